"""Acting in a batched JAX env with `lax.scan`: the Anakin way to make a Trajectory."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from podrl.core.keys import step_keys
from podrl.core.parallel import match_varying
from podrl.core.types import (
    ActorState,
    Agent,
    Array,
    EnvColumns,
    Params,
    PRNGKey,
    Trajectory,
    reset_finished_actor_state,
)
from podrl.envs.types import EnvState, JaxEnv, TimeStep
from podrl.envs.wrappers import batch_step


class ActingState(NamedTuple):
    """Where the actors of one shard stand between rollouts (batch `[B]`)."""

    env_state: EnvState  # [B, ...]
    timestep: TimeStep  # [B, ...], observation is the input of the next action
    actor_state: ActorState  # [B, ...] or ()


class EpisodeTotals(NamedTuple):
    """Sums over finished episodes, reduced on device so nothing `[T, B]` leaves it."""

    return_sum: Array  # float32 []
    length_sum: Array  # float32 []
    count: Array  # float32 [], episodes finished

    @staticmethod
    def zeros() -> "EpisodeTotals":
        zero = jnp.zeros((), jnp.float32)
        return EpisodeTotals(zero, zero, zero)

    def __add__(self, other: "EpisodeTotals") -> "EpisodeTotals":  # type: ignore[override]
        return EpisodeTotals(*(a + b for a, b in zip(self, other)))


def reset_batch(env: JaxEnv, agent: Agent, keys: PRNGKey, columns: EnvColumns | None = None) -> ActingState:
    """Resets one env per key (`keys` `[B]`) and the actor state (of the env `columns`, see `EnvColumns`)."""
    env_state, timestep = jax.vmap(env.reset)(keys)
    return ActingState(env_state, timestep, agent.init_actor_state(keys.shape[0], columns))


def truncation_flags(timestep: TimeStep) -> Array:
    """`[B]` bool truncation flags; all False for envs without a time limit."""
    return timestep.extras.get("truncated", jnp.zeros(timestep.reward.shape, jnp.bool_))


def episode_totals(last: Array, extras: dict[str, Array]) -> EpisodeTotals:
    """Totals of the episodes that end where `last` is True (any shape)."""
    last_f = last.astype(jnp.float32)
    return EpisodeTotals(
        return_sum=jnp.sum(last_f * extras["episode_return"]),
        length_sum=jnp.sum(last_f * extras["episode_length"].astype(jnp.float32)),
        count=jnp.sum(last_f),
    )


def rollout(
    agent: Agent, env: JaxEnv, params: Params, state: ActingState, key: PRNGKey, length: int,
    columns: EnvColumns | None = None,
) -> tuple[ActingState, Trajectory, EpisodeTotals]:
    """Acts `length` steps in every env of the batch (the env `columns` the batch is, see `EnvColumns`).

    `env` must be auto-resetting with episode statistics (`podrl.envs.wrap_for_training`); it steps
    the batch with `podrl.envs.wrappers.batch_step` (resets only on steps where an episode ends).
    Returns the next acting state, a `[length, B]` Trajectory, and the totals of
    the episodes that finished during the rollout.
    """
    initial_actor_state = agent.init_actor_state(state.timestep.reward.shape[0], columns)

    def step(carry: ActingState, step_key: PRNGKey):
        action, extras, actor_state = agent.act(params, carry.actor_state, carry.timestep.observation, step_key)
        env_state, ts = batch_step(env)(carry.env_state, action)
        actor_state = reset_finished_actor_state(actor_state, ts.last(), initial_actor_state)
        record = (carry.timestep.observation, action, ts, extras)
        return match_varying(ActingState(env_state, ts, actor_state), carry), record

    next_state, (obs, action, ts, extras) = jax.lax.scan(step, state, step_keys(key, length))
    trajectory = Trajectory(
        observation=obs,
        action=action,
        reward=ts.reward,
        discount=ts.discount,
        truncated=truncation_flags(ts),
        next_observation=ts.extras["next_obs"],
        agent_extras=extras,
        actor_state=state.actor_state,
    )
    return next_state, trajectory, episode_totals(ts.last(), ts.extras)
