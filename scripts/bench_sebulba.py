"""Benchmark the Sebulba layout: training steps/s next to the env-only ceiling of the same host envs.

For every point of a small grid (env x actor threads x envs per thread x lag) two
things are measured, each in its own subprocess (fresh JAX, its own CPU split):

  sebulba    PPO trained with `train_sebulba` on 2 CPU JAX devices
             (`jax_num_cpu_devices=2`): actor device 0, learner device 1,
             `threads` actor threads of `envs_per_thread` envs each, logging off,
             no evaluation. Steps/s is `SebulbaResult.steps_per_second` (env steps
             consumed by the learner per second after compilation). The per-update
             stage timings are the means of the run's history records
             ('time/env_step_s', 'time/inference_s', 'time/learner_step_s',
             'time/learner_queue_wait_s', 'time/actor_queue_put_wait_s') over the
             steady-state windows (the first log window is left out when there
             are at least three).
  ceiling    the env-only ceiling: the same host vector env
             (`make_host_env(env, envs_per_thread)`, built and reset in the main
             thread), `threads` copies stepped concurrently, one per thread, with
             uniformly random valid actions in a plain loop: no inference, no
             learner, no JAX.

The table gives Sebulba / ceiling next to the targets (>= 85% on ALE Pong, >= 50%
on CartPole-v1) and where one update's time goes. Sebulba runs are sized from the
ceiling measured just before them (`--seconds` of steady state if Sebulba ran at
half the ceiling), so a slow Sebulba point runs longer, not shorter.

Usage:
  python scripts/bench_sebulba.py                                  # full grid, lag 1
  python scripts/bench_sebulba.py --out bench.json --repeats 3     # median of 3 runs per point
  python scripts/bench_sebulba.py --lag 0 1 async --envs CartPole-v1
  python scripts/bench_sebulba.py --envs ale:Pong --threads 1 --num-envs 16
  python scripts/bench_sebulba.py --quick --envs CartPole-v1 --out /tmp/smoke.json   # smoke test
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import threading
import time
from typing import Any

from bench_common import (add_child_run_flags, configure_cpu_devices, emit_result, finish, fmt, load_note, median_of,
                          new_parser, repeats_document, run_child_script)

GRID = {"CartPole-v1": ((1, 2), (16, 64, 128)), "ale:Pong": ((1, 2), (8, 16))}
"""Default grid per env: (actor threads, envs per thread)."""

ROLLOUT_LENGTH = {"CartPole-v1": 32, "ale:Pong": 32}
TARGETS = {"CartPole-v1": 0.50, "ale:Pong": 0.85}
"""Sebulba steps/s as a fraction of the env-only ceiling that the layout should reach."""

SIZING_RATIO = 0.5
"""Sebulba runs are sized for `--seconds` at this fraction of the measured ceiling (sizing only)."""

MIN_UPDATES, QUICK_UPDATES = 20, 3
DEVICES = 2  # actor device 0, learner device 1

STAGES = ("time/env_step_s", "time/inference_s", "time/actor_queue_put_wait_s",
          "time/learner_step_s", "time/learner_queue_wait_s")
ACTOR_STAGES = ("time/env_step_s", "time/inference_s", "time/actor_queue_put_wait_s")
"""Stages the history sums over actor threads (divided by the thread count for per-thread figures)."""


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One child run: a Sebulba training run or an env-only ceiling."""

    kind: str  # "sebulba" | "ceiling"
    env: str
    threads: int
    envs_per_thread: int
    rollout_length: int = 32
    lag: str = "1"
    total_steps: int = 0  # sebulba: env steps (rounded down to whole updates)
    num_minibatches: int = 4
    num_epochs: int = 4
    min_seconds: float = 5.0  # ceiling: step at least this long
    seed: int = 0

    @property
    def steps_per_update(self) -> int:
        return self.threads * self.envs_per_thread * self.rollout_length


# ---------------------------------------------------------------- child side


def _window_weights(history: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int, int]]:
    """`(record, updates, env_steps)` of each log window, first window dropped when >= 3."""
    windows, last_updates, last_steps = [], 0, 0
    for record in history:
        windows.append((record, record["updates"] - last_updates, record["step"] - last_steps))
        last_updates, last_steps = record["updates"], record["step"]
    return windows[1:] if len(windows) >= 3 else windows


def summarize_history(history: list[dict[str, Any]]) -> dict[str, Any]:
    """Steady-state steps/s and update-weighted mean stage timings of a run's history."""
    windows = _window_weights(history)
    updates = sum(u for _, u, _ in windows)
    seconds = sum(s / r["sps"] for r, _, s in windows if r["sps"] > 0)
    stages = {k: sum(r[k] * u for r, u, _ in windows if k in r) / updates for k in STAGES}
    lag = sum(r["policy_lag_mean"] * u for r, u, _ in windows) / updates
    return {
        "steady_steps_per_second": sum(s for _, _, s in windows) / seconds if seconds else None,
        "steady_updates": updates,
        "stage_seconds_per_update": stages,
        "policy_lag_mean": lag,
        "queue_depth_mean": sum(r.get("queue_depth", 0.0) * u for r, u, _ in windows) / updates,
    }


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


def measure_sebulba(m: Measurement) -> dict[str, Any]:
    """Trains PPO with `train_sebulba`; returns steps/s, compile seconds and stage timings."""
    from agents.ppo import PPOConfig
    from podrl.config import LoggingConfig
    from podrl.sebulba import SebulbaConfig, train_sebulba

    num_updates = max(1, m.total_steps // m.steps_per_update)
    config = SebulbaConfig(
        env=m.env, seed=m.seed, total_steps=num_updates * m.steps_per_update, actor_devices=(0,),
        learner_devices=(1,), threads_per_actor_device=m.threads, envs_per_thread=m.envs_per_thread,
        rollout_length=m.rollout_length, lag=m.lag, eval_episodes=0, log_every=max(1, num_updates // 10),
        logging=LoggingConfig(run_dir=None, console=False),
    )
    agent_config = PPOConfig(num_minibatches=m.num_minibatches, num_epochs=m.num_epochs)
    start = time.perf_counter()
    with CpuSampler() as cpu:
        result = train_sebulba(config, agent_config)
    wall = time.perf_counter() - start
    train_seconds = result.env_steps / result.steps_per_second
    return {
        "steps_per_second": float(result.steps_per_second),
        "compile_seconds": float(result.compile_seconds),
        "steps_measured": int(result.env_steps),
        "updates": num_updates,
        "train_seconds": train_seconds,
        "child_wall_seconds": wall,
        "cpu_cores_used": cpu.cores_used(train_seconds),  # the training part (closing envs included)
        **summarize_history(result.history),
    }


def _step_loop(env, seed: int, barrier: threading.Barrier, deadline: list[float], out: list, slot: int) -> None:
    """Steps `env` with random valid actions from the barrier until `deadline[0]`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    num_actions, n = env.action_spec().num_values, env.num_envs
    for _ in range(3):  # warm-up, not timed
        env.step(rng.integers(0, num_actions, n))
    barrier.wait(timeout=300)  # a thread that failed before it breaks the barrier (no hang)
    steps = 0
    while time.perf_counter() < deadline[0]:
        env.step(rng.integers(0, num_actions, n))
        steps += n
    out[slot] = (steps, time.perf_counter())


def measure_ceiling(m: Measurement) -> dict[str, Any]:
    """Env-only steps/s of `threads` host vector envs stepped concurrently (no JAX work)."""
    from envs.adapters.make import make_host_env

    start = time.perf_counter()
    envs = [make_host_env(m.env, m.envs_per_thread, seed=m.seed + j) for j in range(m.threads)]
    for j, env in enumerate(envs):
        env.reset(m.seed + 1000 * j)
    setup_seconds = time.perf_counter() - start
    out: list = [None] * m.threads
    deadline = [math.inf]
    clock: list[float] = []

    def release():  # runs once, when every thread has warmed up
        clock.append(time.perf_counter())
        deadline[0] = clock[0] + m.min_seconds

    barrier = threading.Barrier(m.threads, action=release)
    threads = [threading.Thread(target=_step_loop, args=(env, m.seed + j, barrier, deadline, out, j), daemon=True)
               for j, env in enumerate(envs)]
    try:
        with CpuSampler(interval=0.05) as cpu:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        for env in envs:
            env.close()
    if any(o is None for o in out):
        raise RuntimeError("an env-only stepping thread failed (see stderr)")
    steps = sum(s for s, _ in out)
    seconds = max(end for _, end in out) - clock[0]
    return {"steps_per_second": steps / seconds, "steps_measured": steps, "seconds": seconds,
            "setup_seconds": setup_seconds, "cpu_cores_used": cpu.cores_used(seconds)}


def run_child(spec_json: str) -> int:
    """Child entry point: one measurement, printed as one RESULT_PREFIX line."""
    m = Measurement(**json.loads(spec_json))
    if m.kind == "sebulba":
        configure_cpu_devices(DEVICES)
        result = measure_sebulba(m)
    else:
        result = measure_ceiling(m)
    emit_result(result)
    return 0


# ---------------------------------------------------------------- parent side


@dataclasses.dataclass(frozen=True)
class Point:
    """One grid point: a Sebulba configuration and its ceiling."""

    env: str
    threads: int
    envs_per_thread: int
    lag: str

    @property
    def ceiling_key(self) -> tuple[str, int, int]:
        return (self.env, self.threads, self.envs_per_thread)


def plan(args: argparse.Namespace) -> list[Point]:
    """Every grid point, in the order it runs."""
    points = []
    for env in args.envs:
        threads, num_envs = GRID.get(env, GRID["CartPole-v1"])
        threads = args.threads or threads
        num_envs = args.num_envs or num_envs
        for lag in args.lag:
            points += [Point(env, t, n, lag) for t in threads for n in num_envs]
    return points


def sebulba_measurement(p: Point, args: argparse.Namespace, ceiling_sps: float | None) -> Measurement:
    """The Sebulba run of `p`, sized for `--seconds` at SIZING_RATIO of the ceiling."""
    length = args.rollout_length or ROLLOUT_LENGTH.get(p.env, 32)
    spu = p.threads * p.envs_per_thread * length
    if args.quick:
        updates = QUICK_UPDATES
    else:
        wanted = (ceiling_sps or 0.0) * SIZING_RATIO * args.seconds
        updates = max(MIN_UPDATES, math.ceil(wanted / spu))
    return Measurement("sebulba", p.env, p.threads, p.envs_per_thread, length, p.lag, updates * spu,
                       args.num_minibatches, args.num_epochs)


def ceiling_measurement(p: Point, args: argparse.Namespace) -> Measurement:
    seconds = 0.3 if args.quick else args.ceiling_seconds
    return Measurement("ceiling", p.env, p.threads, p.envs_per_thread, min_seconds=seconds)


def run_once(m: Measurement, timeout: float) -> dict[str, Any]:
    """Runs `m` in a fresh Python process; returns its result (or an `error`, no load after a timeout)."""
    return run_child_script(__file__, dataclasses.asdict(m), timeout, load_on_timeout=False)


def run_status(run: dict[str, Any]) -> str:
    """A one-line account of one run, for the progress log."""
    if "error" in run:
        return "FAILED: " + run["error"].splitlines()[0]
    extra = f", compile {run['compile_seconds']:.1f} s" if "compile_seconds" in run else ""
    return (f"{run['steps_per_second']:,.0f} steps/s{extra}, wall {run['wall_seconds']:.1f} s, "
            f"load {run['load_1m']:.1f}")


def measure_all(points: list[Point], args: argparse.Namespace) -> tuple[dict, dict]:
    """Runs every point `--repeats` times, interleaved (points inner, repeats outer).

    Each Sebulba run follows the ceiling of its point measured in the same repeat
    (a ceiling shared by several lags is measured once per repeat).
    """
    ceilings: dict[tuple, list[dict[str, Any]]] = {p.ceiling_key: [] for p in points}
    sebulba: dict[Point, list[dict[str, Any]]] = {p: [] for p in points}
    for repeat in range(args.repeats):
        tag = f"[{repeat + 1}/{args.repeats}]"
        for p in points:
            runs = ceilings[p.ceiling_key]
            if len(runs) <= repeat:
                runs.append(run_once(ceiling_measurement(p, args), args.timeout))
                print(f"{tag} ceiling {p.env:12s} {p.threads} x {p.envs_per_thread:4d}: {run_status(runs[-1])}",
                      file=sys.stderr, flush=True)
            ceiling_sps = runs[-1].get("steps_per_second")
            m = sebulba_measurement(p, args, ceiling_sps)
            sebulba[p].append({**run_once(m, args.timeout), "total_steps": m.total_steps})
            print(f"{tag} sebulba {p.env:12s} {p.threads} x {p.envs_per_thread:4d} lag={p.lag}: "
                  f"{run_status(sebulba[p][-1])}", file=sys.stderr, flush=True)
    return ceilings, sebulba


def _median_stages(runs: list[dict[str, Any]]) -> dict[str, float] | None:
    stages = [r["stage_seconds_per_update"] for r in runs]
    return {k: statistics.median(s[k] for s in stages) for k in STAGES} if stages else None


def make_row(p: Point, args: argparse.Namespace, ceiling_runs: list, sebulba_runs: list) -> dict[str, Any]:
    """One JSON row: medians over the repeats of the point, with every raw run kept."""
    ok = [r for r in sebulba_runs if "error" not in r]
    ceiling_ok = [r for r in ceiling_runs if "error" not in r]
    length = args.rollout_length or ROLLOUT_LENGTH.get(p.env, 32)
    sps, ceiling = median_of(ok, "steps_per_second"), median_of(ceiling_ok, "steps_per_second")
    row: dict[str, Any] = {
        "env": p.env, "threads": p.threads, "envs_per_thread": p.envs_per_thread, "rollout_length": length,
        "lag": p.lag, "steps_per_update": p.threads * p.envs_per_thread * length,
        "config": {"agent": "PPO", "num_epochs": args.num_epochs, "num_minibatches": args.num_minibatches,
                   "actor_devices": [0], "learner_devices": [1], "cpu_devices": DEVICES,
                   "vectorization": "sync", "eval_episodes": 0, "logging": None},
        "steps_per_second": sps,
        "steady_steps_per_second": median_of(ok, "steady_steps_per_second"),
        "compile_seconds": median_of(ok, "compile_seconds"),
        "ceiling_steps_per_second": ceiling,
        "fraction_of_ceiling": sps / ceiling if (sps and ceiling) else None,
        "target_fraction": TARGETS.get(p.env),
        "policy_lag_mean": median_of(ok, "policy_lag_mean"),
        "cpu_cores_used": median_of(ok, "cpu_cores_used"),
        "ceiling_cpu_cores_used": median_of(ceiling_ok, "cpu_cores_used"),
        "stage_seconds_per_update": _median_stages(ok),
        "runs": sebulba_runs,
        "ceiling_runs": ceiling_runs,
    }
    target = row["target_fraction"]
    row["meets_target"] = (row["fraction_of_ceiling"] >= target) if (target and row["fraction_of_ceiling"]) else None
    if row["stage_seconds_per_update"] and row["steady_steps_per_second"]:
        row["per_thread_ms_per_update"] = per_thread_breakdown(row)
    errors = [r["error"] for r in sebulba_runs + ceiling_runs if "error" in r]
    if not ok or not ceiling_ok:
        row["error"] = errors[-1]
    return row


def per_thread_breakdown(row: dict[str, Any]) -> dict[str, float]:
    """One update in ms: wall time, each actor thread's stages (history sums / threads) and
    'actor_other' = wall - env - inference - put wait (params wait, numpy stacking,
    device_put to the learner, Python overhead), and the learner's stages."""
    stages, threads = row["stage_seconds_per_update"], row["threads"]
    wall = row["steps_per_update"] / row["steady_steps_per_second"]
    actor = {k: stages[k] / threads for k in ACTOR_STAGES}
    return {
        "update_wall": 1e3 * wall,
        "env_step": 1e3 * actor["time/env_step_s"],
        "inference": 1e3 * actor["time/inference_s"],
        "actor_put_wait": 1e3 * actor["time/actor_queue_put_wait_s"],
        "actor_other": 1e3 * (wall - sum(actor.values())),
        "learner_step": 1e3 * stages["time/learner_step_s"],
        "learner_queue_wait": 1e3 * stages["time/learner_queue_wait_s"],
    }


# ---------------------------------------------------------------- report


def caption(args: argparse.Namespace) -> str:
    return (
        "Targets: Sebulba >= 85% of the env-only ceiling on ALE Pong ('ale:Pong', ale-py AtariVectorEnv, "
        "84x84x4 uint8) and >= 50% on CartPole-v1 (gymnasium SyncVectorEnv). steps/s = "
        "SebulbaResult.steps_per_second (env steps consumed by the learner per second, compile "
        "excluded); ceiling = the same host vector env(s), one per actor thread, stepped concurrently "
        "with random actions and nothing else. PPO "
        f"({args.num_epochs} epochs x {args.num_minibatches} minibatches), 2 CPU JAX devices (actor 0, "
        "learner 1). cores S/ceil = CPU seconds per second the Sebulba child (training part) / the "
        "ceiling child used: below 2 means the run did not get both cores (idle waits or other tenants). "
        "Timings are ms per update (one rollout from every thread), steady-state windows: "
        "wall = steps per update / steady steps/s; env, infer (act call + device_get), put wait and "
        "actor other (wall - env - infer - put wait: params wait, numpy stacking, device_put to the "
        "learner, Python; slightly negative in short runs, where a window consumes rollouts collected in the one before) are per actor thread; learn = learner step incl. publishing params, "
        "l.wait = learner waiting for rollouts."
    )


def markdown_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """The results as a markdown table with its caption."""
    lines = [
        "| env | threads x envs | lag | steps/s | ceiling steps/s | Sebulba/ceiling | target | compile s "
        "| cores S/ceil | wall ms | env ms | infer ms | put wait ms | actor other ms | learn ms | l.wait ms "
        "| policy lag |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        b = r.get("per_thread_ms_per_update") or {}
        mark = {True: " (met)", False: " (missed)"}.get(r["meets_target"], "")
        cells = [
            r["env"], f"{r['threads']} x {r['envs_per_thread']}", r["lag"],
            fmt(r["steps_per_second"], ",.0f") if r["steps_per_second"] else "FAILED",
            fmt(r["ceiling_steps_per_second"], ",.0f"),
            fmt(r["fraction_of_ceiling"], ".1%") + mark,
            fmt(r["target_fraction"], ".0%"),
            fmt(r["compile_seconds"], ".1f"),
            f"{fmt(r['cpu_cores_used'], '.2f')}/{fmt(r['ceiling_cpu_cores_used'], '.2f')}",
            *(fmt(b.get(k), ".1f") for k in ("update_wall", "env_step", "inference", "actor_put_wait",
                                                "actor_other", "learner_step", "learner_queue_wait")),
            fmt(r["policy_lag_mean"], ".2f"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    loads = [run["load_1m"] for r in rows for run in r["runs"] + r["ceiling_runs"] if "load_1m" in run]
    return "\n".join(lines) + "\n\n" + caption(args) + load_note(loads)


def document(rows: list[dict[str, Any]], args: argparse.Namespace, wall_seconds: float) -> dict[str, Any]:
    """The JSON document written by --out."""
    import jax

    return repeats_document(rows, args, wall_seconds, jax.__version__, benchmark="sebulba",
                            seconds=args.seconds, targets=TARGETS)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = new_parser(__doc__)
    parser.add_argument("--envs", nargs="+", default=list(GRID), help="host envs to benchmark (make_host_env names)")
    parser.add_argument("--threads", type=int, nargs="+", help="actor threads (default: the env's grid)")
    parser.add_argument("--num-envs", type=int, nargs="+", help="envs per thread (default: the env's grid)")
    parser.add_argument("--lag", nargs="+", default=["1"], help="staleness settings: 0, 1 (Cleanba), ..., async")
    parser.add_argument("--rollout-length", type=int, help="steps per env per rollout (default: 32)")
    parser.add_argument("--num-epochs", type=int, default=4, help="PPO epochs per update")
    parser.add_argument("--num-minibatches", type=int, default=4, help="PPO minibatches per epoch")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help=f"size Sebulba runs for this long at {SIZING_RATIO * 100:.0f}%% of the ceiling")
    parser.add_argument("--ceiling-seconds", type=float, default=5.0, help="env-only runs step this long")
    parser.add_argument("--repeats", type=int, default=1, help="runs per point; the median is reported")
    add_child_run_flags(parser, timeout=600.0, quick_help="tiny runs (smoke test, numbers meaningless)")
    args = parser.parse_args(argv)
    if args.child:
        return args
    positive = [args.repeats, args.num_epochs, args.num_minibatches, *(args.threads or []), *(args.num_envs or [])]
    if any(v < 1 for v in positive) or args.seconds <= 0 or args.ceiling_seconds <= 0:
        parser.error("--repeats, --threads, --num-envs, --num-epochs, --num-minibatches and the seconds must be positive")
    for lag in args.lag:
        if lag != "async" and not lag.isdigit():
            parser.error(f"--lag values are non-negative integers or 'async', got {lag!r}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return run_child(args.child)
    start = time.perf_counter()
    points = plan(args)
    ceilings, sebulba = measure_all(points, args)
    rows = [make_row(p, args, ceilings[p.ceiling_key], sebulba[p]) for p in points]
    wall = time.perf_counter() - start
    return finish(rows, markdown_table(rows, args), wall, args.out, lambda: document(rows, args, wall))


if __name__ == "__main__":
    sys.exit(main())
