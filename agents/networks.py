"""Actor-critic networks (heads over `podrl.agents.torsos`) and action distributions shared by all
agents (PPO, IMPALA).

`ActorCritic` maps observations through a torso to distribution parameters (the policy
head) and a scalar value (the value head), with one shared torso or separate actor and
critic torsos (the CleanRL / PureJaxRL MLP layout, the default for `mlp`). With a
recurrent core (`core="lstm"|"gru"`) `make_network` builds `podrl.agents.cores.RecurrentActorCritic`
instead: shared torso -> core -> the same two heads.
Distributions are plain arrays plus pure functions (no distrax):

- categorical: `dist_params` is `logits [..., num_actions]`, actions int32 `[...]`;
- Gaussian: `dist_params` is `(mean [..., *action_shape], log_std [*action_shape])`,
  `log_std` a state-independent learned parameter; actions are unbounded (the
  environment clips).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from podrl.agents.config_checks import PIXEL_TORSOS
from podrl.agents.cores import ActorCriticFields, RecurrentActorCritic, dist_params_from
from podrl.agents.inputs import has_image_encoder, torso_input
from podrl.agents.torsos import ObservationInputs, flatten_obs, make_torso, mlp_layers
from podrl.envs.types import EnvSpec

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


class Tower(nn.Module):
    """A torso and a linear head: `[..., *obs_shape]` -> `[..., output_size]` (one of the
    separate actor / critic networks).

    For the `mlp` torso the layers are created inline (`Dense_0`, ..., `Dense_n` the head),
    exactly the parameter tree, names and initial values of the original `MLP` class; other
    torsos are a `torso` submodule followed by the head `Dense_0`. Orthogonal init, gain
    `head_gain` on the head.
    """

    obs_shape: tuple[int, ...]
    output_size: int
    head_gain: float
    torso: str = "mlp"
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x: Array) -> Array:
        if self.torso == "mlp" and not isinstance(self.obs_shape, ObservationInputs):
            x = mlp_layers(flatten_obs(x, self.obs_shape), self.hidden_sizes, self.activation)
        else:
            x = make_torso(self.torso, self.obs_shape, self.hidden_sizes, self.activation, name="torso")(x)
        return nn.Dense(self.output_size, kernel_init=nn.initializers.orthogonal(self.head_gain))(x)


class ActorCritic(ActorCriticFields):
    """Policy and value over observations `[..., *obs_shape]`, from a torso (`podrl.agents.torsos`).

    `__call__` returns `(dist_params, value [...])`; `value` computes the value only. With
    `shared_torso` one torso (params `torso`) feeds the `policy_head` and the `value_head`;
    otherwise the `actor` and the `critic` are separate `Tower`s (the CleanRL / PureJaxRL
    layout, and for `mlp` the original parameter tree). Policy head gain 0.01, value head 1.0;
    a Gaussian policy adds the state-independent `log_std [*action_shape]`.
    """

    shared_torso: bool = False

    def setup(self) -> None:
        if self.shared_torso:
            self.torso_net = make_torso(self.torso, self.obs_shape, self.hidden_sizes, self.activation, name="torso")
            self.policy_head = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01))
            self.value_head = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))
        else:
            tower = functools.partial(Tower, self.obs_shape, torso=self.torso,
                                      hidden_sizes=self.hidden_sizes, activation=self.activation)
            self.actor = tower(self.num_actions, 0.01)
            self.critic = tower(1, 1.0)
        if not self.discrete:
            self.log_std = self.param("log_std", nn.initializers.zeros, self.action_shape)

    def __call__(self, observation: Array) -> tuple[DistParams, Array]:
        if self.shared_torso:
            features = self.torso_net(observation)
            out, value = self.policy_head(features), self.value_head(features)[..., 0]
        else:
            out, value = self.actor(observation), self.critic(observation)[..., 0]
        return dist_params_from(out, self.discrete, self.action_shape, None if self.discrete else self.log_std), value

    def value(self, observation: Array) -> Array:
        if self.shared_torso:
            return self.value_head(self.torso_net(observation))[..., 0]
        return self.critic(observation)[..., 0]


def make_network(env_spec: EnvSpec, hidden_sizes: Sequence[int], activation: str,
                 torso: str = "mlp", shared_torso: bool | None = None, core: str = "none",
                 core_size: int = 128, torso_per_key: Sequence[str] = ()) -> ActorCritic | RecurrentActorCritic:
    """The `ActorCritic` for `env_spec`'s observation and action specs, or with a `core`
    ("lstm", "gru") the `podrl.agents.cores.RecurrentActorCritic` (always one shared torso).

    `shared_torso=None` shares the torso for the CNN torsos (and a nested observation with an image
    leaf) and not for `mlp`; with a core the torso is always shared (the configs refuse
    `shared_torso=False` there). A nested observation is read leaf by leaf (`podrl.agents.inputs`,
    `torso_per_key`). ConfigError ("torso", "torso_per_key") if the torso cannot read `env_spec`'s
    observations (`podrl.agents.inputs.torso_input`).
    """
    obs_shape = torso_input(env_spec, torso, torso_per_key)
    if core == "none":
        pixels = torso in PIXEL_TORSOS or has_image_encoder(obs_shape)
        shared = pixels if shared_torso is None else bool(shared_torso)
        net = functools.partial(ActorCritic, hidden_sizes=tuple(hidden_sizes), activation=activation,
                                torso=torso, shared_torso=shared)
    else:
        net = functools.partial(RecurrentActorCritic, hidden_sizes=tuple(hidden_sizes), activation=activation,
                                torso=torso, core=core, core_size=int(core_size))
    if env_spec.discrete:
        return net(obs_shape, (), int(env_spec.action.num_values), True)
    action_shape = tuple(env_spec.action.shape)
    return net(obs_shape, action_shape, int(np.prod(action_shape, dtype=np.int64)), False)
