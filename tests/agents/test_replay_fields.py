"""The replay agents' own fields, each set apart from its default: every replay holds `buffer_size` items
(DQN, SAC, TD3: transitions; MuZero, R2D2: steps), and SAC's gradient step moves its target critics by
`tau` and its temperature by one Adam step of `temperature_learning_rate` (none without
`learn_temperature`)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import podrl.envs
from podrl.agents.dqn import DQNConfig
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.r2d2 import R2D2Config
from podrl.agents.sac import SACConfig
from podrl.agents.td3 import TD3Config
from one_device import update_on_one_device
from test_continuous_update import ONE_STEP, SPEC, reward_one_rollout

CARTPOLE = podrl.envs.env_spec(podrl.envs.make("CartPole-v1"))
RECALL = podrl.envs.env_spec(podrl.envs.make("RecallCue-v0"))


@pytest.mark.parametrize("config, spec", [
    (DQNConfig(buffer_size=96, min_fill=32), CARTPOLE), (SACConfig(buffer_size=96, warmup_steps=32), SPEC),
    (TD3Config(buffer_size=96, warmup_steps=32), SPEC),
    (MuZeroConfig(buffer_size=96, min_fill=64), CARTPOLE),
    (R2D2Config(buffer_size=96, min_fill=48, sequence_period=4, core_size=8), RECALL),
], ids=["dqn", "sac", "td3", "muzero", "r2d2"])
def test_the_replay_holds_buffer_size_items(config, spec):
    replay = config.make_agent(spec, 10).init(jax.random.key(0), spec).shard_state
    steps = getattr(replay, "steps", replay)  # a prioritised replay keeps its steps in a ring
    assert steps.capacity == 96 and all(np.shape(x)[0] == 96 for x in jax.tree.leaves(steps.data))


@pytest.mark.parametrize("learn", [True, False])
def test_sac_moves_its_targets_by_tau_and_its_temperature_by_its_own_step_size(cpu_devices, learn):
    tau, lr = 0.3, 0.02
    config = SACConfig(**ONE_STEP, tau=tau, learn_temperature=learn, temperature_learning_rate=lr)
    agent = config.make_agent(SPEC, 10)
    state = agent.init(jax.random.key(0), SPEC)
    after, metrics = update_on_one_device(agent)(state, reward_one_rollout(), jax.random.key(1))
    assert float(metrics["learning"]) == 1.0
    before, learner = state.opt_state, after.opt_state
    for old, online, new in zip(jax.tree.leaves(before.critic_target), jax.tree.leaves(learner.critic),
                                jax.tree.leaves(learner.critic_target), strict=True):
        np.testing.assert_allclose(new, tau * online + (1 - tau) * old, rtol=1e-5, atol=1e-7)
    step = float(learner.temperature.log_alpha - before.temperature.log_alpha)
    assert (abs(step) == pytest.approx(lr, rel=1e-3)) if learn else step == 0.0  # Adam's first step: lr * sign
