"""gymnasium's MuJoCo envs (the `mujoco` extra) on the host: specs, time limits, and short Sebulba runs.

HalfCheetah never terminates (only gymnasium's TimeLimit of 1000 steps ends it: a truncation,
bootstrapped), Hopper terminates when it falls (discount 0, not bootstrapped). The tests
check both through the adapter and through the replay's transitions, the path SAC and TD3
learn from, then train SAC, TD3 and PPO for a few updates on them in Sebulba.
"""

from __future__ import annotations

import jax
import mujoco  # noqa: F401  (in [dev]: a broken install fails here, never skips)
import numpy as np
import pytest

from podrl.agents import replay
from podrl.agents.ppo import PPOConfig
from podrl.agents.sac import SACConfig
from podrl.agents.td3 import TD3Config
from podrl.envs.adapters.make import make_host_env
from podrl.envs.adapters.specs import check_host_env
from podrl.envs.types import FIRST, LAST, MID
from podrl.run.config import LoggingConfig
from podrl.sebulba import SebulbaConfig, train_sebulba
from podrl.sebulba.transport import stack_rollout, step_record

QUIET = LoggingConfig(run_dir=None, console=False)
SHAPES = {"HalfCheetah-v5": (17, 6), "Hopper-v5": (11, 3), "Walker2d-v5": (17, 6), "Ant-v5": (105, 8)}
"""(observation size, action size) of each env gymnasium 1.x registers (v5: Ant without contact forces: 105)."""


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_mujoco_envs_have_box_specs_and_keep_the_host_contract(name):
    env = make_host_env(name, num_envs=2, seed=0)
    obs_size, act_size = SHAPES[name]
    assert env.observation_spec().shape == (obs_size,) and env.observation_spec().dtype == np.float32
    action = env.action_spec()
    assert action.shape == (act_size,) and action.dtype == np.float32
    np.testing.assert_array_equal(action.minimum, -1.0), np.testing.assert_array_equal(action.maximum, 1.0)
    check_host_env(env, steps=4)
    env.close()


def _rollout(env, actions: np.ndarray):
    """Steps `env` with `actions` `[T, B, A]` from a reset: `(timesteps, stacked [T, B] Trajectory)`."""
    ts = env.reset(0)
    timesteps, steps = [], []
    for action in actions:
        nxt = env.step(action)
        steps.append(step_record(ts.observation, action, nxt.reward, nxt.discount, nxt.extras["truncated"],
                                 nxt.extras["next_obs"], {}))
        timesteps.append(nxt)
        ts = nxt
    return timesteps, stack_rollout(steps, ())


def test_halfcheetah_time_limit_is_a_truncation_and_is_bootstrapped():
    """max_episode_steps=5: step 5 is LAST with discount 1, truncated, the next observation is the final
    state (not the reset one), and its replay transition bootstraps from it with weight gamma."""
    env = make_host_env("HalfCheetah-v5", num_envs=2, seed=0, max_episode_steps=5)
    actions = np.random.default_rng(0).uniform(-1, 1, (7, 2, 6)).astype(np.float32)
    timesteps, trajectory = _rollout(env, actions)
    types = [int(ts.step_type[0]) for ts in timesteps]
    assert types == [MID, MID, MID, MID, LAST, MID, MID]
    end = timesteps[4]
    assert end.extras["truncated"].all() and (end.discount == 1.0).all()
    assert (end.extras["episode_length"] == 5).all()
    assert not np.allclose(end.observation, end.extras["next_obs"])  # reset in the same step
    np.testing.assert_array_equal(timesteps[5].extras["next_obs"], timesteps[5].observation)
    items = replay.transitions(jax.tree.map(np.asarray, trajectory), 1, 0.99)
    discount = np.asarray(items.discount).reshape(7, 2)
    np.testing.assert_allclose(discount, 0.99)  # every step bootstraps, the truncated one too
    np.testing.assert_array_equal(np.asarray(items.next_observation).reshape(7, 2, -1)[4], end.extras["next_obs"])
    env.close()


def test_hopper_fall_is_a_termination_and_is_not_bootstrapped():
    """Hopper-v5 with full-torque actions falls within ~100 steps: LAST, discount 0, not truncated; its
    replay transition has bootstrap weight 0 and the steps before it gamma."""
    env = make_host_env("Hopper-v5", num_envs=1, seed=0)
    actions = np.ones((200, 1, 3), np.float32)
    timesteps, trajectory = _rollout(env, actions)
    ends = [t for t, ts in enumerate(timesteps) if ts.step_type[0] == LAST]
    assert ends, "Hopper did not fall in 200 full-torque steps"
    first = timesteps[ends[0]]
    assert first.discount[0] == 0.0 and not first.extras["truncated"][0] and first.extras["episode_length"][0] < 200
    discount = np.asarray(replay.transitions(jax.tree.map(np.asarray, trajectory), 1, 0.99).discount)
    assert discount[ends[0]] == 0.0 and np.allclose(discount[:ends[0]], 0.99)
    assert env.reset(1).step_type[0] == FIRST
    env.close()


TINY_OFF_POLICY = dict(buffer_size=1024, warmup_steps=64, batch_size=16, hidden_sizes=(16, 16), replay_ratio=1 / 8)
"""Learning from the second update on (2 envs x 16 steps per update); plumbing, not learning."""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("env, agent_config", [
    ("HalfCheetah-v5", SACConfig(**TINY_OFF_POLICY)), ("Hopper-v5", TD3Config(**TINY_OFF_POLICY)),
    ("Walker2d-v5", PPOConfig(num_minibatches=2, hidden_sizes=(16, 16)))], ids=["sac", "td3", "ppo"])
def test_agents_train_on_mujoco_under_sebulba(cpu_devices, env, agent_config):
    """4 updates of 2 envs x 16 steps, 1 actor and 1 learner device, lag 0, a 1-episode greedy eval (capped):
    the learner took gradient steps (off-policy: from update 2), every parameter stayed finite and moved."""
    config = SebulbaConfig(env=env, envs_per_thread=2, rollout_length=16, total_steps=2 * 16 * 4,
                           actor_devices=(0,), learner_devices=(1,), lag="0", log_every=1, eval_episodes=1,
                           eval_max_steps=50, logging=QUIET)
    result = train_sebulba(config, agent_config)
    assert int(np.asarray(result.train_state.update_step)) == 4 and result.env_steps == 128
    if "train/learning" in result.history[-1]:
        assert [float(np.ravel(r["train/learning"])[0]) for r in result.history] == [0.0, 1.0, 1.0, 1.0]
    params = [np.asarray(x) for x in jax.tree.leaves(jax.device_get(result.train_state.params))]
    assert all(np.isfinite(p).all() for p in params)
    assert np.isfinite(result.final_eval_return)
