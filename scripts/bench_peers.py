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
its own venv: `--setup-peer` creates it at ~/.cache/podrl/peers/rejax-0.1.3 (pip install
rejax==0.1.3 gymnax==0.0.9 and podrl's own jax/jaxlib versions); `--peer-python` points
at another interpreter. If the peer cannot run, its cells say "not measured".

The env check steps both CartPoles (podrl's envs/cartpole.py, checked against gymnasium by
tests/test_env_parity.py; gymnax's, in the peer venv) from the same 256 random states and
actions and reports the largest observation difference.

    python scripts/bench_peers.py --setup-peer                 # once
    python scripts/bench_peers.py --repeats 2 --out peers.json
    python scripts/bench_peers.py --quick                      # smoke test: tiny budgets
    JAX_PLATFORMS=cuda python scripts/bench_peers.py --rows gpu   # 4k-64k envs on a GPU
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_common import (add_child_run_flags, child_env, configure_cpu_devices, emit_result, finish, fmt, load_note,
                          median_of, new_parser, repeats_document, run_child_script)

ROOT = Path(__file__).resolve().parent.parent
PEER_SCRIPT = ROOT / "scripts" / "peers" / "rejax_ppo.py"
PEER_VENV = Path.home() / ".cache" / "podrl" / "peers" / "rejax-0.1.3"
PEER_PACKAGES = ("rejax==0.1.3", "gymnax==0.0.9")


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
    """Trains podrl's Anakin PPO on `row` (bench_anakin's training measurement, the peer's constant lr
    and 32 final greedy episodes); steps/s of the training calls, compile, final greedy return."""
    from bench_anakin import Measurement, measure_training

    result = measure_training(Measurement(
        "podrl", row.devices, row.num_envs, row.rollout_length, row.total_steps, num_seeds=row.num_seeds,
        anneal_lr=False, eval_episodes=32, hidden_sizes=row.hidden))
    print(f"final return {result['final_eval_return']}", flush=True)
    return {"steps_per_second": result["steps_per_second"], "compile_seconds": result["compile_seconds"],
            "final_return": result["final_eval_return"]}


def podrl_cartpole_steps(states: list[list[float]], actions: list[int]) -> list[list[float]]:
    """podrl's CartPole observation after one step from each state with each action."""
    import jax
    import jax.numpy as jnp

    from podrl.envs.cartpole import CartPole, CartPoleState

    env = CartPole()
    s = jnp.asarray(states, jnp.float32)
    _, ts = jax.vmap(env.step)(CartPoleState(s[:, 0], s[:, 1], s[:, 2], s[:, 3]), jnp.asarray(actions, jnp.int32))
    return ts.observation.tolist()


def run_child(spec_json: str) -> int:
    spec = json.loads(spec_json)
    if spec.get("check_env"):
        emit_result({"observations": podrl_cartpole_steps(spec["states"], spec["actions"])})
        return 0
    row = Row(**{**spec, "hidden": tuple(spec["hidden"])})  # the spec is `dataclasses.asdict(row)`: a list
    if os.environ.get("JAX_PLATFORMS", "cpu") == "cpu":
        configure_cpu_devices(row.devices)
    emit_result(measure_podrl(row))
    return 0


# ---------------------------------------------------------------- the peer


def setup_peer(venv: Path) -> int:
    """Creates the peer venv with rejax, gymnax 0.0.9 and this interpreter's jax/jaxlib versions."""
    import jax
    import jaxlib

    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pins = [*PEER_PACKAGES, f"jax=={jax.__version__}", f"jaxlib=={jaxlib.__version__}"]
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *pins])
    print(f"peer venv {venv}: {'ready' if done.returncode == 0 else 'pip failed'} ({' '.join(pins)})")
    return done.returncode


def run_peer(python: str, spec: dict[str, Any], timeout: float, script: Path = PEER_SCRIPT) -> dict[str, Any]:
    """The peer `script`'s BENCH_RESULT for `spec`, with `wall_seconds` (its time to result) and `load_1m`."""
    if not Path(python).exists():
        return {"error": f"peer interpreter {python} not found (run --setup-peer)"}
    start = time.perf_counter()
    try:
        proc = subprocess.run([python, str(script), json.dumps(spec)], capture_output=True, text=True,
                              timeout=timeout, env=child_env())
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s", "load_1m": os.getloadavg()[0]}
    info = {"wall_seconds": time.perf_counter() - start, "load_1m": os.getloadavg()[0]}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("BENCH_RESULT "):
            return {**json.loads(line[len("BENCH_RESULT "):]), **info}
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-8:]
    return {"error": f"exit code {proc.returncode}: " + "\n".join(tail), **info}


def check_env(python: str, timeout: float) -> dict[str, Any]:
    """Largest |obs difference| after one step from 256 shared random states and actions."""
    import numpy as np

    rng = np.random.default_rng(0)
    states = rng.uniform([-2.0, -2.0, -0.2, -2.0], [2.0, 2.0, 0.2, 2.0], (256, 4)).tolist()
    actions = rng.integers(0, 2, 256).tolist()
    ours = run_child_script(__file__, {"check_env": True, "states": states, "actions": actions}, timeout)
    theirs = run_peer(python, {"check_env": True, "states": states, "actions": actions}, timeout)
    if "error" in ours or "error" in theirs:
        return {"error": (ours.get("error") or theirs.get("error")).splitlines()[0]}
    diff = np.abs(np.asarray(ours["observations"]) - np.asarray(theirs["observations"]))
    return {"max_abs_obs_difference": float(diff.max()), "transitions": len(states)}


# ---------------------------------------------------------------- the run


def measure_all(rows: list[Row], repeats: int, python: str, timeout: float) -> list[dict[str, Any]]:
    """Every row `repeats` times, peer then podrl, rows inner and repeats outer."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for repeat in range(repeats):
        for row in rows:
            sides = (("rejax", True), ("podrl", False)) if row.peer else (("podrl", False),)
            for side, is_peer in sides:
                spec = {"num_envs": row.num_envs, "num_steps": row.rollout_length, "total_timesteps": row.total_steps,
                        "num_seeds": row.num_seeds, "hidden": list(row.hidden)} if is_peer else dataclasses.asdict(row)
                result = run_peer(python, spec, timeout) if is_peer else run_child_script(__file__, spec, timeout)
                runs.setdefault((row.name, side), []).append(result)
                status = result["error"].splitlines()[0] if "error" in result else (
                    f"{result['steps_per_second']:,.0f} steps/s, compile {result['compile_seconds']:.1f} s, "
                    f"to result {result['wall_seconds']:.1f} s, return {result.get('final_return')}")
                print(f"[{repeat + 1}/{repeats}] {row.name:22s} {side:6s} {status}", file=sys.stderr, flush=True)
    table = []
    for row in rows:
        entry = {"row": dataclasses.asdict(row), "name": row.name}
        for side in ("podrl", "rejax"):
            side_runs = runs.get((row.name, side), [])
            ok = [r for r in side_runs if "error" not in r]
            entry[side] = {
                "steps_per_second": median_of(ok, "steps_per_second"),
                "compile_seconds": median_of(ok, "compile_seconds"),
                "time_to_result_seconds": median_of(ok, "wall_seconds"),
                "final_return": median_of(ok, "final_return"),
                "measured": bool(ok), "runs": side_runs,
            }
        podrl, peer = entry["podrl"], entry["rejax"]
        entry["steps_ratio"] = (podrl["steps_per_second"] / peer["steps_per_second"]
                                if podrl["measured"] and peer["measured"] else None)
        entry["time_to_result_ratio"] = (podrl["time_to_result_seconds"] / peer["time_to_result_seconds"]
                                         if podrl["measured"] and peer["measured"] else None)
        table.append(entry)
    return table


def markdown(table: list[dict[str, Any]], env_check: dict[str, Any]) -> str:
    lines = ["| config | side | run-only steps/s | compile s | time to result s | final return | podrl / peer |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for e in table:
        for side in ("rejax", "podrl"):
            s = e[side]
            if not s["measured"]:
                why = "not run (single-device peer)" if not e["row"]["peer"] and side == "rejax" else "not measured"
                lines.append(f"| {e['name']} | {side} | {why} | | | | |")
                continue
            ratio = ""
            if side == "podrl" and e["steps_ratio"] is not None:
                ratio = f"{e['steps_ratio']:.2f}x steps/s, {e['time_to_result_ratio']:.2f}x time"
            lines.append(f"| {e['name']} | {side} | {fmt(s['steps_per_second'], ',.0f')} | "
                         f"{fmt(s['compile_seconds'], '.1f')} | {fmt(s['time_to_result_seconds'], '.1f')} | "
                         f"{fmt(s['final_return'], '.1f')} | {ratio} |")
    check = (f"max |obs difference| {env_check['max_abs_obs_difference']:.2e} over {env_check['transitions']} "
             "transitions" if "error" not in env_check else f"not checked ({env_check['error']})")
    loads = [r["load_1m"] for e in table for side in ("podrl", "rejax") for r in e[side]["runs"] if "load_1m" in r]
    return ("\n".join(lines) + f"\n\nSame env: podrl vs gymnax CartPole-v1 one-step {check}. Medians of each side's "
            f"runs; time to result includes imports, compile and the final evaluation.{load_note(loads)}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = new_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=2, help="runs per side and row (median reported)")
    parser.add_argument("--rows", choices=sorted(ROWS), default="cpu", help="which configs")
    parser.add_argument("--only", nargs="*", default=None, help="run only these row names")
    parser.add_argument("--peer-python", default=str(PEER_VENV / "bin" / "python"), help="the peer's interpreter")
    parser.add_argument("--setup-peer", action="store_true", help="create the peer venv and exit")
    add_child_run_flags(parser, timeout=1200.0, quick_help="tiny budgets (smoke test; numbers meaningless)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return run_child(args.child)
    if args.setup_peer:
        return setup_peer(PEER_VENV)
    rows = [r for r in ROWS[args.rows] if args.only is None or r.name in args.only]
    rows = [quick(r) for r in rows] if args.quick else rows
    start = time.perf_counter()
    env_check = check_env(args.peer_python, args.timeout)
    table = measure_all(rows, args.repeats, args.peer_python, args.timeout)
    wall = time.perf_counter() - start

    def document() -> dict[str, Any]:
        import jax

        return repeats_document(table, args, wall, jax.__version__, benchmark="bench_peers", env_check=env_check)

    return finish(table, markdown(table, env_check), wall, args.out, document)


if __name__ == "__main__":
    sys.exit(main())
