"""Contracts between agents and layouts: `Trajectory`, `TrainState`, `Agent`.

An agent is a NamedTuple of pure functions and never mentions devices,
threads or layouts; Anakin and Sebulba differ only in how they produce the
`Trajectory` that `Agent.update` consumes.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol, TypeAlias

import jax
import jax.numpy as jnp

from podrl.envs.types import EnvSpec

Array: TypeAlias = jax.Array
PRNGKey: TypeAlias = jax.Array
Params: TypeAlias = Any
ActorState: TypeAlias = Any  # a pytree with leading batch dim [B, ...]; () for feed-forward
Metrics: TypeAlias = dict[str, Array]


class Trajectory(NamedTuple):
    """A time-major rollout of `T` steps from `B` environments.

    Attributes:
      observation: `[T, B, *obs]`, o_t, the input of the action at t; a pytree of such leaves for a
        nested observation (`podrl.envs.observations`), its legal-action mask in the leaf `action_mask`.
      action: `[T, B, *act]`, a_t.
      reward: `[T, B]` float32, r_{t+1}, received for a_t.
      discount: `[T, B]` float32, 0 if the episode terminated at t+1, else 1.
      truncated: `[T, B]` bool, the episode was cut (time limit) at t+1; then
        discount is 1 and `next_observation` is the state to bootstrap from.
      next_observation: `[T, B, *obs]`, o_{t+1} before any auto-reset. Where
        the episode continues it equals `observation[t + 1]`.
      agent_extras: dict of `[T, B, ...]`, what `Agent.act` returned at t
        (e.g. "log_prob", "value").
      actor_state: the actor state before step 0, `[B, ...]` (() if none).
    """

    observation: Array
    action: Array
    reward: Array
    discount: Array
    truncated: Array
    next_observation: Array
    agent_extras: dict[str, Array]
    actor_state: ActorState

    @property
    def episode_end(self) -> Array:
        """`[T, B]` bool: an episode ended at t+1 (terminated or truncated)."""
        return (self.discount == 0.0) | self.truncated

    def validate(self) -> None:
        """Asserts the documented shapes (trace time, cheap)."""
        t, b = self.reward.shape
        for name in ("discount", "truncated"):
            got = getattr(self, name).shape
            if got != (t, b):
                raise ValueError(f"Trajectory.{name} has shape {got}, expected {(t, b)}")
        for name in ("observation", "action", "next_observation"):
            for leaf in jax.tree.leaves(getattr(self, name)):  # a nested observation: every leaf
                if leaf.shape[:2] != (t, b):
                    raise ValueError(f"Trajectory.{name} leads with {leaf.shape[:2]}, expected {(t, b)}")


class TrainState(NamedTuple):
    """What an agent learns. `params` is what actors need; the rest stays on learners.

    `params` may carry actor-side schedule values beside the network weights, e.g. the
    value-based agents' `{"network": ..., "epsilon": float32 []}` (`podrl.agents.q_learning`):
    layouts publish params to actors as a whole, so actors act with the values of the
    params version they hold. `opt_state` need not cover all of `params`.

    `params`, `opt_state` and `update_step` are the same on every learner shard.
    `shard_state` is per learner shard (e.g. a replay ring buffer): each shard keeps
    its own, never averaged; `init` returns and `update` sees only its shard's, with
    its own shapes (the layouts add the shard axis, see `podrl.core.learner_state`).
    `hyperparams` holds the agent-config fields a population sweeps (`podrl.core.population`),
    as arrays, so one compiled program serves members with different values; `init`
    leaves it `()` and `update` then reads the config's Python constants.
    """

    params: Params
    opt_state: Any
    update_step: Array  # int32 [], number of `update` calls applied
    shard_state: Any = ()  # per-learner-shard pytree; () for agents without one
    hyperparams: Any = ()  # {field: float32 []} swept hyperparameters (a population), read by update; () = none


class EnvColumns(NamedTuple):
    """Which of the run's env columns the rows of an actor batch are: what a layout tells
    `Agent.init_actor_state` (an agent whose actors differ by column reads it, e.g. R2D2's Ape-X
    epsilons; every other agent ignores it). Built outside jit (Sebulba) or inside the layout's
    program (Anakin: `index` traced), never passed through a jitted call.

    Attributes:
      index: int32 `[B]`, each row's global env index in `[0, total)`. Anakin shard d of D
        holds rows `d * E / D + [0, E / D)` (E envs per seed / member); Sebulba's actor thread j
        of process p holds `((p * threads) + j) * envs_per_thread + [0, envs_per_thread)`. So a
        column's index is the same across restarts and for any split of the same envs over
        devices, threads and hosts.
      total: int, the env columns of the whole run (E in Anakin; processes x threads x envs per
        thread in Sebulba).
    """

    index: Array
    total: int


def env_columns(first: Any, count: int, total: int) -> EnvColumns:
    """`EnvColumns` of `count` consecutive columns from global index `first` (an int or a traced int32 [])."""
    return EnvColumns(first + jnp.arange(count, dtype=jnp.int32), int(total))


def no_actor_state(batch_size: int, columns: EnvColumns | None = None) -> tuple[()]:
    """`Agent.init_actor_state` of a feed-forward agent: `()`."""
    del batch_size, columns
    return ()


class Agent(NamedTuple):
    """A reinforcement-learning agent as pure functions.

    init(key, env_spec) -> TrainState
    init_actor_state(batch_size, columns=None) -> ActorState, `[B, ...]` (() if feed-forward);
        the layouts reset a row to this value when its episode ends. `columns` (`EnvColumns`)
        says which global env columns the rows are; the training layouts always pass it,
        evaluation and tools may not (None), and an agent must accept both.
    act(params, actor_state, observation [B, *obs], key)
        -> (action [B, *act], extras {name: [B, ...]}, actor_state)
    act_greedy(params, actor_state, observation [B, *obs])
        -> (action [B, *act], actor_state): the evaluation policy.
    update(train_state, trajectory [T, B], key) -> (train_state, metrics {name: []}).
        Runs inside the layout's data-parallel program on the local shard of the
        batch; it takes gradients with `podrl.core.parallel.learner_value_and_grad`
        (a plain `jax.value_and_grad` there sums them over the shards; `podrl.testing`
        checks it). Its metrics are this shard's numbers: the layout averages them over
        the learner shards (`podrl.core.parallel.learner_metrics`).
        `train_state.shard_state` is this shard's own (e.g. its replay buffer).
    reshard_state(shard_states [D, ...], count) -> (shard_states [count, ...], counts {name: int}):
        the `shard_state`s of D learner shards, as host arrays, moved onto `count` shards (a
        resume on another learner-shard count), with what was kept and dropped (e.g.
        {"kept": items, "dropped": items}). None: such a resume restarts every shard's state.
    """

    init: Callable[[PRNGKey, EnvSpec], TrainState]
    init_actor_state: Callable[..., ActorState]  # (batch_size, columns: EnvColumns | None = None)
    act: Callable[[Params, ActorState, Array, PRNGKey], tuple[Array, dict[str, Array], ActorState]]
    act_greedy: Callable[[Params, ActorState, Array], tuple[Array, ActorState]]
    update: Callable[[TrainState, Trajectory, PRNGKey], tuple[TrainState, Metrics]]
    reshard_state: Callable[[Any, int], tuple[Any, dict[str, int]]] | None = None


class AgentConfig(Protocol):
    """A frozen agent config: validates what depends on the layout, builds the agent."""

    def check_batch(self, rollout_length: int, envs_per_shard: int) -> None:
        """Raises `podrl.run.config.ConfigError` naming the field if the shard batch doesn't fit."""
        ...

    def make_agent(self, env_spec: EnvSpec, total_updates: int) -> Agent:
        """The agent; `total_updates` calls of `update` make the whole run (for schedules)."""
        ...


def reset_finished_actor_state(
    actor_state: ActorState, episode_end: Array, initial: ActorState
) -> ActorState:
    """Rows of `actor_state` whose episode ended (`episode_end` `[B]`) go back to `initial`."""

    def select(init_leaf, leaf):
        mask = episode_end.reshape(episode_end.shape + (1,) * (leaf.ndim - 1))
        return jnp.where(mask, init_leaf, leaf)

    return jax.tree.map(select, initial, actor_state)
