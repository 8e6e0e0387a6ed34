"""The PPO `Agent`: act with the actor-critic, update with clipped-surrogate SGD.

`update` runs on one learner shard inside the layout's `shard_map`; it reduces
across shards only through `podrl.parallel`: `learner_value_and_grad` averages
gradients once per minibatch, `mean_across_learners` averages metrics once per
update. Acting, init and the SGD step are `agents.actor_critic`'s.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import optax

from agents.actor_critic import (
    Parts, actor_critic_agent, clipped_flat_optimizer, finish_update, lr_schedule, sgd_step,
)
from agents.networks import ActorCritic
from agents.ppo.config import PPOConfig
from agents.ppo.losses import PPOBatch, make_loss_fn
from agents.returns import batched_gae, learner_rewards
from envs.types import EnvSpec
from podrl.types import Agent, Metrics, TrainState, Trajectory

Array = jax.Array


def make_optimizer(config: PPOConfig, total_updates: int,
                   num_params: int | None = None) -> tuple[optax.GradientTransformation, Any]:
    """`(optimizer, schedule)`: global-norm clip then Adam, flattened for small models
    (`num_params`, see `agents.actor_critic.clipped_flat_optimizer`)."""
    schedule = lr_schedule(config.learning_rate, config.anneal_lr, config.num_optimizer_steps(total_updates))
    return clipped_flat_optimizer(config.max_grad_norm, optax.adam(schedule, eps=config.adam_eps), num_params), schedule


def make_agent(config: PPOConfig, env_spec: EnvSpec, total_updates: int) -> Agent:
    """The PPO agent for `env_spec`; `total_updates` calls of `update` anneal lr to 0."""
    return actor_critic_agent(config, env_spec, total_updates, make_optimizer, make_loss_fn, _update)


def _flat_batch(parts: Parts, params, traj: Trajectory) -> PPOBatch:
    """GAE on the `[T, B]` trajectory, then flattened to `N = T * B` transitions."""
    cfg = parts.config
    for name in ("log_prob", "value"):
        if name not in traj.agent_extras:
            raise ValueError(f"Trajectory.agent_extras lacks {name!r}; PPO's act records it")
    value = traj.agent_extras["value"]
    next_value = parts.network.apply(params, traj.next_observation, method=ActorCritic.value)
    advantage, target = batched_gae(
        r_t=learner_rewards(traj.reward, cfg.reward_clip, cfg.reward_scale), discount_t=traj.discount,
        episode_end_t=traj.episode_end, v_tm1=value, v_t=next_value, gamma=cfg.gamma, lambda_=cfg.gae_lambda,
    )
    batch = PPOBatch(traj.observation, traj.action, traj.agent_extras["log_prob"], advantage, target, value)
    n = traj.reward.size
    return jax.tree.map(lambda x: x.reshape((n,) + x.shape[2:]), batch)


def _epoch(parts: Parts, batch: PPOBatch, carry, key: Array):
    """One pass over the `N`-transition batch in `num_minibatches` shuffled minibatches `[N / m]`."""
    m = parts.config.num_minibatches
    perm = jax.random.permutation(key, batch.advantage.shape[0])
    minibatches = jax.tree.map(lambda x: x[perm].reshape((m, -1) + x.shape[1:]), batch)
    return jax.lax.scan(functools.partial(sgd_step, parts, key), carry, minibatches)


def _update(parts: Parts, train_state: TrainState, traj: Trajectory, key: Array) -> tuple[TrainState, Metrics]:
    """num_epochs x num_minibatches Adam steps on this shard's trajectory."""
    cfg = parts.config
    traj.validate()
    parts.config.check_batch(*traj.reward.shape)
    batch = _flat_batch(parts, train_state.params, traj)
    keys = jax.random.split(key, cfg.num_epochs)
    (params, opt_state), metrics = jax.lax.scan(
        functools.partial(_epoch, parts, batch), (train_state.params, train_state.opt_state), keys
    )
    return finish_update(parts, train_state, params, opt_state, metrics)
