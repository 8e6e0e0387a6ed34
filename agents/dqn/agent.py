"""The DQN `Agent`: act epsilon-greedily, learn off-policy from a replay buffer per learner shard.

Train state (`podrl.core.types.TrainState`):
  params       `{"network": ..., "epsilon": f32 []}` (`podrl.agents.q_learning`): what actors need.
  opt_state    `DQNLearnerState`: Adam state, target network params, gradient steps taken.
  update_step  int32 [], updates applied.
  shard_state  `podrl.agents.replay.ReplayBuffer` of n-step `podrl.agents.replay.Transition`s,
               `buffer_size` of them; each learner shard fills and samples its own.

`update` runs on one learner shard inside the layout's `shard_map`: it adds this
shard's `[T, B]` rollout to its buffer as `T * B` n-step transitions, then (once the
buffer holds `min_fill`) takes `round(replay_ratio * T * B)` Adam steps, each on
`batch_size` uniform samples with targets from the target network
(`podrl.agents.dqn.losses`; the add and the gate: `podrl.agents.off_policy.replay_and_learn`), gradients averaged across learners by
`podrl.agents.actor_critic.sgd_step` (`podrl.core.parallel.learner_value_and_grad`). Nothing
here mentions devices, threads or layouts.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from podrl.agents import replay
from podrl.agents.actor_critic import sgd_step
from podrl.agents.dqn.config import DQNConfig
from podrl.agents.dqn.losses import DQNBatch, batched_q_learning_target, make_loss_fn
from podrl.agents.off_policy import per_update_optimizer, replay_and_learn, set_learning_rate, target_update
from podrl.agents.q_learning import QParts, init_train_state, next_params, q_agent, q_values
from podrl.agents.returns import learner_rewards
from podrl.envs.types import EnvSpec
from podrl.core.types import Agent, Metrics, TrainState, Trajectory

Array = jax.Array


class DQNLearnerState(NamedTuple):
    """DQN's `TrainState.opt_state`: the learner-only state besides the buffer (the same on every shard).

    Attributes:
      optimizer: the Adam (with grad clipping) state over `params["network"]`.
      target: the target network's params, a tree like `params["network"]`.
      sgd_steps: int32 `[]`, gradient steps taken (drives `target_update_period`).
    """

    optimizer: Any
    target: Any
    sgd_steps: Array


def make_optimizer(config: DQNConfig, total_updates: int,
                   num_params: int | None = None) -> tuple[optax.GradientTransformation, Any]:
    """`(optimizer, schedule)`: global-norm clip then Adam, annealed per update
    (`podrl.agents.off_policy.per_update_optimizer`: the number of gradient steps per update depends
    on the rollout shape)."""
    return per_update_optimizer(config, total_updates, num_params)


def make_agent(config: DQNConfig, env_spec: EnvSpec, total_updates: int) -> Agent:
    """The DQN agent for `env_spec` (discrete actions: ConfigError("env") otherwise);
    `total_updates` calls of `update` decay epsilon over the first `epsilon_decay_fraction`."""
    return q_agent("dqn", config, env_spec, total_updates, make_optimizer, make_loss_fn, _update, init=_init)


def _init(parts: QParts, key: Array, env_spec: EnvSpec) -> TrainState:
    """`init_train_state`'s params and Adam state, the target network as a copy, an empty buffer."""
    base = init_train_state(parts, key, env_spec)
    learner = DQNLearnerState(base.opt_state, base.params["network"], jnp.zeros((), jnp.int32))
    buffer = replay.init(parts.config.buffer_size, replay.example_transition(env_spec))
    return base._replace(opt_state=learner, shard_state=buffer)


def _targets(parts: QParts, network_params, target_params, sample: replay.Transition) -> Array:
    """y `[N]` for sampled transitions: the target network values the bootstrap observation's
    action chosen by the online network (Double DQN) or by itself (DQN)."""
    q_value = q_values(parts, target_params, sample.next_observation)  # [N, A]
    q_selector = q_values(parts, network_params, sample.next_observation) if parts.config.double_dqn else q_value
    return batched_q_learning_target(sample.reward, sample.discount, q_value, q_selector)


def _sgd_step(parts: QParts, buffer: replay.ReplayBuffer, carry, key: Array):
    """One Adam step on `batch_size` transitions sampled from `buffer`; a `lax.scan` body over
    `(network params, DQNLearnerState)`."""
    network_params, learner = carry
    sample_key, step_key = jax.random.split(key)
    sample = replay.sample(buffer, sample_key, parts.config.batch_size)
    target = _targets(parts, network_params, learner.target, sample)
    batch = DQNBatch(sample.observation, sample.action.astype(jnp.int32), target)
    (network_params, optimizer), metrics = sgd_step(parts, step_key, (network_params, learner.optimizer), batch)
    sgd_steps = learner.sgd_steps + 1
    target_params = target_update(learner.target, network_params, sgd_steps, parts.config.target_update_period,
                                  parts.config.target_tau)
    return (network_params, DQNLearnerState(optimizer, target_params, sgd_steps)), metrics


def _update(parts: QParts, train_state: TrainState, traj: Trajectory, key: Array) -> tuple[TrainState, Metrics]:
    """Adds this shard's trajectory `[T, B]` to its buffer, then `sgd_steps(T, B)` Adam steps
    once the buffer holds `min_fill`. Metrics: q_loss, q_mean, target_mean (0 before learning
    starts), learning (1 once it has), replay_fill, epsilon (the one this rollout used), learning_rate."""
    cfg = parts.config
    traj.validate()
    t, b = traj.reward.shape
    cfg.check_batch(t, b)
    reward = learner_rewards(traj.reward, cfg.reward_clip, cfg.reward_scale)
    learning_rate = parts.learning_rate(train_state.update_step)
    optimizer = set_learning_rate(train_state.opt_state.optimizer, learning_rate)
    carry = (train_state.params["network"], train_state.opt_state._replace(optimizer=optimizer))
    buffer, (network_params, learner), metrics, _ = replay_and_learn(
        train_state.shard_state, replay.transitions(traj, cfg.n_step, cfg.gamma, reward), train_state.update_step,
        cfg.min_fill, cfg.sgd_steps(t, b), functools.partial(_sgd_step, parts), carry, key)
    metrics = {**metrics, "epsilon": train_state.params["epsilon"],
               "learning_rate": jnp.asarray(learning_rate, jnp.float32)}
    params = next_params(parts, network_params, train_state.update_step)
    return TrainState(params, learner, train_state.update_step + 1, buffer), metrics
