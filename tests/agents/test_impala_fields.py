"""IMPALA's loss follows its config's V-trace and loss fields, each set apart from its default: the rewards
clipped and scaled (reward_clip, reward_scale), discounted by gamma with the trace's lambda (vtrace_lambda),
and the terms weighted by value_coef and entropy_coef; the total against a float64 NumPy transcription
(`test_vtrace.numpy_vtrace`, Espeholt et al. 2018, eq. 1). The clips: test_impala.py."""

from __future__ import annotations

import numpy as np

from impala_parts import DISCRETE, _setup, _trajectory
from podrl.agents.impala.losses import make_loss_fn
from podrl.agents.networks import ActorCritic, action_distribution
from references import numpy_vtrace

FIELDS = dict(reward_clip=0.5, reward_scale=0.3, gamma=0.8, vtrace_lambda=0.7, value_coef=0.4, entropy_coef=0.05)


def test_the_loss_follows_the_configs_vtrace_and_coefficients():
    config, agent, state, network = _setup(DISCRETE, **FIELDS)
    assert all(getattr(type(config)(), name) != value for name, value in FIELDS.items())  # none is a default
    batch = _trajectory(agent, state.params, 6, log_prob_noise=0.3)
    loss, _ = make_loss_fn(config, network)(state.params, batch, None)
    dist_params, value = network.apply(state.params, batch.observation)
    next_value = network.apply(state.params, batch.next_observation, method=ActorCritic.value)
    dist = action_distribution(True)
    log_pi = np.asarray(dist.log_prob(dist_params, batch.action), np.float64)
    rho = np.exp(log_pi - np.asarray(batch.agent_extras["log_prob"], np.float64))
    reward = np.clip(np.asarray(batch.reward, np.float64), -0.5, 0.5) * 0.3
    assert (np.asarray(batch.reward) > 0.5).any()  # the clip binds
    columns = [numpy_vtrace(value[:, b], next_value[:, b], reward[:, b], 0.8 * batch.discount[:, b],
                            batch.episode_end[:, b], rho[:, b], 0.7, config.clip_rho, config.clip_pg_rho,
                            config.clip_c) for b in range(6)]
    vs, pg = (np.stack(x, axis=1) for x in zip(*columns))
    entropy = float(np.mean(np.asarray(dist.entropy(dist_params), np.float64)))
    want = -np.mean(pg * log_pi) + 0.4 * 0.5 * np.mean((vs - np.asarray(value, np.float64)) ** 2) - 0.05 * entropy
    np.testing.assert_allclose(float(loss), want, rtol=1e-4)
