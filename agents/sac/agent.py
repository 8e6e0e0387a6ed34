"""The SAC `Agent`: a tanh-squashed Gaussian actor, twin soft Q critics, a learned temperature.

Train state (`podrl.core.types.TrainState`, see `podrl.agents.continuous`):
  params       `{"actor": ..., "warmup": f32 []}`: what actors need.
  opt_state    `podrl.agents.continuous.ContinuousLearnerState`: critics, their Polyak target,
               Adam states, `temperature = SACTemperature(log_alpha, its Adam state)`.
  shard_state  `podrl.agents.replay.ReplayBuffer` of 1-step transitions, one per learner shard.

Each gradient step (`_sgd_step`, on `batch_size` uniform samples; Haarnoja et al. 2018b,
Algorithm 1): the critics toward the soft target with a' ~ pi(.|s') and the target critics;
the actor on the updated critics; log alpha toward the target entropy -A (with the actor
step's log pi); then the Polyak target update. The actor's output `[2A]` is the Gaussian's
mean and a log std squashed by tanh into `[log_std_min, log_std_max]` (CleanRL); actions are
u = tanh(z), scaled to the env's bounds by `podrl.agents.continuous.ActionBounds`.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from podrl.agents import replay
from podrl.agents.continuous import (
    ContinuousParts,
    continuous_agent,
    continuous_parts,
    critic_step,
    init_learner,
    optimizer_step,
    polyak,
    target_entropy,
)
from podrl.agents.optimizers import base_optimizer
from podrl.agents.sac.config import SACConfig
from podrl.agents.sac.losses import actor_loss, soft_q_target, tanh_gaussian_log_prob, temperature_loss
from podrl.core.types import Agent, Metrics, TrainState
from podrl.envs.types import EnvSpec

Array = jax.Array


class SACTemperature(NamedTuple):
    """`ContinuousLearnerState.temperature` of SAC: `log_alpha` float32 `[]` and its Adam state."""

    log_alpha: Array
    optimizer: Any


def gaussian(config: SACConfig, actor_output: Array) -> tuple[Array, Array]:
    """`(mean, log_std)` `[..., A]` from the actor's output `[..., 2A]`; log std squashed into its bounds."""
    mean, raw = jnp.split(actor_output, 2, axis=-1)
    low, high = config.log_std_min, config.log_std_max
    return mean, low + 0.5 * (high - low) * (jnp.tanh(raw) + 1.0)


def sample_action(config: SACConfig, actor_output: Array, key: Array) -> tuple[Array, Array]:
    """`(u [N, A], log pi(u) [N])`: reparameterized u = tanh(mean + std * eps) from actor outputs `[N, 2A]`."""
    mean, log_std = gaussian(config, actor_output)
    z = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)
    return jnp.tanh(z), jax.vmap(tanh_gaussian_log_prob)(z, mean, log_std)


def _explore(config: SACConfig, actor_output: Array, key: Array) -> Array:
    return sample_action(config, actor_output, key)[0]


def make_agent(config: SACConfig, env_spec: EnvSpec, total_updates: int) -> Agent:
    """The SAC agent for `env_spec`: ConfigError("env") unless its actions are a bounded box."""
    del total_updates
    greedy = lambda out: jnp.tanh(gaussian(config, out)[0])  # noqa: E731 - the squashed mean
    parts = continuous_parts("sac", config, env_spec, 2, _explore, greedy)
    temperature_optimizer = base_optimizer(config, config.temperature_learning_rate)  # Adam, adam_eps
    return continuous_agent(parts, functools.partial(_init, parts, temperature_optimizer),
                            functools.partial(_sgd_step, parts, temperature_optimizer))


def _init(parts: ContinuousParts, temperature_optimizer, key: Array, env_spec: EnvSpec) -> TrainState:
    log_alpha = jnp.log(jnp.asarray(parts.config.initial_temperature, jnp.float32))
    temperature = SACTemperature(log_alpha, temperature_optimizer.init(log_alpha))
    return init_learner(parts, key, env_spec, actor_target=False, temperature=temperature)


def _actor_loss(parts: ContinuousParts, actor_params, critic_params, alpha: Array, observation: Array, key: Array):
    """Mean SAC actor loss over `[N]` states; aux `(metrics, log pi [N])`."""
    u, log_pi = sample_action(parts.config, parts.actor.apply(actor_params, observation), key)
    q = parts.critic.apply(critic_params, observation, u)  # [N, K]
    loss = jnp.mean(jax.vmap(actor_loss, in_axes=(0, 0, None))(q, log_pi, alpha))
    return loss, ({"actor_loss": loss, "entropy": -jnp.mean(log_pi)}, log_pi)


def _temperature_loss(log_alpha: Array, log_pi: Array, entropy_target: float):
    loss = jnp.mean(jax.vmap(temperature_loss, in_axes=(None, 0, None))(log_alpha, log_pi, entropy_target))
    return loss, {"temperature_loss": loss}


def _temperature_step(parts: ContinuousParts, optimizer, temperature: SACTemperature, log_pi: Array):
    """One Adam step of log alpha (none when `learn_temperature` is False)."""
    if not parts.config.learn_temperature:
        return temperature, {}
    loss = functools.partial(_temperature_loss, entropy_target=target_entropy(parts))
    log_alpha, state, metrics = optimizer_step(optimizer, loss, temperature.log_alpha, temperature.optimizer, log_pi)
    return SACTemperature(log_alpha, state), metrics


def _sgd_step(parts: ContinuousParts, temperature_optimizer, buffer: replay.ReplayBuffer, carry,
              key: Array) -> tuple[Any, Metrics]:
    """One SAC gradient step on `batch_size` samples of `buffer`; a `lax.scan` body over
    `(actor params, ContinuousLearnerState)`. Metrics `[]`: critic_loss, q_mean, target_mean,
    actor_loss, entropy (-mean log pi), alpha (before this step), temperature_loss."""
    actor, learner = carry
    sample_key, next_key, actor_key = jax.random.split(key, 3)
    sample = replay.sample(buffer, sample_key, parts.config.batch_size)
    alpha = jnp.exp(learner.temperature.log_alpha)
    next_u, next_log_pi = sample_action(parts.config, parts.actor.apply(actor, sample.next_observation), next_key)
    q_next = parts.critic.apply(learner.critic_target, sample.next_observation, next_u)  # [N, K]
    target = jax.vmap(soft_q_target, in_axes=(0, 0, 0, 0, None))(sample.reward, sample.discount, q_next,
                                                                   next_log_pi, alpha)
    learner, critic_metrics = critic_step(parts, learner, sample, target)
    actor, actor_optimizer, (actor_metrics, log_pi) = optimizer_step(
        parts.actor_optimizer, functools.partial(_actor_loss, parts), actor, learner.actor_optimizer,
        learner.critic, alpha, sample.observation, actor_key)
    temperature, temperature_metrics = _temperature_step(parts, temperature_optimizer, learner.temperature, log_pi)
    learner = learner._replace(critic_target=polyak(learner.critic, learner.critic_target, parts.config.tau),
                               actor_optimizer=actor_optimizer, temperature=temperature,
                               sgd_steps=learner.sgd_steps + 1)
    return (actor, learner), {**critic_metrics, **actor_metrics, **temperature_metrics, "alpha": alpha}
