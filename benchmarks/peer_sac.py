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

    python -m benchmarks.peer_sac --setup-peer                # once: the rejax 0.1.3 venv (benchmarks.peer_ppo's)
    python -m benchmarks.peer_sac --repeats 2 --out sac_peers.json
    python -m benchmarks.peer_sac --quick                     # smoke test: tiny budgets
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from typing import Any

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
    ok_runs,
    ratio,
    run_child,
    side_summary,
    spread_of,
    table,
)
from benchmarks.peers.registry import REJAX, add_peer_flags, compare_envs, peer_python, run_driver, setup_peers

MODULE = "benchmarks.peer_sac"
DRIVER = "rejax_sac"  # benchmarks/peers/rejax_sac.py, in the rejax venv
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


def child_main(spec_json: str) -> int:
    """Child entry point: the env check's steps, or one training run."""
    spec = json.loads(spec_json)
    if spec.get("check_env"):
        emit_result(podrl_pendulum_steps(spec["states"], spec["actions"]))
        return 0
    configure_cpu_devices(1)
    emit_result(measure_podrl(Shared(**{**spec, "hidden": tuple(spec["hidden"])})))
    return 0


# ---------------------------------------------------------------- the run


def check_env(python, timeout: float) -> dict[str, Any]:
    """Largest |obs| and |reward| difference after one step from 256 shared random states and torques."""
    import numpy as np

    rng = np.random.default_rng(0)
    spec = {"check_env": True, "states": rng.uniform([-np.pi, -8.0], [np.pi, 8.0], (256, 2)).tolist(),
            "actions": rng.uniform(-2.5, 2.5, 256).tolist()}  # beyond the bounds too: both clip to [-2, 2]

    def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
        return {"max_abs_obs_difference": float(np.abs(np.subtract(ours["observations"],
                                                                    theirs["observations"])).max()),
                "max_abs_reward_difference": float(np.abs(np.subtract(ours["rewards"], theirs["rewards"])).max()),
                "transitions": len(spec["states"])}

    return compare_envs(MODULE, python, DRIVER, spec, timeout, compare)


def steps_to_threshold(run: dict[str, Any]) -> float | None:
    hits = [step for step, ret in zip(run["eval_steps"], run["eval_returns"]) if ret >= THRESHOLD]
    return float(hits[0]) if hits else None


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One side's medians (steps to the threshold over the runs that reached it), `reached` and its runs."""
    ok = ok_runs(runs)
    reached = [steps for steps in map(steps_to_threshold, ok) if steps is not None]
    summary = side_summary(runs, {"steps_per_second": "steps_per_second", "compile_seconds": "compile_seconds",
                                  "time_to_budget_seconds": "wall_seconds", "final_return": "final_return"})
    return {**summary, "steps_per_second_spread": spread_of(runs, "steps_per_second"),
            "steps_to_threshold": statistics.median(reached) if reached else None,
            "reached": f"{len(reached)}/{len(ok)}"}


def measure_all(shared: Shared, repeats: int, python, timeout: float) -> dict[str, Any]:
    """`repeats` rounds of peer then podrl, each in a fresh process."""
    def run(shared: Shared, side: str, _round: int) -> dict[str, Any]:
        if side == "rejax":
            return run_driver(python, DRIVER, peer_spec(shared), timeout)
        return run_child(MODULE, dataclasses.asdict(shared), timeout)

    (runs,) = interleave_sides([shared], lambda _: ("rejax", "podrl"), repeats, run, lambda _, side: f"{side:6s}")
    entry = {"shared": dataclasses.asdict(shared), "threshold": THRESHOLD, "differences": list(DIFFERENCES),
             **{side: summarize(side_runs) for side, side_runs in runs.items()}}
    podrl, peer = entry["podrl"], entry["rejax"]
    entry["steps_ratio"] = ratio(podrl["steps_per_second"], peer["steps_per_second"])
    entry["time_to_budget_ratio"] = ratio(podrl["time_to_budget_seconds"], peer["time_to_budget_seconds"])
    if not podrl["measured"]:  # the peer may be missing (its cells say so); podrl's own side must run
        entry["error"] = "podrl's SAC not measured"
    return entry


def side_cells(side: str, s: dict[str, Any]) -> list[str]:
    """One side's cells of the markdown table."""
    if not s["measured"]:
        return [side, "not measured", "", "", "", ""]
    return [side, fmt(s["steps_per_second"], ",.0f"), fmt(s["compile_seconds"], ".1f"),
            f"{fmt(s['steps_to_threshold'], ',.0f')} ({s['reached']} runs)", fmt(s["time_to_budget_seconds"], ".1f"),
            fmt(s["final_return"], ".1f")]


def markdown(entry: dict[str, Any], env_check: dict[str, Any]) -> str:
    lines = [table(["side", ">run-only steps/s", ">compile s", ">steps to threshold", ">time to budget s",
                    ">final return"], (side_cells(side, entry[side]) for side in ("rejax", "podrl")))]
    if entry["steps_ratio"] is not None:
        lines.append(f"\npodrl / rejax: {entry['steps_ratio']:.2f}x run-only steps/s, "
                     f"{entry['time_to_budget_ratio']:.2f}x time to budget.")
    check = (f"max |obs difference| {env_check['max_abs_obs_difference']:.2e}, |reward difference| "
             f"{env_check['max_abs_reward_difference']:.2e} over {env_check['transitions']} transitions"
             if "error" not in env_check else f"not checked ({env_check['error']})")
    loads = loads_of(r for side in ("podrl", "rejax") for r in entry[side]["runs"])
    budget = entry["shared"]["total_steps"]
    return ("\n".join(lines) + f"\n\nThreshold: mean return >= {THRESHOLD:.0f}; budget {budget:,} "
            f"env steps. Same env: podrl vs gymnax Pendulum-v1 one-step {check}. Remaining differences:\n"
            + "\n".join(f"- {d}" for d in DIFFERENCES) + f"\n\nMedians of each side's runs.{load_note(loads)}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = new_parser(__doc__, quick="tiny budgets and networks (smoke test; numbers meaningless)", repeats=2,
                        repeats_help="runs per side, interleaved (median reported)", timeout=900.0, child=True)
    add_peer_flags(parser, (REJAX,))
    return parser.parse_args(argv)


def run(args: argparse.Namespace, start: float) -> int:
    """The parent: the peer's venv set up (--setup-peer), or the env check and both sides measured."""
    if args.setup_peer:
        return setup_peers(args, (REJAX,))
    shared = quick(Shared()) if args.quick else Shared()
    python = peer_python(REJAX, args)
    env_check = check_env(python, args.timeout)
    entry = measure_all(shared, args.repeats, python, args.timeout)
    return finish("bench_peers_sac", args, [entry], markdown(entry, env_check), start, env_check=env_check)


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, parse_args, child_main, run)


if __name__ == "__main__":
    sys.exit(main())
