"""Everything a Sebulba run builds in the main thread before any actor starts:
envs (checked against their specs), the agent, initial params, keys, compiled
inference per actor device, queues, the params source and the actor threads.

Keys and host env seeds come from `podrl.keys` (the tree Anakin uses): actor
thread j (global index) acts with base key `base_key(run_key, j)`, learner shard
d updates with `base_key(run_key, d)`; JAX host envs reset thread j's envs with
slice j of `env_keys(env_key, total_envs)`. With one thread and one learner
device this is exactly Anakin's single-device schedule.
"""

from __future__ import annotations

import queue
import time
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from envs.host import HostVectorEnv
from envs.types import EnvSpec
from podrl.errors import ConfigError
from podrl.evaluation import evaluate_host_greedy
from podrl.keys import base_key, env_keys, host_env_seed, seed_keys, step_keys
from podrl.learner_state import check_shard_state_fits, init_on_mesh
from podrl.mesh import data_mesh, local_replica
from podrl.parallel import DATA_AXIS
from podrl.sebulba.actor import ActorThread, make_act_step
from podrl.sebulba.config import SebulbaConfig
from podrl.sebulba.params import ParamsSource
from podrl.sebulba.stopping import StopSignal
from podrl.sebulba.transport import example_trajectory, learner_shardings, step_record
from podrl.types import Agent, AgentConfig, TrainState, Trajectory

if TYPE_CHECKING:
    from podrl.run import RunContext


class ActorSetup(NamedTuple):
    agent: Agent
    envs: list[HostVectorEnv]
    threads: list[ActorThread]
    queues: list[queue.Queue]
    source: ParamsSource
    stop: StopSignal
    learner_mesh: Mesh
    learner_keys: jax.Array  # [D] typed keys, sharded over the learner devices
    train_state: TrainState  # on the learner devices, laid out as `podrl.learner_state` says
    example_trajectory: Trajectory  # numpy zeros shaped like one thread's rollout
    shardings: Trajectory
    act_compile_seconds: float
    evaluate: Callable[[Any, int], float]  # (params, seed) -> mean greedy return


def _make_env(config: SebulbaConfig, factory, thread: int, num_envs: int) -> HostVectorEnv:
    if factory is not None:
        return factory(thread, num_envs)
    from envs.adapters.make import make_host_env

    try:
        return make_host_env(config.env, num_envs, seed=config.seed, vectorization=config.vectorization,
                             **config.env_options)
    except TypeError as e:  # an option the env's constructor does not take
        if not config.env_kwargs:
            raise
        raise ConfigError("env_kwargs", f"{config.env} does not take {config.env_kwargs}: {e}") from e


def learner_devices(local_ids: tuple[int, ...]) -> list[jax.Device]:
    """The learner mesh: local devices `local_ids` of every process, by process."""
    return [jax.local_devices(process_index=p)[i] for p in range(jax.process_count()) for i in local_ids]


def _reset(env: HostVectorEnv, env_key: jax.Array, thread: int, total_envs: int, seed: int):
    reset_from_keys = getattr(env, "reset_from_keys", None)
    if reset_from_keys is not None:
        n = env.num_envs
        return reset_from_keys(env_keys(env_key, total_envs)[thread * n:(thread + 1) * n])
    return env.reset(host_env_seed(seed, thread))


def build_actors(config: SebulbaConfig, agent_config: AgentConfig, env_factory, local: list[jax.Device],
                 learner_ids: tuple[int, ...], run: RunContext) -> ActorSetup:
    """Builds everything; the train state is `run.restore`'s, updates run from `run.start` to `run.limit`."""
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
        keys = seed_keys(config.seed)
        mesh = data_mesh(learner_devices(learner_ids))
        check_shard_state_fits(agent, spec, agent_config, list(mesh.devices.flat))  # before any allocation
        train_state = run.restore(init_on_mesh(agent, keys.params, spec, mesh))
        start, limit = run.start, run.limit
        num_shards = mesh.devices.size
        learner_keys = jax.jit(lambda: jax.vmap(lambda d: base_key(keys.run, d))(jnp.arange(num_shards)),
                               out_shardings=NamedSharding(mesh, P(DATA_AXIS)))()
        firsts = [_reset(env, keys.env, first_thread + j, total_envs, config.seed) for j, env in enumerate(envs)]
        actor_devices = [local[i] for i in config.actor_devices]
        act_step = make_act_step(agent)
        compile_start = time.perf_counter()
        example = None
        local_params = local_replica(train_state.params)
        for device in actor_devices:  # compile inference for every actor device, in this thread
            example = _warm_up(agent, act_step, local_params, firsts[0], device, config.rollout_length)
        act_seconds = time.perf_counter() - compile_start
        shardings = learner_shardings(mesh, example)
        source = ParamsSource(actor_devices, config.fixed_lag, stop, config.timeout_s, first_version=start)
        queues = [queue.Queue(maxsize=config.queue_size) for _ in range(n_threads)]
        threads = []
        for j in range(n_threads):
            slot = j // config.threads_per_actor_device
            threads.append(ActorThread(
                index=j, env=envs[j], first=firsts[j], agent=agent, act_step=act_step, device=actor_devices[slot],
                device_slot=slot, source=source, out=queues[j], stop=stop,
                base_key=base_key(keys.run, first_thread + j), rollout_length=config.rollout_length,
                rollouts=range(start, limit), shardings=shardings, timeout=config.timeout_s))
        evaluate = _evaluator(config, env_factory, agent, actor_devices[0], envs)
    except BaseException:
        for env in envs:
            env.close()
        raise
    return ActorSetup(agent=agent, envs=envs, threads=threads, queues=queues, source=source, stop=stop,
                      learner_mesh=mesh, learner_keys=learner_keys, train_state=train_state,
                      example_trajectory=example, shardings=shardings, act_compile_seconds=act_seconds,
                      evaluate=evaluate)


def _warm_up(agent: Agent, act_step, params, first, device, length: int) -> Trajectory:
    """Compiles `act_step` for `device`; returns a zero Trajectory shaped like one rollout."""
    params = jax.device_put(params, device)
    batch = first.observation.shape[0]
    actor_state = jax.device_put(agent.init_actor_state(batch), device)
    keys = jax.device_put(step_keys(jax.random.key(0), length), device)
    action, extras, _ = jax.device_get(act_step(params, actor_state, first.observation, keys, 0))
    flags = np.zeros(batch, np.float32)  # reward, discount, truncated: cast by the transport
    step = step_record(first.observation, action, flags, flags, flags, first.observation, extras)
    return example_trajectory(step, jax.device_get(agent.init_actor_state(batch)), length)


def _evaluator(config: SebulbaConfig, env_factory, agent: Agent, device, envs: list) -> Callable[[Any, int], float]:
    """`evaluate(params, seed) -> mean greedy return` on its own env batch (built on first use).

    `params` are the learner's replicated global params; only this process's replica is
    used, so evaluating on one process alone involves no collective."""
    holder: list[HostVectorEnv] = []

    def evaluate(params, seed: int) -> float:
        if not holder:
            holder.append(_make_env(config, env_factory, -1, config.eval_episodes))
            envs.append(holder[0])  # closed with the others
        result = evaluate_host_greedy(agent, jax.device_put(local_replica(params), device), holder[0],
                                      seed=seed, max_steps=config.eval_max_steps)
        return float(np.mean(result.returns))

    return evaluate
