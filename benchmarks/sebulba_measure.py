"""The child side of benchmarks.sebulba (and benchmarks.muzero): one measurement per fresh process.

`sebulba`: PPO trained with `train_sebulba` on 2 CPU JAX devices (actor 0, learner 1);
`ceiling`: the same host vector envs stepped with random actions, no JAX. See
benchmarks/sebulba.py for what each number means.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
import time
from typing import Any

from benchmarks.harness import CpuSampler, configure_cpu_devices, emit_result

DEVICES = 2  # on CPU: actor device 0, learner device 1 (on one accelerator both are device 0)

STAGES = ("time/env_step_s", "time/inference_s", "time/actor_queue_put_wait_s", "time/actor_params_wait_s",
          "time/actor_transfer_s", "time/learner_step_s", "time/learner_queue_wait_s")
"""Stages a run's history records (actor stages summed over threads); code from before the transfer stage was
timed (a `--baseline` revision) has no 'time/actor_transfer_s' (None in the summary)."""


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One child run: a Sebulba training run or an env-only ceiling."""

    kind: str  # "sebulba" | "ceiling"
    env: str
    threads: int
    envs_per_thread: int
    rollout_length: int = 32
    lag: str = "1"
    total_steps: int = 0  # sebulba: env steps (rounded down to whole updates)
    num_minibatches: int = 4
    num_epochs: int = 4
    min_seconds: float = 5.0  # ceiling: step at least this long
    seed: int = 0
    hidden_sizes: tuple[int, ...] = (64, 64)  # sebulba: the MLP torso's hidden layers (CNN torsos ignore it)
    agent: str = "ppo"  # sebulba: a key of agents.AGENTS
    agent_fields: dict = dataclasses.field(default_factory=dict)  # sebulba, agents other than ppo: config fields
    env_groups: int = 1  # sebulba: SebulbaConfig.env_groups
    pool: int = 0  # sebulba PPO: > 0 = the cheap network, an mlp on frames average-pooled by this (probe_agent)
    learn: bool = True  # sebulba: False = the learner consumes rollouts without updating (the actor pipeline alone)

    @property
    def steps_per_update(self) -> int:
        return self.threads * self.envs_per_thread * self.rollout_length


def _window_weights(history: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int, int]]:
    """`(record, updates, env_steps)` of each log window, first window dropped when >= 3."""
    windows, last_updates, last_steps = [], 0, 0
    for record in history:
        windows.append((record, record["updates"] - last_updates, record["step"] - last_steps))
        last_updates, last_steps = record["updates"], record["step"]
    return windows[1:] if len(windows) >= 3 else windows


def summarize_history(history: list[dict[str, Any]]) -> dict[str, Any]:
    """Steady-state steps/s and update-weighted mean stage timings of a run's history."""
    windows = _window_weights(history)
    updates = sum(u for _, u, _ in windows)
    seconds = sum(s / r["sps"] for r, _, s in windows if r["sps"] > 0)
    stages = {k: sum(r[k] * u for r, u, _ in windows) / updates if all(k in r for r, _, _ in windows) else None
              for k in STAGES}
    lag = sum(r["policy_lag_mean"] * u for r, u, _ in windows) / updates
    return {
        "steady_steps_per_second": sum(s for _, _, s in windows) / seconds if seconds else None,
        "steady_updates": updates,
        "stage_seconds_per_update": stages,
        "policy_lag_mean": lag,
        "queue_depth_mean": sum(r.get("queue_depth", 0.0) * u for r, u, _ in windows) / updates,
    }


def agent_config_for(m: Measurement):
    """The config a Sebulba measurement trains: PPO (Atari frames get the Nature CNN torso; with `m.pool`
    an mlp on pooled frames instead), or `m.agent` at its defaults but for `m.agent_fields`; wrapped
    in `benchmarks.probe_agent.PooledConfig` when it pools or does not learn."""
    config = _plain_agent_config(m)
    if not (m.pool or not m.learn):
        return config
    from benchmarks.probe_agent import PooledConfig

    if m.pool:
        config = dataclasses.replace(config, torso="mlp")
    return PooledConfig(config, pool=max(1, m.pool), learn=m.learn)


def _plain_agent_config(m: Measurement):
    if m.agent != "ppo":
        from podrl.agents import AGENTS

        return AGENTS[m.agent].config(**{k: tuple(v) if isinstance(v, list) else v for k, v in m.agent_fields.items()})
    from podrl.agents.ppo import PPOConfig

    # Atari frames need a CNN torso (an mlp on [4, 84, 84] is a ConfigError since issue 11's torsos);
    # an envpool id may be Atari (Pong-v5) or not (CartPole-v1), so the observation's rank decides.
    if m.env.startswith("ale:"):
        torso = "nature_cnn"
    elif m.env.startswith("envpool:"):
        from podrl.envs.adapters.make import make_host_env

        env = make_host_env(m.env, 1)
        torso = "nature_cnn" if len(env.observation_spec().shape) == 3 else "mlp"
        env.close()
    else:
        torso = "mlp"
    return PPOConfig(num_minibatches=m.num_minibatches, num_epochs=m.num_epochs, torso=torso,
                     hidden_sizes=tuple(m.hidden_sizes))


def trajectory_bytes(env_name: str, agent_config, rollout_length: int) -> dict[str, float]:
    """Bytes per env step of the trajectory the Sebulba learner receives for `env_name`, per field and
    total (`podrl.sebulba.transport.bytes_per_step`); shapes from the env spec and `jax.eval_shape` of
    the agent's act, so nothing compiles."""
    import jax
    import numpy as np

    from podrl.envs.adapters.make import make_host_env
    from podrl.envs.types import EnvSpec
    from podrl.sebulba.transport import bytes_per_step, example_trajectory, step_record

    env = make_host_env(env_name, 1)
    spec = EnvSpec(env.observation_spec(), env.action_spec())
    env.close()
    agent = agent_config.make_agent(spec, 1)
    key = jax.random.key(0)
    params = jax.eval_shape(lambda k: agent.init(k, spec).params, key)
    obs = np.zeros((1, *spec.observation.shape), spec.observation.dtype)
    action, extras, _ = jax.eval_shape(agent.act, params, agent.init_actor_state(1), obs, key)
    zeros = lambda s: np.zeros(s.shape, s.dtype)  # noqa: E731
    flags = np.zeros(1, np.float32)  # reward, discount, truncated: cast by the transport
    step = step_record(obs, zeros(action), flags, flags, flags, obs, jax.tree.map(zeros, extras))
    actor_state = jax.device_get(agent.init_actor_state(1))
    return bytes_per_step(example_trajectory(step, actor_state, rollout_length))


def measure_sebulba(m: Measurement) -> dict[str, Any]:
    """Trains `agent_config_for(m)` with `train_sebulba`; returns steps/s, compile seconds and stage timings."""
    import jax

    from podrl.run.config import LoggingConfig
    from podrl.sebulba import SebulbaConfig, train_sebulba

    num_updates = max(1, m.total_steps // m.steps_per_update)
    learner = (1,) if jax.local_device_count() > 1 else (0,)  # one accelerator acts and learns
    config = SebulbaConfig(
        env=m.env, seed=m.seed, total_steps=num_updates * m.steps_per_update, actor_devices=(0,),
        learner_devices=learner, threads_per_actor_device=m.threads, envs_per_thread=m.envs_per_thread,
        rollout_length=m.rollout_length, lag=m.lag, eval_episodes=0, log_every=max(1, num_updates // 10),
        timeout_s=600.0,  # a Nature CNN update on a loaded 2-core CPU can take over a minute
        logging=LoggingConfig(run_dir=None, console=False),
        **({"env_groups": m.env_groups} if m.env_groups != 1 else {}),  # a --baseline revision may not know it
    )
    agent_config = agent_config_for(m)
    start = time.perf_counter()
    with CpuSampler() as cpu:
        result = train_sebulba(config, agent_config)
    wall = time.perf_counter() - start
    train_seconds = result.env_steps / result.steps_per_second
    return {
        "steps_per_second": float(result.steps_per_second),
        "compile_seconds": float(result.compile_seconds),
        "steps_measured": int(result.env_steps),
        "updates": num_updates,
        "train_seconds": train_seconds,
        "child_wall_seconds": wall,
        "cpu_cores_used": cpu.cores_used(train_seconds),  # the training part (closing envs included)
        "trajectory_bytes_per_step": trajectory_bytes(m.env, agent_config, m.rollout_length),
        "podrl_source": os.path.dirname(os.path.dirname(os.path.abspath(train_sebulba.__code__.co_filename))),
        **summarize_history(result.history),
    }


def _step_loop(env, seed: int, barrier: threading.Barrier, deadline: list[float], out: list, slot: int) -> None:
    """Steps `env` with random valid actions from the barrier until `deadline[0]`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    num_actions, n = env.action_spec().num_values, env.num_envs
    for _ in range(3):  # warm-up, not timed
        env.step(rng.integers(0, num_actions, n))
    barrier.wait(timeout=300)  # a thread that failed before it breaks the barrier (no hang)
    steps = 0
    while time.perf_counter() < deadline[0]:
        env.step(rng.integers(0, num_actions, n))
        steps += n
    out[slot] = (steps, time.perf_counter())


def measure_ceiling(m: Measurement) -> dict[str, Any]:
    """Env-only steps/s of `threads` host vector envs stepped concurrently (no JAX work)."""
    from podrl.envs.adapters.make import make_host_env

    start = time.perf_counter()
    envs = [make_host_env(m.env, m.envs_per_thread, seed=m.seed + j) for j in range(m.threads)]
    for j, env in enumerate(envs):
        env.reset(m.seed + 1000 * j)
    setup_seconds = time.perf_counter() - start
    out: list = [None] * m.threads
    deadline = [math.inf]
    clock: list[float] = []

    def release():  # runs once, when every thread has warmed up
        clock.append(time.perf_counter())
        deadline[0] = clock[0] + m.min_seconds

    barrier = threading.Barrier(m.threads, action=release)
    threads = [threading.Thread(target=_step_loop, args=(env, m.seed + j, barrier, deadline, out, j), daemon=True)
               for j, env in enumerate(envs)]
    try:
        with CpuSampler(interval=0.05) as cpu:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        for env in envs:
            env.close()
    if any(o is None for o in out):
        raise RuntimeError("an env-only stepping thread failed (see stderr)")
    steps = sum(s for s, _ in out)
    seconds = max(end for _, end in out) - clock[0]
    return {"steps_per_second": steps / seconds, "steps_measured": steps, "seconds": seconds,
            "setup_seconds": setup_seconds, "cpu_cores_used": cpu.cores_used(seconds)}


def inline_cpu_dispatch() -> None:
    """What `podrl sebulba` sets before JAX starts (`podrl.sebulba.setup.inline_cpu_dispatch`); nothing on a
    `--baseline` revision's code from before it."""
    from podrl.sebulba import setup

    getattr(setup, "inline_cpu_dispatch", lambda: None)()


def child_main(spec_json: str) -> int:
    """Child entry point: one measurement, printed as one RESULT_PREFIX line."""
    spec = json.loads(spec_json)
    m = Measurement(**{**spec, "hidden_sizes": tuple(spec.get("hidden_sizes", (64, 64)))})

    if m.kind == "sebulba":
        inline_cpu_dispatch()
        if os.environ.get("JAX_PLATFORMS", "cpu") == "cpu":
            configure_cpu_devices(DEVICES)
        result = measure_sebulba(m)
    else:
        result = measure_ceiling(m)
    emit_result(result)
    return 0
