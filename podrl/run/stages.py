"""Where a run's seconds go, from process start to its result (`--profile-startup`).

A `StageClock` keeps spans of wall and CPU seconds, each placed on the process's own timeline
(seconds since the process started, read from Linux's /proc; None elsewhere):

* the stages a layout times (`with clock.stage("setup"): ...`, from any thread);
* every program JAX traces, lowers and compiles while the clock is open, named by its function
  (`jax.monitoring`'s compile events; a compile served by the persistent compilation cache is a
  "cache load");
* what came before the clock: the interpreter's start and the imports.

CPU seconds are the whole process's (every thread) over a span's wall interval, so on a loaded
machine they still say what a stage cost when its wall seconds do not. Spans that overlap in
time (programs compiled in background threads while another stage runs) each count all the CPU
of their interval; `lines` marks a span that overlaps an earlier one.

    with timed_run() as clock:           # listens to JAX's compile events until the block ends
        with clock.stage("setup"):
            ...
        report = publish(clock, run.logger, config.logging.profile_startup)

`publish` returns `clock.report()` ({"before": {...}, "spans": [...], "total": {...}}), and when asked
(`--profile-startup`) prints `clock.lines()` and writes the report to the run folder's `stages.json`.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from typing import Any, Iterator

from jax import monitoring

_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
           "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
           "/jax/core/compile/backend_compile_duration": "compile"}
"""JAX's compile events (`jax._src.dispatch`) and the kind of span each opens."""
_CACHE_HIT = "/jax/compilation_cache/cache_hits"


def process_age() -> float | None:
    """Wall seconds since this process started (Linux /proc, 10 ms resolution); None where unknown."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


class StageClock:
    """Spans of wall and CPU seconds on the process's timeline (module docstring)."""

    def __init__(self):
        age = process_age()
        self._origin = time.perf_counter() - (age or 0.0)  # perf_counter() at process start (or now)
        self.before = {"wall": age, "cpu": time.process_time()}  # process start -> this clock
        self.spans: list[dict[str, Any]] = []
        self._open: dict[tuple[str, int], list[list]] = {}  # (event, thread) -> its open [start, cpu, kind], nested
        self._lock = threading.Lock()
        self._listening = True
        monitoring.register_scalar_listener(self._on_start)
        monitoring.register_event_time_span_listener(self._on_end)
        monitoring.register_event_listener(self._on_event)

    def now(self) -> float:
        """Seconds since the process started (since this clock, where the start is unknown)."""
        return time.perf_counter() - self._origin

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Times the block as the span `name` (kind "stage"), whatever thread runs it."""
        start, cpu = self.now(), time.process_time()
        try:
            yield
        finally:
            self._add("stage", name, start, cpu)

    def close(self) -> None:
        """Stops listening to JAX's compile events."""
        if not self._listening:
            return
        self._listening = False
        for unregister, listener in (("unregister_scalar_listener", self._on_start),
                                     ("unregister_event_time_span_listener", self._on_end),
                                     ("unregister_event_listener", self._on_event)):
            getattr(monitoring, unregister, lambda _: None)(listener)

    def report(self) -> dict[str, Any]:
        """`before` (process start -> the clock), `spans` in start order (kind, name, start, wall, cpu,
        thread) and `total` (process start -> now), all in seconds."""
        with self._lock:
            spans = sorted(self.spans, key=lambda s: s["start"])
        return {"before": dict(self.before), "spans": spans, "total": {"wall": self.now(), "cpu": time.process_time()}}

    def lines(self) -> list[str]:
        """The report as text: one line per span, programs indented under the stage they ran in."""
        report = self.report()
        total = report["total"]
        out = [f"time to result: {total['wall']:.2f} s wall, {total['cpu']:.2f} CPU-s since the process started",
               f"{'start':>7} {'wall s':>7} {'CPU-s':>7}  span",
               f"{0.0:7.2f} {_num(report['before']['wall'])} {report['before']['cpu']:7.2f}  "
               "before the run (interpreter, imports)"]
        ends: list[float] = []
        for span in report["spans"]:
            overlap = " (overlaps)" if span["kind"] != "stage" and any(e > span["start"] + 1e-3 for e in ends) else ""
            label = span["name"] if span["kind"] == "stage" else f"  {span['kind']} {span['name']}"
            times = f"{span['start']:7.2f} {span['wall']:7.2f} {span['cpu']:7.2f}"
            out.append(f"{times}  {label}{overlap} [{span['thread']}]")
            if span["kind"] != "stage":
                ends.append(span["start"] + span["wall"])
        return out

    # ---- JAX's listeners (called in the thread that traces or compiles) ----

    def _add(self, kind: str, name: str, start: float, cpu: float, thread: str | None = None) -> None:
        span = {"kind": kind, "name": name, "start": start, "wall": self.now() - start,
                "cpu": time.process_time() - cpu, "thread": thread or threading.current_thread().name}
        with self._lock:
            self.spans.append(span)

    def _on_start(self, event: str, value: float, **kwargs: Any) -> None:
        kind = _EVENTS.get(event)
        if kind is not None and self._listening:
            self._open.setdefault((event, threading.get_ident()), []).append([self.now(), time.process_time(), kind])

    def _on_end(self, event: str, start: float, end: float, **kwargs: Any) -> None:
        opened = self._open.get((event, threading.get_ident()))
        if opened:  # the innermost span of this event open in this thread ends
            start, cpu, kind = opened.pop()
            self._add(kind, str(kwargs.get("fun_name", "?")), start, cpu)

    def _on_event(self, event: str, **kwargs: Any) -> None:
        opened = self._open.get(("/jax/core/compile/backend_compile_duration", threading.get_ident()))
        if event == _CACHE_HIT and opened:
            opened[-1][2] = "cache load"


def _num(value: float | None) -> str:
    return f"{value:7.2f}" if value is not None else f"{'?':>7}"


@contextlib.contextmanager
def timed_run() -> Iterator[StageClock]:
    """A `StageClock` for the block, closed (no longer listening to JAX) however the block ends."""
    clock = StageClock()
    try:
        yield clock
    finally:
        clock.close()


def publish(clock: StageClock, logger: Any, show: bool) -> dict[str, Any]:
    """`clock.report()`; with `show`, also each of `clock.lines()` through `logger.info` (a
    `podrl.run.logging.RunLogger`) and the report in `<run dir>/stages.json` when the run has a folder."""
    report = clock.report()
    if show:
        for line in clock.lines():
            logger.info(line)
        if logger.run_dir is not None:
            with open(os.path.join(logger.run_dir, "stages.json"), "w") as f:
                json.dump(report, f, indent=2)
    return report
