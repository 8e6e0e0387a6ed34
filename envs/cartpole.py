"""CartPole as a functional JAX environment.

Mirrors gymnasium's ``CartPole-v1`` (``gymnasium.envs.classic_control.cartpole``),
itself Barto, Sutton & Anderson (1983), "Neuronlike adaptive elements that can
solve difficult learning control problems": same constants, explicit Euler
integration with tau = 0.02 s, termination when |x| > 2.4 or |theta| > 12
degrees, reward 1 on every step including the terminating one, and a reset
state drawn from U(-0.05, 0.05)^4. The 500-step time limit is not part of the
env; `podrl.envs.make("CartPole-v1")` adds it. Computation is float32 (gymnasium uses
float64), so trajectories agree closely but not bit for bit.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from dm_env import specs

from podrl.envs.types import Array, PRNGKey, TimeStep, restart, transition


class CartPoleState(NamedTuple):
    """Physical state of the cart and pole.

    Attributes:
      x: float32 [], cart position (m).
      x_dot: float32 [], cart velocity (m/s).
      theta: float32 [], pole angle from upright (rad).
      theta_dot: float32 [], pole angular velocity (rad/s).
    """

    x: Array
    x_dot: Array
    theta: Array
    theta_dot: Array


class CartPole:
    """Balance a pole on a cart by pushing the cart left (0) or right (1)."""

    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    total_mass = masspole + masscart
    length = 0.5  # half the pole's length
    polemass_length = masspole * length
    force_mag = 10.0
    tau = 0.02  # seconds per step
    theta_threshold = 12 * 2 * math.pi / 360
    x_threshold = 2.4
    reset_bound = 0.05

    def reset(self, key: PRNGKey) -> tuple[CartPoleState, TimeStep]:
        values = jax.random.uniform(
            key, (4,), jnp.float32, -self.reset_bound, self.reset_bound
        )
        state = CartPoleState(*values)
        return state, restart(self._observation(state))

    def step(self, state: CartPoleState, action: Array) -> tuple[CartPoleState, TimeStep]:
        force = jnp.where(action == 1, self.force_mag, -self.force_mag)
        cos_t, sin_t = jnp.cos(state.theta), jnp.sin(state.theta)
        temp = (force + self.polemass_length * state.theta_dot**2 * sin_t) / self.total_mass
        theta_acc = (self.gravity * sin_t - cos_t * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * cos_t**2 / self.total_mass)
        )
        x_acc = temp - self.polemass_length * theta_acc * cos_t / self.total_mass
        new = CartPoleState(
            x=state.x + self.tau * state.x_dot,
            x_dot=state.x_dot + self.tau * x_acc,
            theta=state.theta + self.tau * state.theta_dot,
            theta_dot=state.theta_dot + self.tau * theta_acc,
        )
        new = jax.tree.map(lambda v: jnp.asarray(v, jnp.float32), new)
        terminated = (jnp.abs(new.x) > self.x_threshold) | (
            jnp.abs(new.theta) > self.theta_threshold
        )
        return new, transition(self._observation(new), 1.0, terminated)

    def observation_spec(self) -> specs.Array:
        return specs.Array((4,), np.float32, name="observation")

    def action_spec(self) -> specs.DiscreteArray:
        return specs.DiscreteArray(2, name="action")

    @staticmethod
    def _observation(state: CartPoleState) -> Array:
        return jnp.stack(state).astype(jnp.float32)
