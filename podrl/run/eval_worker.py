"""Greedy evaluation off the critical path (`RunConfig.eval_async`).

At an evaluation point the driver copies the params of update k (`snapshot`: new buffers, ready, so
the next training call may donate or overwrite the originals) and hands them to an `EvalWorker`,
which evaluates them in one daemon thread while training goes on. At most one evaluation is in
flight: at the next evaluation point (and after the last update) the driver waits for it, at most
`timeout_s` seconds, and logs its result at update k's step. An exception raised by the evaluation
(e.g. `podrl.core.finite.check_evaluation`'s NonFiniteError) is re-raised in the driver's thread.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import jax
import jax.numpy as jnp

from podrl.run.watchdog import StageTimeout


def snapshot(params: Any) -> Any:
    """A copy of the `params` pytree (each leaf a new buffer, same shape, dtype and sharding), computed."""
    return jax.block_until_ready(jax.tree.map(lambda x: jnp.array(x, copy=True), params))


class EvalWorker:
    """Runs `evaluate(params, seed, update)` in a background thread, one call at a time.

    Args:
      evaluate: the program's evaluation (`podrl.run.driver.Program.evaluate`); its result must be host data.
      timeout_s: the longest `result` waits (the run's `timeout_s`; <= 0 waits for ever).
    """

    def __init__(self, evaluate: Callable[[Any, int, int], Any], timeout_s: float):
        self.evaluate, self.timeout_s = evaluate, timeout_s
        self._update: int | None = None
        self._done = threading.Event()
        self._outcome: dict[str, Any] = {}  # "value" or "error"

    @property
    def submitted(self) -> bool:
        """True from `submit` until `result` (running or finished, not yet collected)."""
        return self._update is not None

    def submit(self, params: Any, seed: int, update: int) -> None:
        """Starts evaluating `params` (a `snapshot`) after update `update`; `result` first if one was submitted."""
        if self._update is not None:
            raise RuntimeError("an evaluation is still in flight: call result() first")
        self._update, self._done, self._outcome = update, threading.Event(), {}
        done, outcome = self._done, self._outcome

        def work() -> None:
            try:
                outcome["value"] = self.evaluate(params, seed, update)
            except BaseException as error:  # re-raised by result() in the driver's thread
                outcome["error"] = error
            finally:
                done.set()

        threading.Thread(target=work, name=f"podrl-eval:{update}", daemon=True).start()

    def result(self) -> tuple[int, Any] | None:
        """Waits for the evaluation in flight: (its update, its value), or None when none was submitted.
        Re-raises its exception; `StageTimeout` when it takes longer than `timeout_s`."""
        if self._update is None:
            return None
        update = self._update
        if not self._done.wait(self.timeout_s if self.timeout_s > 0 else None):
            raise StageTimeout(f"evaluation after update {update}", self.timeout_s)
        self._update = None
        if "error" in self._outcome:
            raise self._outcome["error"]
        return update, self._outcome["value"]
