"""MuZero's model from parts: representation (an `podrl.agents.torsos` torso), dynamics and prediction.

    network = MuZeroNetwork(obs_shape, num_actions, config fields...)
    state = network.apply(params, obs, method=MuZeroNetwork.represent)             # [N, latent]
    next_state, reward_logits = network.apply(params, state, action, method=MuZeroNetwork.dynamics)
    policy_logits, value_logits = network.apply(params, state, method=MuZeroNetwork.predict)

Value and reward are logits over the `2S + 1` atoms of `podrl.agents.muzero.targets`. Two dynamics:

- `mlp`: hidden states min-max scaled to [0, 1] per sample, after the representation and after every
  dynamics step (Schrittwieser et al. 2020, Appendix G); an MLP of the state and the one-hot action gives
  the next state and the reward.
- `gru`: the recurrent world model of Stoix's `ff_mz`: the state is the concatenated carries of a
  stack of GRU cells; each step scales it to [-1, 1] per sample, feeds the action (one-hot, through a
  dense embedding) to the stack, adds the new carries to the scaled state (a residual) and predicts
  the reward with an MLP over the top cell's output. The representation is not scaled.
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
    dynamics_kind: str = "mlp"

    def setup(self) -> None:
        atoms = 2 * self.support_size + 1
        self.torso_net = make_torso(self.torso, self.obs_shape, self.hidden_sizes, self.activation,
                                    layer_norm=self.layer_norm)
        self.latent = nn.Dense(self.latent_size)
        if self.dynamics_kind == "gru":
            self.action_embedding = nn.Dense(self.latent_size)
            self.cells = [nn.GRUCell(size) for size in self.dynamics_sizes]
            self.reward_mlp = _MLP(tuple(self.prediction_sizes), self.activation)
        else:
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
        """Observations `[N, *obs]` -> hidden states `[N, latent_size]` (mlp: in [0, 1]; gru: unscaled)."""
        state = self.latent(self.torso_net(observation))
        return state if self.dynamics_kind == "gru" else scale_hidden_state(state)

    def dynamics(self, state: Array, action: Array) -> tuple[Array, Array]:
        """States `[N, D]`, int actions `[N]` -> (next states `[N, D]` (mlp: in [0, 1]), reward logits `[N, 2S +
        1]`)."""
        one_hot = jax.nn.one_hot(action, self.num_actions)
        if self.dynamics_kind == "gru":
            return self._gru_dynamics(state, one_hot)
        features = self.dynamics_mlp(jnp.concatenate([state, one_hot], axis=-1))
        return scale_hidden_state(self.next_state(features)), self.reward_head(features)

    def _gru_dynamics(self, state: Array, one_hot: Array) -> tuple[Array, Array]:
        """gru: the state in [-1, 1] split into the cells' carries `[N, size]`, the embedded action the
        bottom cell's input; next state = the new carries + the scaled state."""
        scaled = scale_hidden_state(state) * 2.0 - 1.0
        bounds = [sum(self.dynamics_sizes[:i]) for i in range(1, len(self.dynamics_sizes))]
        x, carries = self.action_embedding(one_hot), []
        for cell, carry in zip(self.cells, jnp.split(scaled, bounds, axis=-1)):
            carry, x = cell(carry, x)
            carries.append(carry)
        return jnp.concatenate(carries, axis=-1) + scaled, self.reward_head(self.reward_mlp(x))

    def predict(self, state: Array) -> tuple[Array, Array]:
        """States `[N, D]` -> (policy logits `[N, A]`, value logits `[N, 2S + 1]`)."""
        features = self.prediction_mlp(state)
        return self.policy_head(features), self.value_head(features)


class _MLP(nn.Module):
    """Dense + activation (ReLU unless named) per width (`podrl.agents.torsos.mlp_layers`); the identity with no
    widths."""

    sizes: tuple[int, ...]
    activation: str = "relu"

    @nn.compact
    def __call__(self, x: Array) -> Array:
        return mlp_layers(x, self.sizes, self.activation)
