"""Benchmark multi-process scaling: env steps/s for 1, 2 and 4 local processes, Anakin and Sebulba.

Every point is one real multi-process run started with `scripts/launch_local.py`
(jax.distributed on 127.0.0.1, gloo CPU collectives), each process with its own
`DEVICES_PER_PROCESS` = 2 fake CPU devices (`--cpu-devices 2`). Weak scaling: the
work per process is fixed and the global problem grows with the process count.

  anakin    PPO on the JAX CartPole-v1, `--anakin-envs-per-device` envs on every
            device (so `2 * processes * envs_per_device` envs in the global
            program), `--rollout-length` steps, `updates_per_call` updates per
            compiled call, one metrics record per call, no evaluation.
            Gradients are pmean'd over all 2 * processes devices.
  sebulba   PPO on gymnasium CartPole-v1 (`--sebulba-env`), per process: actor
            device 0, learner device 1, 1 actor thread of `--sebulba-envs-per-thread`
            envs, lag 1, no evaluation. The learners of all processes form one
            data-parallel mesh.

SPS is read from process 0's `metrics.jsonl` (`--logging.run-dir <tmp>
--logging.run-name r`): both scripts already log the global rate (Anakin counts
every env of the global program; Sebulba sums the env steps consumed on every
host). Steady state = the mean `sps` of the records after the first (the first
holds warm-up). Nothing about timing is asserted.

This machine has 2 CPU cores: 4 processes x 2 devices (plus actor threads and
gloo) oversubscribe it, and the cross-process all-reduce goes through gloo over
loopback. The table shows that the multi-process machinery runs and counts
correctly at every size, not the speedup a real pod would get.

Usage:
  python -m benchmarks.scaling --out scaling.json --plot scaling.png
  python -m benchmarks.scaling --processes 1 2 --layouts anakin
  python -m benchmarks.scaling --quick --processes 1 2 --out /tmp/s.json --plot /tmp/s.png   # smoke test
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, child_env, finish, fmt, load_note, loads_of, log_run, new_parser, table

LAUNCH = ROOT / "scripts" / "launch_local.py"
TRAIN = {"anakin": ROOT / "scripts" / "train_anakin.py", "sebulba": ROOT / "scripts" / "train_sebulba.py"}
DEVICES_PER_PROCESS = 2
LAYOUTS = ("anakin", "sebulba")


@dataclasses.dataclass(frozen=True)
class Point:
    """One multi-process run."""

    layout: str  # anakin | sebulba
    processes: int
    envs_per_process: int  # anakin: 2 devices x envs per device; sebulba: envs of the one actor thread
    rollout_length: int
    updates: int  # anakin: updates in the whole run; sebulba: updates (= rollouts per thread) per process
    updates_per_record: int  # anakin: updates_per_call; sebulba: log_every
    env: str

    @property
    def devices_total(self) -> int:
        return self.processes * DEVICES_PER_PROCESS

    @property
    def envs_total(self) -> int:
        return self.processes * self.envs_per_process

    @property
    def records(self) -> int:
        return -(-self.updates // self.updates_per_record)

    def train_args(self, run_dir: str) -> list[str]:
        """The training command's own flags (the launcher appends the distributed ones)."""
        logging = ["--logging.run-dir", run_dir, "--logging.run-name", "r", "--logging.no-tensorboard",
                   # An explicit checkpoint folder, the same on every process: by default the folder is
                   # '<run dir>/checkpoints' and only process 0 has a run dir, so only process 0 would
                   # build orbax's CheckpointManager (a cross-process barrier) and the run deadlocks.
                   "--checkpoint.directory", os.path.join(run_dir, "checkpoints")]
        if self.layout == "anakin":
            total = self.updates * self.envs_total * self.rollout_length  # per seed, global program
            return ["--env", self.env, "--num-envs", str(self.envs_total), "--rollout-length",
                    str(self.rollout_length), "--total-steps", str(total), "--updates-per-call",
                    str(self.updates_per_record), "--eval-every", "0",
                    "--eval-episodes", "0"] + logging  # no evaluation (nor its compile)
        total = self.updates * self.envs_per_process * self.rollout_length  # per process
        return ["--env", self.env, "--envs-per-thread", str(self.envs_per_process), "--rollout-length",
                str(self.rollout_length), "--total-steps", str(total), "--actor-devices", "0",
                "--learner-devices", "1", "--threads-per-actor-device", "1", "--lag", "1",
                "--log-every", str(self.updates_per_record), "--eval-episodes", "0"] + logging


def plan(args: argparse.Namespace) -> list[Point]:
    """Every point, layouts outer, processes inner (the order they run)."""
    if args.quick:
        anakin = dict(envs_per_device=4, rollout=16, updates=12, per_record=4)
        sebulba = dict(envs=8, rollout=16, updates=12, per_record=4)
    else:
        anakin = dict(envs_per_device=args.anakin_envs_per_device, rollout=args.rollout_length,
                      updates=args.records * 8, per_record=8)
        sebulba = dict(envs=args.sebulba_envs_per_thread, rollout=args.rollout_length,
                       updates=args.records * 5, per_record=5)
    points = []
    for layout in args.layouts:
        for p in args.processes:
            if layout == "anakin":
                points.append(Point("anakin", p, DEVICES_PER_PROCESS * anakin["envs_per_device"], anakin["rollout"],
                                    anakin["updates"], anakin["per_record"], args.anakin_env))
            else:
                points.append(Point("sebulba", p, sebulba["envs"], sebulba["rollout"], sebulba["updates"],
                                    sebulba["per_record"], args.sebulba_env))
    return points


# ---------------------------------------------------------------- running


def read_metrics(path: Path) -> list[dict[str, Any]]:
    records = []
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a half-written last line
    return records


def steady_sps(records: list[dict[str, Any]]) -> tuple[float | None, list[float]]:
    """(mean sps of the records after the first, every record's sps)."""
    values = [float(r["sps"]) for r in records if isinstance(r.get("sps"), (int, float))]
    steady = values[1:] if len(values) > 1 else values
    return (sum(steady) / len(steady) if steady else None), values


def launch(command: list[str], timeout: float) -> tuple[str, int | None]:
    """Runs the launcher; (output, exit code), code None after a timeout.

    On a timeout the launcher gets SIGTERM, which it forwards to every process
    group it started before stopping them; should it not exit, it is killed and
    the process groups it reported (`[launcher] process i: pid N`) are killed too.
    """
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            env=child_env())
    try:
        return proc.communicate(timeout=timeout)[0], proc.returncode
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            output = proc.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            output = proc.communicate()[0]
        for pid in re.findall(r"^\[launcher\] process \d+: pid (\d+)$", output, flags=re.M):
            try:
                os.killpg(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return output, None


def run_point(point: Point, timeout: float, keep_dir: str | None) -> dict[str, Any]:
    """Runs one point through the launcher; returns its row (with `error` on failure)."""
    tmp = tempfile.mkdtemp(prefix=f"podrl-scaling-{point.layout}-p{point.processes}-")
    command = [sys.executable, str(LAUNCH), "--num-processes", str(point.processes), "--devices-per-process",
               str(DEVICES_PER_PROCESS), "--", sys.executable, str(TRAIN[point.layout])] + point.train_args(tmp)
    start = time.perf_counter()
    output, code = launch(command, timeout)
    wall = time.perf_counter() - start
    records = read_metrics(Path(tmp) / "r" / "metrics.jsonl")
    sps, all_sps = steady_sps(records)
    row = {
        "layout": point.layout, "processes": point.processes, "devices_per_process": DEVICES_PER_PROCESS,
        "devices_total": point.devices_total, "envs_per_process": point.envs_per_process,
        "envs_total": point.envs_total, "rollout_length": point.rollout_length, "env": point.env,
        "agent": "PPO", "updates": point.updates, "updates_per_record": point.updates_per_record,
        "steps_per_second": sps, "sps_per_process": sps / point.processes if sps else None,
        "record_sps": all_sps, "records": len(records),
        "final_step": records[-1]["step"] if records else None,
        "wall_seconds": wall, "load_1m": os.getloadavg()[0], "command": command,
    }
    if point.layout == "sebulba":
        lags = [r["policy_lag_mean"] for r in records if "policy_lag_mean" in r]
        row["policy_lag_mean"] = sum(lags) / len(lags) if lags else None
    if code is None:
        row["error"] = f"timed out after {timeout:.0f}s"
    elif code != 0:
        row["error"] = f"exit code {code}"
    elif sps is None:
        row["error"] = "no sps in process 0's metrics.jsonl"
    if "error" in row:
        row["output_tail"] = "\n".join(output.strip().splitlines()[-25:])
    if keep_dir:
        shutil.copytree(tmp, os.path.join(keep_dir, f"{point.layout}_p{point.processes}"), dirs_exist_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return row


def add_speedups(rows: list[dict[str, Any]]) -> None:
    """`speedup_vs_1_process` = SPS / SPS of the same layout with 1 process."""
    base = {r["layout"]: r["steps_per_second"] for r in rows if r["processes"] == 1}
    for row in rows:
        b, sps = base.get(row["layout"]), row["steps_per_second"]
        row["speedup_vs_1_process"] = sps / b if (b and sps) else None


# ---------------------------------------------------------------- report


CAPTION = (
    "Weak scaling on ONE machine with {cpus} CPU cores: every process has its own {dpp} fake CPU devices and a "
    "fixed share of the envs, so the global problem grows with the process count. One {dpp}-device process "
    "already uses every core, so more processes only share the same cores (4 processes x {dpp} devices, plus "
    "Sebulba's actor threads, oversubscribe them 4x), and every cross-process all-reduce (PPO's gradient pmean, "
    "each minibatch step) goes "
    "through gloo over loopback TCP. So speedup < 1 here is expected: this shows that the multi-process "
    "machinery runs and counts steps globally at every size, not the speedup a real pod would get. "
    "SPS = global env steps/s from process 0's metrics.jsonl, mean of the records after the first; "
    "SPS per process = SPS / processes."
)


def table_cells(r: dict[str, Any]) -> list[Any]:
    """One row's cells of the markdown table."""
    speedup = fmt(r.get("speedup_vs_1_process"), ".2f")
    return [r["layout"], r["processes"], r["devices_total"], r["envs_total"],
            "FAILED" if "error" in r else fmt(r["steps_per_second"], ",.0f"), fmt(r["sps_per_process"], ",.0f"),
            speedup + ("x" if speedup != "n/a" else "")]


def markdown_table(rows: list[dict[str, Any]]) -> str:
    text = table(["layout", ">processes", ">devices total", ">envs total", ">SPS", ">SPS per process",
                  ">speedup vs 1 process"], map(table_cells, rows))
    caption = CAPTION.format(cpus=os.cpu_count(), dpp=DEVICES_PER_PROCESS)
    return text + "\n\n" + caption + load_note(loads_of(rows), with_cpus=False)


def plot(rows: list[dict[str, Any]], path: str) -> None:
    """SPS vs processes, one line per layout (log-log), caption under the axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5.8))
    for layout, marker in zip(LAYOUTS, ("o", "s")):
        points = sorted((r["processes"], r["steps_per_second"]) for r in rows
                        if r["layout"] == layout and r["steps_per_second"])
        if not points:
            continue
        xs, ys = zip(*points)
        (line,) = ax.plot(xs, ys, marker=marker, label=f"{layout} (measured)")
        ideal = [ys[0] * x / xs[0] for x in xs]  # perfect weak scaling from the smallest point
        ax.plot(xs, ideal, linestyle=":", color=line.get_color(), alpha=0.6,
                label=f"{layout}: ideal weak scaling (one host per process)")
    processes = sorted({r["processes"] for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(processes, [str(p) for p in processes])
    ax.set_xlabel(f"local processes ({DEVICES_PER_PROCESS} fake CPU devices each)")
    ax.set_ylabel("global env steps / s (steady state)")
    ax.set_title(f"podrl multi-process weak scaling on {os.cpu_count()} CPU cores")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    caption = (f"One machine, {os.cpu_count()} cores: 4 processes x {DEVICES_PER_PROCESS} devices oversubscribe it "
               "and cross-process all-reduce is gloo over loopback.\nThis checks that the machinery scales "
               "correctly (runs, counts global steps); it is not a raw speedup measurement.")
    fig.text(0.5, 0.01, caption, ha="center", va="bottom", fontsize=7.5, wrap=True)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = new_parser(__doc__, quick="tiny runs (smoke test, numbers meaningless)", timeout=600.0)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4], help="process counts to run")
    parser.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS), help="layouts to run")
    parser.add_argument("--anakin-env", default="CartPole-v1", help="JAX env of the Anakin runs")
    parser.add_argument("--sebulba-env", default="CartPole-v1",
                        help="host env of the Sebulba runs (gymnasium id, or jax:CartPole-v1)")
    parser.add_argument("--anakin-envs-per-device", type=int, default=32, help="Anakin envs on every device")
    parser.add_argument("--sebulba-envs-per-thread", type=int, default=32, help="Sebulba envs per actor thread")
    parser.add_argument("--rollout-length", type=int, default=32, help="steps per env between updates")
    parser.add_argument("--records", type=int, default=6, help="metrics records per run (the first is dropped)")
    parser.add_argument("--keep-runs", help="copy every run directory (config.json, metrics.jsonl) here")
    parser.add_argument("--plot", help="write the PNG plot here")
    args = parser.parse_args(argv)
    if any(p < 1 for p in args.processes) or args.records < 2:
        parser.error("--processes must be >= 1 and --records >= 2")
    args.processes = sorted(set(args.processes))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    load_start = list(os.getloadavg())
    start = time.perf_counter()
    rows = []
    for point in plan(args):
        rows.append(run_point(point, args.timeout, args.keep_runs))
        r = rows[-1]
        log_run(f"{point.layout:8s} processes={point.processes} envs={point.envs_total:4d} ({r['records']} records)", r)
        if "error" in r:
            print(r["output_tail"], file=sys.stderr, flush=True)
    add_speedups(rows)
    code = finish("multi-process weak scaling (benchmarks/scaling.py)", args, rows, markdown_table(rows), start,
                  devices_per_process=DEVICES_PER_PROCESS, load_average_at_start=load_start,
                  caption=CAPTION.format(cpus=os.cpu_count(), dpp=DEVICES_PER_PROCESS))
    if args.plot:
        plot(rows, args.plot)
    return code


if __name__ == "__main__":
    sys.exit(main())
