"""Benchmark Anakin PPO on MinAtar Breakout (gymnax): env steps/s and compile seconds vs the env-only ceiling.

Rows, for every env count of --envs (default 64 / 256 / 1024) on every device count
of --devices (default 1 and 2; on CPU the host is split into that many JAX devices),
each measured in its own subprocess by scripts/bench_anakin.py's child:
  ppo       PPO (PPOConfig defaults, `--agent.torso minatar_cnn`) on gymnax:Breakout-MinAtar
            through `train_anakin`: `--rollout-length` steps per env between updates,
            `--updates-per-call` updates per compiled call, `--calls` calls, no periodic
            evaluation. Steps/s count training calls only; compile = the AOT compile of the call.
  env_only  the ceiling: the same env (wrap_for_training) with uniform random actions and no
            network, vmapped over the envs, `lax.scan` over one call's steps inside one
            jit(shard_map(...)) over the device mesh (bench_anakin's `build_env_only`).
The table gives both side by side and PPO's fraction of the ceiling. Nothing is asserted.

Usage:
  python scripts/bench_minatar.py                                 # 64/256/1024 envs, 1 and 2 devices
  python scripts/bench_minatar.py --out minatar.json --repeats 3  # median of 3 runs per row
  python scripts/bench_minatar.py --quick --envs 8 --out /tmp/m.json   # smoke test
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench_anakin import Measurement, measure_all
from bench_common import add_child_run_flags, finish, fmt, load_note, new_parser, repeats_document

ENV = "gymnax:Breakout-MinAtar"
TORSO = "minatar_cnn"


def plan(args: argparse.Namespace) -> list[Measurement]:
    """Every row, in the order it runs: for each device count, PPO then the ceiling at each env count."""
    rollout, per_call = (4, 1) if args.quick else (args.rollout_length, args.updates_per_call)
    calls, min_seconds = (1, 0.0) if args.quick else (args.calls, args.env_min_seconds)
    rows = []
    for devices in args.devices:
        for num_envs in args.envs:
            steps = num_envs * rollout * per_call * calls
            common = dict(devices=devices, num_envs=num_envs, rollout_length=rollout, total_steps=steps,
                          updates_per_call=per_call, env=ENV, torso=TORSO)
            rows.append(Measurement("ppo", **common))
            rows.append(Measurement("env_only", **common, min_seconds=min_seconds))
    return rows


def pair_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One table line per (devices, envs): PPO and env-only figures and PPO's fraction of the ceiling."""
    by_key = {(r["name"], r["devices"], r["num_envs"]): r for r in rows}
    lines = []
    for r in rows:
        if r["name"] != "ppo":
            continue
        ceiling = by_key.get(("env_only", r["devices"], r["num_envs"]), {})
        ppo_sps, env_sps = r.get("steps_per_second"), ceiling.get("steps_per_second")
        lines.append({
            "devices": r["devices"], "num_envs": r["num_envs"], "rollout_length": r["rollout_length"],
            "ppo_steps_per_second": ppo_sps, "ppo_compile_seconds": r.get("compile_seconds"),
            "env_only_steps_per_second": env_sps, "env_only_compile_seconds": ceiling.get("compile_seconds"),
            "ppo_fraction_of_ceiling": ppo_sps / env_sps if (ppo_sps and env_sps) else None,
            "failed": [n for n, x in (("ppo", r), ("env_only", ceiling)) if "error" in x or not x],
        })
    return lines


CAPTION = (
    "PPO = Anakin PPO (defaults: 4 epochs x 4 minibatches, minatar_cnn torso) on gymnax:Breakout-MinAtar, "
    "training calls only; env-only = the same env with random actions and no network, one scan per call. "
    "Compile = AOT compile of one call. PPO/ceiling = PPO steps/s / env-only steps/s."
)


def markdown_table(lines: list[dict[str, Any]], rows: list[dict[str, Any]], caption: str = CAPTION) -> str:
    """The paired results as a markdown table with its caption (scripts/bench_brax.py gives its own)."""
    out = [
        "| devices | envs x steps | PPO steps/s | PPO compile s | env-only steps/s | env-only compile s | PPO/ceiling |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for line in lines:
        failed = "FAILED: " + ", ".join(line["failed"]) if line["failed"] else None
        cells = [
            str(line["devices"]), f"{line['num_envs']} x {line['rollout_length']}",
            fmt(line["ppo_steps_per_second"], ",.0f"), fmt(line["ppo_compile_seconds"], ".1f"),
            fmt(line["env_only_steps_per_second"], ",.0f"), fmt(line["env_only_compile_seconds"], ".1f"),
            failed or fmt(line["ppo_fraction_of_ceiling"], ".2%"),
        ]
        out.append("| " + " | ".join(cells) + " |")
    loads = [run["load_1m"] for r in rows for run in r["runs"]]
    return "\n".join(out) + "\n\n" + caption + load_note(loads)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = new_parser(__doc__)
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2], help="device counts to run each row on")
    parser.add_argument("--envs", type=int, nargs="+", default=[64, 256, 1024], help="env counts (multiples of every device count)")
    parser.add_argument("--rollout-length", type=int, default=16, help="steps per env between updates")
    parser.add_argument("--updates-per-call", type=int, default=4, help="updates per compiled call")
    parser.add_argument("--calls", type=int, default=2, help="timed training calls per PPO row")
    parser.add_argument("--repeats", type=int, default=1, help="runs per row; the median is reported")
    parser.add_argument("--env-min-seconds", type=float, default=1.0, help="env-only rows step at least this long")
    add_child_run_flags(parser, timeout=900.0, quick_help="tiny step counts (smoke test, numbers meaningless)")
    args = parser.parse_args(argv)
    if min(args.repeats, args.calls, args.rollout_length, args.updates_per_call, *args.devices, *args.envs) < 1:
        parser.error("--repeats, --calls, --rollout-length, --updates-per-call, --devices and --envs must be positive")
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

        return repeats_document(rows, args, wall, jax.__version__, benchmark="anakin_minatar_breakout",
                                env=ENV, torso=TORSO, table=lines)

    return finish(rows, markdown_table(lines, rows), wall, args.out, document)


if __name__ == "__main__":
    sys.exit(main())
