"""A watchdog for the blocking stages of a run (init, compile, a train call).

`within(stage, timeout_s, fn)` runs `fn()` and waits until its result is ready
(`jax.block_until_ready`), in a helper daemon thread, while the calling thread
waits at most `timeout_s` seconds. A stage that stalls, e.g. an XLA computation
that never completes, then raises `StageTimeout` in the calling thread, naming
the stage and the timeout, instead of blocking forever.

`Begun(stage, timeout_s, fn)` starts the same in a daemon thread and returns at once; its
`result()` waits for it under the same rule, the timeout counted from the start (0 waits for
ever). The Anakin program compiles its training and evaluation programs so while its init runs.

A thread blocked inside XLA cannot be interrupted: the helper thread stays
parked, and a normal interpreter exit may wait on it (JAX's exit handlers).
A command-line program that catches `StageTimeout` should therefore report it
and leave with `exit_now` (an `os._exit`), as `podrl.cli.train` does.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Generic, TypeVar

import jax

from podrl.run import outcome

T = TypeVar("T")

STALL_EXIT_CODE = outcome.STALL_EXIT_CODE
"""Exit status of a command-line run stopped by the watchdog."""


class StageTimeout(RuntimeError):
    """A stage of a run took longer than its timeout (the message names both)."""

    def __init__(self, stage: str, timeout_s: float):
        super().__init__(f"{stage} did not finish within {timeout_s:g}s (timeout_s); the computation is stalled "
                         "or far slower than expected. Raise --timeout-s if it is only slow (0 waits forever).")
        self.stage, self.timeout_s = stage, timeout_s


def within(stage: str, timeout_s: float, fn: Callable[[], T]) -> T:
    """`fn()` with every array in its result ready, or `StageTimeout` after `timeout_s` seconds.

    `timeout_s <= 0` runs `fn` in the calling thread and waits for ever. An exception
    raised by `fn` (or by the computation it started) is re-raised here. `fn` runs in
    another thread, so thread-local JAX contexts the caller entered (`with
    jax.default_device(...)`) do not apply inside it; pass what it needs explicitly.
    """
    if timeout_s <= 0:
        return jax.block_until_ready(fn())
    return Begun(stage, timeout_s, fn).result()


class Begun(Generic[T]):
    """`fn()` started now in a daemon thread, named `podrl-watchdog:<stage>`; `result()` waits for it."""

    def __init__(self, stage: str, timeout_s: float, fn: Callable[[], T]):
        self.stage, self.timeout_s, self.started = stage, timeout_s, time.monotonic()
        self._done = threading.Event()
        self._outcome: dict[str, object] = {}  # "value" or "error"
        threading.Thread(target=self._run, args=(fn,), name=f"podrl-watchdog:{stage}", daemon=True).start()

    def _run(self, fn: Callable[[], T]) -> None:
        try:
            self._outcome["value"] = jax.block_until_ready(fn())
        except BaseException as e:  # re-raised by result()
            self._outcome["error"] = e
        finally:
            self._done.set()

    def result(self) -> T:
        """The stage's result, or its exception; `StageTimeout` once `timeout_s` (> 0) seconds have
        passed since it began."""
        wait = None if self.timeout_s <= 0 else max(0.0, self.timeout_s - (time.monotonic() - self.started))
        if not self._done.wait(wait):
            raise StageTimeout(self.stage, self.timeout_s)
        if "error" in self._outcome:
            raise self._outcome["error"]
        return self._outcome["value"]


def exit_now(error: BaseException, code: int = STALL_EXIT_CODE) -> None:
    """Prints `error: <error>` to stderr and ends the process at once (no exit handlers),
    because a thread may still be blocked inside XLA."""
    print(f"error: {error}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
