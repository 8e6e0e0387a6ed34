"""podrl's side of `benchmarks.peer_programs`: one measurement per fresh process.

  sebulba      PPO through `train_sebulba` on 2 CPU JAX devices (actor 0, learner 1), envpool
               CartPole-v1, one log record per update; steps/s = env steps of updates 2..N over
               the seconds from the end of update 1 to the end of update N (the peer's clock).
  ceiling      the same envpool envs stepped with random actions by the same number of threads,
               no JAX (benchmarks.sebulba_measure's env-only ceiling).
  minatar-ppo  `--preset minatar-ppo` through `train_anakin`, one training call; steps/s = the
               call's env steps / its seconds (the peer's: its compiled train call).
  minatar-pqn  `agent:pqn` with purejaxql's pqn_minatar.yaml values through `train_anakin`.
  minatar-muzero  `agent:muzero` with Stoix's ff_mz.yaml values (`stoix_ff_mz`) through `train_anakin`,
               evaluated after each of `evaluations` calls: its `curve` (env steps, cumulative
               training seconds, the call's training return, the greedy evaluation) as the peer's.
Each returns steps_per_second, compile_seconds and final_return (greedy evaluation).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from benchmarks.harness import configure_cpu_devices
from benchmarks.sebulba_measure import Measurement, inline_cpu_dispatch
from benchmarks.sebulba_measure import measure_ceiling as ceiling

SEBULBA_DEVICES = 2


def sebulba_ppo(spec: dict[str, Any]):
    """The PPOConfig of the Sebulba row: the peer's network and PPO settings."""
    from podrl.agents.ppo import PPOConfig

    return PPOConfig(num_minibatches=spec["minibatches"], num_epochs=spec["epochs"],
                     hidden_sizes=tuple(spec["hidden"]), activation="tanh", learning_rate=spec["learning_rate"],
                     anneal_lr=False, gamma=0.99, gae_lambda=0.95, clip_eps=0.2, entropy_coef=0.01,
                     value_coef=0.5, max_grad_norm=0.5)


def after_first_update(history: list[dict[str, Any]]) -> tuple[float, int]:
    """(steps/s, updates) over the log windows after the first (one window per update)."""
    windows, last = [], 0
    for record in history:
        windows.append((record["step"] - last, record["sps"]))
        last = record["step"]
    later = windows[1:]
    seconds = sum(steps / sps for steps, sps in later if sps > 0)
    return sum(steps for steps, _ in later) / seconds, len(windows)


def measure_sebulba(spec: dict[str, Any]) -> dict[str, Any]:
    from podrl.run.config import LoggingConfig
    from podrl.sebulba import SebulbaConfig, train_sebulba

    inline_cpu_dispatch()  # as `podrl sebulba` does, before JAX starts
    configure_cpu_devices(SEBULBA_DEVICES)
    per_update = spec["num_envs"] * spec["rollout_length"]
    config = SebulbaConfig(
        env=spec["env"], seed=spec.get("seed", 0), total_steps=spec["updates"] * per_update, actor_devices=(0,),
        learner_devices=(1,), threads_per_actor_device=1, envs_per_thread=spec["num_envs"],
        rollout_length=spec["rollout_length"], lag=spec.get("lag", "1"), eval_episodes=spec["eval_episodes"],
        eval_every=0, log_every=1, timeout_s=600.0, logging=LoggingConfig(run_dir=None, console=False))
    result = train_sebulba(config, sebulba_ppo(spec))
    sps, updates = after_first_update(result.history)
    stages = {k: sum(r.get(k, 0.0) for r in result.history[1:]) / max(1, len(result.history) - 1)
              for k in ("time/env_step_s", "time/inference_s", "time/learner_step_s", "time/learner_queue_wait_s",
                        "time/actor_queue_put_wait_s", "time/actor_params_wait_s", "time/actor_transfer_s")}
    return {"steps_per_second": sps, "updates": updates, "compile_seconds": float(result.compile_seconds),
            "final_return": result.final_eval_return, "stage_seconds_per_update": stages}


def measure_ceiling(spec: dict[str, Any]) -> dict[str, Any]:
    return ceiling(Measurement("ceiling", spec["env"], 1, spec["num_envs"], min_seconds=spec.get("seconds", 5.0)))


def anakin_result(run, agent) -> dict[str, Any]:
    import numpy as np

    from podrl.anakin import train_anakin

    result = train_anakin(run, agent)
    final = result.final_eval_return
    return {"steps_per_second": float(result.steps_per_second), "compile_seconds": float(result.compile_seconds),
            "final_return": None if final is None else float(np.mean(final)), "stages": result.stages}


def quiet(run, **fields):
    """`run` with `fields`, no periodic evaluation, no run folder, no console."""
    from podrl.run.config import LoggingConfig

    return dataclasses.replace(run, eval_every=0, logging=LoggingConfig(run_dir=None, console=False), **fields)


def measure_minatar_ppo(spec: dict[str, Any]) -> dict[str, Any]:
    from podrl.cli.experiment import preset_experiment

    experiment = preset_experiment("anakin", "minatar-ppo")
    run = experiment.run
    updates = spec["total_steps"] // (run.num_envs * run.rollout_length)
    run = quiet(run, env=spec["env"], total_steps=spec["total_steps"], updates_per_call=updates,
                eval_episodes=spec["eval_episodes"], seed=spec.get("seed", 0))
    return anakin_result(run, experiment.agent)


def minatar_pqn(spec: dict[str, Any]):
    """(AnakinConfig, PQNConfig) with purejaxql's pqn_minatar.yaml values."""
    from podrl.agents.pqn import PQNConfig
    from podrl.anakin.config import AnakinConfig

    run = quiet(AnakinConfig(env=spec["env"], num_envs=128, rollout_length=32, total_steps=spec["total_steps"],
                             updates_per_call=spec["total_steps"] // (128 * 32), eval_episodes=spec["eval_episodes"],
                             seed=spec.get("seed", 0)))
    agent = PQNConfig(torso="minatar_cnn", layer_norm=True, learning_rate=5e-4, anneal_lr=True, max_grad_norm=10.0,
                      gamma=0.99, q_lambda=0.65, epsilon_start=1.0, epsilon_end=0.05, epsilon_decay_fraction=0.1,
                      num_epochs=2, num_minibatches=32)
    return run, agent


def stoix_ff_mz(spec: dict[str, Any]):
    """(AnakinConfig, MuZeroConfig) with Stoix's ff_mz.yaml values and its muzero network's widths: 64 envs
    x 8 steps, 8 gradient steps of 32 windows per update, 25 simulations of the PUCT search, 601-atom
    supports, a buffer of 390 steps per env, 16 warm-up steps per env, no target network (tau 1), value
    targets bootstrapped from the stored search values and the recurrent world model (GRU dynamics) as Stoix's."""
    from podrl.agents.muzero import MuZeroConfig
    from podrl.anakin.config import AnakinConfig

    num_envs, rollout = spec.get("num_envs", 64), 8
    updates = spec["total_steps"] // (num_envs * rollout)
    per_call = max(1, updates // spec.get("evaluations", 8))
    run = dataclasses.replace(quiet(AnakinConfig(
        env=spec["env"], num_envs=num_envs, rollout_length=rollout, total_steps=spec["total_steps"],
        updates_per_call=per_call, eval_episodes=spec["eval_episodes"], seed=spec.get("seed", 0))), eval_every=per_call)
    agent = MuZeroConfig(search="muzero", num_simulations=25, learning_rate=3e-4, anneal_lr=False, max_grad_norm=0.5,
                         gamma=0.99, unroll_steps=5, td_steps=5, support_size=300, value_loss_weight=0.25,
                         buffer_size=390 * num_envs, min_fill=16 * num_envs, batch_size=32,
                         replay_ratio=8 / (num_envs * rollout), torso="mlp", hidden_sizes=(256, 256), activation="silu",
                         latent_size=512, dynamics="gru", dynamics_sizes=(256, 256), prediction_sizes=(256, 256),
                         target_tau=1.0, value_bootstrap="search")
    return run, agent


def anakin_curve(run, agent) -> dict[str, Any]:
    """`anakin_result` plus its `curve`: per logged call, env steps, cumulative training seconds (each call's
    steps over its SPS), the call's mean training return and the greedy evaluation after it."""
    import numpy as np

    from podrl.anakin import train_anakin

    result = train_anakin(run, agent)
    curve, seconds = [], 0.0
    for record in result.history:
        if "sps" not in record:
            continue
        seconds += (record["step"] - (curve[-1]["env_steps"] if curve else 0)) / record["sps"]
        train = record.get("episode_return")
        curve.append({"env_steps": int(record["step"]), "train_seconds": seconds,
                      "train_return": None if train is None else float(np.mean(train)),
                      "eval_return": None if record.get("eval_return") is None
                      else float(np.mean(record["eval_return"]))})
    final = result.final_eval_return
    return {"steps_per_second": curve[-1]["env_steps"] / seconds, "compile_seconds": float(result.compile_seconds),
            "final_return": None if final is None else float(np.mean(final)), "curve": curve}


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """podrl's measurement of `spec['kind']`."""
    kind = spec["kind"]
    if kind == "sebulba":
        return measure_sebulba(spec)
    if kind == "ceiling":
        return measure_ceiling(spec)
    configure_cpu_devices(1)
    if kind == "minatar-ppo":
        return measure_minatar_ppo(spec)
    if kind == "minatar-pqn":
        return anakin_result(*minatar_pqn(spec))
    if kind == "minatar-muzero":
        return anakin_curve(*stoix_ff_mz(spec))
    raise ValueError(f"unknown measurement kind {kind!r}")
