"""Benchmark Anakin PPO on MinAtar Breakout (gymnax): env steps/s and compile seconds vs the env-only ceiling.

Rows, for every env count of --envs (default 64 / 256 / 1024) on every device count
of --devices (default 1 and 2; on CPU the host is split into that many JAX devices),
each measured in its own subprocess by benchmarks.anakin's child:
  ppo       PPO (PPOConfig defaults, `--agent.torso minatar_cnn`) on gymnax:Breakout-MinAtar
            through `train_anakin`: `--rollout-length` steps per env between updates,
            `--updates-per-call` updates per compiled call, `--calls` calls, no periodic
            evaluation. Steps/s count training calls only; compile = the AOT compile of the call.
  env_only  the ceiling: the same env (wrap_for_training) with uniform random actions and no
            network, vmapped over the envs, `lax.scan` over one call's steps inside one
            jit(shard_map(...)) over the device mesh (benchmarks.anakin's `build_env_only`).
The table gives both side by side and PPO's fraction of the ceiling. Nothing is asserted.

Usage:
  python -m benchmarks.minatar                                 # 64/256/1024 envs, 1 and 2 devices
  python -m benchmarks.minatar --out minatar.json --repeats 3  # median of 3 runs per row
  python -m benchmarks.minatar --quick --envs 8 --out /tmp/m.json   # smoke test

The paired rows, their table and the flags they share serve benchmarks.brax too (`pair_parser`,
`run_pairs`).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from benchmarks.anakin import Measurement, measure_all
from benchmarks.harness import finish, fmt, load_note, loads_of, new_parser, table

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


def line_cells(line: dict[str, Any]) -> list[str]:
    """One paired line's cells of the markdown table."""
    failed = "FAILED: " + ", ".join(line["failed"]) if line["failed"] else None
    return [str(line["devices"]), f"{line['num_envs']} x {line['rollout_length']}",
            fmt(line["ppo_steps_per_second"], ",.0f"), fmt(line["ppo_compile_seconds"], ".1f"),
            fmt(line["env_only_steps_per_second"], ",.0f"), fmt(line["env_only_compile_seconds"], ".1f"),
            failed or fmt(line["ppo_fraction_of_ceiling"], ".2%")]


def markdown_table(lines: list[dict[str, Any]], rows: list[dict[str, Any]], caption: str = CAPTION) -> str:
    """The paired results as a markdown table with its caption (benchmarks.brax gives its own)."""
    text = table([">devices", "envs x steps", ">PPO steps/s", ">PPO compile s", ">env-only steps/s",
                  ">env-only compile s", ">PPO/ceiling"], map(line_cells, lines))
    return text + "\n\n" + caption + load_note(loads_of(run for r in rows for run in r["runs"]))


def pair_parser(doc: str | None, *, envs: list[int], env_min_seconds: float) -> argparse.ArgumentParser:
    """The parser of a PPO-vs-ceiling benchmark (this one, benchmarks.brax): the shared flags and
    --devices, --envs, --rollout-length, --calls and --env-min-seconds."""
    parser = new_parser(doc, quick="tiny step counts (smoke test, numbers meaningless)", repeats=1,
                        timeout=900.0)
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2], help="device counts to run each row on")
    parser.add_argument("--envs", type=int, nargs="+", default=envs,
                        help="env counts (multiples of every device count)")
    parser.add_argument("--rollout-length", type=int, default=16, help="steps per env between updates")
    parser.add_argument("--calls", type=int, default=2, help="timed training calls per PPO row")
    parser.add_argument("--env-min-seconds", type=float, default=env_min_seconds,
                        help="env-only rows step at least this long")
    return parser


def check_pairs(parser: argparse.ArgumentParser, args: argparse.Namespace, **more: int) -> argparse.Namespace:
    """`args`, once the counts (and `more`: flag name -> value) are positive and every --envs value is a
    multiple of every --devices value; a parser error naming the flags otherwise."""
    if min(args.repeats, args.calls, args.rollout_length, *more.values(), *args.devices, *args.envs) < 1:
        names = ["--repeats", "--calls", "--rollout-length", *(f"--{n.replace('_', '-')}" for n in more)]
        parser.error(", ".join(names) + ", --devices and --envs must be positive")
    if any(n % d for n in args.envs for d in args.devices):
        parser.error(f"every --envs value must be a multiple of every --devices value, "
                     f"got {args.envs} / {args.devices}")
    return args


def run_pairs(benchmark: str, args: argparse.Namespace, plan_: list[Measurement], caption: str, **fields: Any) -> int:
    """Measures `plan_` (benchmarks.anakin's children), pairs PPO with its ceiling, prints the table and
    writes the document (`fields`, then the paired lines as `table`); the exit code."""
    start = time.perf_counter()
    rows = measure_all(plan_, args.repeats, args.timeout)
    lines = pair_rows(rows)
    return finish(benchmark, args, rows, markdown_table(lines, rows, caption), start, **fields, table=lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = pair_parser(__doc__, envs=[64, 256, 1024], env_min_seconds=1.0)
    parser.add_argument("--updates-per-call", type=int, default=4, help="updates per compiled call")
    args = parser.parse_args(argv)
    return check_pairs(parser, args, updates_per_call=args.updates_per_call)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_pairs("anakin_minatar_breakout", args, plan(args), CAPTION, env=ENV, torso=TORSO)


if __name__ == "__main__":
    sys.exit(main())
