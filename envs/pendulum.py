"""Inverted pendulum swing-up as a functional JAX environment.

Mirrors gymnasium's ``Pendulum-v1`` (``gymnasium.envs.classic_control.pendulum``):
a unit rod (m = l = 1) under gravity g (default 10), torque clipped to [-2, 2],
one semi-implicit Euler step of dt = 0.05 s per action with the angular
velocity clipped to [-8, 8]. The reward is
``-(normalize(theta)^2 + 0.1 * theta_dot^2 + 0.001 * u^2)``, computed from the
state *before* the step and the clipped torque u, so it lies in
[-16.27, 0]. The episode never terminates; `podrl.envs.make("Pendulum-v1")` adds
the 200-step time limit. Reset draws theta ~ U(-pi, pi), theta_dot ~ U(-1, 1).
Computation is float32 (gymnasium uses float64).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from dm_env import specs

from podrl.envs.types import Array, PRNGKey, TimeStep, restart, transition


class PendulumState(NamedTuple):
    """Pendulum angle and angular velocity.

    Attributes:
      theta: float32 [], angle from upright (rad), not wrapped (as in gymnasium).
      theta_dot: float32 [], angular velocity (rad/s), within [-max_speed, max_speed].
    """

    theta: Array
    theta_dot: Array


def _normalize_angle(x: Array) -> Array:
    """`x` mapped into [-pi, pi)."""
    return jnp.mod(x + math.pi, 2 * math.pi) - math.pi


class Pendulum:
    """Swing a pendulum up and keep it upright with a bounded torque."""

    max_speed = 8.0
    max_torque = 2.0
    dt = 0.05
    mass = 1.0
    length = 1.0

    def __init__(self, g: float = 10.0):
        self.g = float(g)

    def reset(self, key: PRNGKey) -> tuple[PendulumState, TimeStep]:
        high = jnp.asarray([math.pi, 1.0], jnp.float32)
        values = jax.random.uniform(key, (2,), jnp.float32, -high, high)
        state = PendulumState(*values)
        return state, restart(self._observation(state))

    def step(self, state: PendulumState, action: Array) -> tuple[PendulumState, TimeStep]:
        u = jnp.clip(jnp.reshape(action, (-1,))[0], -self.max_torque, self.max_torque)
        u = u.astype(jnp.float32)
        th, thdot = state
        cost = _normalize_angle(th) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
        m, length = self.mass, self.length
        thdot_acc = 3 * self.g / (2 * length) * jnp.sin(th) + 3.0 / (m * length**2) * u
        new_thdot = jnp.clip(thdot + thdot_acc * self.dt, -self.max_speed, self.max_speed)
        new = PendulumState(theta=th + new_thdot * self.dt, theta_dot=new_thdot)
        return new, transition(self._observation(new), -cost, False)

    def observation_spec(self) -> specs.Array:
        return specs.Array((3,), np.float32, name="observation")

    def action_spec(self) -> specs.BoundedArray:
        return specs.BoundedArray(
            (1,), np.float32, -self.max_torque, self.max_torque, name="action"
        )

    @staticmethod
    def _observation(state: PendulumState) -> Array:
        th, thdot = state
        return jnp.stack([jnp.cos(th), jnp.sin(th), thdot]).astype(jnp.float32)
