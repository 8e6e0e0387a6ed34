"""What both layouts' training loops share: stop requests (SIGINT/SIGTERM) and the save schedule.

A run's stop requests (`podrl.run.context.stop_requests()` picks): `StopRequests` for one process (a signal stops it
after the current call), `podrl.run.preemption.PodStopRequests` when the run has several
processes (a signal to any one stops every one after the same call). Both answer
`agreed(call)` after each training call, `reason()` and `describe()` after the stop.

A second signal: SIGINT is a person's, so a second one interrupts at once (Python's handler:
KeyboardInterrupt, and the failure path checkpoints what it can). SIGTERM is a machine's notice (a
preemption, a scheduler's stop), often delivered more than once by the layers that forward it (a
launcher and the system both signalling a process): a second one must not throw away the stop and
final checkpoint the first started within the grace period, so it is answered with a line on stderr
saying the run is already stopping and that SIGKILL ends it at once, and the stop goes on.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from types import FrameType

import jax
import numpy as np
from jax.experimental import multihost_utils


class StopRequests:
    """While active, SIGINT/SIGTERM ask the loop to stop (checkpoint, then return) instead of dying.

    The first signal is acknowledged on stderr. After it, a SIGINT calls the handler from before we
    were installed (Python's: KeyboardInterrupt), so an impatient user can still break out; a SIGTERM
    does not end the stop in progress (module docstring): it is answered on stderr, or goes to a
    Python handler installed before ours, or is ignored if SIGTERM was ignored before. Outside the
    main thread (where Python allows no handlers) it does nothing.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.received: str | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "StopRequests":
        if threading.current_thread() is threading.main_thread():
            self._before_install()
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.received is None:
            self.received = name
            later = "Ctrl-C again interrupts at once" if signum == signal.SIGINT else "SIGKILL ends it at once"
            say(f"{name}: stopping cleanly after the current training call ({later})")
            self._asked()
            return
        previous = self._previous.get(signum)
        if callable(previous):  # Python's SIGINT handler (KeyboardInterrupt), or a user's own
            previous(signum, frame)
        elif previous != signal.SIG_IGN:  # SIGTERM's default action would lose the checkpoint on its way
            say(f"{name} again: already stopping cleanly after the current training call (SIGKILL ends "
                "the process at once, without its final checkpoint)")

    def _before_install(self) -> None:
        """Runs in the main thread before the handlers go in (a subclass's hook)."""

    def _asked(self) -> None:
        """Runs once the first request is recorded in `received` (a subclass's hook)."""

    def agreed(self, call: int) -> bool:
        """True once a signal asked this (single-process) run to stop; `call` is the training call just done."""
        del call
        return self.received is not None

    def reason(self) -> str | None:
        """The signal that stopped the run ("SIGINT", "SIGTERM"), or None."""
        return self.received

    def describe(self) -> str | None:
        """Who stopped the run, for the closing line (one process: the signal's name)."""
        return self.received

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def say(line: str) -> None:
    """Writes `[podrl] line` to stderr from a signal handler (an unbuffered write: the handler may have
    interrupted a print to the same stream)."""
    os.write(2, f"[podrl] {line}\n".encode())


class SaveSchedule:
    """Decides when a periodic checkpoint is due (every N updates and/or T seconds)."""

    def __init__(self, every_updates: int, every_seconds: float, start_update: int):
        self.every_updates, self.every_seconds = every_updates, every_seconds
        self.last_update, self.last_time = start_update, time.monotonic()

    def due(self, update: int) -> bool:
        """Whether to save after `update`; with several processes, a time-based save is process 0's
        clock's decision, broadcast (every process must save the same updates: a save is collective)."""
        by_count = self.every_updates > 0 and update - self.last_update >= self.every_updates
        by_time = self.every_seconds > 0 and time.monotonic() - self.last_time >= self.every_seconds
        if self.every_seconds > 0:
            by_time = process_0s(by_time)
        return by_count or by_time

    def saved(self, update: int) -> None:
        self.last_update, self.last_time = update, time.monotonic()


def process_0s(decision: bool) -> bool:
    """Process 0's `decision`, on every process (itself with one process)."""
    if jax.process_count() == 1:
        return decision
    return bool(multihost_utils.broadcast_one_to_all(np.asarray(decision)))
