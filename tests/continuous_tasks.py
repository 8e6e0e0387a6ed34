"""The continuous-action agents' test settings: small replay configs, the ReachCue task's budgets and
thresholds, and a one-step rollout whose targets are known by hand."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from podrl.core.types import Trajectory
from podrl.envs.registry import make
from podrl.envs.types import env_spec

SMALL = dict(buffer_size=4096, warmup_steps=128, batch_size=32, hidden_sizes=(32, 32), replay_ratio=1 / 16)
"""Agents that start learning after two 8 x 8 updates (tests of plumbing, not of learning)."""


REACH = dict(buffer_size=8192, warmup_steps=256, batch_size=64, hidden_sizes=(64, 64), replay_ratio=0.25)
"""ReachCue learners: 256 uniform warm-up steps, then one gradient step per 4 env steps."""


REACH_TD3 = dict(REACH, critic_learning_rate=1e-3)


REACH_THRESHOLDS = {"sac": 12.0, "td3": 13.0}
"""Greedy returns at 4096 Anakin steps, seeds 0-2 (2 loaded CPU cores): SAC 13.4, 13.1, 13.3; TD3 15.4, 15.7,
15.6 (optimum 16; the untrained greedy policy answers ~0: 5.3)."""


REACH_SEBULBA_STEPS = 8192
"""Sebulba's two learner shards each get half the transitions, so half the gradient steps per env step."""


SPEC = env_spec(make("ReachCue-v0"))  # observations one-hot [4]; actions a box [1] in [-1, 1] (u = a)


T, B = 8, 8


GAMMA = 0.9


SAMPLES = 4096  # transitions sampled in the one gradient step (the noise draws the targets average over)


ONE_STEP = dict(buffer_size=T * B, warmup_steps=T * B, batch_size=SAMPLES, replay_ratio=1 / (T * B),
                hidden_sizes=(4,), gamma=GAMMA)
"""Learning from the first update on, one gradient step per update."""


def reward_one_rollout(seed: int = 0) -> Trajectory:
    """`[T, B]` transitions between random cues, action 0, reward 1, no episode end."""
    obs = jax.nn.one_hot(jax.random.randint(jax.random.key(seed), (T + 1, B), 0, 4), 4)
    ones = jnp.ones((T, B), jnp.float32)
    return Trajectory(obs[:-1], jnp.zeros((T, B, 1)), ones, ones, jnp.zeros((T, B), bool), obs[1:], {}, ())
