"""Benchmark Brax in Anakin: env-only steps/s (random actions) vs `brax-ppo` steps/s, and compile seconds.

Rows, for every env count of --envs (default 256 and 2048) on every device count of
--devices (default 1 and 2; on CPU the host is split into that many JAX devices), each
measured in its own subprocess by benchmarks.anakin's child:
  ppo       PPO with the `brax-ppo` preset's agent fields (observation normalisation, 4 epochs x
            32 minibatches, 4 x 32 silu MLPs; podrl/cli/presets.py) on --env through `train_anakin`:
            `--rollout-length` steps per env between updates, one update per compiled call,
            `--calls` calls, no periodic evaluation. Steps/s count training calls only; compile =
            the AOT compile of the call.
  env_only  the ceiling: the same env (wrap_for_training: time limit, auto-reset) with uniform
            random actions in [-1, 1] and no network, vmapped over the envs, `lax.scan` over one
            call's steps inside one jit(shard_map(...)) over the device mesh.
The table (benchmarks.minatar's) gives both side by side and PPO's fraction of the
ceiling. Nothing is asserted.

Usage:
  python -m benchmarks.brax                                      # 256 / 2048 envs, 1 and 2 devices
  python -m benchmarks.brax --env brax:ant,backend=spring --out ant.json
  python -m benchmarks.brax --quick --envs 8 --devices 1 --out /tmp/b.json   # smoke test
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from benchmarks.anakin import Measurement
from benchmarks.minatar import check_pairs, pair_parser, run_pairs
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
    parser = pair_parser(__doc__, envs=[256, 2048], env_min_seconds=2.0)
    parser.add_argument("--env", default=PRESETS[PRESET].run["env"],
                        help="a brax:<env>[,backend=...] name (any JAX env runs; the smoke test uses Pendulum-v1)")
    return check_pairs(parser, parser.parse_args(argv))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_pairs("anakin_brax", args, plan(args), caption(args.env), env=args.env, preset=PRESET)


if __name__ == "__main__":
    sys.exit(main())
