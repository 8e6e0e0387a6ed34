"""R2D2's recurrent Q network and its unroll over replayed sequences.

The network is the house parts: a torso (`podrl.agents.torsos`), a core (`podrl.agents.cores.CELLS`,
LSTM or GRU, its carry the actor's state) and a Q head, dueling or not (Wang et al. 2016, "Dueling
Network Architectures for Deep Reinforcement Learning", ICML, eq. 9: Q = V + A - mean_a A). R2D2's
Atari network (Kapturowski et al. 2019, sec. 2.3) is the Nature CNN, an LSTM of 512 and a dueling
head with a hidden layer of 512 in each stream: `torso="nature_cnn", core_size=512, head_hidden=512`.
It has `features`, `core_step` and `heads`, so `podrl.agents.unroll.unroll_core` runs it over `[T, B]`.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from podrl.agents.cores import CELLS, Carry, zero_carry
from podrl.agents.torsos import make_torso
from podrl.agents.unroll import shifted_bootstrap, unroll_core
from podrl.envs.observations import batch_size

Array = jax.Array

_RELU_GAIN = 2.0 ** 0.5


class RecurrentQNetwork(nn.Module):
    """Observations `[B, *obs]` and a carry -> Q values `[B, num_actions]` and the next carry."""

    obs_shape: tuple[int, ...]
    num_actions: int
    torso: str = "mlp"
    hidden_sizes: Sequence[int] = (64,)
    activation: str = "relu"
    layer_norm: bool = False
    core: str = "lstm"
    core_size: int = 64
    dueling: bool = True
    head_hidden: int = 0  # a hidden ReLU layer of this width in each head stream (0: none)

    def setup(self) -> None:
        self.torso_net = make_torso(self.torso, self.obs_shape, self.hidden_sizes, self.activation, name="torso",
                                    layer_norm=self.layer_norm)
        self.cell = CELLS[self.core](self.core_size, name="core")
        self.advantage = _Stream(self.num_actions, self.head_hidden, name="advantage")
        if self.dueling:
            self.value = _Stream(1, self.head_hidden, name="value")

    def features(self, observation: Array) -> Array:
        """The torso: `[..., *obs]` -> `[..., F]`."""
        return self.torso_net(observation)

    def core_step(self, carry: Carry, features: Array) -> tuple[Carry, Array]:
        """One core step: carry `[B, H]` (pair), features `[B, F]` -> `(carry, output [B, H])`."""
        return self.cell(carry, features)

    def heads(self, output: Array) -> Array:
        """Q values `[..., A]` from core outputs `[..., H]` (the advantage stream alone without dueling)."""
        advantage = self.advantage(output)
        if not self.dueling:
            return advantage
        return self.value(output) + advantage - jnp.mean(advantage, axis=-1, keepdims=True)

    def __call__(self, observation: Array, carry: Carry | None = None) -> tuple[Array, Carry]:
        if carry is None:
            carry = zero_carry(self.core, self.core_size, batch_size(observation))
        carry, output = self.core_step(carry, self.features(observation))
        return self.heads(output), carry


class _Stream(nn.Module):
    """A head stream: optionally Dense(hidden) + ReLU, then Dense(size)."""

    size: int
    hidden: int = 0

    @nn.compact
    def __call__(self, x: Array) -> Array:
        if self.hidden:
            x = jax.nn.relu(nn.Dense(self.hidden, kernel_init=nn.initializers.orthogonal(_RELU_GAIN))(x))
        return nn.Dense(self.size, kernel_init=nn.initializers.orthogonal(1.0))(x)


def q_unroll(network: RecurrentQNetwork, params: Any, carry: Carry, observation: Array,
             reset: Array) -> tuple[Array, Carry]:
    """`(q [T, N, A], next_carry [T, N, ...])` over `observation` `[T, N, *obs]` from `carry` `[N, ...]`,
    the carry zeroed before each step where `reset` `[T, N]` (`podrl.agents.unroll.unroll_core`)."""
    _, next_carry, output = unroll_core(network, params, carry, observation, reset)
    return network.apply(params, output, method="heads"), next_carry


def bootstrap_q(network: RecurrentQNetwork, params: Any, q: Array, next_carry: Carry, next_observation: Array,
                truncated: Array) -> Array:
    """`[T, N, A]` Q values of `next_observation[t]` seen with `next_carry[t]` (the state after step t before
    any reset): `q[t + 1]` where that is the same (`podrl.agents.unroll.shifted_bootstrap`), one more core
    step where an episode was truncated inside or at the last step (`q`: the unroll's `[T, N, A]`)."""

    def q_of(steps: slice) -> Array:
        obs, carry = jax.tree.map(lambda x: x[steps], (next_observation, next_carry))
        t, n = jax.tree.leaves(obs)[0].shape[:2]
        flat = lambda x: x.reshape((t * n,) + x.shape[2:])  # noqa: E731
        values, _ = network.apply(params, jax.tree.map(flat, obs), jax.tree.map(flat, carry))
        return values.reshape(t, n, -1)

    return shifted_bootstrap(q, truncated, q_of)
