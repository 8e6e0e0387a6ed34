"""`DmEnvVectorEnv`: a batch of `dm_env.Environment`s as a podrl `HostVectorEnv`.

The envs are stepped one after the other in a Python loop and their results
stacked into `[B]`-leading numpy arrays (see `podrl.envs.host`); a nested observation spec
(dm_env specs in dicts, tuples or lists) is stacked leaf by leaf (`podrl.envs.observations`).

dm_env has no `terminated`/`truncated` flags; it encodes the end of an episode
in the discount of the LAST timestep:

* LAST with discount 0   -> termination (absorbing state; podrl discount 0);
* LAST with discount > 0 -> truncation (dm_env's convention for a time limit is
  LAST with discount 1); podrl emits discount 1 and `extras["truncated"] = True`.

Other discounts on MID steps (an env's own per-step discount) are not passed
through: the host contract's discount is 0 only where an episode terminated.
An ended env is reset in the same `step` call; its observation is the new
episode's first one and the final observation is in `extras["next_obs"]`.

Seeding: dm_env's `reset()` takes no seed. If the factory accepts a `seed`
keyword, env i is built as `factory(seed=seed + i)` and `reset(seed)` rebuilds
the envs for a new seed; otherwise the seed cannot reach the envs and is ignored.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import dm_env
import numpy as np

from podrl.envs import observations
from podrl.envs.adapters.specs import EpisodeTracker, convert_action_spec, convert_observation_spec
from podrl.envs.types import ActionSpec, ObservationSpec, TimeStep


def accepts_seed(factory: Callable) -> bool:
    """True if `factory` can be called with a `seed=` keyword."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "seed" or p.kind == inspect.Parameter.VAR_KEYWORD for p in params)


class DmEnvVectorEnv:
    """`num_envs` dm_env environments from `factory`, batched (module docstring).

    Args:
      factory: callable returning a `dm_env.Environment` (optionally taking `seed=`).
      num_envs: batch size B.
      seed: seed of the envs built now (a seeded factory only; `reset(seed)` may rebuild).
    """

    def __init__(self, factory: Callable[..., dm_env.Environment], num_envs: int, seed: int = 0):
        if num_envs < 1:
            raise ValueError(f"num_envs must be positive, got {num_envs}")
        self.num_envs = int(num_envs)
        self._factory = factory
        self._seeded = accepts_seed(factory)
        self._seed, self._fresh = seed, True
        self.envs = self._build(seed)
        self._observation_spec = convert_observation_spec(self.envs[0].observation_spec())
        self._action_spec = convert_action_spec(self.envs[0].action_spec())
        self._tracker = EpisodeTracker(self.num_envs)

    def observation_spec(self) -> ObservationSpec:
        return self._observation_spec

    def action_spec(self) -> ActionSpec:
        return self._action_spec

    def reset(self, seed: int) -> TimeStep:
        """Resets every env (rebuilt for `seed` if the factory is seeded); FIRST timesteps."""
        if self._seeded and (seed != self._seed or not self._fresh):
            self.close()
            self.envs, self._seed = self._build(seed), seed
        self._fresh = False
        obs = self._stack([self._first(env).observation for env in self.envs])
        return self._tracker.first(obs)

    def step(self, actions: np.ndarray) -> TimeStep:
        """Steps env i with `actions[i]` (`actions` `[B, *action_shape]`)."""
        actions = np.asarray(actions, dtype=self._action_spec.dtype)
        b = self.num_envs
        reward = np.zeros(b, np.float32)
        terminated, truncated = np.zeros(b, bool), np.zeros(b, bool)
        next_obs, obs = [], []
        for i, env in enumerate(self.envs):
            ts = env.step(actions[i])
            if ts.first():
                raise RuntimeError(f"{type(env).__name__}.step returned FIRST: reset it only when asked")
            reward[i] = 0.0 if ts.reward is None else ts.reward
            next_obs.append(ts.observation)
            if ts.last():
                ended_by_termination = ts.discount is not None and float(ts.discount) == 0.0
                terminated[i], truncated[i] = ended_by_termination, not ended_by_termination
                obs.append(self._first(env).observation)
            else:
                obs.append(ts.observation)
        return self._tracker.transition(self._stack(obs), self._stack(next_obs), reward, terminated, truncated)

    def close(self) -> None:
        for env in self.envs:
            env.close()

    # ---- internals ----

    def _build(self, seed: int) -> list[dm_env.Environment]:
        if self._seeded:
            return [self._factory(seed=seed + i) for i in range(self.num_envs)]
        return [self._factory() for _ in range(self.num_envs)]

    @staticmethod
    def _first(env: dm_env.Environment) -> dm_env.TimeStep:
        ts = env.reset()
        if not ts.first():
            raise RuntimeError(f"{type(env).__name__}.reset returned step_type {ts.step_type}, not FIRST")
        return ts

    def _stack(self, per_env: list) -> Any:
        """`[B, ...]` arrays of the envs' observations, leaf by leaf for a nested spec (dicts, tuples)."""
        spec = self._observation_spec
        if not observations.is_nested(spec):
            return np.stack([np.asarray(o) for o in per_env]).astype(spec.dtype, copy=False)
        trees = [observations.as_tree(o) for o in per_env]
        return observations.map_spec_with(
            lambda leaf, *xs: np.stack([np.asarray(x) for x in xs]).astype(leaf.dtype, copy=False), spec, *trees)
