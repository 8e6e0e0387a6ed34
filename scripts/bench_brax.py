"""Benchmark Brax in Anakin: env-only steps/s (random actions) vs `brax-ppo` steps/s, and compile seconds.

Rows, for every env count of --envs (default 256 and 2048) on every device count of
--devices (default 1 and 2; on CPU the host is split into that many JAX devices), each
measured in its own subprocess by scripts/bench_anakin.py's child:
  ppo       PPO with the `brax-ppo` preset's agent fields (observation normalisation, 4 epochs x
            32 minibatches, 4 x 32 silu MLPs; podrl/cli/presets.py) on --env through `train_anakin`:
            `--rollout-length` steps per env between updates, one update per compiled call,
            `--calls` calls, no periodic evaluation. Steps/s count training calls only; compile =
            the AOT compile of the call.
  env_only  the ceiling: the same env (wrap_for_training: time limit, auto-reset) with uniform
            random actions in [-1, 1] and no network, vmapped over the envs, `lax.scan` over one
            call's steps inside one jit(shard_map(...)) over the device mesh.
The table (scripts/bench_minatar.py's) gives both side by side and PPO's fraction of the
ceiling. Nothing is asserted.

Usage:
  python scripts/bench_brax.py                                      # 256 / 2048 envs, 1 and 2 devices
  python scripts/bench_brax.py --env brax:ant,backend=spring --out ant.json
  python scripts/bench_brax.py --quick --envs 8 --devices 1 --out /tmp/b.json   # smoke test
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench_anakin import Measurement, measure_all
from bench_common import add_child_run_flags, finish, new_parser, repeats_document
from bench_minatar import markdown_table, pair_rows
from podrl.cli.presets import PRESETS

PRESET = "brax-ppo"


def agent_fields(quick: bool) -> dict[str, Any]:
    """The preset's agent fields; --quick: 2 minibatches (a tiny batch must split into them)."""
    fields = dict(PRESETS[PRESET].agent_fields)
    return {**fields, "num_minibatches": 2} if quick else fields


def plan(args: argparse.Namespace) -> list[Measurement]:
    """Every row, in the order it runs: for each device count, PPO then the ceiling at each env count."""
    rollout, calls, min_seconds = (4, 1, 0.0) if args.quick else (args.rollout_length, args.calls, args.env_min_seconds)
    rows = []
    for devices in args.devices:
        for num_envs in args.envs:
            common = dict(devices=devices, num_envs=num_envs, rollout_length=rollout,
                          total_steps=num_envs * rollout * calls, updates_per_call=1, env=args.env)
            rows.append(Measurement("ppo", **common, agent_fields=agent_fields(args.quick), anneal_lr=False))
            rows.append(Measurement("env_only", **common, min_seconds=min_seconds))
    return rows


def caption(env: str) -> str:
    return (f"PPO = Anakin PPO with the {PRESET} preset's agent fields on {env}, training calls only (one update "
            "per call); env-only = the same env with uniform random actions and no network, one scan per call. "
            "Compile = AOT compile of one call. PPO/ceiling = PPO steps/s / env-only steps/s.")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = new_parser(__doc__)
    parser.add_argument("--env", default=PRESETS[PRESET].run["env"],
                        help="a brax:<env>[,backend=...] name (any JAX env runs; the smoke test uses Pendulum-v1)")
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2], help="device counts to run each row on")
    parser.add_argument("--envs", type=int, nargs="+", default=[256, 2048], help="env counts (multiples of every device count)")
    parser.add_argument("--rollout-length", type=int, default=16, help="steps per env between updates")
    parser.add_argument("--calls", type=int, default=2, help="timed training calls per PPO row")
    parser.add_argument("--repeats", type=int, default=1, help="runs per row; the median is reported")
    parser.add_argument("--env-min-seconds", type=float, default=2.0, help="env-only rows step at least this long")
    add_child_run_flags(parser, timeout=900.0, quick_help="tiny step counts (smoke test, numbers meaningless)")
    args = parser.parse_args(argv)
    if min(args.repeats, args.calls, args.rollout_length, *args.devices, *args.envs) < 1:
        parser.error("--repeats, --calls, --rollout-length, --devices and --envs must be positive")
    if any(n % d for n in args.envs for d in args.devices):
        parser.error(f"every --envs value must be a multiple of every --devices value, got {args.envs} / {args.devices}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    rows = measure_all(plan(args), args.repeats, args.timeout)
    lines = pair_rows(rows)
    wall = time.perf_counter() - start

    def document() -> dict[str, Any]:
        import jax

        return repeats_document(rows, args, wall, jax.__version__, benchmark="anakin_brax", env=args.env,
                                preset=PRESET, table=lines)

    return finish(rows, markdown_table(lines, rows, caption(args.env)), wall, args.out, document)


if __name__ == "__main__":
    sys.exit(main())
