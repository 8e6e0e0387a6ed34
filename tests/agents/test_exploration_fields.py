"""Every agent explores as its config says: DQN's and PQN's epsilon goes linearly from epsilon_start to
epsilon_end over epsilon_decay_fraction of the run's updates (the params carry it to the actors from the
first rollout on), and R2D2's actor of env column i of N explores with epsilon^(1 + alpha i / (N - 1))
(Horgan et al. 2018). Values set apart from the defaults (`tools/check_mutations.py --fields`)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import podrl.envs
from podrl.agents.dqn import DQNConfig
from podrl.agents.pqn import PQNConfig
from podrl.agents.r2d2 import R2D2Config
from podrl.core.types import EnvColumns

CARTPOLE = podrl.envs.env_spec(podrl.envs.make("CartPole-v1"))


@pytest.mark.parametrize("cls", [DQNConfig, PQNConfig])
def test_epsilon_decays_from_start_to_end_over_the_configured_fraction(cls):
    config = cls(epsilon_start=0.8, epsilon_end=0.1, epsilon_decay_fraction=0.5)
    agent = config.make_agent(CARTPOLE, 10)  # decays over 5 updates
    epsilon = agent.update.args[0].epsilon  # the parts' schedule (`functools.partial(update, parts)`)
    want = [0.8 - 0.7 * min(u, 5) / 5 for u in range(10)]
    np.testing.assert_allclose([float(epsilon(u)) for u in range(10)], want, rtol=1e-6)
    assert float(agent.init(jax.random.key(0), CARTPOLE).params["epsilon"]) == pytest.approx(0.8)


def test_r2d2s_ape_x_epsilons_follow_the_config():
    config = R2D2Config(epsilon=0.3, epsilon_alpha=2.0, core_size=8)
    agent = config.make_agent(podrl.envs.env_spec(podrl.envs.make("RecallCue-v0")), 10)
    state = agent.init_actor_state(3, EnvColumns(np.array([0, 2, 4], np.int32), 5))
    np.testing.assert_allclose(np.asarray(state.epsilon), 0.3 ** (1 + 2.0 * np.array([0, 2, 4]) / 4), rtol=1e-6)
