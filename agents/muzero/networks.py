"""MuZero's model from parts: representation (an `podrl.agents.torsos` torso), dynamics and prediction.

    network = MuZeroNetwork(obs_shape, num_actions, config fields...)
    state = network.apply(params, obs, method=MuZeroNetwork.represent)             # [N, latent]
    next_state, reward_logits = network.apply(params, state, action, method=MuZeroNetwork.dynamics)
    policy_logits, value_logits = network.apply(params, state, method=MuZeroNetwork.predict)

Value and reward are logits over the `2S + 1` atoms of `podrl.agents.muzero.targets`. Hidden states
are min-max scaled to [0, 1] per sample, after the representation and after every dynamics step
(Schrittwieser et al. 2020, Appendix G).
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from podrl.agents.torsos import make_torso, mlp_layers

Array = jax.Array


def scale_hidden_state(state: Array) -> Array:
    """`[..., D]` -> `[..., D]` min-max scaled to [0, 1] over the last axis (a constant state -> 0)."""
    low = jnp.min(state, axis=-1, keepdims=True)
    high = jnp.max(state, axis=-1, keepdims=True)
    return (state - low) / jnp.maximum(high - low, 1e-5)


class MuZeroNetwork(nn.Module):
    """Representation h, dynamics g and prediction f of MuZero for discrete actions."""

    obs_shape: tuple[int, ...]
    num_actions: int
    support_size: int
    torso: str = "mlp"
    hidden_sizes: Sequence[int] = (64,)
    activation: str = "relu"
    layer_norm: bool = False
    latent_size: int = 64
    dynamics_sizes: Sequence[int] = (64,)
    prediction_sizes: Sequence[int] = (64,)

    def setup(self) -> None:
        atoms = 2 * self.support_size + 1
        self.torso_net = make_torso(self.torso, self.obs_shape, self.hidden_sizes, self.activation,
                                    layer_norm=self.layer_norm)
        self.latent = nn.Dense(self.latent_size)
        self.dynamics_mlp = _MLP(tuple(self.dynamics_sizes))
        self.next_state = nn.Dense(self.latent_size)
        self.reward_head = nn.Dense(atoms, kernel_init=nn.initializers.zeros)
        self.prediction_mlp = _MLP(tuple(self.prediction_sizes))
        self.policy_head = nn.Dense(self.num_actions, kernel_init=nn.initializers.zeros)
        self.value_head = nn.Dense(atoms, kernel_init=nn.initializers.zeros)

    def __call__(self, observation: Array, action: Array):
        """All three parts once (for `init`): `(policy_logits, value_logits, reward_logits)`."""
        state = self.represent(observation)
        next_state, reward_logits = self.dynamics(state, action)
        policy_logits, value_logits = self.predict(next_state)
        return policy_logits, value_logits, reward_logits

    def represent(self, observation: Array) -> Array:
        """Observations `[N, *obs]` -> hidden states `[N, latent_size]` in [0, 1]."""
        return scale_hidden_state(self.latent(self.torso_net(observation)))

    def dynamics(self, state: Array, action: Array) -> tuple[Array, Array]:
        """States `[N, D]`, int actions `[N]` -> (next states `[N, D]` in [0, 1], reward logits `[N, 2S + 1]`)."""
        x = jnp.concatenate([state, jax.nn.one_hot(action, self.num_actions)], axis=-1)
        features = self.dynamics_mlp(x)
        return scale_hidden_state(self.next_state(features)), self.reward_head(features)

    def predict(self, state: Array) -> tuple[Array, Array]:
        """States `[N, D]` -> (policy logits `[N, A]`, value logits `[N, 2S + 1]`)."""
        features = self.prediction_mlp(state)
        return self.policy_head(features), self.value_head(features)


class _MLP(nn.Module):
    """Dense + ReLU per width (`podrl.agents.torsos.mlp_layers`); the identity with no widths."""

    sizes: tuple[int, ...]

    @nn.compact
    def __call__(self, x: Array) -> Array:
        return mlp_layers(x, self.sizes, "relu")
