"""What the benchmark scripts share: child processes, medians, report text and the JSON document.

Used by scripts/bench_anakin.py, scripts/bench_sebulba.py and scripts/bench_scaling.py
(run as `python scripts/bench_x.py`, so this folder is on sys.path).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Callable

RESULT_PREFIX = "BENCH_RESULT "
"""A child prints its result as one stdout line starting with this."""


# ---------------------------------------------------------------- child processes


def child_env() -> dict[str, str]:
    """The child's environment: CPU platform, no inherited forced device count."""
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
    env["XLA_FLAGS"] = " ".join(flags)
    env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def configure_cpu_devices(devices: int) -> None:
    """Splits the CPU into `devices` JAX devices; must run before any device use."""
    import jax

    jax.config.update("jax_num_cpu_devices", devices)
    if jax.device_count() != devices:
        raise RuntimeError(f"asked for {devices} devices, JAX has {jax.device_count()}")


def emit_result(result: dict[str, Any]) -> None:
    """Child side: prints `result` as the one RESULT_PREFIX line `run_child_script` reads."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_child_script(script: str, spec: dict[str, Any], timeout: float, *,
                     load_on_timeout: bool = True) -> dict[str, Any]:
    """Runs `python script --child <spec as JSON>` in a fresh process (env: `child_env()`);
    returns its RESULT_PREFIX result (or an `error`) with `wall_seconds` and `load_1m`
    (the 1-min load average after the run) added. A timed-out run gets `load_1m` only
    when `load_on_timeout`."""
    cmd = [sys.executable, os.path.abspath(script), "--child", json.dumps(spec)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=child_env())
    except subprocess.TimeoutExpired:
        proc = None
    info: dict[str, Any] = {"wall_seconds": time.perf_counter() - start}
    if proc is not None or load_on_timeout:
        info["load_1m"] = os.getloadavg()[0]
    if proc is None:
        return {"error": f"timed out after {timeout:.0f}s", **info}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return {**json.loads(line[len(RESULT_PREFIX):]), **info}
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
    return {"error": f"exit code {proc.returncode}: " + "\n".join(tail), **info}


# ---------------------------------------------------------------- results


def median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    """The median of `key` over the runs that have it (not None); None when none has."""
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def exit_code(rows: list[dict[str, Any]]) -> int:
    """1 when any row has an `error`, else 0."""
    return 1 if any("error" in r for r in rows) else 0


# ---------------------------------------------------------------- report


def fmt(value: float | None, spec: str) -> str:
    """`value` formatted with `spec`; 'n/a' for None, inf and nan."""
    return "n/a" if value is None or not math.isfinite(value) else format(value, spec)


def load_note(loads: list[float], with_cpus: bool = True) -> str:
    """The caption's sentence on the host load after each run ('' when there are no loads)."""
    if not loads:
        return ""
    cpus = f" on {os.cpu_count()} CPUs" if with_cpus else ""
    return f" Host load (1-min average) after each run: {min(loads):.1f}-{max(loads):.1f}{cpus}."


def utc_timestamp() -> str:
    """Now, UTC, ISO 8601 to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def host_fields(jax_version: str | None) -> dict[str, Any]:
    """The JSON document's host fields: jax_version, cpu_count, python, timestamp."""
    return {
        "jax_version": jax_version,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "timestamp": utc_timestamp(),
    }


def finish(rows: list[dict[str, Any]], table: str, wall_seconds: float, out: str | None,
           document: Callable[[], dict[str, Any]]) -> int:
    """Prints the table and the wall time, writes `document()` to `out` (when given) as
    indented JSON; returns `exit_code(rows)`."""
    print(table, flush=True)
    print(f"\nbenchmark wall time: {wall_seconds:.1f} s", file=sys.stderr)
    if out:
        with open(out, "w") as f:
            json.dump(document(), f, indent=2)
    return exit_code(rows)


def repeats_document(rows: list[dict[str, Any]], args: argparse.Namespace, wall_seconds: float,
                     jax_version: str | None, *, benchmark: str | None = None, **fields: Any) -> dict[str, Any]:
    """The JSON document of a benchmark with --repeats, in this order: `benchmark` (when
    given), the host fields, quick, repeats, `fields` (as passed), wall_seconds,
    load_average_at_end, rows."""
    head = {} if benchmark is None else {"benchmark": benchmark}
    return {
        **head,
        **host_fields(jax_version),
        "quick": args.quick,
        "repeats": args.repeats,
        **fields,
        "wall_seconds": wall_seconds,
        "load_average_at_end": list(os.getloadavg()),
        "rows": rows,
    }


# ---------------------------------------------------------------- command line


def new_parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser whose description is the script's docstring, kept as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_child_run_flags(parser: argparse.ArgumentParser, *, timeout: float, quick_help: str) -> None:
    """--timeout (per subprocess), --quick, --out and the hidden --child of a script that
    runs each measurement through `run_child_script`."""
    parser.add_argument("--timeout", type=float, default=timeout, help="seconds allowed per subprocess")
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--out", help="write the JSON document here")
    parser.add_argument("--child", help=argparse.SUPPRESS)


class CpuSampler:
    """Samples this process's CPU time (all threads) every `interval` s, to tell how many
    cores a run actually got on a shared machine: `cores_used(seconds)` over the last `seconds`."""

    def __init__(self, interval: float = 0.2):
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)

    def _run(self, interval: float) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), time.process_time()))
            self._stop.wait(interval)

    def __enter__(self) -> "CpuSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.perf_counter(), time.process_time()))

    def cores_used(self, seconds: float) -> float | None:
        end_wall, end_cpu = self.samples[-1]
        earlier = [s for s in self.samples if s[0] <= end_wall - seconds]
        if not earlier:
            return None
        start_wall, start_cpu = earlier[-1]
        return (end_cpu - start_cpu) / (end_wall - start_wall)
