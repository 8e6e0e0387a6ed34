"""The R2D2 `Agent`: act epsilon-greedily through a recurrent Q network, learn from prioritised sequences.

Train state (`podrl.core.types.TrainState`):
  params       the `RecurrentQNetwork`'s flax params: all that actors need (each actor's epsilon is fixed).
  opt_state    `R2D2LearnerState` (`podrl.agents.off_policy.TargetLearnerState`): Adam state, the target
               network's params, gradient steps taken.
  update_step  int32 [], updates applied.
  shard_state  `podrl.agents.prioritised.PrioritisedReplay` of `Step`s (`buffer_size` env steps) with the
               actor's core state at every sequence start and the sequences' priorities; each learner
               shard fills and samples its own.

Actor state: `R2D2ActorState(carry, epsilon)`: the core's carry `[B, ...]` and each row's Ape-X epsilon
`[B]` (Horgan et al. 2018, "Distributed Prioritized Experience Replay", ICLR, sec. 4.1: actor i of N
explores with eps^(1 + alpha i / (N - 1))). `init_actor_state` reads i and N from the env columns the
layout names (`podrl.core.types.EnvColumns`), so a column keeps its epsilon across restarts and for
any split of the same envs over devices, threads and hosts; a row reset at an episode end keeps its
epsilon (the initial state is the row's own). `act` returns the carry it acted from as the extra
"core_state": the learner stores it at every sequence start (R2D2's stored state).

`update` is the replay frame `podrl.agents.off_policy.replay_update` with R2D2's pieces: it adds this
shard's `[T, B]` rollout to its replay (`prioritised.add`: sequences every `sequence_period` steps),
then (once the replay holds `min_fill` steps) takes `round(replay_ratio * T * B)` Adam steps
(`off_policy.target_sgd_step`), each on `batch_size` sequences drawn by priority, targets from the
target network (`podrl.agents.r2d2.losses`), and sets the drawn sequences' new priorities. Nothing here
mentions devices, threads or layouts.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from podrl.agents import prioritised
from podrl.agents.actor_critic import check_total_updates, count_params
from podrl.agents.cores import Carry, zero_carry
from podrl.agents.masking import action_mask, epsilon_greedy, masked_argmax
from podrl.agents.off_policy import (
    ReplayParts,
    ReplayPieces,
    TargetLearnerState,
    init_target_learner,
    replay_update,
    target_sgd_step,
)
from podrl.agents.optimizers import per_update_optimizer
from podrl.agents.q_learning import discrete_torso_input
from podrl.agents.r2d2.config import R2D2Config
from podrl.agents.r2d2.losses import R2D2Batch, Step, make_loss_fn
from podrl.agents.r2d2.networks import RecurrentQNetwork, bootstrap_q, q_unroll
from podrl.agents.returns import learner_rewards
from podrl.agents.unroll import reset_before
from podrl.core.types import Agent, EnvColumns, TrainState, Trajectory
from podrl.envs import observations
from podrl.envs.types import EnvSpec

Array = jax.Array

R2D2LearnerState = TargetLearnerState
"""R2D2's `TrainState.opt_state` (the same on every shard): Adam state, target params, gradient steps."""


class R2D2ActorState(NamedTuple):
    """`Agent.init_actor_state`'s value: the core carry `[B, ...]` and each row's epsilon float32 `[B]`."""

    carry: Carry
    epsilon: Array


R2D2Parts = ReplayParts
"""What R2D2's pure functions close over (`podrl.agents.off_policy.ReplayParts`: its config, `RecurrentQNetwork`,
...)."""


def make_network(config: R2D2Config, env_spec: EnvSpec) -> RecurrentQNetwork:
    """The config's `RecurrentQNetwork` for `env_spec`: ConfigError("env") unless actions are discrete,
    ConfigError("torso") for a torso that cannot read the observations (nothing is traced)."""
    obs_shape, num_actions = discrete_torso_input("r2d2", config.torso, env_spec, config.torso_per_key)
    return RecurrentQNetwork(obs_shape, num_actions, config.torso, config.hidden_sizes,
                             config.activation, config.layer_norm, config.core, config.core_size, config.dueling,
                             config.head_hidden)


def make_parts(config: R2D2Config, env_spec: EnvSpec, total_updates: int) -> R2D2Parts:
    """What the agent's functions close over, for `env_spec` and a run of `total_updates` updates."""
    total_updates = check_total_updates(total_updates)
    network = make_network(config, env_spec)
    optimizer, schedule = per_update_optimizer(config, total_updates, count_params(network, env_spec))
    grad_fn = jax.value_and_grad(make_loss_fn(config, network), has_aux=True)
    return R2D2Parts(config, network, optimizer, schedule, grad_fn, env_spec)


def make_agent(config: R2D2Config, env_spec: EnvSpec, total_updates: int) -> Agent:
    """The R2D2 agent for `env_spec` (discrete actions); `total_updates` updates make the run."""
    parts = make_parts(config, env_spec, total_updates)
    return Agent(
        init=functools.partial(_init, parts),
        init_actor_state=functools.partial(init_actor_state, parts),
        act=functools.partial(act, parts),
        act_greedy=functools.partial(act_greedy, parts),
        update=functools.partial(replay_update, replay_pieces(parts)),
        reshard_state=prioritised.refill,  # sequences follow each shard's env columns
    )


def apex_epsilons(columns: EnvColumns, epsilon: float, alpha: float) -> Array:
    """float32 `[B]`: eps_i = epsilon^(1 + alpha i / (N - 1)) for the columns' global indices i of N
    (Horgan et al. 2018, sec. 4.1); `epsilon` itself when N = 1."""
    spread = columns.index.astype(jnp.float32) / max(columns.total - 1, 1)
    return jnp.power(jnp.float32(epsilon), 1.0 + alpha * spread)


def init_actor_state(parts: R2D2Parts, batch_size: int, columns: EnvColumns | None = None) -> R2D2ActorState:
    """`Agent.init_actor_state`: the zero carry and the rows' Ape-X epsilons (`columns` None: the rows are
    columns 0 .. B-1 of B, as for evaluation, which acts greedily)."""
    cfg = parts.config
    if columns is None:
        columns = EnvColumns(jnp.arange(batch_size, dtype=jnp.int32), batch_size)
    epsilon = apex_epsilons(columns, cfg.epsilon, cfg.epsilon_alpha)
    return R2D2ActorState(zero_carry(cfg.core, cfg.core_size, batch_size), epsilon)


def act(parts: R2D2Parts, params, actor_state: R2D2ActorState, observation: Array, key: Array):
    """`Agent.act`: each row epsilon-greedy with its own epsilon; extra "core_state" (the carry acted from)."""
    q, carry = parts.network.apply(params, observation, actor_state.carry)
    action = epsilon_greedy(key, q, actor_state.epsilon, action_mask(observation))
    return action, {"core_state": actor_state.carry}, R2D2ActorState(carry, actor_state.epsilon)


def act_greedy(parts: R2D2Parts, params, actor_state: R2D2ActorState, observation: Array):
    """`Agent.act_greedy`: argmax_a Q(o, a) `[B]` over the legal actions, with the core carried on, the
    evaluation policy."""
    q, carry = parts.network.apply(params, observation, actor_state.carry)
    return masked_argmax(q, action_mask(observation)), actor_state._replace(carry=carry)


def example_step(env_spec: EnvSpec) -> Step:
    """One stored `Step`'s shapes and dtypes for `env_spec` (discrete actions)."""
    obs = observations.structs(env_spec.observation)
    scalar = jax.ShapeDtypeStruct((), jnp.float32)
    return Step(obs, jax.ShapeDtypeStruct((), jnp.int32), scalar, scalar, jax.ShapeDtypeStruct((), jnp.bool_), obs)


def _init(parts: R2D2Parts, key: Array, env_spec: EnvSpec) -> TrainState:
    """Fresh params, Adam state, the target network as a copy, an empty replay."""
    cfg = parts.config
    params = parts.network.init(key, observations.zeros(env_spec.observation, (1,)))
    carry = jax.tree.map(lambda x: x[0], zero_carry(cfg.core, cfg.core_size, 1))
    buffer = prioritised.init(cfg.buffer_size, example_step(parts.env_spec), cfg.sequence_period, carry)
    return TrainState(params, init_target_learner(parts.optimizer.init(params), params), jnp.zeros((), jnp.int32),
                      buffer)


def _items(parts: R2D2Parts, traj: Trajectory) -> prioritised.SequenceItems:
    """The rollout's `[T, B]` `Step`s (rewards clipped) and the carries the actor had at its steps
    0, sequence_period, ... (the starts of the sequences it begins)."""
    reward = learner_rewards(traj.reward, parts.config.reward_clip, 1.0)
    steps = Step(traj.observation, traj.action.astype(jnp.int32), reward, traj.discount, traj.truncated,
                 traj.next_observation)
    period = parts.config.sequence_period
    return prioritised.SequenceItems(steps, jax.tree.map(lambda x: x[::period], traj.agent_extras["core_state"]))


def _batch(parts: R2D2Parts, columns: int, buffer: prioritised.PrioritisedReplay, key: Array, params,
           target_params) -> R2D2Batch:
    """`batch_size` sequences drawn by priority from `buffer` (fed rollouts of `columns` envs), time-major,
    with their importance weights and the target network's bootstrap Q values."""
    del params  # the online network's values are the loss's
    cfg, network = parts.config, parts.network
    drawn = prioritised.sample(buffer, key, cfg.batch_size, cfg.window, cfg.sequence_period, columns)
    window = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), drawn.window)  # [W, N, ...]
    q, next_carry = q_unroll(network, target_params, drawn.start_state, window.observation,
                             reset_before(window.episode_end))
    burn = cfg.burn_in
    target_q = bootstrap_q(network, target_params, q[burn:], jax.tree.map(lambda x: x[burn:], next_carry),
                           jax.tree.map(lambda x: x[burn:], window.next_observation), window.truncated[burn:])
    weight = prioritised.importance_weights(drawn.probability, cfg.importance_exponent)
    return R2D2Batch(window, drawn.start_state, weight, drawn.index, target_q)


def _sgd_step(parts: R2D2Parts, columns: int, buffer: prioritised.PrioritisedReplay, carry, key: Array):
    """One Adam step on `batch_size` sequences, the target update and the drawn sequences' new priorities
    (`off_policy.target_sgd_step`); a `lax.scan` body over `((params, R2D2LearnerState), Priorities)`."""
    return target_sgd_step(parts, functools.partial(_batch, parts, columns), buffer, carry, key)


def _hand_on(train_state: TrainState, params, traj: Trajectory):
    """The learned params as they are; no rollout metric."""
    del train_state, traj
    return params, {}


def replay_pieces(parts: R2D2Parts) -> ReplayPieces:
    """R2D2's pieces of `podrl.agents.off_policy.replay_update`. Its metrics: the loss's (0 before learning
    starts), learning, replay_fill."""
    cfg = parts.config
    add = functools.partial(prioritised.add, window=cfg.window, period=cfg.sequence_period,
                            priority_exponent=cfg.priority_exponent)
    return ReplayPieces(cfg, cfg.min_fill, functools.partial(_items, parts),
                        lambda columns: functools.partial(_sgd_step, parts, columns), lambda params: params, _hand_on,
                        parts.learning_rate, add)
