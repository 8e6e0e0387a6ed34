"""The functional JAX environment contract shared by every podrl layout.

An environment is a pair of pure functions over an explicit state pytree::

    state, timestep = env.reset(key)
    state, timestep = env.step(state, action)

`TimeStep` follows dm_env: `step_type` is FIRST on reset, MID in an episode and
LAST on the step that ends it. `discount` is 0 when the episode *terminated*
(the MDP reached an absorbing state) and 1 otherwise, so a time-limit
*truncation* is a LAST step with discount 1 and `extras["truncated"] = True`.

Environments act on a single (unbatched) instance; layouts batch with `jax.vmap`.
Any randomness an environment needs inside `step` lives in its state.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, TypeAlias, runtime_checkable

import jax
import jax.numpy as jnp
from dm_env import specs

Array: TypeAlias = jax.Array
PRNGKey: TypeAlias = jax.Array
EnvState: TypeAlias = Any

FIRST = 0
MID = 1
LAST = 2


class TimeStep(NamedTuple):
    """One (possibly batched) environment transition, dm_env-shaped.

    Attributes (leading batch dims `...` are optional):
      step_type: int32 `[...]`, one of FIRST, MID, LAST.
      reward: float32 `[...]`, reward received on arriving here (0 on FIRST).
      discount: float32 `[...]`, 0 if the episode terminated here, else 1.
      observation: `[..., *obs_shape]`, or a pytree of such leaves (dicts, tuples, NamedTuples;
        `podrl.envs.observations`), with a legal-action mask in its leaf `action_mask` if the env has one.
      extras: dict of `[...]`-leading arrays. Wrappers add keys; every step and
        reset of one env returns the same keys (scan needs a fixed structure).
        Well-known keys: "truncated" (bool, time limit hit),
        "next_obs" (the observation the action led to, before any auto-reset),
        "episode_return"/"episode_length" (valid where step_type == LAST).
    """

    step_type: Array
    reward: Array
    discount: Array
    observation: Array
    extras: dict[str, Array]

    def first(self) -> Array:
        return self.step_type == FIRST

    def last(self) -> Array:
        return self.step_type == LAST


def restart(observation: Array, extras: dict[str, Array] | None = None) -> TimeStep:
    """A FIRST timestep for `observation` (reward 0, discount 1)."""
    return TimeStep(
        step_type=jnp.asarray(FIRST, jnp.int32),
        reward=jnp.asarray(0.0, jnp.float32),
        discount=jnp.asarray(1.0, jnp.float32),
        observation=observation,
        extras={} if extras is None else extras,
    )


def transition(
    observation: Array,
    reward: Array,
    terminated: Array,
    extras: dict[str, Array] | None = None,
) -> TimeStep:
    """A MID timestep, or a LAST one with discount 0 where `terminated`."""
    terminated = jnp.asarray(terminated, jnp.bool_)
    return TimeStep(
        step_type=jnp.where(terminated, LAST, MID).astype(jnp.int32),
        reward=jnp.asarray(reward, jnp.float32),
        discount=jnp.where(terminated, 0.0, 1.0).astype(jnp.float32),
        observation=observation,
        extras={} if extras is None else extras,
    )


def ending(observation: Array, reward: Array, terminated: Array, truncated: Array,
           extras: dict[str, Array] | None = None) -> TimeStep:
    """A `transition` that may also end on a truncation the env reports itself: LAST with discount 1 and
    `extras["truncated"]` where `truncated` and not `terminated` (termination wins, as in gymnasium).

    For suites whose own step tells a time limit from a termination (brax's `EpisodeWrapper`,
    xland-minigrid, Jumanji's `truncation` timesteps); `TimeLimit` keeps an inner truncation."""
    terminated = jnp.asarray(terminated, jnp.bool_)
    truncated = jnp.asarray(truncated, jnp.bool_) & ~terminated
    ts = transition(observation, reward, terminated, {**(extras or {}), "truncated": truncated})
    return ts._replace(step_type=jnp.where(truncated, LAST, ts.step_type).astype(jnp.int32))


ObservationSpec: TypeAlias = Any
"""A `dm_env.specs.Array` of one env's observation, or a pytree of them (`podrl.envs.observations`)."""
ActionSpec: TypeAlias = specs.DiscreteArray | specs.BoundedArray


class EnvSpec(NamedTuple):
    """Static description of an environment's interface (not a pytree of arrays).

    `observation` is one dm_env spec, or a pytree of them for a nested observation (dicts, tuples,
    NamedTuples: `podrl.envs.observations`); `action` a `DiscreteArray` or a `BoundedArray`."""

    observation: ObservationSpec
    action: ActionSpec

    @property
    def discrete(self) -> bool:
        return isinstance(self.action, specs.DiscreteArray)


@runtime_checkable
class JaxEnv(Protocol):
    """A functional, jittable environment (see module docstring)."""

    def reset(self, key: PRNGKey) -> tuple[EnvState, TimeStep]: ...

    def step(self, state: EnvState, action: Array) -> tuple[EnvState, TimeStep]: ...

    def observation_spec(self) -> ObservationSpec: ...

    def action_spec(self) -> ActionSpec: ...


def env_spec(env: JaxEnv) -> EnvSpec:
    """The `EnvSpec` of `env`."""
    return EnvSpec(observation=env.observation_spec(), action=env.action_spec())
