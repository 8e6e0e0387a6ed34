"""Everything a Sebulba run builds in the main thread before any actor starts:
envs (checked against their specs), the agent, initial params, keys, compiled
inference per actor device, queues, the params source and the actor threads.

Key schedule (shared with Anakin): `params_key, env_key, run_key =
split(key(seed), 3)`; actor thread j acts with base key `fold_in(run_key, j)`,
learner shard d updates with `fold_in(run_key, d)`, and update i of either uses
`podrl.rollout.update_keys(base, i)`. JAX host envs reset thread j's envs with
slice j of `split(env_key, total_envs)`. With one thread and one learner device
this is exactly Anakin's single-device schedule.
"""

from __future__ import annotations

import queue
import time
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from envs.host import HostVectorEnv
from envs.types import EnvSpec
from podrl.evaluation import evaluate_host_greedy
from podrl.mesh import data_mesh, local_replica, replicated
from podrl.parallel import DATA_AXIS
from podrl.sebulba.actor import ActorThread, make_act_step, step_keys, trajectory_shardings
from podrl.sebulba.config import SebulbaConfig
from podrl.sebulba.params import ParamsSource
from podrl.sebulba.stopping import StopSignal
from podrl.types import Agent, TrainState, Trajectory


class ActorSetup(NamedTuple):
    agent: Agent
    envs: list[HostVectorEnv]
    threads: list[ActorThread]
    queues: list[queue.Queue]
    source: ParamsSource
    stop: StopSignal
    learner_mesh: Mesh
    learner_keys: jax.Array  # [D] typed keys, sharded over the learner devices
    train_state: TrainState  # replicated on the learner devices
    example_trajectory: Trajectory  # numpy zeros shaped like one thread's rollout
    shardings: Trajectory
    act_compile_seconds: float
    evaluate: Callable[[Any], float]
    start_update: int  # > 0 when resuming from a checkpoint
    limit: int  # updates end before this index (num_updates or checkpoint.stop_after_updates)


def seed_keys(seed: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`(params_key, env_key, run_key)` of a run (the Anakin split for one seed)."""
    params_key, env_key, run_key = jax.random.split(jax.random.key(seed), 3)
    return params_key, env_key, run_key


def _make_env(config: SebulbaConfig, factory, thread: int, num_envs: int) -> HostVectorEnv:
    if factory is not None:
        return factory(thread, num_envs)
    from envs.adapters.make import make_host_env

    return make_host_env(config.env, num_envs, seed=config.seed, vectorization=config.vectorization)


def learner_devices(local_ids: tuple[int, ...]) -> list[jax.Device]:
    """The learner mesh: local devices `local_ids` of every process, by process."""
    return [jax.local_devices(process_index=p)[i] for p in range(jax.process_count()) for i in local_ids]


def _reset(env: HostVectorEnv, env_key: jax.Array, thread: int, total_envs: int, seed: int):
    reset_from_keys = getattr(env, "reset_from_keys", None)
    if reset_from_keys is not None:
        n = env.num_envs
        return reset_from_keys(jax.random.split(env_key, total_envs)[thread * n:(thread + 1) * n])
    return env.reset(int(np.random.SeedSequence([seed, thread]).generate_state(1)[0] % (2**31)))


def build_actors(config: SebulbaConfig, agent_config, env_factory, local: list[jax.Device],
                 learner_ids: tuple[int, ...], restore: Callable[[TrainState], TrainState]) -> ActorSetup:
    """Builds everything; `restore` maps the fresh train state to the one to start from."""
    from envs.adapters.specs import check_host_env

    stop = StopSignal()
    n_threads, n = config.num_threads, config.envs_per_thread
    first_thread = jax.process_index() * n_threads  # global index of this process's thread 0
    total_envs = jax.process_count() * n_threads * n
    envs = []
    try:
        for j in range(n_threads):
            envs.append(_make_env(config, env_factory, j, n))
        check_host_env(envs[0])
        spec = EnvSpec(envs[0].observation_spec(), envs[0].action_spec())
        agent = agent_config.make_agent(spec, config.num_updates)
        params_key, env_key, run_key = seed_keys(config.seed)
        mesh = data_mesh(learner_devices(learner_ids))
        train_state = restore(jax.jit(lambda: agent.init(params_key, spec), out_shardings=replicated(mesh))())
        start = int(np.asarray(train_state.update_step.addressable_data(0)))
        limit = min(config.num_updates, config.checkpoint.stop_after_updates or config.num_updates)
        num_shards = mesh.devices.size
        learner_keys = jax.jit(lambda: jax.vmap(lambda d: jax.random.fold_in(run_key, d))(jnp.arange(num_shards)),
                               out_shardings=NamedSharding(mesh, P(DATA_AXIS)))()
        firsts = [_reset(env, env_key, first_thread + j, total_envs, config.seed) for j, env in enumerate(envs)]
        actor_devices = [local[i] for i in config.actor_devices]
        act_step = make_act_step(agent)
        compile_start = time.perf_counter()
        example = None
        local_params = local_replica(train_state.params)
        for device in actor_devices:  # compile inference for every actor device, in this thread
            example = _warm_up(agent, act_step, local_params, firsts[0], device, config.rollout_length)
        act_seconds = time.perf_counter() - compile_start
        shardings = trajectory_shardings(mesh, DATA_AXIS, example)
        source = ParamsSource(actor_devices, config.fixed_lag, stop, config.timeout_s, first_version=start)
        queues = [queue.Queue(maxsize=config.queue_size) for _ in range(n_threads)]
        threads = []
        for j in range(n_threads):
            slot = j // config.threads_per_actor_device
            threads.append(ActorThread(
                j, envs[j], firsts[j], agent, act_step, actor_devices[slot], slot, source, queues[j], stop,
                jax.random.fold_in(run_key, first_thread + j), config.rollout_length, range(start, limit), shardings,
                config.timeout_s))
        evaluate = _evaluator(config, env_factory, agent, actor_devices[0], envs)
    except BaseException:
        for env in envs:
            env.close()
        raise
    return ActorSetup(agent, envs, threads, queues, source, stop, mesh, learner_keys, train_state,
                      example, shardings, act_seconds, evaluate, start, limit)


def _warm_up(agent: Agent, act_step, params, first, device, length: int) -> Trajectory:
    """Compiles `act_step` for `device`; returns a zero Trajectory shaped like one rollout."""
    params = jax.device_put(params, device)
    actor_state = jax.device_put(agent.init_actor_state(first.observation.shape[0]), device)
    keys = jax.device_put(step_keys(jax.random.key(0), length), device)
    action, extras, _ = jax.device_get(act_step(params, actor_state, first.observation, keys, 0))
    zeros = lambda x: np.zeros((length,) + np.shape(x), np.asarray(x).dtype)  # noqa: E731
    obs = zeros(first.observation)
    batch = obs.shape[1]
    return Trajectory(obs, zeros(action), np.zeros((length, batch), np.float32), np.zeros((length, batch), np.float32),
                      np.zeros((length, batch), np.bool_), obs.copy(), jax.tree.map(zeros, extras),
                      jax.device_get(agent.init_actor_state(batch)))


def _evaluator(config: SebulbaConfig, env_factory, agent: Agent, device, envs: list) -> Callable[[Any], float]:
    """`evaluate(params) -> mean greedy return` on its own env batch (built on first use).

    `params` are the learner's replicated global params; only this process's replica is
    used, so evaluating on one process alone involves no collective."""
    holder: list[HostVectorEnv] = []

    def evaluate(params) -> float:
        if not holder:
            holder.append(_make_env(config, env_factory, -1, config.eval_episodes))
            envs.append(holder[0])  # closed with the others
        result = evaluate_host_greedy(agent, jax.device_put(local_replica(params), device), holder[0],
                                      seed=config.seed + 1_000_003, max_steps=config.eval_max_steps)
        return float(np.mean(result.returns))

    return evaluate
