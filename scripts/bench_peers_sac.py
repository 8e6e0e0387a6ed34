"""podrl's Anakin SAC against a peer, rejax 0.1.3's SAC, timed side by side in one run.

Both train SAC on Pendulum-v1 (podrl's envs/pendulum.py; gymnax's, in the peer venv) with the
same config (`Shared`: 4 envs, one gradient step per env step, batch 256, buffer 131072,
2048 warm-up steps, Adam 3e-4 for actor, critics and temperature, gamma 0.99, tau 0.01, 64-64
ReLU MLPs, no gradient clip, alpha starting at 1, target entropy -1), each in a fresh
process, interleaved (peer, podrl, peer, podrl, ...) so a burst of load from elsewhere hits
both; medians over --repeats. Both sides evaluate every 2048 env steps (128 episodes).
Columns:

  run-only steps/s    env steps / seconds of the training call(s), compile excluded (rejax's
                      call also runs its evaluations; podrl's evaluations are outside its calls)
  compile s           podrl: its train program's compile; rejax: jit(train).lower().compile()
  steps to threshold  env steps at the first evaluation with mean return >= THRESHOLD
  time to budget      a fresh process, from its start to the final return printed (imports,
                      compile, training and evaluations included), for the fixed step budget
  final return        the last evaluation's mean return
  ratio               podrl / peer, from the same run

Neither side reports when (in seconds) an intermediate evaluation happened inside its compiled
call, so "time to threshold" is given as steps to threshold plus the time to the fixed budget.
The remaining differences between the two sides are listed in DIFFERENCES and printed.

The env check steps both Pendulums from the same 256 random (theta, theta_dot) states and
torques and reports the largest observation and reward difference.

    python scripts/bench_peers.py --setup-peer                  # once: the rejax 0.1.3 venv
    python scripts/bench_peers_sac.py --repeats 2 --out sac_peers.json
    python scripts/bench_peers_sac.py --quick                   # smoke test: tiny budgets
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any

from bench_common import (add_child_run_flags, configure_cpu_devices, emit_result, finish, fmt, load_note, median_of,
                          new_parser, repeats_document, run_child_script)
from bench_peers import PEER_VENV, ROOT, run_peer

PEER_SCRIPT = ROOT / "scripts" / "peers" / "rejax_sac.py"
THRESHOLD = -300.0  # mean Pendulum return; a uniform random policy scores about -1200
DIFFERENCES = (
    "warm-up actions: podrl uniform random in the action bounds; rejax its (untrained) policy's samples",
    "evaluation: podrl the greedy (tanh of the mean) action; rejax its act(), a sample of the policy",
    "log std bounds: podrl [-5, 2] (squashed); rejax [-10, 2] (clipped)",
    "target update: podrl after every gradient step; rejax once per 4-env step (after the 4 gradient steps)",
    "update order: podrl critics, actor, temperature; rejax actor, critics, temperature",
    "first gradient step: podrl once 2048 transitions are stored; rejax once more than 2048 are (2052)",
    "run-only time: rejax's compiled call includes its 10 evaluations; podrl's evaluations run between calls",
    "float32 Pendulum on both sides; gymnax's observation/reward checked equal below",
)


@dataclasses.dataclass(frozen=True)
class Shared:
    """The SAC config both sides run."""

    num_envs: int = 4  # envs stepped together
    total_steps: int = 20_480  # env steps per run
    eval_every_steps: int = 2_048  # env steps between evaluations
    buffer_size: int = 131_072  # replay capacity (transitions)
    warmup_steps: int = 2_048  # transitions collected before the first gradient step
    batch_size: int = 256  # transitions per gradient step
    learning_rate: float = 3e-4  # Adam step size, actor, critics and temperature
    gamma: float = 0.99  # discount
    tau: float = 0.01  # Polyak step of the target critics (rejax polyak = 1 - tau)
    hidden: tuple[int, ...] = (64, 64)  # actor and critic ReLU MLPs


def quick(shared: Shared) -> Shared:
    return dataclasses.replace(shared, total_steps=256, eval_every_steps=128, warmup_steps=64, batch_size=16,
                               hidden=(8, 8))


def peer_spec(s: Shared) -> dict[str, Any]:
    """rejax.SAC.create's fields: num_epochs gradient steps per iteration of num_envs env steps."""
    return {"num_envs": s.num_envs, "num_epochs": s.num_envs, "total_timesteps": s.total_steps,
            "eval_freq": s.eval_every_steps, "buffer_size": s.buffer_size, "fill_buffer": s.warmup_steps,
            "batch_size": s.batch_size, "learning_rate": s.learning_rate, "gamma": s.gamma, "polyak": 1 - s.tau,
            "hidden": list(s.hidden)}


# ---------------------------------------------------------------- podrl's child


def measure_podrl(s: Shared) -> dict[str, Any]:
    """Trains podrl's Anakin SAC with `s` (1 device, rollout 1); steps/s of the training calls,
    compile, the evaluation curve."""
    from podrl.agents.sac import SACConfig
    from podrl.anakin import train_anakin
    from podrl.anakin.config import AnakinConfig
    from podrl.run.config import LoggingConfig

    every = s.eval_every_steps // s.num_envs  # updates between evaluations
    config = AnakinConfig(env="Pendulum-v1", num_envs=s.num_envs, rollout_length=1, total_steps=s.total_steps,
                          num_devices=1, updates_per_call=every, eval_every=every, eval_episodes=128,
                          logging=LoggingConfig(run_dir=None, console=False))
    agent = SACConfig(buffer_size=s.buffer_size, warmup_steps=s.warmup_steps, batch_size=s.batch_size,
                      replay_ratio=1.0, gamma=s.gamma, tau=s.tau, hidden_sizes=s.hidden, activation="relu",
                      actor_learning_rate=s.learning_rate, critic_learning_rate=s.learning_rate,
                      temperature_learning_rate=s.learning_rate, max_grad_norm=1e6, initial_temperature=1.0)
    result = train_anakin(config, agent)
    curve = [(r["updates"] * s.num_envs, float(sum(r["eval_return"]) / len(r["eval_return"])))
             for r in result.history if r.get("eval_return") is not None]
    print(f"final return {curve[-1][1]}", flush=True)
    return {"steps_per_second": float(result.steps_per_second), "compile_seconds": float(result.compile_seconds),
            "eval_steps": [c[0] for c in curve], "eval_returns": [c[1] for c in curve], "final_return": curve[-1][1]}


def podrl_pendulum_steps(states: list[list[float]], actions: list[float]) -> dict[str, list]:
    """podrl's Pendulum observation and reward after one step from each state with each torque."""
    import jax
    import jax.numpy as jnp

    from podrl.envs.pendulum import Pendulum, PendulumState

    s = jnp.asarray(states, jnp.float32)
    _, ts = jax.vmap(Pendulum().step)(PendulumState(s[:, 0], s[:, 1]), jnp.asarray(actions, jnp.float32)[:, None])
    return {"observations": ts.observation.tolist(), "rewards": ts.reward.tolist()}


def run_child(spec_json: str) -> int:
    spec = json.loads(spec_json)
    if spec.get("check_env"):
        emit_result(podrl_pendulum_steps(spec["states"], spec["actions"]))
        return 0
    configure_cpu_devices(1)
    emit_result(measure_podrl(Shared(**{**spec, "hidden": tuple(spec["hidden"])})))
    return 0


# ---------------------------------------------------------------- the run


def check_env(python: str, timeout: float) -> dict[str, Any]:
    """Largest |obs| and |reward| difference after one step from 256 shared random states and torques."""
    import numpy as np

    rng = np.random.default_rng(0)
    spec = {"check_env": True, "states": rng.uniform([-np.pi, -8.0], [np.pi, 8.0], (256, 2)).tolist(),
            "actions": rng.uniform(-2.5, 2.5, 256).tolist()}  # beyond the bounds too: both clip to [-2, 2]
    ours = run_child_script(__file__, spec, timeout)
    theirs = run_peer(python, spec, timeout, PEER_SCRIPT)
    if "error" in ours or "error" in theirs:
        return {"error": (ours.get("error") or theirs.get("error")).splitlines()[0]}
    return {"max_abs_obs_difference": float(np.abs(np.subtract(ours["observations"], theirs["observations"])).max()),
            "max_abs_reward_difference": float(np.abs(np.subtract(ours["rewards"], theirs["rewards"])).max()),
            "transitions": len(spec["states"])}


def steps_to_threshold(run: dict[str, Any]) -> float | None:
    hits = [step for step, ret in zip(run["eval_steps"], run["eval_returns"]) if ret >= THRESHOLD]
    return float(hits[0]) if hits else None


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [{**r, "steps_to_threshold": steps_to_threshold(r)} for r in runs if "error" not in r]
    reached = [r for r in ok if r["steps_to_threshold"] is not None]
    return {"steps_per_second": median_of(ok, "steps_per_second"), "compile_seconds": median_of(ok, "compile_seconds"),
            "time_to_budget_seconds": median_of(ok, "wall_seconds"), "final_return": median_of(ok, "final_return"),
            "steps_to_threshold": median_of(reached, "steps_to_threshold"), "reached": f"{len(reached)}/{len(ok)}",
            "measured": bool(ok), "runs": runs}


def measure_all(shared: Shared, repeats: int, python: str, timeout: float) -> dict[str, Any]:
    """`repeats` rounds of peer then podrl, each in a fresh process."""
    runs: dict[str, list[dict[str, Any]]] = {"rejax": [], "podrl": []}
    for repeat in range(repeats):
        for side in ("rejax", "podrl"):
            result = (run_peer(python, peer_spec(shared), timeout, PEER_SCRIPT) if side == "rejax"
                      else run_child_script(__file__, dataclasses.asdict(shared), timeout))
            runs[side].append(result)
            status = result["error"].splitlines()[0] if "error" in result else (
                f"{result['steps_per_second']:,.0f} steps/s, compile {result['compile_seconds']:.1f} s, "
                f"to budget {result['wall_seconds']:.1f} s, curve {[round(r) for r in result['eval_returns']]}")
            print(f"[{repeat + 1}/{repeats}] {side:6s} {status}", file=sys.stderr, flush=True)
    entry = {"shared": dataclasses.asdict(shared), "threshold": THRESHOLD, "differences": list(DIFFERENCES),
             **{side: summarize(side_runs) for side, side_runs in runs.items()}}
    podrl, peer = entry["podrl"], entry["rejax"]
    both = podrl["measured"] and peer["measured"]
    entry["steps_ratio"] = podrl["steps_per_second"] / peer["steps_per_second"] if both else None
    entry["time_to_budget_ratio"] = podrl["time_to_budget_seconds"] / peer["time_to_budget_seconds"] if both else None
    if not podrl["measured"]:  # the peer may be missing (its cells say so); podrl's own side must run
        entry["error"] = "podrl's SAC not measured"
    return entry


def markdown(entry: dict[str, Any], env_check: dict[str, Any]) -> str:
    lines = ["| side | run-only steps/s | compile s | steps to threshold | time to budget s | final return |",
             "|---|---:|---:|---:|---:|---:|"]
    for side in ("rejax", "podrl"):
        s = entry[side]
        if not s["measured"]:
            lines.append(f"| {side} | not measured | | | | |")
            continue
        lines.append(f"| {side} | {fmt(s['steps_per_second'], ',.0f')} | {fmt(s['compile_seconds'], '.1f')} | "
                     f"{fmt(s['steps_to_threshold'], ',.0f')} ({s['reached']} runs) | "
                     f"{fmt(s['time_to_budget_seconds'], '.1f')} | {fmt(s['final_return'], '.1f')} |")
    if entry["steps_ratio"] is not None:
        lines.append(f"\npodrl / rejax: {entry['steps_ratio']:.2f}x run-only steps/s, "
                     f"{entry['time_to_budget_ratio']:.2f}x time to budget.")
    check = (f"max |obs difference| {env_check['max_abs_obs_difference']:.2e}, |reward difference| "
             f"{env_check['max_abs_reward_difference']:.2e} over {env_check['transitions']} transitions"
             if "error" not in env_check else f"not checked ({env_check['error']})")
    loads = [r["load_1m"] for side in ("podrl", "rejax") for r in entry[side]["runs"] if "load_1m" in r]
    budget = entry["shared"]["total_steps"]
    return ("\n".join(lines) + f"\n\nThreshold: mean return >= {THRESHOLD:.0f}; budget {budget:,} "
            f"env steps. Same env: podrl vs gymnax Pendulum-v1 one-step {check}. Remaining differences:\n"
            + "\n".join(f"- {d}" for d in DIFFERENCES) + f"\n\nMedians of each side's runs.{load_note(loads)}")


def main(argv: list[str] | None = None) -> int:
    parser = new_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=2, help="runs per side (median reported)")
    parser.add_argument("--peer-python", default=str(PEER_VENV / "bin" / "python"), help="the peer's interpreter")
    add_child_run_flags(parser, timeout=900.0, quick_help="tiny budgets and networks (smoke test; numbers meaningless)")
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args.child)
    shared = quick(Shared()) if args.quick else Shared()
    start = time.perf_counter()
    env_check = check_env(args.peer_python, args.timeout)
    entry = measure_all(shared, args.repeats, args.peer_python, args.timeout)
    wall = time.perf_counter() - start

    def document() -> dict[str, Any]:
        import jax

        return repeats_document([entry], args, wall, jax.__version__, benchmark="bench_peers_sac", env_check=env_check)

    return finish([entry], markdown(entry, env_check), wall, args.out, document)


if __name__ == "__main__":
    sys.exit(main())
