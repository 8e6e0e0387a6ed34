"""JAX environments, wrappers and adapters for podrl."""

from podrl.envs.registry import UnknownEnvError, make, registered
from podrl.envs.types import FIRST, LAST, MID, EnvSpec, JaxEnv, TimeStep, env_spec, restart, transition
from podrl.envs.wrappers import AutoReset, EpisodeStats, TimeLimit, Wrapper, batch_step, wrap_for_training

__all__ = [
    "FIRST", "MID", "LAST", "TimeStep", "EnvSpec", "JaxEnv", "env_spec", "restart", "transition",
    "AutoReset", "EpisodeStats", "TimeLimit", "Wrapper", "batch_step", "wrap_for_training",
    "make", "registered", "UnknownEnvError",
]
