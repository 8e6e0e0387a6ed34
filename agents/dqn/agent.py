"""The DQN `Agent`: act epsilon-greedily, learn off-policy from a replay buffer per learner shard.

Train state (`podrl.core.types.TrainState`):
  params       `{"network": ..., "epsilon": f32 []}` (`podrl.agents.q_learning`): what actors need.
  opt_state    `DQNLearnerState` (`podrl.agents.off_policy.TargetLearnerState`): Adam state, target
               network params, gradient steps taken.
  update_step  int32 [], updates applied.
  shard_state  `podrl.agents.replay.ReplayBuffer` of n-step `podrl.agents.replay.Transition`s,
               `buffer_size` of them; each learner shard fills and samples its own (`prioritised`:
               a `podrl.agents.prioritised.PrioritisedReplay` of them, one-step sequences, Ape-X).

`update` is the replay frame `podrl.agents.off_policy.replay_update` with DQN's pieces: it adds this
shard's `[T, B]` rollout to its buffer as `T * B` n-step transitions, then (once the buffer holds
`min_fill`) takes `round(replay_ratio * T * B)` Adam steps (`off_policy.target_sgd_step`), each on
`batch_size` uniform samples (`prioritised`: drawn by priority, importance-weighted, their new
priorities |delta|^alpha set after the step) with targets from the target network (`podrl.agents.dqn.losses`),
gradients averaged across learners by `podrl.agents.actor_critic.sgd_step`
(`podrl.core.parallel.learner_value_and_grad`). Nothing here mentions devices, threads or layouts.
"""

from __future__ import annotations

import functools
import operator

import jax
import jax.numpy as jnp

from podrl.agents import prioritised, replay
from podrl.agents.dqn.config import DQNConfig
from podrl.agents.dqn.losses import DQNBatch, batched_q_learning_target, make_loss_fn
from podrl.agents.masking import action_mask
from podrl.agents.off_policy import (
    ReplayPieces,
    TargetLearnerState,
    init_target_learner,
    replay_update,
    target_sgd_step,
)
from podrl.agents.optimizers import moved_here, per_update_optimizer
from podrl.agents.q_learning import QParts, init_train_state, next_params, q_agent, q_values
from podrl.agents.returns import learner_rewards
from podrl.core.types import Agent, Metrics, TrainState, Trajectory
from podrl.envs.types import EnvSpec

Array = jax.Array

DQNLearnerState = TargetLearnerState
"""DQN's `TrainState.opt_state`: Adam state over `params["network"]`, the target network, gradient steps."""

__getattr__ = moved_here(__name__, {"make_optimizer": "per_update_optimizer"})

def make_agent(config: DQNConfig, env_spec: EnvSpec, total_updates: int) -> Agent:
    """The DQN agent for `env_spec` (discrete actions: ConfigError("env") otherwise);
    `total_updates` calls of `update` decay epsilon over the first `epsilon_decay_fraction`."""
    return q_agent("dqn", config, env_spec, total_updates, per_update_optimizer, make_loss_fn, _update, init=_init,
                   reshard_state=prioritised.refill if config.prioritised else replay.redistribute)


def _init(parts: QParts, key: Array, env_spec: EnvSpec) -> TrainState:
    """`init_train_state`'s params and Adam state, the target network as a copy, an empty buffer
    (a `prioritised.PrioritisedReplay` of single transitions when `prioritised`)."""
    base = init_train_state(parts, key, env_spec)
    example = replay.example_transition(env_spec)
    if parts.config.prioritised:
        buffer = prioritised.init(parts.config.buffer_size, example, 1)
    else:
        buffer = replay.init(parts.config.buffer_size, example)
    return base._replace(opt_state=init_target_learner(base.opt_state, base.params["network"]), shard_state=buffer)


def _targets(parts: QParts, network_params, target_params, sample: replay.Transition) -> Array:
    """y `[N]` for sampled transitions: the target network values the bootstrap observation's
    action chosen by the online network (Double DQN) or by itself (DQN), among its legal actions."""
    q_value = q_values(parts, target_params, sample.next_observation)  # [N, A]
    q_selector = q_values(parts, network_params, sample.next_observation) if parts.config.double_dqn else q_value
    return batched_q_learning_target(sample.reward, sample.discount, q_value, q_selector,
                                     action_mask(sample.next_observation))


def _batch(parts: QParts, columns: int, buffer, key: Array, network_params, target_params) -> DQNBatch:
    """`batch_size` transitions sampled from `buffer`, with their targets `[N]`: uniformly, or by priority
    from a prioritised replay (fed rollouts of `columns` envs) with their importance weights."""
    cfg = parts.config
    if not cfg.prioritised:
        sample = replay.sample(buffer, key, cfg.batch_size)
        target = _targets(parts, network_params, target_params, sample)
        return DQNBatch(sample.observation, sample.action.astype(jnp.int32), target)
    drawn = prioritised.sample(buffer, key, cfg.batch_size, 1, 1, columns)
    sample = jax.tree.map(lambda x: x[:, 0], drawn.window)
    target = _targets(parts, network_params, target_params, sample)
    weight = prioritised.importance_weights(drawn.probability, cfg.importance_exponent)
    return DQNBatch(sample.observation, sample.action.astype(jnp.int32), target, weight, drawn.index)


def _sgd_step(parts: QParts, columns: int, buffer, carry, key: Array):
    """One Adam step on `batch_size` transitions sampled from `buffer`, then the target update
    (`off_policy.target_sgd_step`; prioritised: the drawn transitions' new priorities too); a `lax.scan`
    body over `(network params, DQNLearnerState)` (prioritised: with the replay's `Priorities`)."""
    return target_sgd_step(parts, functools.partial(_batch, parts, columns), buffer, carry, key)


def _items(parts: QParts, traj: Trajectory):
    """The `T * B` n-step transitions of a `[T, B]` rollout, rewards clipped and scaled: flattened
    time-major, or (prioritised) `[T, B]` as `prioritised.SequenceItems` of one-step sequences."""
    cfg = parts.config
    reward = learner_rewards(traj.reward, cfg.reward_clip, cfg.reward_scale)
    items = replay.transitions(traj, cfg.n_step, cfg.gamma, reward)
    if not cfg.prioritised:
        return items
    t, b = traj.reward.shape
    return prioritised.SequenceItems(jax.tree.map(lambda x: x.reshape((t, b) + x.shape[1:]), items), ())


def _hand_on(parts: QParts, train_state: TrainState, network_params, traj: Trajectory):
    """The next params (epsilon for the next rollout) and metric "epsilon" (the one this rollout used)."""
    del traj
    return next_params(parts, network_params, train_state.update_step), {"epsilon": train_state.params["epsilon"]}


def _update(parts: QParts, train_state: TrainState, traj: Trajectory, key: Array) -> tuple[TrainState, Metrics]:
    """`podrl.agents.off_policy.replay_update` with DQN's pieces. Metrics: q_loss, q_mean, target_mean
    (0 before learning starts), learning, replay_fill, epsilon (the one this rollout used), learning_rate."""
    cfg = parts.config
    add = functools.partial(prioritised.add, window=1, period=1, priority_exponent=cfg.priority_exponent)
    pieces = ReplayPieces(cfg, cfg.min_fill, functools.partial(_items, parts),
                          lambda columns: functools.partial(_sgd_step, parts, columns),
                          operator.itemgetter("network"), functools.partial(_hand_on, parts), parts.learning_rate,
                          add if cfg.prioritised else replay.add)
    return replay_update(pieces, train_state, traj, key)
