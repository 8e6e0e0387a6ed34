"""Acrobot as a functional JAX environment.

Mirrors gymnasium's ``Acrobot-v1`` (``gymnasium.envs.classic_control.acrobot``),
Sutton (1996), "Generalization in Reinforcement Learning: Successful Examples
Using Sparse Coarse Coding", with the dynamics of Sutton & Barto's book (the
gymnasium default, ``book_or_nips = "book"``): two unit links, one classic
4th-order Runge-Kutta step of dt = 0.2 s per action with the torque held
constant, angles wrapped to [-pi, pi] and velocities clipped to
[-4 pi, 4 pi] and [-9 pi, 9 pi] after the step. Actions 0, 1, 2 apply torques
-1, 0, +1 (no torque noise, as in gymnasium's default). Reward is -1 per step
and 0 on the step that reaches the goal, -cos(t1) - cos(t1 + t2) > 1, which
terminates the episode. Reset draws all four state variables from
U(-0.1, 0.1). The 500-step time limit is added by `podrl.envs.make("Acrobot-v1")`.
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


class AcrobotState(NamedTuple):
    """Joint angles and velocities.

    Attributes:
      theta1: float32 [], angle of the first link from hanging down (rad).
      theta2: float32 [], angle of the second link relative to the first (rad).
      dtheta1: float32 [], angular velocity of the first joint (rad/s).
      dtheta2: float32 [], angular velocity of the second joint (rad/s).
    """

    theta1: Array
    theta2: Array
    dtheta1: Array
    dtheta2: Array


def _wrap(x: Array, low: float, high: float) -> Array:
    """Shifts `x` by whole periods (high - low) into [low, high]; inside, unchanged."""
    period = high - low
    above = jnp.ceil((x - high) / period)
    below = jnp.ceil((low - x) / period)
    return jnp.where(x > high, x - above * period, jnp.where(x < low, x + below * period, x))


class Acrobot:
    """Swing the tip of a two-link pendulum above the bar by torquing the middle joint."""

    dt = 0.2
    link_length_1 = 1.0
    link_mass_1 = 1.0
    link_mass_2 = 1.0
    link_com_1 = 0.5  # position of each link's centre of mass
    link_com_2 = 0.5
    link_moi = 1.0  # moment of inertia of both links
    gravity = 9.8
    max_vel_1 = 4 * math.pi
    max_vel_2 = 9 * math.pi
    torques = (-1.0, 0.0, 1.0)
    reset_bound = 0.1

    def reset(self, key: PRNGKey) -> tuple[AcrobotState, TimeStep]:
        values = jax.random.uniform(
            key, (4,), jnp.float32, -self.reset_bound, self.reset_bound
        )
        state = AcrobotState(*values)
        return state, restart(self._observation(state))

    def step(self, state: AcrobotState, action: Array) -> tuple[AcrobotState, TimeStep]:
        torque = jnp.asarray(self.torques, jnp.float32)[action]
        y = jnp.stack(state).astype(jnp.float32)
        h = self.dt
        k1 = self._derivatives(y, torque)
        k2 = self._derivatives(y + h / 2 * k1, torque)
        k3 = self._derivatives(y + h / 2 * k2, torque)
        k4 = self._derivatives(y + h * k3, torque)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        new = AcrobotState(
            theta1=_wrap(y[0], -math.pi, math.pi),
            theta2=_wrap(y[1], -math.pi, math.pi),
            dtheta1=jnp.clip(y[2], -self.max_vel_1, self.max_vel_1),
            dtheta2=jnp.clip(y[3], -self.max_vel_2, self.max_vel_2),
        )
        terminated = -jnp.cos(new.theta1) - jnp.cos(new.theta1 + new.theta2) > 1.0
        reward = jnp.where(terminated, 0.0, -1.0)
        return new, transition(self._observation(new), reward, terminated)

    def _derivatives(self, y: Array, torque: Array) -> Array:
        """d/dt of [theta1, theta2, dtheta1, dtheta2] under `torque` (book dynamics)."""
        t1, t2, dt1, dt2 = y
        m1, m2 = self.link_mass_1, self.link_mass_2
        l1, lc1, lc2, inertia = self.link_length_1, self.link_com_1, self.link_com_2, self.link_moi
        g = self.gravity
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * jnp.cos(t2)) + 2 * inertia
        d2 = m2 * (lc2**2 + l1 * lc2 * jnp.cos(t2)) + inertia
        # cos(a - pi/2) == sin(a): the gravity terms of both links.
        phi2 = m2 * lc2 * g * jnp.sin(t1 + t2)
        phi1 = (
            -m2 * l1 * lc2 * dt2**2 * jnp.sin(t2)
            - 2 * m2 * l1 * lc2 * dt2 * dt1 * jnp.sin(t2)
            + (m1 * lc1 + m2 * l1) * g * jnp.sin(t1)
            + phi2
        )
        ddt2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dt1**2 * jnp.sin(t2) - phi2) / (
            m2 * lc2**2 + inertia - d2**2 / d1
        )
        ddt1 = -(d2 * ddt2 + phi1) / d1
        return jnp.stack([dt1, dt2, ddt1, ddt2])

    def observation_spec(self) -> specs.Array:
        return specs.Array((6,), np.float32, name="observation")

    def action_spec(self) -> specs.DiscreteArray:
        return specs.DiscreteArray(3, name="action")

    @staticmethod
    def _observation(state: AcrobotState) -> Array:
        t1, t2, dt1, dt2 = state
        obs = jnp.stack([jnp.cos(t1), jnp.sin(t1), jnp.cos(t2), jnp.sin(t2), dt1, dt2])
        return obs.astype(jnp.float32)
