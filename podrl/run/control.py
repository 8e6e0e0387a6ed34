"""What both layouts' training loops share: stop requests (SIGINT/SIGTERM) and the save schedule."""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType


class StopRequests:
    """While active, SIGINT/SIGTERM ask the loop to stop (checkpoint, then return) instead of dying.

    A second signal of the same kind falls back to the previous handler (e.g.
    KeyboardInterrupt), so an impatient user can still break out. Outside the main
    thread (where Python allows no handlers) it does nothing.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.received: str | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "StopRequests":
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:  # second request: behave as before we were installed
            previous = self._previous.get(signum)
            if callable(previous):
                previous(signum, frame)
            return
        self.received = signal.Signals(signum).name

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class SaveSchedule:
    """Decides when a periodic checkpoint is due (every N updates and/or T seconds)."""

    def __init__(self, every_updates: int, every_seconds: float, start_update: int):
        self.every_updates, self.every_seconds = every_updates, every_seconds
        self.last_update, self.last_time = start_update, time.monotonic()

    def due(self, update: int) -> bool:
        by_count = self.every_updates > 0 and update - self.last_update >= self.every_updates
        by_time = self.every_seconds > 0 and time.monotonic() - self.last_time >= self.every_seconds
        return by_count or by_time

    def saved(self, update: int) -> None:
        self.last_update, self.last_time = update, time.monotonic()
