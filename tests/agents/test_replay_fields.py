"""The replay agents' own fields, each set apart from its default: every replay holds `buffer_size` items
(DQN, SAC, TD3: transitions; MuZero, R2D2: steps), and SAC's gradient step moves its target critics by
`tau` and its temperature by one Adam step of `temperature_learning_rate` (none without
`learn_temperature`); DQN's and MuZero's target networks wait for `target_update_period`; TD3 explores with
`exploration_noise`."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import podrl.envs
from continuous_tasks import ONE_STEP, SPEC, reward_one_rollout
from one_device import update_on_one_device
from podrl.agents.dqn import DQNConfig
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.r2d2 import R2D2Config
from podrl.agents.sac import SACConfig
from podrl.agents.td3 import TD3Config
from podrl.core.types import Trajectory

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


@pytest.mark.parametrize("agent_name", ["dqn", "muzero"])
def test_the_target_network_waits_for_its_update_period(cpu_devices, agent_name):
    """target_update_period 2 (both default to 1): after one update of one gradient step the online params
    moved and the target network has not (sgd step 1 of a period of 2)."""
    t, b = 8, 4
    if agent_name == "dqn":
        config, spec = DQNConfig(buffer_size=t * b, min_fill=t * b, batch_size=16, replay_ratio=1 / (t * b),
                                 target_update_period=2, hidden_sizes=(8,)), CARTPOLE
    else:
        config, spec = MuZeroConfig(hidden_sizes=(8,), latent_size=8, dynamics_sizes=(8,), prediction_sizes=(8,),
                                    support_size=3, num_simulations=4, unroll_steps=2, td_steps=2, buffer_size=t * b,
                                    min_fill=t * b, batch_size=8,
                                    replay_ratio=1 / (t * b), target_update_period=2), CARTPOLE
    agent = config.make_agent(spec, 10)
    state = agent.init(jax.random.key(0), spec)
    obs = jax.random.normal(jax.random.key(1), (t + 1, b, 4))
    ones = np.ones((t, b), np.float32)
    extras = {} if agent_name == "dqn" else {"policy": np.full((t, b, 2), 0.5, np.float32),
                                             "search_value": np.zeros((t, b), np.float32)}
    traj = Trajectory(obs[:-1], np.zeros((t, b), np.int32), ones, ones, np.zeros((t, b), bool), obs[1:], extras, ())
    after, metrics = update_on_one_device(agent)(state, traj, jax.random.key(2))
    assert float(metrics["learning"]) == 1.0 and int(after.opt_state.sgd_steps) == 1
    online = lambda s: s.params["network"] if agent_name == "dqn" else s.params  # noqa: E731
    assert max(float(np.max(np.abs(x - y))) for x, y in zip(jax.tree.leaves(online(state)),
                                                              jax.tree.leaves(online(after)))) > 0.0
    for x, y in zip(jax.tree.leaves(state.opt_state.target), jax.tree.leaves(after.opt_state.target), strict=True):
        np.testing.assert_array_equal(x, y)


def test_td3_explores_with_its_noise():
    """A zero actor's exploration actions are clip(N(0, sigma), -1, 1): sigma 0.3 (the default is 0.1),
    over 8192 envs."""
    config = TD3Config(exploration_noise=0.3, warmup_steps=32)
    agent = config.make_agent(SPEC, 10)
    params = agent.init(jax.random.key(0), SPEC).params
    params = {**params, "actor": jax.tree.map(np.zeros_like, params["actor"]), "warmup": np.zeros((), bool)}
    action, _, _ = agent.act(params, (), np.zeros((8192, 4), np.float32), jax.random.key(1))
    assert abs(float(np.std(np.asarray(action))) - 0.3) < 0.01 and abs(float(np.mean(np.asarray(action)))) < 0.01
