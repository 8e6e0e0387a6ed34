"""`--profile DIR`: a `jax.profiler` trace of a few training calls, to read in perfetto or TensorBoard.

The trace skips the first call (it can carry one-time work) when the run has more than
one, and covers `count` calls from there. Open `DIR/plugins/profile/<time>/*.trace.json.gz`
at https://ui.perfetto.dev, or point TensorBoard's profile plugin at DIR.
"""

from __future__ import annotations

import jax


class CallProfiler:
    """Starts a trace before call `first` and stops it after call `first + count - 1` (0-based)."""

    def __init__(self, directory: str | None, total_calls: int, count: int = 1):
        self.directory = directory
        self.first = 1 if total_calls > 1 else 0
        self.last = min(self.first + count, total_calls) - 1
        self.active = False

    def before(self, call: int) -> None:
        """Call before running call number `call`."""
        if self.directory and call == self.first and not self.active:
            jax.profiler.start_trace(self.directory)
            self.active = True

    def after(self, call: int) -> None:
        """Call after call number `call` finished (its results on the host)."""
        if self.active and call >= self.last:
            self.stop()

    def stop(self) -> None:
        """Ends the trace if one is running (also on an early stop)."""
        if self.active:
            jax.profiler.stop_trace()
            self.active = False
            print(f"profile of training call(s) {self.first}..{self.last} written to {self.directory}", flush=True)
