"""The PPO `Agent`: act with the actor-critic, update with clipped-surrogate SGD.

`update` runs on one learner shard inside the layout's `shard_map`; it reduces
across shards only through `podrl.core.parallel`: `learner_value_and_grad` averages
gradients once per minibatch; the metrics it returns are this shard's, which the
layout averages (`podrl.core.parallel.learner_metrics`). Acting, init and the SGD step are
`podrl.agents.actor_critic`'s.

With a recurrent core (`config.core`) the batch stays time-major: minibatches are whole
env columns `[T, B / m]`, and the loss re-unrolls the core over each (`podrl.agents.unroll`);
feed-forward PPO shuffles the `T * B` transitions.
"""

from __future__ import annotations

import functools

import jax

from podrl.agents.actor_critic import (
    Parts,
    actor_critic_agent,
    finish_update,
    for_member,
    sgd_step,
    shuffled_epoch,
)
from podrl.agents.cores import is_recurrent
from podrl.agents.optimizers import moved_here
from podrl.agents.ppo.config import PPOConfig
from podrl.agents.ppo.losses import PPOBatch, make_loss_fn
from podrl.agents.returns import batched_gae, learner_rewards
from podrl.agents.unroll import env_minibatches, next_values
from podrl.core.types import Agent, Metrics, TrainState, Trajectory
from podrl.envs.types import EnvSpec

Array = jax.Array

__all__ = ["make_agent"]
__getattr__ = moved_here(__name__, {"make_optimizer": "make_optimizer"})


def make_agent(config: PPOConfig, env_spec: EnvSpec, total_updates: int) -> Agent:
    """The PPO agent for `env_spec`; `total_updates` calls of `update` anneal lr to 0. With
    `config.normalize_observations` it acts and learns on normalised observations (`podrl.agents.obs_norm`)."""
    return config.with_obs_norm(actor_critic_agent(config, env_spec, total_updates, make_loss_fn, _update))


def _gae_batch(parts: Parts, params, traj: Trajectory) -> PPOBatch:
    """GAE on the `[T, B]` trajectory: a `[T, B]` PPOBatch (with a core, plus the sequence fields);
    gamma and lambda are `parts.hyperparams`'."""
    cfg, hp = parts.config, parts.hyperparams
    for name in ("log_prob", "value"):
        if name not in traj.agent_extras:
            raise ValueError(f"Trajectory.agent_extras lacks {name!r}; PPO's act records it")
    value = traj.agent_extras["value"]
    next_value = next_values(parts.network, params, traj)
    advantage, target = batched_gae(
        r_t=learner_rewards(traj.reward, cfg.reward_clip, cfg.reward_scale), discount_t=traj.discount,
        episode_end_t=traj.episode_end, v_tm1=value, v_t=next_value, gamma=hp.gamma, lambda_=hp.gae_lambda,
    )
    batch = PPOBatch(traj.observation, traj.action, traj.agent_extras["log_prob"], advantage, target, value)
    if is_recurrent(parts.network):
        return batch._replace(actor_state=traj.actor_state, episode_end=traj.episode_end)
    return batch


def _flatten(batch: PPOBatch) -> PPOBatch:
    """`[T, B]` -> `N = T * B` transitions (feed-forward)."""
    n = batch.advantage.size
    return jax.tree.map(lambda x: x.reshape((n,) + x.shape[2:]), batch)


def _sequence_epoch(parts: Parts, batch: PPOBatch, carry, key: Array):
    """One pass over the `[T, B]` sequences (recurrent core) in `num_minibatches` minibatches of
    whole env columns `[T, B / m]` (envs shuffled, time never): each re-unrolls its core from
    its columns' `actor_state`."""
    perm = jax.random.permutation(key, batch.advantage.shape[1])
    steps = jax.tree.map(lambda x: x[:, perm], batch._replace(actor_state=()))
    steps, actor_state = env_minibatches(steps, jax.tree.map(lambda x: x[perm], batch.actor_state),
                                         parts.config.num_minibatches)
    minibatches = steps._replace(actor_state=actor_state)
    return jax.lax.scan(functools.partial(sgd_step, parts, key), carry, minibatches)


def _update(parts: Parts, train_state: TrainState, traj: Trajectory, key: Array) -> tuple[TrainState, Metrics]:
    """num_epochs x num_minibatches Adam steps on this shard's trajectory."""
    parts = for_member(parts, train_state)  # a population member's own hyperparams
    cfg = parts.config
    traj.validate()
    parts.config.check_batch(*traj.reward.shape)
    batch = _gae_batch(parts, train_state.params, traj)
    recurrent = is_recurrent(parts.network)
    epoch = _sequence_epoch if recurrent else shuffled_epoch
    batch = batch if recurrent else _flatten(batch)
    keys = jax.random.split(key, cfg.num_epochs)
    (params, opt_state), metrics = jax.lax.scan(
        functools.partial(epoch, parts, batch), (train_state.params, train_state.opt_state), keys
    )
    return finish_update(parts, train_state, params, opt_state, metrics)
