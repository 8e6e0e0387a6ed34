"""`JaxHostVectorEnv`: a functional JAX env stepped on the host CPU as a `HostVectorEnv`.

The env is wrapped with `podrl.envs.wrap_for_training` (auto-reset + episode stats),
exactly as the Anakin layout runs it, and `num_envs` copies are stepped by one
jitted, vmapped call on this process's first CPU device (`jax.local_devices(backend="cpu")[0]`). Results come back as
numpy.

Reset keys: `reset(seed)` derives the per-env keys as a single-device,
single-seed Anakin run does (the `env_key` branch of `podrl.core.keys`; envs never
import podrl, tests/test_keys.py holds the two equal)::

    params_key, env_key, run_key = jax.random.split(jax.random.key(seed), 3)
    env_keys = jax.random.split(env_key, num_envs)

so the same env and seed start (and, given the same actions, run) bit-identically
in both layouts. A layout that owns its key derivation calls
`reset_from_keys(keys)` instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from podrl.envs.types import ActionSpec, JaxEnv, ObservationSpec, PRNGKey, TimeStep
from podrl.envs.wrappers import batch_step, wrap_for_training


def anakin_env_keys(seed: int, num_envs: int) -> PRNGKey:
    """`[num_envs]` typed reset keys, derived from `seed` as Anakin does on one device."""
    _, env_key, _ = jax.random.split(jax.random.key(np.uint32(seed)), 3)
    return jax.random.split(env_key, num_envs)


def _with_truncated(ts: TimeStep) -> TimeStep:
    """Adds all-False `extras["truncated"]` for envs without a time limit (contract key)."""
    if "truncated" in ts.extras:
        return ts
    return ts._replace(extras={**ts.extras, "truncated": jnp.zeros(ts.reward.shape, jnp.bool_)})


class JaxHostVectorEnv:
    """`num_envs` copies of a `JaxEnv` (from `podrl.envs.make`) on the host CPU (module docstring).

    Attributes:
      env: the env as given; training_env: `wrap_for_training(env)`;
      state: the batched env state after the latest reset/step (on `device`).
    """

    def __init__(self, env: JaxEnv, num_envs: int, device: jax.Device | None = None):
        if num_envs < 1:
            raise ValueError(f"num_envs must be positive, got {num_envs}")
        self.env, self.num_envs = env, int(num_envs)
        self.training_env = wrap_for_training(env)
        self.device = device if device is not None else jax.local_devices(backend="cpu")[0]
        self.state = None
        reset, step = jax.vmap(self.training_env.reset), batch_step(self.training_env)
        self._reset = jax.jit(lambda keys: _finish(reset(keys)))
        self._step = jax.jit(lambda state, actions: _finish(step(state, actions)))

    def observation_spec(self) -> ObservationSpec:
        return self.env.observation_spec()

    def action_spec(self) -> ActionSpec:
        return self.env.action_spec()

    def reset(self, seed: int) -> TimeStep:
        """Resets with Anakin's key derivation for `seed` (`anakin_env_keys`)."""
        with jax.default_device(self.device):
            keys = anakin_env_keys(seed, self.num_envs)
        return self.reset_from_keys(keys)

    def reset_from_keys(self, keys: PRNGKey) -> TimeStep:
        """Resets env i with `keys[i]` (`[num_envs]` typed keys, or raw uint32 `[num_envs, 2]`)."""
        keys = jax.device_put(keys, self.device)
        if keys.shape[0] != self.num_envs:
            raise ValueError(f"expected {self.num_envs} keys, got {keys.shape[0]}")
        self.state, ts = self._reset(keys)
        return _to_numpy(ts)

    def step(self, actions: np.ndarray) -> TimeStep:
        """Steps every env with `actions` `[num_envs, *action_shape]` (auto-resets ended envs)."""
        if self.state is None:
            raise RuntimeError("call reset(seed) or reset_from_keys(keys) before step")
        actions = jax.device_put(np.asarray(actions, dtype=self.action_spec().dtype), self.device)
        self.state, ts = self._step(self.state, actions)
        return _to_numpy(ts)

    def close(self) -> None:
        self.state = None


def _finish(out: tuple) -> tuple:
    state, ts = out
    return state, _with_truncated(ts)


def _to_numpy(ts: TimeStep) -> TimeStep:
    return jax.tree.map(np.array, jax.device_get(ts))  # writable copies
