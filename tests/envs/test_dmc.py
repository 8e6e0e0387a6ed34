"""dm_control suite tasks on the host (`dmc:<domain>-<task>`, the `dmc` extra): names, flat
observations, action bounds, the time limit as a bootstrapped truncation, and a short Sebulba run."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from dev_extra import require
from podrl.agents import replay
from podrl.agents.sac import SACConfig
from podrl.envs.adapters.dmc import task_names
from podrl.envs.adapters.make import make_host_env
from podrl.envs.adapters.specs import check_host_env
from podrl.envs.errors import UserInputError
from podrl.envs.registry import UnknownEnvError
from podrl.envs.types import LAST, MID
from podrl.run.config import LoggingConfig
from podrl.sebulba import SebulbaConfig, train_sebulba
from podrl.sebulba.transport import stack_rollout, step_record

suite = require("dm_control.suite", "dm_control")  # in [dev] where it has wheels: a broken install fails here
QUIET = LoggingConfig(run_dir=None, console=False)


@pytest.mark.parametrize("name, says", [
    ("dmc:nosuch-run", ["unknown dm_control domain 'nosuch'", "'cheetah'", "'cartpole'"]),
    ("dmc:cheetah-fly", ["has no task 'fly'", "['run']"]),
    ("dmc:cartpole", ["has no task ''", "'swingup'", "'balance'"])])
def test_unknown_domain_or_task_names_the_valid_ones(name, says):
    with pytest.raises(UnknownEnvError) as info:
        make_host_env(name, num_envs=1)
    assert isinstance(info.value, UserInputError) and info.value.field == "env"
    for text in says:
        assert text in str(info.value), str(info.value)


def test_task_names_cover_the_suite():
    names = task_names()
    assert "dmc:cartpole-swingup" in names and "dmc:cheetah-run" in names and len(names) == len(suite.ALL_TASKS)


def test_observation_is_the_concatenation_in_spec_order_and_actions_keep_the_task_bounds():
    env = make_host_env("dmc:cartpole-swingup", num_envs=2, seed=3)
    raw = suite.load("cartpole", "swingup", task_kwargs={"random": 3})  # env 0 of the batch
    assert list(raw.observation_spec()) == ["position", "velocity"]  # shapes (3,) and (2,)
    assert env.observation_spec().shape == (5,) and env.observation_spec().dtype == np.float32
    action = env.action_spec()
    assert action.shape == (1,) and action.dtype == np.float32
    np.testing.assert_array_equal(action.minimum, [-1.0]), np.testing.assert_array_equal(action.maximum, [1.0])
    ts, want = env.reset(3), raw.reset()
    np.testing.assert_allclose(ts.observation[0], np.concatenate([want.observation["position"],
                                                                  want.observation["velocity"]]), rtol=1e-6)
    for a in (0.5, -1.0, 0.25):
        ts, want = env.step(np.full((2, 1), a, np.float32)), raw.step(np.array([a]))
        flat = np.concatenate([want.observation["position"], want.observation["velocity"]])
        np.testing.assert_allclose(ts.observation[0], flat, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ts.reward[0], want.reward, rtol=1e-5)
    check_host_env(env, steps=4)
    cheetah = make_host_env("dmc:cheetah-run", 1)  # position (8,) + velocity (9,); 6 actuators
    assert cheetah.observation_spec().shape == (17,) and cheetah.action_spec().shape == (6,)


def test_the_time_limit_is_a_truncation_and_is_bootstrapped():
    """time_limit 0.05 s at cartpole's 0.01 s control step = 5 steps: step 5 is LAST with discount 1
    (dm_control's time limit), reported truncated, the next observation is the final state, and the
    replay transition bootstraps from it with weight gamma."""
    env = make_host_env("dmc:cartpole-swingup", num_envs=2, seed=0, time_limit=0.05)
    ts, steps, timesteps = env.reset(0), [], []
    for t in range(7):
        action = np.full((2, 1), 0.5 if t % 2 else -0.5, np.float32)
        nxt = env.step(action)
        steps.append(step_record(ts.observation, action, nxt.reward, nxt.discount, nxt.extras["truncated"],
                                 nxt.extras["next_obs"], {}))
        timesteps.append(ts := nxt)
    assert [int(t.step_type[0]) for t in timesteps] == [MID, MID, MID, MID, LAST, MID, MID]
    end = timesteps[4]
    assert end.extras["truncated"].all() and (end.discount == 1.0).all() and (end.extras["episode_length"] == 5).all()
    assert not np.allclose(end.observation, end.extras["next_obs"])  # reset in the same step
    items = replay.transitions(jax.tree.map(np.asarray, stack_rollout(steps, ())), 1, 0.99)
    np.testing.assert_allclose(np.asarray(items.discount), 0.99)
    np.testing.assert_array_equal(np.asarray(items.next_observation).reshape(7, 2, -1)[4], end.extras["next_obs"])
    env.close()


@pytest.mark.timeout(300)
def test_sac_trains_on_a_dm_control_task_under_sebulba(cpu_devices):
    """4 updates of 2 envs x 16 steps of dmc:cheetah-run, lag 0; learning from update 2 on; finite params."""
    agent = SACConfig(buffer_size=1024, warmup_steps=64, batch_size=16, hidden_sizes=(16, 16), replay_ratio=1 / 8)
    config = SebulbaConfig(env="dmc:cheetah-run", envs_per_thread=2, rollout_length=16, total_steps=2 * 16 * 4,
                           actor_devices=(0,), learner_devices=(1,), lag="0", log_every=1, eval_episodes=1,
                           eval_max_steps=50, logging=QUIET)
    result = train_sebulba(config, agent)
    assert int(np.asarray(result.train_state.update_step)) == 4
    assert [float(np.ravel(r["train/learning"])[0]) for r in result.history] == [0.0, 1.0, 1.0, 1.0]
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(jax.device_get(result.train_state.params)))
    assert np.isfinite(result.final_eval_return)
