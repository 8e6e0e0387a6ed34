"""One stop signal for all Sebulba threads, and blocking waits that honour it.

Every blocking call of the layout goes through `StopSignal.put`/`get`/`wait_for`:
they wait in short slices, give up when the stop event is set (raising
`RunStopped` in a worker, or the first worker's exception in the main thread),
and raise `TimeoutError` naming what they waited for after `timeout` seconds.
The first exception of any thread is kept with its traceback; the main thread
re-raises that very exception (with a note naming the thread).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

_SLICE_S = 0.05


class RunStopped(Exception):
    """Raised inside a worker thread when the run is stopping; the thread just exits."""


class StopSignal:
    """A stop event plus the first error that caused it."""

    def __init__(self):
        self.event = threading.Event()
        self._lock = threading.Lock()
        self.error: BaseException | None = None

    def fail(self, where: str, error: BaseException) -> None:
        """Records `error` (if it is the first) and stops every thread."""
        with self._lock:
            if self.error is None:
                error.add_note(f"(raised in {where}; the Sebulba run was stopped)")
                self.error = error
        self.event.set()

    def stop(self) -> None:
        self.event.set()

    @property
    def stopped(self) -> bool:
        return self.event.is_set()

    def check(self) -> None:
        """In the main thread: re-raises a worker's error; in any thread: RunStopped if stopping."""
        if self.error is not None and threading.current_thread() is threading.main_thread():
            raise self.error
        if self.event.is_set():
            raise RunStopped()

    def wait_for(self, ready: Callable[[], Any], timeout: float, what: str,
                 condition: threading.Condition | None = None) -> Any:
        """Polls `ready()` until it returns something not None; the stop/timeout rules apply."""
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            value = ready()
            if value is not None:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            if condition is not None:
                with condition:
                    condition.wait(_SLICE_S)
            else:
                time.sleep(_SLICE_S)

    def put(self, q: queue.Queue, item: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            try:
                q.put(item, timeout=_SLICE_S)
                return
            except queue.Full:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"timed out after {timeout:.0f}s putting {what} (queue full)") from None

    def get(self, q: queue.Queue, timeout: float, what: str, on_timeout: Callable[[], str] | None = None) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            try:
                return q.get(timeout=_SLICE_S)
            except queue.Empty:
                if time.monotonic() > deadline:
                    detail = f"; {on_timeout()}" if on_timeout else ""
                    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}") from None
