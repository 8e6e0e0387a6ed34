"""Tiny environments that agents learn in seconds, for fast tests.

`MatchSign`: each observation is a random sign s in {-1, +1}; action 1 means
"positive" and action 0 "negative". Matching the sign earns 1, otherwise 0.
Signs are i.i.d. and independent of the actions, so the optimal policy is
``action = (obs > 0)``, a linear function of the observation.

With the default ``episode_length = 16``:

- optimal return = episode_length = 16 (every step matched);
- uniformly random policy: expected return = episode_length / 2 = 8.

The episode *terminates* (LAST, discount 0) on its `episode_length`-th step,
so no time limit is needed (`envs.make("MatchSign-v0")` adds none).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from dm_env import specs

from envs.types import Array, PRNGKey, TimeStep, restart, transition


class MatchSignState(NamedTuple):
    """The current sign and the randomness for the next ones.

    Attributes:
      key: PRNG key, typed [] or raw uint32 [2] (as given to `reset`), draws the next sign.
      sign: float32 [], the sign currently observed, -1 or +1.
      t: int32 [], steps taken in this episode.
    """

    key: PRNGKey
    sign: Array
    t: Array


class MatchSign:
    """Say whether the observed number is positive (see module docstring)."""

    def __init__(self, episode_length: int = 16):
        if episode_length <= 0:
            raise ValueError(f"episode_length must be positive, got {episode_length}")
        self.episode_length = int(episode_length)

    def reset(self, key: PRNGKey) -> tuple[MatchSignState, TimeStep]:
        key, sign = _draw_sign(key)
        state = MatchSignState(key, sign, jnp.asarray(0, jnp.int32))
        return state, restart(sign[None])

    def step(self, state: MatchSignState, action: Array) -> tuple[MatchSignState, TimeStep]:
        reward = jnp.where(action == (state.sign > 0), 1.0, 0.0)
        key, sign = _draw_sign(state.key)
        t = state.t + 1
        new = MatchSignState(key, sign, t)
        return new, transition(sign[None], reward, t >= self.episode_length)

    def observation_spec(self) -> specs.Array:
        return specs.Array((1,), np.float32, name="observation")

    def action_spec(self) -> specs.DiscreteArray:
        return specs.DiscreteArray(2, name="action")


def _draw_sign(key: PRNGKey) -> tuple[PRNGKey, Array]:
    key, sub = jax.random.split(key)
    sign = jnp.where(jax.random.bernoulli(sub), 1.0, -1.0).astype(jnp.float32)
    return key, sign
