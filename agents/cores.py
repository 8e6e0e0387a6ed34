"""Recurrent actor-critic: torso -> recurrent core (LSTM or GRU) -> policy and value heads.

The core sits between one shared torso (`podrl.agents.torsos`) and the two linear heads of
`podrl.agents.networks.ActorCritic` (policy gain 0.01, value gain 1.0). Its state, the *carry*, is
the agent's `actor_state` (`podrl.core.types`): the actor carries it from step to step, the
layouts reset a row to `zero_carry` where its episode ended, and the learner re-unrolls the
core over a trajectory from `Trajectory.actor_state` (`podrl.agents.unroll`).

Carry layout, `B` rows of width `H = core_size`, float32 zeros at the start of an episode:

- `lstm`: `(c [B, H], h [B, H])`, flax's `OptimizedLSTMCell` (cell then hidden state);
- `gru`: `h [B, H]`, flax's `GRUCell`.

Parameters: `torso` (as the shared torso of `ActorCritic`), `core` (the cell), `policy_head`,
`value_head` (and `log_std` for a Gaussian policy).
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from podrl.agents.torsos import make_torso
from podrl.envs.observations import batch_size

Array = jax.Array
Carry = Any  # (c [B, H], h [B, H]) for lstm, h [B, H] for gru
DistParams = Any  # logits, or (mean, log_std)

CELLS = {"lstm": nn.OptimizedLSTMCell, "gru": nn.GRUCell}
"""Core name -> flax cell (`podrl.agents.config_checks.CORES` minus "none")."""


def dist_params_from(out: Array, discrete: bool, action_shape: tuple[int, ...], log_std: Array | None) -> DistParams:
    """The policy head's output `[..., num_actions]` as distribution parameters: logits, or
    `(mean [..., *action_shape], log_std [*action_shape])`."""
    if discrete:
        return out
    return out.reshape(out.shape[:-1] + tuple(action_shape)), log_std


def zero_carry(core: str, core_size: int, batch_size: int) -> Carry:
    """The carry at the start of an episode: zeros `[batch_size, core_size]` (a `(c, h)` pair for lstm)."""
    zeros = jnp.zeros((batch_size, core_size), jnp.float32)
    return (zeros, zeros) if core == "lstm" else zeros


class ActorCriticFields(nn.Module):
    """The attributes of both actor-critic networks (this and `podrl.agents.networks.ActorCritic`):
    the env's observation / action shapes and the torso settings."""

    obs_shape: tuple[int, ...]
    action_shape: tuple[int, ...]  # () for discrete
    num_actions: int  # discrete: number of actions; continuous: prod(action_shape)
    discrete: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    torso: str = "mlp"


class RecurrentActorCritic(ActorCriticFields):
    """Policy and value from a torso, a recurrent core and two heads (module docstring).

    `__call__(observation [B, *obs], carry)` is one acting step and returns
    `(dist_params, value [B], carry)`; `carry=None` starts from zeros (used by `init`).
    `features`, `core_step` and `heads` are its three stages, which `podrl.agents.unroll` runs
    over a whole `[T, B]` trajectory (the torso and heads batched, the core scanned).
    """

    core: str = "lstm"
    core_size: int = 128

    def setup(self) -> None:
        self.torso_net = make_torso(self.torso, self.obs_shape, self.hidden_sizes, self.activation, name="torso")
        self.cell = CELLS[self.core](self.core_size, name="core")
        self.policy_head = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01))
        self.value_head = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))
        if not self.discrete:
            self.log_std = self.param("log_std", nn.initializers.zeros, self.action_shape)

    def features(self, observation: Array) -> Array:
        """The torso: `[..., *obs]` -> `[..., F]`."""
        return self.torso_net(observation)

    def core_step(self, carry: Carry, features: Array) -> tuple[Carry, Array]:
        """One core step: carry `[B, H]` (pair), features `[B, F]` -> `(carry, output [B, H])`."""
        return self.cell(carry, features)

    def heads(self, output: Array) -> tuple[DistParams, Array]:
        """`(dist_params, value [...])` from core outputs `[..., H]`."""
        log_std = None if self.discrete else self.log_std
        value = self.value_head(output)[..., 0]
        return dist_params_from(self.policy_head(output), self.discrete, self.action_shape, log_std), value

    def __call__(self, observation: Array, carry: Carry | None = None) -> tuple[DistParams, Array, Carry]:
        if carry is None:
            carry = zero_carry(self.core, self.core_size, batch_size(observation))
        carry, output = self.core_step(carry, self.features(observation))
        dist_params, value = self.heads(output)
        return dist_params, value, carry

    def value(self, observation: Array, carry: Carry) -> Array:
        """V of observations `[N, *obs]` seen with core states `carry` `[N, H]`: `[N]`."""
        _, output = self.core_step(carry, self.features(observation))
        return self.value_head(output)[..., 0]


def is_recurrent(network: nn.Module) -> bool:
    """True for a `RecurrentActorCritic` (a network whose acting carries a core state)."""
    return isinstance(network, RecurrentActorCritic)


def initial_actor_state(network: nn.Module, batch_size: int, columns: Any = None) -> Carry | tuple[()]:
    """`Agent.init_actor_state`: the zero carry `[batch_size, ...]`, or `()` for a feed-forward network
    (the same for every env column: `columns` is not read)."""
    del columns
    if not is_recurrent(network):
        return ()
    return zero_carry(network.core, network.core_size, batch_size)
