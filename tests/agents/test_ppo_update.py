"""What PPO's update learns from: the GAE advantages and value targets of its trajectory, bootstrapped
from V(next_observation) at a time limit and not at a termination, against a NumPy transcription
(Schulman et al. 2016, eq. 16, with episode ends), read back through the first minibatch's losses."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from one_device import update_on_one_device
from podrl.agents.ppo import PPOConfig
from podrl.core.types import Trajectory
from podrl.envs.registry import make
from podrl.envs.types import env_spec

SPEC = env_spec(make("MatchCue-v0"))  # observations [4], 4 actions
T, B = 6, 2


def numpy_gae(r, discount, end, v, v_next, gamma, lam):
    """delta_t = r_t + gamma d_t V(o'_t) - V(o_t); A_t = delta_t + gamma lambda (1 - end_t) A_{t+1}, A_T = 0:
    a termination (d = 0) does not bootstrap, a truncation (d = 1) bootstraps from its final observation
    o'_t; both cut the trace. Columns are envs."""
    advantage = np.zeros_like(r)
    following = np.zeros(r.shape[1])
    for t in reversed(range(len(r))):
        delta = r[t] + gamma * discount[t] * v_next[t] - v[t]
        following = delta + gamma * lam * (1.0 - end[t]) * following
        advantage[t] = following
    return advantage


def test_update_learns_from_gae_that_bootstraps_at_time_limits_and_not_at_terminations(cpu_devices):
    """One epoch of one minibatch, advantages not normalised: the first (only) step's losses are taken
    at the acting params, where the ratio is 1 and V = V_old, so policy_loss = -mean(A) and
    value_loss = mean(A^2) / 2 with A from the trajectory: env 0 terminates after t = 1 and is
    truncated after t = 4, env 1 is truncated after t = 2; a truncated step's next_observation is
    its final observation, not the next row's (the reset)."""
    gamma, lam = 0.9, 0.8
    config = PPOConfig(num_epochs=1, num_minibatches=1, gamma=gamma, gae_lambda=lam, normalize_advantages=False,
                       hidden_sizes=(16,))
    agent = config.make_agent(SPEC, 10)
    state = agent.init(jax.random.key(0), SPEC)
    keys = jax.random.split(jax.random.key(1), 5)
    obs = 2.0 * jax.random.normal(keys[0], (T + 1, B, 4))
    final = 2.0 * jax.random.normal(keys[1], (T, B, 4))  # where an episode ended: its last observation
    discount = np.ones((T, B), np.float32)
    truncated = np.zeros((T, B), bool)
    discount[1, 0] = 0.0
    truncated[4, 0] = truncated[2, 1] = True
    end = (discount == 0.0) | truncated
    next_obs = jnp.where(jnp.asarray(end)[..., None], final, obs[1:])
    action, extras, _ = jax.vmap(lambda o, k: agent.act(state.params, (), o, k))(obs[:-1], jax.random.split(keys[2], T))
    reward = jax.random.normal(keys[3], (T, B))
    traj = Trajectory(obs[:-1], action, reward, jnp.asarray(discount), jnp.asarray(truncated), next_obs, extras, ())
    _, metrics = update_on_one_device(agent)(state, traj, jax.random.key(2))

    value = np.asarray(extras["value"], np.float64)
    values_of = jax.vmap(lambda o: agent.act(state.params, (), o, keys[4])[1]["value"])  # V(o) [T, B], acting params
    next_value = np.asarray(values_of(next_obs), np.float64)
    assert np.min(np.abs(next_value[truncated])) > 0.05  # bootstrapping there or not differs
    advantage = numpy_gae(np.asarray(reward, np.float64), discount, end, value, next_value, gamma, lam)
    np.testing.assert_allclose(float(metrics["policy_loss"]), -np.mean(advantage), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(metrics["value_loss"]), 0.5 * np.mean(advantage**2), rtol=1e-4)
    np.testing.assert_allclose(float(metrics["approx_kl"]), 0.0, atol=1e-6)  # acting params: ratio 1
