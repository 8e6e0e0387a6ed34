"""The pieces a Sebulba program builds in the main thread before any actor starts: host envs
(from `config.env` or a factory), their first reset, the learner devices, compiled inference.

Keys and host env seeds come from `podrl.core.keys` (the tree Anakin uses): actor
thread j (global index) acts with base key `base_key(run_key, j)`, learner shard
d updates with `base_key(run_key, d)`; JAX host envs reset thread j's envs with
slice j of `env_keys(env_key, total_envs)`, and its envs are the env columns
`j * envs_per_thread + [0, envs_per_thread)` its actor state is made for
(`podrl.core.types.EnvColumns`). With one thread and one learner device this is
exactly Anakin's single-device schedule.
"""

from __future__ import annotations

import jax
import numpy as np

from podrl.envs.host import HostVectorEnv
from podrl.core.errors import ConfigError
from podrl.core.keys import env_keys, host_env_seed, step_keys
from podrl.sebulba.config import SebulbaConfig
from podrl.sebulba.transport import example_trajectory, step_record
from podrl.core.types import Agent, Trajectory


def make_env(config: SebulbaConfig, factory, thread: int, num_envs: int) -> HostVectorEnv:
    if factory is not None:
        return factory(thread, num_envs)
    from podrl.envs.adapters.make import make_host_env

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


def reset_env(env: HostVectorEnv, env_key: jax.Array, thread: int, total_envs: int, seed: int):
    reset_from_keys = getattr(env, "reset_from_keys", None)
    if reset_from_keys is not None:
        n = env.num_envs
        return reset_from_keys(env_keys(env_key, total_envs)[thread * n:(thread + 1) * n])
    return env.reset(host_env_seed(seed, thread))


def warm_up(agent: Agent, act_step, params, first, device, length: int) -> Trajectory:
    """Compiles `act_step` for `device`; returns a zero Trajectory shaped like one rollout."""
    params = jax.device_put(params, device)
    batch = first.observation.shape[0]
    actor_state = jax.device_put(agent.init_actor_state(batch), device)
    keys = jax.device_put(step_keys(jax.random.key(0), length), device)
    action, extras, _ = jax.device_get(act_step(params, actor_state, first.observation, keys, 0))
    flags = np.zeros(batch, np.float32)  # reward, discount, truncated: cast by the transport
    step = step_record(first.observation, action, flags, flags, flags, first.observation, extras)
    return example_trajectory(step, jax.device_get(agent.init_actor_state(batch)), length)
