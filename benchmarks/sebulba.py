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

Every row also gives the trajectory bytes per env step the learner receives
(`podrl.sebulba.transport.bytes_per_step`, by field), e.g. 56,469 on Atari, where
observation and next_observation are one 4x84x84 uint8 stack each. Atari
(`--envs ale:Pong`) trains PPO with the Nature CNN torso on the default "machado"
protocol (`podrl.envs.adapters.atari`); on 2 CPU cores a CNN update takes tens of seconds,
so use `--quick` (3 updates) or `--updates N` there.

The table gives Sebulba / ceiling next to the targets (>= 85% on ALE Pong, >= 50%
on CartPole-v1) and where one update's time goes. Sebulba runs are sized from the
ceiling measured just before them (`--seconds` of steady state if Sebulba ran at
half the ceiling), so a slow Sebulba point runs longer, not shorter.

This module plans the grid, runs every measurement in a child process
(benchmarks.sebulba_measure, the child side), and reports
(benchmarks.sebulba_report: rows, table, JSON document).

Usage:
  python -m benchmarks.sebulba                                  # full grid, lag 1
  python -m benchmarks.sebulba --out bench.json --repeats 3     # median of 3 runs per point
  python -m benchmarks.sebulba --lag 0 1 async --envs CartPole-v1
  python -m benchmarks.sebulba --envs ale:Pong --threads 1 --num-envs 16
  python -m benchmarks.sebulba --envs ale:Pong --threads 1 --num-envs 8 --num-epochs 1 --num-minibatches 1 \
      --updates 4 --out atari.json                              # Atari on a small CPU: a tiny run
  python -m benchmarks.sebulba --envs envpool:CartPole-v1 --threads 1 --num-envs 256 --hidden-sizes 8
                                                                # inference nearly free: pipeline vs ceiling
  python -m benchmarks.sebulba --quick --envs CartPole-v1 --out /tmp/smoke.json   # smoke test
  python -m benchmarks.sebulba --envs ale:Pong --threads 1 --num-envs 16 32 --pool 6 --pipeline actor full \
      --env-groups 1 2 --baseline restructure --repeats 2      # the actor loop, before (REV) and after,
                                                                # cheap inference, alone and with PPO learning

Variants of a point: `--env-groups` (SebulbaConfig.env_groups: env batches per thread that
alternate), `--pipeline actor` (the learner consumes rollouts without updating:
`benchmarks.probe_agent`, what the actor loop alone delivers), `--pool N` (a network whose
inference is cheap: PPO's mlp on frames average-pooled by N, trajectories still full frames) and
`--baseline REV` (the same point on git revision REV's code, podrl/, agents/ and envs/, with this checkout's
benchmarks: `benchmarks.harness.baseline_tree`), all interleaved.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import baseline_tree, dispatch, finish, interleave, log_run, new_parser, run_child
from benchmarks.sebulba_measure import Measurement, child_main
from benchmarks.sebulba_report import TARGETS, make_row, markdown_table

MODULE = "benchmarks.sebulba"

GRID = {"CartPole-v1": ((1, 2), (16, 64, 128)), "ale:Pong": ((1, 2), (8, 16))}
"""Default grid per env: (actor threads, envs per thread)."""

ROLLOUT_LENGTH = {"CartPole-v1": 32, "ale:Pong": 32}
"""Default steps per env per rollout (--rollout-length overrides)."""

SIZING_RATIO = 0.5
"""Sebulba runs are sized for `--seconds` at this fraction of the measured ceiling (sizing only)."""

MIN_UPDATES, QUICK_UPDATES = 20, 3


@dataclasses.dataclass(frozen=True)
class Point:
    """One grid point: a Sebulba configuration and its ceiling."""

    env: str
    threads: int
    envs_per_thread: int
    lag: str
    rollout_length: int
    env_groups: int = 1
    learn: bool = True  # False: the actor pipeline alone (the learner consumes rollouts without updating)
    code: str = "current"  # "current", or "baseline": the --baseline revision's podrl

    @property
    def ceiling_key(self) -> tuple[str, int, int]:
        return (self.env, self.threads, self.envs_per_thread)

    @property
    def pipeline(self) -> str:
        return "full" if self.learn else "actor"


def plan(args: argparse.Namespace) -> list[Point]:
    """Every grid point, in the order it runs: per env, lag, pipeline, threads and envs, the --baseline
    revision's loop (one group) first, then every --env-groups setting of this checkout's."""
    points = []
    variants = ([("baseline", 1)] if args.baseline else []) + [("current", g) for g in args.env_groups]
    for env in args.envs:
        threads, num_envs = GRID.get(env, GRID["CartPole-v1"])
        threads = args.threads or threads
        num_envs = args.num_envs or num_envs
        length = args.rollout_length or ROLLOUT_LENGTH.get(env, 32)
        for lag in args.lag:
            for pipeline in args.pipeline:
                points += [Point(env, t, n, lag, length, groups, pipeline == "full", code)
                           for t in threads for n in num_envs for code, groups in variants if n % groups == 0]
    return points


def sebulba_measurement(p: Point, args: argparse.Namespace, ceiling_sps: float | None) -> Measurement:
    """The Sebulba run of `p`, sized for `--seconds` at SIZING_RATIO of the ceiling."""
    length = p.rollout_length
    spu = p.threads * p.envs_per_thread * length
    if args.quick:
        updates = QUICK_UPDATES
    elif args.updates:
        updates = args.updates
    else:
        wanted = (ceiling_sps or 0.0) * SIZING_RATIO * args.seconds
        updates = max(MIN_UPDATES, math.ceil(wanted / spu))
    return Measurement("sebulba", p.env, p.threads, p.envs_per_thread, length, p.lag, updates * spu,
                       args.num_minibatches, args.num_epochs, hidden_sizes=tuple(args.hidden_sizes),
                       env_groups=p.env_groups, pool=args.pool, learn=p.learn)


def ceiling_measurement(p: Point, args: argparse.Namespace) -> Measurement:
    seconds = 0.3 if args.quick else args.ceiling_seconds
    return Measurement("ceiling", p.env, p.threads, p.envs_per_thread, min_seconds=seconds)


def run_once(m: Measurement, timeout: float, cwd=None) -> dict[str, Any]:
    """Runs `m` in a fresh Python process (from `cwd`: a `baseline_tree`); returns its result (or an
    `error`, no load after a timeout)."""
    return run_child(MODULE, dataclasses.asdict(m), timeout, load_on_timeout=False, cwd=cwd)


def measure_all(points: list[Point], args: argparse.Namespace) -> tuple[dict, list[list[dict[str, Any]]]]:
    """Runs every point `--repeats` times, interleaved (points inner, repeats outer): `(ceiling runs by
    ceiling key, each point's Sebulba runs)`.

    Each Sebulba run follows the ceiling of its point measured in the same repeat
    (a ceiling shared by several lags is measured once per repeat).
    """
    ceilings: dict[tuple, list[dict[str, Any]]] = {p.ceiling_key: [] for p in points}

    def run(p: Point, repeat: int) -> dict[str, Any]:
        runs = ceilings[p.ceiling_key]
        if len(runs) <= repeat:
            runs.append(run_once(ceiling_measurement(p, args), args.timeout))
            log_run(f"[{repeat + 1}/{args.repeats}] ceiling {p.env:12s} {p.threads} x {p.envs_per_thread:4d}", runs[-1])
        m = sebulba_measurement(p, args, runs[-1].get("steps_per_second"))
        cwd = args.baseline_dir if p.code == "baseline" else None
        return {**run_once(m, args.timeout, cwd), "total_steps": m.total_steps}

    def label(p: Point) -> str:
        return (f"sebulba {p.env:12s} {p.threads} x {p.envs_per_thread:4d} lag={p.lag} {p.pipeline} "
                f"{p.code} groups={p.env_groups}")

    return ceilings, interleave(points, args.repeats, run, label)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = new_parser(__doc__, quick="tiny runs (smoke test, numbers meaningless)", repeats=1, timeout=600.0,
                        child=True)
    parser.add_argument("--envs", nargs="+", default=list(GRID), help="host envs to benchmark (make_host_env names)")
    parser.add_argument("--threads", type=int, nargs="+", help="actor threads (default: the env's grid)")
    parser.add_argument("--num-envs", type=int, nargs="+", help="envs per thread (default: the env's grid)")
    parser.add_argument("--lag", nargs="+", default=["1"], help="staleness settings: 0, 1 (Cleanba), ..., async")
    parser.add_argument("--rollout-length", type=int, help="steps per env per rollout (default: 32)")
    parser.add_argument("--num-epochs", type=int, default=4, help="PPO epochs per update")
    parser.add_argument("--num-minibatches", type=int, default=4, help="PPO minibatches per epoch")
    parser.add_argument("--hidden-sizes", type=int, nargs="+", default=[64, 64],
                        help="hidden layers of the MLP torso (e.g. 8: a network whose inference is nearly free)")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help=f"size Sebulba runs for this long at {SIZING_RATIO * 100:.0f}%% of the ceiling")
    parser.add_argument("--ceiling-seconds", type=float, default=5.0, help="env-only runs step this long")
    parser.add_argument("--updates", type=int,
                        help="Sebulba runs exactly this many updates (default: sized by --seconds)")
    parser.add_argument("--env-groups", type=int, nargs="+", default=[1],
                        help="SebulbaConfig.env_groups settings to measure (each point that splits evenly)")
    parser.add_argument("--pipeline", nargs="+", choices=["full", "actor"], default=["full"],
                        help="full: PPO learns; actor: the learner consumes rollouts without updating")
    parser.add_argument("--pool", type=int, default=0,
                        help="> 0: the cheap network, an mlp on frames average-pooled by this (Atari: 6 -> 4x14x14)")
    parser.add_argument("--baseline", metavar="REV",
                        help="also measure every point with git revision REV's podrl/ (before/after, interleaved)")
    args = parser.parse_args(argv)
    if args.child:
        return args
    positive = [args.repeats, args.num_epochs, args.num_minibatches, *args.hidden_sizes, *(args.threads or []),
                *(args.num_envs or []), *args.env_groups, *([args.updates] if args.updates is not None else [])]
    if any(v < 1 for v in positive) or args.seconds <= 0 or args.ceiling_seconds <= 0:
        parser.error("--repeats, --threads, --num-envs, --num-epochs, --num-minibatches, --updates and the seconds "
                     "must be positive")
    for lag in args.lag:
        if lag != "async" and not lag.isdigit():
            parser.error(f"--lag values are non-negative integers or 'async', got {lag!r}")
    return args


def run(args: argparse.Namespace, start: float) -> int:
    """The parent: every point measured, the table printed, the document written."""
    points = plan(args)
    with tempfile.TemporaryDirectory(prefix="podrl-baseline-") as tmp:
        args.baseline_dir = baseline_tree(args.baseline, Path(tmp)) if args.baseline else None
        ceilings, sebulba = measure_all(points, args)
    rows = [make_row(p, args, ceilings[p.ceiling_key], runs) for p, runs in zip(points, sebulba)]
    return finish("sebulba", args, rows, markdown_table(rows, args), start, seconds=args.seconds, targets=TARGETS)


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, parse_args, child_main, run)


if __name__ == "__main__":
    sys.exit(main())
