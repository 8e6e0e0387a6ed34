"""podrl's Anakin PPO against a peer, rejax 0.1.3's PPO, timed side by side in one run.

Both run the same CartPole-v1 PPO (CleanRL / PureJaxRL settings: 64-64 tanh actor and
critic, 4 epochs x 4 minibatches, lr 2.5e-4 constant, clip 0.2, entropy 0.01, GAE 0.95,
gamma 0.99, grad clip 0.5; the "8-8 MLP" row shrinks both sides' hidden layers to 8 units,
to show how much of a step is the networks' matmuls) on the same devices, each in a fresh
process, interleaved (peer, podrl, peer, podrl, ...) so a burst of load from elsewhere hits
both; medians over --repeats. Columns:

  run-only steps/s   env steps / seconds of the training call(s), compile and evaluation excluded
  compile s          podrl: its train program's compile; rejax: jit(train).lower().compile()
  time to result     a fresh process, from its start to the final return printed (imports,
                     compile, training and the final evaluation included)
  final return       podrl: greedy evaluation; rejax: its own final evaluation (128 episodes)
  ratio              podrl / peer, from the same run

The peer needs gymnax 0.0.9, which conflicts with the gymnax podrl uses, so it lives in
its own venv: `--setup-peer` creates it at ~/.cache/podrl/peers/rejax-0.1.3 (`--venv-root` or
$PODRL_PEER_VENVS for another root; pip install rejax==0.1.3 gymnax==0.0.9 and podrl's own
jax/jaxlib versions: benchmarks/peers/registry.py); `--peer-python` points at another
interpreter. If the peer cannot run, its cells say "not measured".

The env check steps both CartPoles (podrl's envs/cartpole.py, checked against gymnasium by
tests/test_env_parity.py; gymnax's, in the peer venv) from the same 256 random states and
actions and reports the largest observation difference.

    python -m benchmarks.peer_ppo --setup-peer                 # once
    python -m benchmarks.peer_ppo --repeats 2 --out peers.json
    python -m benchmarks.peer_ppo --quick                      # smoke test: tiny budgets
    JAX_PLATFORMS=cuda python -m benchmarks.peer_ppo --rows gpu   # 4k-64k envs on a GPU
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any

from benchmarks.anakin import Measurement, measure_training
from benchmarks.harness import (
    configure_cpu_devices,
    dispatch,
    emit_result,
    finish,
    fmt,
    interleave_sides,
    load_note,
    loads_of,
    new_parser,
    ratio,
    run_child,
    side_summary,
    spread_of,
    table,
)
from benchmarks.peers.registry import REJAX, add_peer_flags, compare_envs, peer_python, run_driver, setup_peers

MODULE = "benchmarks.peer_ppo"
DRIVER = "rejax_ppo"  # benchmarks/peers/rejax_ppo.py, in the rejax venv
SIDES = ("rejax", "podrl")


@dataclasses.dataclass(frozen=True)
class Row:
    """One configuration, run by both sides (the peer only where `peer`)."""

    name: str
    num_envs: int
    rollout_length: int
    total_steps: int  # per seed
    num_seeds: int = 1
    devices: int = 1
    peer: bool = True
    hidden: tuple[int, ...] = (64, 64)  # both sides' actor and critic MLP


ROWS = {
    "cpu": (
        Row("4x128", 4, 128, 500_000),
        Row("2048x16", 2048, 16, 4_000_000),
        Row("4x128, 16 seeds", 4, 128, 500_000, num_seeds=16),
        Row("4x128, 2-device mesh", 4, 128, 500_000, devices=2, peer=False),
        Row("4x128, 8-8 MLP", 4, 128, 500_000, hidden=(8, 8)),  # the same program with 64x less matmul work
    ),
    "gpu": (
        Row("4096x16", 4096, 16, 20_000_000),
        Row("65536x16", 65536, 16, 100_000_000),
    ),
}


def quick(row: Row) -> Row:
    return dataclasses.replace(row, total_steps=row.num_envs * row.rollout_length * 2)


# ---------------------------------------------------------------- podrl's child


def measure_podrl(row: Row) -> dict[str, Any]:
    """Trains podrl's Anakin PPO on `row` (benchmarks.anakin's training measurement, the peer's constant lr
    and 32 final greedy episodes); steps/s of the training calls, compile, final greedy return."""
    result = measure_training(Measurement(
        "podrl", row.devices, row.num_envs, row.rollout_length, row.total_steps, num_seeds=row.num_seeds,
        anneal_lr=False, eval_episodes=32, hidden_sizes=row.hidden))
    print(f"final return {result['final_eval_return']}", flush=True)
    return {"steps_per_second": result["steps_per_second"], "compile_seconds": result["compile_seconds"],
            "final_return": result["final_eval_return"], "stages": result["stages"]}


def podrl_cartpole_steps(states: list[list[float]], actions: list[int]) -> list[list[float]]:
    """podrl's CartPole observation after one step from each state with each action."""
    import jax
    import jax.numpy as jnp

    from podrl.envs.cartpole import CartPole, CartPoleState

    env = CartPole()
    s = jnp.asarray(states, jnp.float32)
    _, ts = jax.vmap(env.step)(CartPoleState(s[:, 0], s[:, 1], s[:, 2], s[:, 3]), jnp.asarray(actions, jnp.int32))
    return ts.observation.tolist()


def child_main(spec_json: str) -> int:
    """Child entry point: the env check's observations, or one row's training measurement."""
    spec = json.loads(spec_json)
    if spec.get("check_env"):
        emit_result({"observations": podrl_cartpole_steps(spec["states"], spec["actions"])})
        return 0
    row = Row(**{**spec, "hidden": tuple(spec["hidden"])})  # the spec is `dataclasses.asdict(row)`: a list
    if os.environ.get("JAX_PLATFORMS", "cpu") == "cpu":
        configure_cpu_devices(row.devices)
    emit_result(measure_podrl(row))
    return 0


# ---------------------------------------------------------------- the run


def check_env(python, timeout: float) -> dict[str, Any]:
    """Largest |obs difference| after one step from 256 shared random states and actions."""
    import numpy as np

    rng = np.random.default_rng(0)
    states = rng.uniform([-2.0, -2.0, -0.2, -2.0], [2.0, 2.0, 0.2, 2.0], (256, 4)).tolist()
    spec = {"check_env": True, "states": states, "actions": rng.integers(0, 2, 256).tolist()}

    def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
        diff = np.abs(np.asarray(ours["observations"]) - np.asarray(theirs["observations"]))
        return {"max_abs_obs_difference": float(diff.max()), "transitions": len(states)}

    return compare_envs(MODULE, python, DRIVER, spec, timeout, compare)


def run_side(row: Row, side: str, python, timeout: float) -> dict[str, Any]:
    """One run of `side` ('rejax' or 'podrl') on `row`, in a fresh process."""
    if side == "podrl":
        return run_child(MODULE, dataclasses.asdict(row), timeout)
    spec = {"num_envs": row.num_envs, "num_steps": row.rollout_length, "total_timesteps": row.total_steps,
            "num_seeds": row.num_seeds, "hidden": list(row.hidden)}
    return run_driver(python, DRIVER, spec, timeout)


def summarize(row: Row, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """One table entry: each side's medians and its runs, and the podrl / peer ratios."""
    entry: dict[str, Any] = {"row": dataclasses.asdict(row), "name": row.name}
    for side in ("podrl", "rejax"):
        entry[side] = side_summary(runs.get(side, []), {
            "steps_per_second": "steps_per_second", "compile_seconds": "compile_seconds",
            "time_to_result_seconds": "wall_seconds", "final_return": "final_return"})
        entry[side]["steps_per_second_spread"] = spread_of(entry[side]["runs"], "steps_per_second")
    podrl, peer = entry["podrl"], entry["rejax"]
    entry["steps_ratio"] = ratio(podrl["steps_per_second"], peer["steps_per_second"])
    entry["time_to_result_ratio"] = ratio(podrl["time_to_result_seconds"], peer["time_to_result_seconds"])
    return entry


def measure_all(rows: list[Row], repeats: int, python, timeout: float) -> list[dict[str, Any]]:
    """Every row `repeats` times, peer then podrl, rows inner and repeats outer."""
    runs = interleave_sides(rows, lambda row: SIDES if row.peer else ("podrl",), repeats,
                            lambda row, side, _round: run_side(row, side, python, timeout),
                            lambda row, side: f"{row.name:22s} {side:6s}")
    return [summarize(row, row_runs) for row, row_runs in zip(rows, runs)]


def side_cells(e: dict[str, Any], side: str) -> list[str]:
    """One side's cells of the markdown table."""
    s = e[side]
    if not s["measured"]:
        why = "not run (single-device peer)" if not e["row"]["peer"] and side == "rejax" else "not measured"
        return [e["name"], side, why, "", "", "", ""]
    ratios = ""
    if side == "podrl" and e["steps_ratio"] is not None:
        ratios = f"{e['steps_ratio']:.2f}x steps/s, {e['time_to_result_ratio']:.2f}x time"
    return [e["name"], side, fmt(s["steps_per_second"], ",.0f"), fmt(s["compile_seconds"], ".1f"),
            fmt(s["time_to_result_seconds"], ".1f"), fmt(s["final_return"], ".1f"), ratios]


def markdown(entries: list[dict[str, Any]], env_check: dict[str, Any]) -> str:
    text = table(["config", "side", ">run-only steps/s", ">compile s", ">time to result s", ">final return",
                  ">podrl / peer"], (side_cells(e, side) for e in entries for side in SIDES))
    check = (f"max |obs difference| {env_check['max_abs_obs_difference']:.2e} over {env_check['transitions']} "
             "transitions" if "error" not in env_check else f"not checked ({env_check['error']})")
    loads = loads_of(r for e in entries for side in SIDES for r in e[side]["runs"])
    return (text + f"\n\nSame env: podrl vs gymnax CartPole-v1 one-step {check}. Medians of each side's "
            f"runs; time to result includes imports, compile and the final evaluation.{load_note(loads)}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = new_parser(__doc__, quick="tiny budgets (smoke test; numbers meaningless)", repeats=2,
                        repeats_help="runs per side and row, interleaved (median reported)", timeout=1200.0,
                        child=True)
    parser.add_argument("--rows", choices=sorted(ROWS), default="cpu", help="which configs")
    parser.add_argument("--only", nargs="*", default=None, help="run only these row names")
    add_peer_flags(parser, (REJAX,))
    return parser.parse_args(argv)


def run(args: argparse.Namespace, start: float) -> int:
    """The parent: the peer's venv set up (--setup-peer), or the env check and every row measured."""
    if args.setup_peer:
        return setup_peers(args, (REJAX,))
    rows = [r for r in ROWS[args.rows] if args.only is None or r.name in args.only]
    rows = [quick(r) for r in rows] if args.quick else rows
    python = peer_python(REJAX, args)
    env_check = check_env(python, args.timeout)
    entries = measure_all(rows, args.repeats, python, args.timeout)
    return finish("bench_peers", args, entries, markdown(entries, env_check), start, env_check=env_check)


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, parse_args, child_main, run)


if __name__ == "__main__":
    sys.exit(main())
