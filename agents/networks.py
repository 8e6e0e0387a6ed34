"""Actor-critic networks and action distributions shared by all agents (PPO, IMPALA).

`ActorCritic` holds two separate MLPs (CleanRL / PureJaxRL layout): the actor
maps observations to distribution parameters, the critic to a scalar value.
Distributions are plain arrays plus pure functions (no distrax):

- categorical: `dist_params` is `logits [..., num_actions]`, actions int32 `[...]`;
- Gaussian: `dist_params` is `(mean [..., *action_shape], log_std [*action_shape])`,
  `log_std` a state-independent learned parameter; actions are unbounded (the
  environment clips).
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from envs.types import EnvSpec

Array = jax.Array
DistParams = Any  # logits, or (mean, log_std)

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


# ----------------------------------------------------------------- categorical


def categorical_log_prob(logits: Array, action: Array) -> Array:
    """log pi(a) for logits `[..., K]` and integer actions `[...]`; returns `[...]`."""
    log_p = jax.nn.log_softmax(logits)
    one_hot = jax.nn.one_hot(action, logits.shape[-1], dtype=log_p.dtype)
    return jnp.sum(one_hot * log_p, axis=-1)


def categorical_entropy(logits: Array) -> Array:
    """-sum_k p_k log p_k over the last axis; returns `[...]`."""
    log_p = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)


def categorical_sample(key: Array, logits: Array) -> Array:
    """One int32 action per row of logits `[..., K]`."""
    return jax.random.categorical(key, logits).astype(jnp.int32)


def categorical_mode(logits: Array) -> Array:
    """The most likely action, int32 `[...]`."""
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


# -------------------------------------------------------------------- Gaussian
# `log_std` has the event shape `[*action_shape]`; its rank is the event rank.


def _event_axes(log_std: Array) -> tuple[int, ...]:
    return tuple(range(-log_std.ndim, 0))


def gaussian_log_prob(dist_params: tuple[Array, Array], action: Array) -> Array:
    """Diagonal Gaussian log density of `action [..., *A]`, summed over A; returns `[...]`."""
    mean, log_std = dist_params
    z = (action - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * jnp.square(z) - log_std - _HALF_LOG_2PI, axis=_event_axes(log_std))


def gaussian_entropy(dist_params: tuple[Array, Array]) -> Array:
    """sum_A (log_std + 0.5 log(2 pi e)), broadcast to the batch shape `[...]` of mean."""
    mean, log_std = dist_params
    per_event = jnp.sum(log_std + 0.5 + _HALF_LOG_2PI)
    return jnp.broadcast_to(per_event, mean.shape[: mean.ndim - log_std.ndim])


def gaussian_sample(key: Array, dist_params: tuple[Array, Array]) -> Array:
    """mean + std * N(0, I), shape of mean."""
    mean, log_std = dist_params
    return mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)


def gaussian_mode(dist_params: tuple[Array, Array]) -> Array:
    """The mean."""
    return dist_params[0]


class ActionDistribution(NamedTuple):
    """Pure functions over one family of `dist_params`."""

    log_prob: Callable[[DistParams, Array], Array]
    entropy: Callable[[DistParams], Array]
    sample: Callable[[Array, DistParams], Array]
    mode: Callable[[DistParams], Array]


CATEGORICAL = ActionDistribution(
    categorical_log_prob, categorical_entropy, categorical_sample, categorical_mode
)
GAUSSIAN = ActionDistribution(gaussian_log_prob, gaussian_entropy, gaussian_sample, gaussian_mode)


def action_distribution(discrete: bool) -> ActionDistribution:
    """CATEGORICAL for discrete action spaces, GAUSSIAN otherwise."""
    return CATEGORICAL if discrete else GAUSSIAN


# -------------------------------------------------------------------- networks

_ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,
    "silu": jax.nn.silu,
    "elu": jax.nn.elu,
}


class MLP(nn.Module):
    """Dense layers with orthogonal init: sqrt(2) gain hidden, `head_gain` on the output."""

    hidden_sizes: Sequence[int]
    output_size: int
    head_gain: float
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x: Array) -> Array:
        act = _ACTIVATIONS[self.activation]
        for size in self.hidden_sizes:
            x = nn.Dense(size, kernel_init=nn.initializers.orthogonal(math.sqrt(2.0)))(x)
            x = act(x)
        return nn.Dense(self.output_size, kernel_init=nn.initializers.orthogonal(self.head_gain))(x)


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs over observations `[..., *obs_shape]`.

    `__call__` returns `(dist_params, value [...])`; `value` runs the critic only.
    """

    obs_shape: tuple[int, ...]
    action_shape: tuple[int, ...]  # () for discrete
    num_actions: int  # discrete: number of actions; continuous: prod(action_shape)
    discrete: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"

    def setup(self) -> None:
        self.actor = MLP(self.hidden_sizes, self.num_actions, 0.01, self.activation)
        self.critic = MLP(self.hidden_sizes, 1, 1.0, self.activation)
        if not self.discrete:
            self.log_std = self.param("log_std", nn.initializers.zeros, self.action_shape)

    def _features(self, observation: Array) -> Array:
        batch_shape = observation.shape[: observation.ndim - len(self.obs_shape)]
        return observation.reshape(batch_shape + (-1,)).astype(jnp.float32)

    def __call__(self, observation: Array) -> tuple[DistParams, Array]:
        x = self._features(observation)
        out = self.actor(x)
        value = self.critic(x)[..., 0]
        if self.discrete:
            return out, value
        mean = out.reshape(out.shape[:-1] + tuple(self.action_shape))
        return (mean, self.log_std), value

    def value(self, observation: Array) -> Array:
        return self.critic(self._features(observation))[..., 0]


def make_network(env_spec: EnvSpec, hidden_sizes: Sequence[int], activation: str) -> ActorCritic:
    """The `ActorCritic` for `env_spec`'s observation and action specs."""
    obs_shape = tuple(env_spec.observation.shape)
    if env_spec.discrete:
        return ActorCritic(obs_shape, (), int(env_spec.action.num_values), True, tuple(hidden_sizes), activation)
    action_shape = tuple(env_spec.action.shape)
    num = int(np.prod(action_shape, dtype=np.int64))
    return ActorCritic(obs_shape, action_shape, num, False, tuple(hidden_sizes), activation)
