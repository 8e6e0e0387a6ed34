"""Benchmark SAC in Anakin: env steps/s and gradient steps/s on 1 and 2 CPU devices, and the
replay's bytes per transition.

Each row runs in its own subprocess (its own JAX device count) with `train_anakin` on
Pendulum-v1 (JAX), `--envs` envs in all x `--rollout` steps per update (so each learner shard
gets envs / devices of them), and SAC at CleanRL's MuJoCo network and batch (256 x 256 ReLU,
batch 256, one gradient step per env step: replay_ratio 1, per shard) with no warm-up, so
every update learns. Steps/s count training calls only (compile excluded, from
`AnakinResult.steps_per_second`); gradient steps/s = env steps/s x replay_ratio / devices: the
steps every shard takes, in lockstep, on its own batch (their gradients averaged). Bytes per
transition: `podrl.agents.replay.item_bytes` of one stored 1-step transition (o, a, r, discount, o').
Nothing is asserted about timings; a shared machine's load is printed with the figures.

Usage:
  python -m benchmarks.sac                          # 1 and 2 devices, 16384 steps per row
  python -m benchmarks.sac --devices 1 2 4 --steps 32768 --out sac.json
  python -m benchmarks.sac --quick                  # smoke test, numbers meaningless
"""

from __future__ import annotations

import json
import sys
from typing import Any

from benchmarks.harness import (
    configure_cpu_devices,
    dispatch,
    emit_result,
    finish,
    fmt,
    load_note,
    loads_of,
    new_parser,
    run_child,
    table,
)

ENV_NAME = "Pendulum-v1"


def sac_config(quick: bool, replay_ratio: float):
    from podrl.agents.sac import SACConfig

    hidden, batch = ((16, 16), 16) if quick else ((256, 256), 256)
    return SACConfig(buffer_size=100_000, warmup_steps=0, batch_size=batch, hidden_sizes=hidden,
                     replay_ratio=replay_ratio)


def child_main(spec_text: str) -> int:
    """One row in this process: `spec` {devices, envs, rollout, steps, quick, replay_ratio}."""
    spec = json.loads(spec_text)
    configure_cpu_devices(spec["devices"])
    import podrl.envs
    from podrl.agents import replay
    from podrl.anakin import train_anakin
    from podrl.anakin.config import AnakinConfig
    from podrl.run.config import LoggingConfig

    config = AnakinConfig(env=ENV_NAME, num_envs=spec["envs"], rollout_length=spec["rollout"],
                          total_steps=spec["steps"], num_devices=spec["devices"],
                          updates_per_call=spec["per_call"], eval_every=0, eval_episodes=spec["devices"],
                          logging=LoggingConfig(run_dir=None, console=False))
    agent = sac_config(spec["quick"], spec["replay_ratio"])
    result = train_anakin(config, agent)
    sps = float(result.steps_per_second)
    example = replay.example_transition(podrl.envs.env_spec(podrl.envs.make(ENV_NAME)))
    emit_result({"steps_per_second": sps, "sgd_steps_per_second": sps * agent.replay_ratio / spec["devices"],
                 "compile_seconds": float(result.compile_seconds), "bytes_per_transition": replay.item_bytes(example)})
    return 0


def markdown_table(rows: list[dict[str, Any]]) -> str:
    cells = ([r["devices"], f"{r['envs']} x {r['rollout']}", fmt(r.get("steps_per_second"), ",.0f"),
              fmt(r.get("sgd_steps_per_second"), ",.0f"), fmt(r.get("compile_seconds"), ".1f"),
              r.get("bytes_per_transition", "n/a")] for r in rows)
    text = table(["devices", "envs x steps", "env steps/s", "gradient steps/s (per shard)", "compile s",
                  "bytes/transition"], cells)
    return text + f"\n\nSAC on {ENV_NAME}, training calls only.{load_note(loads_of(rows))}"


def parse_args(argv: list[str] | None):
    parser = new_parser(__doc__, quick="tiny networks and steps (smoke test, numbers meaningless)", timeout=900.0,
                        child=True)
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2], help="device counts, one row each")
    parser.add_argument("--envs", type=int, default=16, help="envs in all (split over the devices)")
    parser.add_argument("--rollout", type=int, default=8, help="steps per env between updates")
    parser.add_argument("--steps", type=int, default=16_384, help="env steps per row")
    parser.add_argument("--replay-ratio", type=float, default=1.0, help="gradient steps per env step, per shard")
    args = parser.parse_args(argv)
    if any(d < 1 or args.envs % d for d in args.devices):
        parser.error("--devices must be positive and divide --envs")
    return args


def run(args, start: float) -> int:
    """The parent: one child run per device count, the table printed, the document written."""
    steps = 512 if args.quick else args.steps
    per_update = args.envs * args.rollout
    rows = []
    for devices in args.devices:
        spec = dict(devices=devices, envs=args.envs, rollout=args.rollout, steps=steps, quick=args.quick,
                    replay_ratio=args.replay_ratio, per_call=max(1, steps // per_update // 4))
        rows.append({**spec, **run_child("benchmarks.sac", spec, args.timeout)})
    return finish("sac", args, rows, markdown_table(rows), start, repeats=1)


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, parse_args, child_main, run)


if __name__ == "__main__":
    sys.exit(main())
