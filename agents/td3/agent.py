"""The TD3 `Agent`: a deterministic tanh actor with Gaussian exploration, twin critics.

Train state (`podrl.core.types.TrainState`, see `podrl.agents.continuous`):
  params       `{"actor": ..., "warmup": f32 []}`: what actors need.
  opt_state    `podrl.agents.continuous.ContinuousLearnerState`: critics, Polyak targets of the
               critics and of the actor, Adam states, gradient steps taken.
  shard_state  `podrl.agents.replay.ReplayBuffer` of 1-step transitions, one per learner shard.

Each gradient step (`_sgd_step`; Fujimoto et al. 2018, Algorithm 1): the critics toward the
clipped double-Q target at the smoothed target action; every `policy_delay`-th step also the
actor (on the updated critics) and the Polyak update of both targets. The actor's output `[A]`
is squashed by tanh into the normalized box and scaled to the env's bounds.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from podrl.agents import replay
from podrl.agents.continuous import (
    ContinuousLearnerState,
    ContinuousParts,
    continuous_agent,
    continuous_parts,
    critic_step,
    init_learner,
    optimizer_step,
    polyak,
)
from podrl.agents.td3.config import TD3Config
from podrl.agents.td3.losses import clipped_double_q_target, deterministic_actor_loss, smoothed_target_action
from podrl.core.parallel import vary_like
from podrl.core.types import Agent, Metrics, TrainState
from podrl.envs.types import EnvSpec

Array = jax.Array


def _explore(config: TD3Config, actor_output: Array, key: Array) -> Array:
    """tanh(actor output) plus N(0, exploration_noise) noise, clipped to the box."""
    mu = jnp.tanh(actor_output)
    return jnp.clip(mu + config.exploration_noise * jax.random.normal(key, mu.shape, mu.dtype), -1.0, 1.0)


def make_agent(config: TD3Config, env_spec: EnvSpec, total_updates: int) -> Agent:
    """The TD3 agent for `env_spec`: ConfigError("env") unless its actions are a bounded box."""
    del total_updates
    parts = continuous_parts("td3", config, env_spec, 1, _explore, jnp.tanh)
    return continuous_agent(parts, functools.partial(_init, parts), functools.partial(_sgd_step, parts))


def _init(parts: ContinuousParts, key: Array, env_spec: EnvSpec) -> TrainState:
    return init_learner(parts, key, env_spec, actor_target=True)


def _actor_loss(parts: ContinuousParts, actor_params, critic_params, observation: Array):
    """Mean -Q_1(s, mu(s)) over `[N]` states."""
    u = jnp.tanh(parts.actor.apply(actor_params, observation))
    loss = jnp.mean(jax.vmap(deterministic_actor_loss)(parts.critic.apply(critic_params, observation, u)))
    return loss, {"actor_loss": loss}


def _delayed_step(parts: ContinuousParts, observation: Array, carry):
    """The actor step on the current critics, then the Polyak update of both targets."""
    actor, learner = carry
    actor, optimizer, metrics = optimizer_step(parts.actor_optimizer, functools.partial(_actor_loss, parts), actor,
                                               learner.actor_optimizer, learner.critic, observation)
    tau = parts.config.tau
    learner = learner._replace(actor_optimizer=optimizer, actor_target=polyak(actor, learner.actor_target, tau),
                               critic_target=polyak(learner.critic, learner.critic_target, tau))
    return (actor, learner), metrics


def _skip_delayed(like: Array, carry):
    """No actor step: `carry` unchanged, actor_loss 0 (varying over the mesh axes `like` varies over)."""
    return carry, {"actor_loss": vary_like(jnp.zeros((), jnp.float32), like)}


def _target(parts: ContinuousParts, learner: ContinuousLearnerState, sample: replay.Transition, key: Array) -> Array:
    """y `[N]`: the clipped double-Q target at the smoothed action of the target actor."""
    cfg = parts.config
    mu_next = jnp.tanh(parts.actor.apply(learner.actor_target, sample.next_observation))
    noise = cfg.policy_noise * jax.random.normal(key, mu_next.shape, mu_next.dtype)
    next_u = jax.vmap(smoothed_target_action, in_axes=(0, 0, None))(mu_next, noise, cfg.noise_clip)
    q_next = parts.critic.apply(learner.critic_target, sample.next_observation, next_u)  # [N, K]
    return jax.vmap(clipped_double_q_target)(sample.reward, sample.discount, q_next)


def _sgd_step(parts: ContinuousParts, buffer: replay.ReplayBuffer, carry, key: Array) -> tuple[Any, Metrics]:
    """One TD3 critic step on `batch_size` samples of `buffer`, and on every `policy_delay`-th step the
    actor and target updates; a `lax.scan` body over `(actor params, ContinuousLearnerState)`.
    Metrics `[]`: critic_loss, q_mean, target_mean, actor_loss (0 on steps without an actor step),
    actor_updated (1 on those with one)."""
    actor, learner = carry
    sample_key, noise_key = jax.random.split(key)
    sample = replay.sample(buffer, sample_key, parts.config.batch_size)
    learner, critic_metrics = critic_step(parts, learner, sample, _target(parts, learner, sample, noise_key))
    learner = learner._replace(sgd_steps=learner.sgd_steps + 1)
    # sgd_steps is the same on every learner shard, so the delayed step's pmean may run inside the cond
    due = learner.sgd_steps % parts.config.policy_delay == 0
    carry, actor_metrics = jax.lax.cond(due, functools.partial(_delayed_step, parts, sample.observation),
                                        functools.partial(_skip_delayed, critic_metrics["critic_loss"]),
                                        (actor, learner))
    return carry, {**critic_metrics, **actor_metrics, "actor_updated": due.astype(jnp.float32)}
