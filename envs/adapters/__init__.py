"""Host vector envs for the Sebulba layout (the `podrl.envs.host.HostVectorEnv` contract).

* `GymnasiumVectorEnv`: gymnasium ids, single-env factories (sync/async) or VectorEnvs.
* `DmEnvVectorEnv`: a factory of `dm_env.Environment`s, batched in a loop.
* `JaxHostVectorEnv`: a JAX env on the host CPU, keyed like Anakin.
* `make_ale_env` (ale-py) and `EnvpoolVectorEnv` (envpool): optional extras.
* `make_host_env(name, num_envs, seed)`: any of the above by name.
* `check_host_env(env)`: a startup check of the contract.
"""

from podrl.envs.adapters.ale import make_ale_env
from podrl.envs.adapters.dm_env import DmEnvVectorEnv
from podrl.envs.adapters.envpool import EnvpoolVectorEnv
from podrl.envs.adapters.gymnasium import GymnasiumVectorEnv, ResetMaskError, build_vector_env
from podrl.envs.adapters.jax_host import JaxHostVectorEnv, anakin_env_keys
from podrl.envs.adapters.make import make_host_env
from podrl.envs.adapters.specs import (
    EnvSpecMismatchError,
    EpisodeTracker,
    UnsupportedSpaceError,
    check_host_env,
    convert_action_spec,
    convert_observation_spec,
    sample_actions,
)

__all__ = [
    "GymnasiumVectorEnv", "build_vector_env", "ResetMaskError",
    "DmEnvVectorEnv", "JaxHostVectorEnv", "anakin_env_keys",
    "make_ale_env", "EnvpoolVectorEnv", "make_host_env",
    "check_host_env", "EnvSpecMismatchError", "UnsupportedSpaceError", "EpisodeTracker",
    "convert_observation_spec", "convert_action_spec", "sample_actions",
]
