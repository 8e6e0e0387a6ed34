"""Every agent's optimizer is its config's: the optimizer each agent's update (or gradient step) uses,
taken from the agent as built, makes one step on a known gradient equal to the closed form of a
global-norm clip then Adam (or RMSProp) with the config's step size, clip and epsilon, and its step-size
schedule anneals (or not) as the config says. Values are set apart from the defaults (a field the code
read at its default would give other numbers: `tools/check_mutations.py --fields`)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import podrl.envs
from podrl.agents.dqn import DQNConfig
from podrl.agents.impala import ImpalaConfig
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.muzero import agent as muzero_agent
from podrl.agents.ppo import PPOConfig
from podrl.agents.pqn import PQNConfig
from podrl.agents.r2d2 import R2D2Config
from podrl.agents.r2d2 import agent as r2d2_agent
from podrl.agents.sac import SACConfig
from podrl.agents.td3 import TD3Config

DISCRETE = podrl.envs.env_spec(podrl.envs.make("CartPole-v1"))
CONTINUOUS = podrl.envs.env_spec(podrl.envs.make("ReachCue-v0"))
GRAD = np.array([3.0, -4.0, 0.0], np.float32)  # global norm 5
LR, CLIP, EPS, TOTAL = 0.3, 2.0, 0.5, 10


def adam_step(lr: float, clip: float, eps: float) -> np.ndarray:
    """Adam's first step on GRAD after a global-norm clip: -lr * g / (|g| + eps) (m and v unbiased are g, g^2)."""
    g = GRAD * min(1.0, clip / np.linalg.norm(GRAD))
    return -lr * g / (np.abs(g) + eps)


def rmsprop_step(lr: float, clip: float, eps: float, in_sqrt: bool) -> np.ndarray:
    """RMSProp's first step (decay 0.99): nu = 0.01 g^2; -lr g / sqrt(nu + eps), or / (sqrt(nu) + eps)."""
    g = GRAD * min(1.0, clip / np.linalg.norm(GRAD))
    nu = 0.01 * g ** 2
    return -lr * g / (np.sqrt(nu + eps) if in_sqrt else np.sqrt(nu) + eps)


def first_step(optimizer) -> np.ndarray:
    params = {"w": jnp.zeros(3)}
    updates, _ = optimizer.update({"w": jnp.asarray(GRAD)}, optimizer.init(params), params)
    return np.asarray(updates["w"])


def update_parts(agent):
    """The parts an agent's `update` closes over (`functools.partial(update, parts)`)."""
    return agent.update.args[0]


def parts_of(config):
    """`(parts, optimizer steps the schedule anneals over)` of the agent `config` builds."""
    if isinstance(config, R2D2Config):
        return r2d2_agent.make_parts(config, podrl.envs.env_spec(podrl.envs.make("RecallCue-v0")), TOTAL), TOTAL
    if isinstance(config, MuZeroConfig):
        return muzero_agent.make_parts(config, DISCRETE, TOTAL), TOTAL
    parts = update_parts(config.make_agent(DISCRETE, TOTAL))
    steps = TOTAL if isinstance(config, DQNConfig) else config.num_optimizer_steps(TOTAL)  # DQN anneals per update
    return parts, steps


@pytest.mark.parametrize("cls", [PPOConfig, ImpalaConfig, PQNConfig, DQNConfig, MuZeroConfig, R2D2Config])
def test_the_update_steps_with_the_configs_optimizer_and_anneal(cls):
    anneal = not cls().anneal_lr
    eps_field = "optimizer_eps" if cls is ImpalaConfig else "adam_eps"
    config = cls(learning_rate=LR, max_grad_norm=CLIP, anneal_lr=anneal, **{eps_field: EPS})
    parts, steps = parts_of(config)
    np.testing.assert_allclose(first_step(parts.optimizer), adam_step(LR, CLIP, EPS), rtol=1e-5)
    np.testing.assert_allclose(float(parts.learning_rate(steps // 2)), LR * (0.5 if anneal else 1.0), rtol=1e-5)


@pytest.mark.parametrize("in_sqrt", [True, False])
def test_impala_steps_with_rmsprop_where_the_config_says(in_sqrt):
    config = ImpalaConfig(optimizer="rmsprop", learning_rate=LR, max_grad_norm=CLIP, optimizer_eps=EPS,
                          rmsprop_eps_in_sqrt=in_sqrt)
    parts, _ = parts_of(config)
    np.testing.assert_allclose(first_step(parts.optimizer), rmsprop_step(LR, CLIP, EPS, in_sqrt), rtol=1e-5)


@pytest.mark.parametrize("cls", [SACConfig, TD3Config])
def test_the_actor_and_critic_step_with_their_own_step_sizes(cls):
    config = cls(actor_learning_rate=LR, critic_learning_rate=2 * LR, max_grad_norm=CLIP, adam_eps=EPS)
    parts = config.make_agent(CONTINUOUS, TOTAL).act.args[0]  # `functools.partial(act, parts)`
    np.testing.assert_allclose(first_step(parts.actor_optimizer), adam_step(LR, CLIP, EPS), rtol=1e-5)
    np.testing.assert_allclose(first_step(parts.critic_optimizer), adam_step(2 * LR, CLIP, EPS), rtol=1e-5)
