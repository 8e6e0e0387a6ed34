"""Every agent's learner sees the rewards its config asks for: clip(r, -c, c) * scale (`reward_clip`,
`reward_scale`; R2D2 and MuZero clip only, SAC and TD3 scale only), where each agent's rewards enter its
learner: the transitions or steps a replay agent stores, PPO's GAE returns and PQN's Q(lambda) targets at
the last step of a rollout (their networks zeroed, so the last target is the reward alone). Raw rewards
in [-3, 3]; clip 1.5 and scale 0.5 (neither a default). And PPO's normalised observations are clipped at
its obs_norm_clip."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrl.envs
from podrl.agents import continuous
from podrl.agents.dqn import DQNConfig
from podrl.agents.dqn import agent as dqn_agent
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.muzero import agent as muzero_agent
from podrl.agents.ppo import PPOConfig
from podrl.agents.ppo import agent as ppo_agent
from podrl.agents.pqn import PQNConfig
from podrl.agents.pqn.agent import q_lambda_batch
from podrl.agents.r2d2 import R2D2Config
from podrl.agents.r2d2 import agent as r2d2_agent
from podrl.agents.sac import SACConfig
from podrl.agents.td3 import TD3Config
from podrl.core.types import Trajectory

T, B, CLIP, SCALE = 4, 3, 1.5, 0.5
CARTPOLE = podrl.envs.env_spec(podrl.envs.make("CartPole-v1"))
RAW = np.random.default_rng(0).uniform(-3.0, 3.0, (T, B)).astype(np.float32)


def trajectory(extras: dict, obs_size: int = 4, action=None) -> Trajectory:
    """A `[T, B]` rollout with the raw rewards RAW, no episode end."""
    obs = jnp.asarray(np.random.default_rng(1).normal(size=(T + 1, B, obs_size)), jnp.float32)
    ones = jnp.ones((T, B), jnp.float32)
    action = jnp.zeros((T, B), jnp.int32) if action is None else action
    return Trajectory(obs[:-1], action, jnp.asarray(RAW), ones, jnp.zeros((T, B), bool), obs[1:], extras, ())


def processed(clip: float | None, scale: float) -> np.ndarray:
    return (RAW if clip is None else np.clip(RAW, -clip, clip)) * scale


def zeroed(tree):
    return jax.tree.map(jnp.zeros_like, tree)


def test_dqn_stores_clipped_scaled_rewards():
    config = DQNConfig(reward_clip=CLIP, reward_scale=SCALE, n_step=1)
    parts = config.make_agent(CARTPOLE, 10).update.args[0]  # `functools.partial(update, parts)`
    items = dqn_agent._items(parts, trajectory({}))
    np.testing.assert_allclose(np.asarray(items.reward), processed(CLIP, SCALE).reshape(-1), rtol=1e-6)


def test_r2d2_and_muzero_store_clipped_rewards():
    r2d2 = R2D2Config(reward_clip=CLIP, core_size=8)
    spec = podrl.envs.env_spec(podrl.envs.make("RecallCue-v0"))
    parts = r2d2_agent.make_parts(r2d2, spec, 10)
    carry = (jnp.zeros((T, B, 8)), jnp.zeros((T, B, 8)))
    items = r2d2_agent._items(parts, trajectory({"core_state": carry}, obs_size=3))
    np.testing.assert_allclose(np.asarray(items.steps.reward), processed(CLIP, 1.0), rtol=1e-6)
    muzero = MuZeroConfig(reward_clip=CLIP)
    parts = muzero_agent.make_parts(muzero, CARTPOLE, 10)
    extras = {"policy": jnp.full((T, B, 2), 0.5), "search_value": jnp.zeros((T, B))}
    steps = muzero_agent._items(parts, trajectory(extras))
    np.testing.assert_allclose(np.asarray(steps.reward), processed(CLIP, 1.0).reshape(-1), rtol=1e-6)


@pytest.mark.parametrize("cls", [SACConfig, TD3Config])
def test_the_continuous_agents_store_scaled_rewards(cls):
    items = continuous._items(cls(reward_scale=SCALE), trajectory({}, action=jnp.zeros((T, B, 1))))
    np.testing.assert_allclose(np.asarray(items.reward), processed(None, SCALE).reshape(-1), rtol=1e-6)


def test_ppos_returns_and_pqns_targets_start_from_the_processed_rewards():
    """With the value (Q) network zeroed, the last step's GAE return (Q(lambda) target) is its reward, and
    PQN's step before it adds gamma lambda times that."""
    ppo = PPOConfig(reward_clip=CLIP, reward_scale=SCALE)
    agent = ppo.make_agent(CARTPOLE, 10)
    params = zeroed(agent.init(jax.random.key(0), CARTPOLE).params)
    zeros = jnp.zeros((T, B))
    batch = ppo_agent._gae_batch(agent.update.args[0], params, trajectory({"log_prob": zeros, "value": zeros}))
    np.testing.assert_allclose(np.asarray(batch.target)[-1], processed(CLIP, SCALE)[-1], rtol=1e-6)
    pqn = PQNConfig(reward_clip=CLIP, reward_scale=SCALE, gamma=0.9, q_lambda=0.5)
    agent = pqn.make_agent(CARTPOLE, 10)
    params = zeroed(agent.init(jax.random.key(0), CARTPOLE).params["network"])
    target = np.asarray(q_lambda_batch(agent.update.args[0], params, trajectory({})).target).reshape(T, B)
    r = processed(CLIP, SCALE)
    np.testing.assert_allclose(target[-1], r[-1], rtol=1e-6)
    # Q = 0: G_t = r_t + gamma ((1 - lambda) max Q + lambda G_{t+1}) = r_t + 0.9 * 0.5 * G_{t+1}
    np.testing.assert_allclose(target[-2], r[-2] + 0.45 * r[-1], rtol=1e-5)


def test_normalised_observations_are_clipped_at_the_configured_bound():
    """Fresh statistics (mean 0, variance 1) leave observations as they are, then the clip: with
    obs_norm_clip 0.5, an observation of 3 acts and is valued as one of 0.5 (not so at the default 10)."""
    agent = PPOConfig(normalize_observations=True, obs_norm_clip=0.5).make_agent(CARTPOLE, 10)
    params = agent.init(jax.random.key(0), CARTPOLE).params
    far, edge = (agent.act(params, (), jnp.full((1, 4), x), jax.random.key(1))[1]["value"] for x in (3.0, 0.5))
    np.testing.assert_array_equal(far, edge)
    beyond = agent.act(params, (), jnp.full((1, 4), 0.4), jax.random.key(1))[1]["value"]
    assert not np.array_equal(beyond, edge)  # inside the bound the observation counts
