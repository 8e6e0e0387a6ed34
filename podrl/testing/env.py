"""`check_env`: does a JAX env keep the `podrl.envs.types.JaxEnv` contract?

    from podrl.testing import check_env
    check_env("my_envs:Chain")        # a name `podrl.envs.make` takes, or the env itself

It runs the env as the Anakin layout does (wrapped for training: auto-reset and episode statistics,
vmapped over `num_envs` copies, jitted) through the host env's startup check
(`podrl.envs.adapters.specs.check_host_env`: observation shape and dtype against the spec, rewards
and discounts float32, step types, discount 0 only where an episode terminated, truncation flags, the
same extras on every step, actions from the whole action spec accepted), for `steps` steps, then
resets twice with the same seed and asks for the same observations. A broken rule raises
`EnvSpecMismatchError` naming the method, the field, what was expected and what came.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from podrl.envs.adapters.jax_host import JaxHostVectorEnv
from podrl.envs.adapters.specs import EnvSpecMismatchError, check_host_env
from podrl.envs.registry import make
from podrl.envs.types import JaxEnv


def check_env(env: str | JaxEnv, num_envs: int = 4, steps: int = 32, seed: int = 0) -> None:
    """Checks the JAX `env` (or the env `podrl.envs.make(env)` builds) against the env contract (module doc)."""
    if isinstance(env, str):
        env = make(env)
    name = type(env).__name__
    missing = [m for m in ("reset", "step", "observation_spec", "action_spec") if not callable(getattr(env, m, None))]
    if missing:
        raise EnvSpecMismatchError(name, "__init__", "methods", "reset, step, observation_spec, action_spec",
                                   f"no {', '.join(missing)}", "a JaxEnv is a pair of pure functions over a state "
                                   "pytree with its specs (podrl.envs.types.JaxEnv)")
    host = type(name, (JaxHostVectorEnv,), {})(env, num_envs)  # named like the env in the messages
    check_host_env(host, steps=steps, seed=seed)
    first, again = host.reset(seed), host.reset(seed)
    if not _same(first.observation, again.observation):
        raise EnvSpecMismatchError(name, "reset", "observation", "the same observations from the same key",
                                   "different ones", "keep every random draw on the key reset gets (and the state)")


def _same(a: Any, b: Any) -> bool:
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=np.issubdtype(np.asarray(a).dtype, np.inexact))
