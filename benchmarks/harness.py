"""What every benchmark shares: its flags, child processes, interleaved repeats, medians, tables and
the JSON document.

A benchmark is a module `benchmarks.<name>` run from the repository root
(`python -m benchmarks.<name>`). Its measurements run in fresh child processes (each with its own
JAX device count): `run_child(module, spec, timeout)` starts `python -m <module> --child <spec
JSON>`, whose `main` measures and prints one result line (`emit_result`); the parent reads it back
with the wall seconds and the host's 1-min load average after the run. `interleave` repeats the
runs A B A B ... (items inner, rounds outer) so a burst of load from elsewhere does not land on all
runs of one item; `median_of` / `spread_of` summarise them. `finish` prints the markdown table
(`table`) and writes the JSON document (`document`: host fields, flags, rows).

Imports only the standard library at import time (jax inside `configure_cpu_devices`).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TypeVar

from benchmarks.peers.driver import RESULT_PREFIX, emit_result

__all__ = ["RESULT_PREFIX", "emit_result"]  # re-exported: a benchmark's child prints its result with it

ROOT = Path(__file__).resolve().parents[1]
"""The repository root: where children run (`python -m benchmarks.<name>`)."""

T = TypeVar("T")


# ---------------------------------------------------------------- command line


def new_parser(doc: str | None, *, quick: str, repeats: int | None = None, repeats_help: str | None = None,
               timeout: float | None = None, child: bool = False) -> argparse.ArgumentParser:
    """A parser whose description is the benchmark's docstring (kept as written), with the flags every
    benchmark shares: --out (the JSON document), --quick (tiny budgets; `quick` is its help) and --note
    (free text kept in the document: the machine, what else ran); --repeats (default `repeats`) when
    given; --timeout (seconds per child process, default `timeout`) when given; the hidden --child
    (a child's spec) of a benchmark whose measurements run in child processes."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the JSON document here")
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--note", default=None, help="free text kept in the JSON document (the machine, its load)")
    if repeats is not None:
        parser.add_argument("--repeats", type=int, default=repeats,
                            help=repeats_help or "runs per row, interleaved across rows; the median is reported")
    if timeout is not None:
        parser.add_argument("--timeout", type=float, default=timeout, help="seconds allowed per subprocess")
    if child:
        parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser


def dispatch(argv: list[str] | None, parse_args: Callable[[list[str] | None], argparse.Namespace],
             child_main: Callable[[str], int], run: Callable[[argparse.Namespace, float], int]) -> int:
    """A benchmark's `main`: its flags parsed; a child (--child SPEC) goes to `child_main(SPEC)`, the
    parent to `run(args, start)` (`start`: `time.perf_counter()` now). Returns the exit code."""
    args = parse_args(argv)
    if getattr(args, "child", None):
        return child_main(args.child)
    return run(args, time.perf_counter())


# ---------------------------------------------------------------- child processes


def child_env() -> dict[str, str]:
    """A child's environment: CPU platform unless JAX_PLATFORMS says otherwise, no inherited forced
    device count."""
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


def run_process(command: list[str], timeout: float, *, load_on_timeout: bool = True,
                cwd: Path | None = None) -> dict[str, Any]:
    """Runs `command` from the repository root, or `cwd` (env: `child_env()`); returns its RESULT_PREFIX
    result, or an `error` (a timeout, or the exit code and the tail of its output), with `wall_seconds` and
    `load_1m` (the 1-min load average after the run; after a timeout only when `load_on_timeout`)."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=child_env(),
                              cwd=cwd or ROOT)
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


def run_child(module: str, spec: dict[str, Any], timeout: float, *, load_on_timeout: bool = True,
              cwd: Path | None = None) -> dict[str, Any]:
    """`python -m <module> --child <spec JSON>` in a fresh process (from `cwd`, default the repository
    root: `baseline_tree` makes a tree that runs the same benchmarks on older code): `run_process`'s result."""
    return run_process([sys.executable, "-m", module, "--child", json.dumps(spec)], timeout,
                       load_on_timeout=load_on_timeout, cwd=cwd)


def baseline_tree(rev: str, into: Path) -> Path:
    """A folder from which children run this checkout's benchmarks on git revision `rev`'s code
    (`git archive`): `into/podrl` is `rev`'s `podrl/`, with `rev`'s `agents/` and `envs/` inside it as
    `podrl/agents` and `podrl/envs` (found there before the editable install's mapping, so a child
    imports no module of this checkout's but the benchmarks), `into/benchmarks` a copy of this one.
    Returns `into`."""
    import shutil

    archive = subprocess.run(["git", "archive", rev, "podrl", "agents", "envs"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    for package in ("agents", "envs"):
        shutil.move(str(into / package), str(into / "podrl" / package))
    shutil.copytree(ROOT / "benchmarks", into / "benchmarks", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return into


# ---------------------------------------------------------------- repeats


def interleave(items: Sequence[T], repeats: int, run: Callable[[T, int], dict[str, Any]],
               label: Callable[[T], str]) -> list[list[dict[str, Any]]]:
    """`run(item, repeat)` for every item, `repeats` rounds, items inner and rounds outer (A B A B ...),
    so a burst of load from other processes does not land on all runs of one item; each run is logged
    to stderr as `[round/repeats] label(item): run_status(run)`. Returns each item's runs, in order."""
    runs: list[list[dict[str, Any]]] = [[] for _ in items]
    for repeat in range(repeats):
        for item, item_runs in zip(items, runs):
            item_runs.append(run(item, repeat))
            log_run(f"[{repeat + 1}/{repeats}] {label(item)}", item_runs[-1])
    return runs


def interleave_sides(rows: Sequence[T], sides: Callable[[T], Sequence[str]], repeats: int,
                     run: Callable[[T, str, int], dict[str, Any]],
                     label: Callable[[T, str], str]) -> list[dict[str, list]]:
    """`interleave` of a comparison: every side of every row (`sides(row)`: e.g. the peer, then podrl) is one
    item, so each round runs row 1's sides, then row 2's, ...; `run(row, side, round)` (round 0, 1, ...: a
    caller may run a seed per round); returns each row's `{side: runs}`."""
    items = [(i, side) for i, row in enumerate(rows) for side in sides(row)]
    runs = interleave(items, repeats, lambda item, r: run(rows[item[0]], item[1], r),
                      lambda item: label(rows[item[0]], item[1]))
    by_row: list[dict[str, list]] = [{} for _ in rows]
    for (i, side), side_runs in zip(items, runs):
        by_row[i][side] = side_runs
    return by_row


def log_run(label: str, run: dict[str, Any]) -> None:
    """One progress line on stderr: `label: run_status(run)`."""
    print(f"{label}: {run_status(run)}", file=sys.stderr, flush=True)


STATUS = (("steps_per_second", "{:,.0f} steps/s"), ("us_per_update", "{:,.1f} us/update"),
          ("us_per_step", "{:,.1f} us/step"), ("compile_seconds", "compile {:.2f} s"),
          ("final_return", "return {:.1f}"), ("wall_seconds", "wall {:.1f} s"), ("load_1m", "load {:.1f}"))
"""The fields of a run's one-line account, in order, with their formats."""


def run_status(run: dict[str, Any]) -> str:
    """A one-line account of one run: `FAILED: <first line of its error>`, or its STATUS fields."""
    if "error" in run:
        return "FAILED: " + run["error"].splitlines()[0]
    return ", ".join(spec.format(run[key]) for key, spec in STATUS if isinstance(run.get(key), (int, float)))


def median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    """The median of `key` over the runs that have it (not None); None when none has."""
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def spread_of(runs: list[dict[str, Any]], key: str) -> dict[str, float] | None:
    """`{median, min, max}` of `key` over the runs that have it; None when none has."""
    values = [r[key] for r in runs if r.get(key) is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def ok_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs without an `error`."""
    return [r for r in runs if "error" not in r]


def side_summary(runs: list[dict[str, Any]], fields: dict[str, str]) -> dict[str, Any]:
    """One side of a comparison (podrl, a peer): `{name: median of run key}` over the runs without an
    error for each `name: key` of `fields`, `measured` (whether any run worked) and the `runs`."""
    ok = ok_runs(runs)
    return {**{name: median_of(ok, key) for name, key in fields.items()}, "measured": bool(ok), "runs": runs}


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """`numerator / denominator`; None when either is missing or the denominator is 0."""
    return numerator / denominator if numerator is not None and denominator else None


def exit_code(rows: list[dict[str, Any]]) -> int:
    """1 when any row has an `error`, else 0."""
    return 1 if any("error" in r for r in rows) else 0


# ---------------------------------------------------------------- report


def fmt(value: float | None, spec: str) -> str:
    """`value` formatted with `spec`; 'n/a' for None, inf and nan."""
    return "n/a" if value is None or not math.isfinite(value) else format(value, spec)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A markdown table: `columns` are the header cells, a leading '>' right-aligns a column (numbers);
    each row's cells are written with str()."""
    names = [c.removeprefix(">") for c in columns]
    align = ["---:" if c.startswith(">") else "---" for c in columns]
    lines = ["| " + " | ".join(names) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def loads_of(runs: Iterable[dict[str, Any]]) -> list[float]:
    """The `load_1m` of every run that has one."""
    return [r["load_1m"] for r in runs if r.get("load_1m") is not None]


def load_note(loads: list[float], with_cpus: bool = True) -> str:
    """The caption's sentence on the host load after each run ('' when there are no loads)."""
    if not loads:
        return ""
    cpus = f" on {os.cpu_count()} CPUs" if with_cpus else ""
    return f" Host load (1-min average) after each run: {min(loads):.1f}-{max(loads):.1f}{cpus}."


# ---------------------------------------------------------------- the JSON document


def jax_version() -> str | None:
    """The installed jax's version (read without importing jax); None when it is not installed."""
    try:
        return importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        return None


def utc_timestamp() -> str:
    """Now, UTC, ISO 8601 to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def host_fields() -> dict[str, Any]:
    """The document's host fields: jax_version, cpu_count, python, timestamp."""
    return {"jax_version": jax_version(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "timestamp": utc_timestamp()}


def document(benchmark: str, args: argparse.Namespace, rows: list[dict[str, Any]], wall_seconds: float,
             **fields: Any) -> dict[str, Any]:
    """The JSON document, in this order: benchmark, the host fields, quick, repeats (where the benchmark
    has --repeats), note, `fields` (as passed), wall_seconds, load_average_at_end, rows."""
    repeats = {"repeats": args.repeats} if hasattr(args, "repeats") else {}
    return {"benchmark": benchmark, **host_fields(), "quick": args.quick, **repeats, "note": args.note, **fields,
            "wall_seconds": wall_seconds, "load_average_at_end": list(os.getloadavg()), "rows": rows}


def finish(benchmark: str, args: argparse.Namespace, rows: list[dict[str, Any]], text: str, start: float,
           **fields: Any) -> int:
    """Prints `text` (the table) and the wall time since `start` (a `time.perf_counter()`), writes
    `document(benchmark, args, rows, ...)` to --out when given; returns `exit_code(rows)`."""
    wall_seconds = time.perf_counter() - start
    print(text, flush=True)
    print(f"\nbenchmark wall time: {wall_seconds:.1f} s", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(document(benchmark, args, rows, wall_seconds, **fields), f, indent=2)
    return exit_code(rows)


# ---------------------------------------------------------------- CPU use


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
