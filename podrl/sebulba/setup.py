"""What a Sebulba run builds before it starts (the twin of `podrl.anakin.setup`): the device split
checked against the config, the learner mesh, one host env batch per actor thread (checked
against its own specs), the env spec, the agent, and the learner state's fit on a device.

Both layouts build their envs and agent here, in `build`, before `podrl.run.context.RunContext`
opens the run, and hand the result to their program (`program.py`), because:

* a bad env name, an env that breaks its spec, an agent that cannot act in the env, a batch the
  devices cannot split or a replay buffer no device holds then fails before a run folder, a
  logger or a W&B run exists, and before a resume opens its checkpoint;
* building runs in the calling thread, outside the watchdog (`podrl.run.watchdog`, which guards
  the program's device stages: init, compile, the calls): an env constructor takes as long as
  it needs, and no helper thread is left parked in it;
* envs hold threads and processes (async vectorisation, envpool, ale-py's vector env), so every
  failure path closes them: `build` closes the envs it built when a later step of it fails, and
  the program's `close` (train.py's `finally`, whatever the run context or the driver raised)
  closes them after it.

The evaluation env batch is the exception: built on the first evaluation (`SebulbaProgram.evaluate`,
process 0 only), it joins the envs the program closes.

One thing is set before JAX starts, not here: `inline_cpu_dispatch` (`podrl sebulba` calls it first).
"""

from __future__ import annotations

import os
from typing import Callable, NamedTuple

import jax
from jax.sharding import Mesh

from podrl.core.errors import ConfigError
from podrl.core.learner_state import check_shard_state_fits
from podrl.core.mesh import data_mesh
from podrl.core.types import Agent, AgentConfig
from podrl.envs.adapters.make import make_host_env
from podrl.envs.adapters.specs import check_host_env
from podrl.envs.host import HostVectorEnv
from podrl.envs.types import EnvSpec
from podrl.sebulba.config import SebulbaConfig, check_actor_cpus
from podrl.testing.shards import check_before_run


def inline_cpu_dispatch() -> bool:
    """Has JAX run single-device CPU programs in the thread that calls them (`jax_cpu_enable_async_dispatch`
    off), unless the environment chose (`JAX_CPU_ENABLE_ASYNC_DISPATCH`); returns whether it did.

    An actor thread on a CPU actor device acts every env step: with XLA's asynchronous dispatch each of its
    small inference programs is handed to an XLA worker thread and waited for (two thread hand-offs per
    env step, which on a busy host cost a scheduler slice each); inline, the actor runs it itself, with the
    GIL released, so the learner and the other threads go on. Programs over several devices (an Anakin
    call on a mesh, a multi-process learner) stay asynchronous. JAX reads the setting when its CPU backend
    starts: call this before anything uses a device (later it changes nothing). Values are unchanged."""
    if "JAX_CPU_ENABLE_ASYNC_DISPATCH" in os.environ:
        return False
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    return True


EnvFactory = Callable[[int, int], HostVectorEnv]
"""`(thread_index, num_envs) -> HostVectorEnv`, replacing `config.env` (thread -1: the evaluation batch); called
once per env group of the thread (`env_groups` times, `num_envs = envs_per_group`)."""


class SebulbaSetup(NamedTuple):
    """What `build` returns: what the program runs, built and checked."""

    envs: list[HostVectorEnv]  # `env_groups` batches of `envs_per_group` per actor thread of this process,
    # thread-major (thread j's groups are envs[j * env_groups:(j + 1) * env_groups]), not yet reset
    spec: EnvSpec  # the spec of one env
    agent: Agent  # made for `spec` and the run's update count
    mesh: Mesh  # the learner mesh (the learner devices of every process)
    actor_devices: list[jax.Device]  # this process's actor devices, in `config.actor_devices` order
    env_factory: EnvFactory | None  # what builds envs instead of `config.env` (the evaluation batch, later)


def build(config: SebulbaConfig, agent_config: AgentConfig, env_factory: EnvFactory | None = None) -> SebulbaSetup:
    """Checks `config` against the local devices and `agent_config`, builds the envs and the agent (module doc)."""
    local = jax.local_devices()
    config.check_layout(len(local), agent_config)
    check_actor_cpus(config.actor_cpus)
    mesh = data_mesh(learner_devices(config.resolve_learner_devices(len(local))))
    envs: list[HostVectorEnv] = []
    try:
        for j in range(config.num_threads):
            envs += [make_env(config, env_factory, j, config.envs_per_group) for _ in range(config.env_groups)]
        check_host_env(envs[0])
        spec = EnvSpec(envs[0].observation_spec(), envs[0].action_spec())
        agent = agent_config.make_agent(spec, config.num_updates)
        check_shard_state_fits(agent, spec, agent_config, list(mesh.devices.flat))
        check_before_run(agent_config, agent, spec, config.rollout_length, mesh.size, config.skip_agent_check,
                         list(mesh.devices.flat))  # a user's agent on several learner shards
    except BaseException:
        for env in envs:
            env.close()
        raise
    return SebulbaSetup(envs, spec, agent, mesh, [local[i] for i in config.actor_devices], env_factory)


def make_env(config: SebulbaConfig, factory: EnvFactory | None, thread: int, num_envs: int) -> HostVectorEnv:
    """Thread `thread`'s batch of `num_envs` envs: `factory`'s, else `config.env` with its `env_kwargs`."""
    if factory is not None:
        return factory(thread, num_envs)
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
