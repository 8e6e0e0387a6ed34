"""The PQN `Agent`: act epsilon-greedily, update by minibatch SGD on Q(lambda) targets.

`update` runs on one learner shard inside the layout's `shard_map`. It computes
max_a Q(next_observation) `[T, B]` with the params before the update, the Q(lambda)
targets `[T, B]` (`podrl.agents.returns.batched_q_lambda_returns`), then `num_epochs` passes of
`num_minibatches` shuffled minibatches of the `T * B` transitions, with the SGD step of
`podrl.agents.actor_critic.sgd_step` on `params["network"]` (gradients averaged across learners
by `learner_value_and_grad`). The params it hands on carry the next epsilon
(`podrl.agents.q_learning`). Nothing here mentions devices, threads or layouts.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from podrl.agents.actor_critic import finish_update, shuffled_epoch
from podrl.agents.masking import action_mask, masked_max
from podrl.agents.optimizers import make_optimizer
from podrl.agents.pqn.config import PQNConfig
from podrl.agents.pqn.losses import PQNBatch, make_loss_fn
from podrl.agents.q_learning import QParts, next_params, q_agent, q_values
from podrl.agents.returns import batched_q_lambda_returns, learner_rewards
from podrl.core.types import Agent, Metrics, TrainState, Trajectory
from podrl.envs.types import EnvSpec

Array = jax.Array

__all__ = ["make_agent", "q_lambda_batch"]


def make_agent(config: PQNConfig, env_spec: EnvSpec, total_updates: int) -> Agent:
    """The PQN agent for `env_spec` (discrete actions); `total_updates` calls of `update`
    decay epsilon over the first `epsilon_decay_fraction` of them and anneal lr to 0."""
    return q_agent("pqn", config, env_spec, total_updates, make_optimizer, make_loss_fn, _update)


def q_lambda_batch(parts: QParts, network_params, traj: Trajectory) -> PQNBatch:
    """The `[T, B]` trajectory as a flat `N = T * B` batch with its Q(lambda) targets."""
    cfg = parts.config
    q_next = masked_max(q_values(parts, network_params, traj.next_observation),  # [T, B], legal actions only
                        action_mask(traj.next_observation))
    target = batched_q_lambda_returns(
        r_t=learner_rewards(traj.reward, cfg.reward_clip, cfg.reward_scale),
        discount_t=cfg.gamma * traj.discount, q_t=jax.lax.stop_gradient(q_next),
        episode_end_t=traj.episode_end, lambda_=cfg.q_lambda,
    )
    batch = PQNBatch(traj.observation, traj.action.astype(jnp.int32), target)
    n = target.size
    return jax.tree.map(lambda x: x.reshape((n,) + x.shape[2:]), batch)


def _update(parts: QParts, train_state: TrainState, traj: Trajectory, key: Array) -> tuple[TrainState, Metrics]:
    """num_epochs x num_minibatches Adam steps on this shard's trajectory `[T, B]`; metrics
    q_loss, q_mean, target_mean (meaned over steps and learners), learning_rate and epsilon
    (the one this rollout was acted with)."""
    traj.validate()
    parts.config.check_batch(*traj.reward.shape)
    network_params = train_state.params["network"]
    batch = q_lambda_batch(parts, network_params, traj)
    keys = jax.random.split(key, parts.config.num_epochs)
    (network_params, opt_state), metrics = jax.lax.scan(
        functools.partial(shuffled_epoch, parts, batch), (network_params, train_state.opt_state), keys
    )
    epsilon = train_state.params["epsilon"]  # what the actors used for this rollout
    params = next_params(parts, network_params, train_state.update_step)
    train_state, metrics = finish_update(parts, train_state, params, opt_state, metrics)
    metrics["epsilon"] = jnp.asarray(epsilon, jnp.float32)
    return train_state, metrics
