"""xland-minigrid's MiniGrid tasks through `podrl.envs.xminigrid`: the `{img, direction}` observation and its
encoders, the env's own truncation kept apart from reaching the goal, bad names, the host adapter, and a short
Anakin PPO run through the embedding CNN."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("xminigrid", reason="the xminigrid extra is not installed (pip install 'podrl[xminigrid]')")

import xminigrid  # noqa: E402

import podrl.envs  # noqa: E402
from podrl.agents.inputs import torso_input  # noqa: E402
from podrl.agents.ppo import PPOConfig  # noqa: E402
from podrl.anakin import train_anakin  # noqa: E402
from podrl.anakin.config import AnakinConfig  # noqa: E402
from podrl.core.errors import ConfigError  # noqa: E402
from podrl.envs.adapters.make import make_host_env  # noqa: E402
from podrl.envs.adapters.optional import MissingExtraError  # noqa: E402
from podrl.envs.registry import UnknownEnvError, check_name  # noqa: E402
from podrl.envs.types import LAST, MID  # noqa: E402
from podrl.run.config import LoggingConfig  # noqa: E402

EMPTY = "xminigrid:MiniGrid-Empty-5x5"
QUIET = LoggingConfig(run_dir=None, console=False)


def rollout(env, actions):
    """`[T]` timesteps of `env` from reset(key 0) through `actions` `[T]`, one jitted scan."""

    def run(actions):
        return jax.lax.scan(env.step, env.reset(jax.random.key(0))[0], actions)[1]

    return jax.device_get(jax.jit(run)(actions))


def test_the_observation_is_the_view_and_the_direction_read_by_embeddings():
    env = podrl.envs.make(EMPTY)
    spec = env.observation_spec()
    assert spec["img"].shape == (7, 7, 2) and spec["img"].dtype == np.uint8
    np.testing.assert_array_equal(spec["img"].maximum[0, 0], [12, 11])  # NUM_TILES - 1, NUM_COLORS - 1
    assert (spec["direction"].minimum, spec["direction"].maximum) == (0, 3)
    assert env.action_spec().num_values == 6
    _, ts = jax.jit(env.reset)(jax.random.key(2))
    raw_env, params = xminigrid.make("MiniGrid-Empty-5x5")
    raw = jax.jit(raw_env.reset)(params, jax.random.key(2))
    np.testing.assert_array_equal(ts.observation["img"], raw.observation)
    assert ts.observation["direction"] == raw.state.agent.direction
    for key in spec:
        spec[key].validate(np.asarray(ts.observation[key]))
    inputs = {leaf.key: leaf for leaf in torso_input(podrl.envs.env_spec(env), "mlp").leaves}
    assert inputs["img"].encoder == "embed_cnn" and inputs["img"].num_values == 13  # ids, not pixels
    assert inputs["direction"].encoder == "embed" and inputs["direction"].num_values == 4


def test_the_time_limit_is_a_truncation_and_the_goal_a_termination():
    turns = jnp.ones(3, jnp.int32)  # turning in place never reaches the goal
    ts = rollout(podrl.envs.make(EMPTY + ",max_steps=3"), turns)
    np.testing.assert_array_equal(ts.step_type, [MID, MID, LAST])
    np.testing.assert_array_equal(ts.discount, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(ts.extras["truncated"], [False, False, True])
    # Empty-5x5 starts in the top-left corner facing right, the goal in the bottom-right: 2 forward,
    # turn right (clockwise), 2 forward
    ts = rollout(podrl.envs.make(EMPTY), jnp.array([0, 0, 1, 0, 0], jnp.int32))
    np.testing.assert_array_equal(ts.step_type, [MID, MID, MID, MID, LAST])
    np.testing.assert_array_equal(ts.discount, [1.0, 1.0, 1.0, 1.0, 0.0])
    assert not ts.extras["truncated"].any()
    assert ts.reward[-1] == pytest.approx(1.0 - 0.9 * 5 / 100)  # xland-minigrid's success reward, max_steps 100


@pytest.mark.parametrize("name, fragment", [
    ("xminigrid:MiniGrid-DorKey-5x5", "did you mean ['MiniGrid-DoorKey-5x5'"),
    ("xminigrid:XLand-MiniGrid-R1-9x9", "need a ruleset from a benchmark"),
    (EMPTY + ",max_step=3", "unknown env param 'max_step'"),
    (EMPTY + ",max_steps=0", "env param 'max_steps' must be a positive int, got 0"),
])
def test_bad_names_are_unknown_env_errors_in_both_layouts(name, fragment):
    for build in (check_name, lambda n: make_host_env(n, 1), lambda n: make_host_env("jax:" + n, 1)):
        with pytest.raises(UnknownEnvError) as info:
            build(name)
        assert fragment in str(info.value), str(info.value)
    with pytest.raises(ConfigError, match="^env: "):
        AnakinConfig(env=name)


def test_missing_xminigrid_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "xminigrid", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'podrl\[xminigrid\]'"):
        check_name(EMPTY)


def test_the_host_adapter_steps_the_same_env():
    host = make_host_env("jax:" + EMPTY, 2)
    assert host.observation_spec() == podrl.envs.make(EMPTY).observation_spec()
    ts = host.reset(seed=0)
    assert (ts.observation["direction"] == ts.observation["direction"][0]).all()  # Empty-5x5 starts facing right
    ts = host.step(np.array([1, 2]))  # turn right, turn left: the directions part
    assert ts.observation["img"].shape == (2, 7, 7, 2)
    assert ts.observation["direction"][0] != ts.observation["direction"][1]
    host.close()


@pytest.mark.timeout(300)
def test_anakin_ppo_runs_on_doorkey_through_the_embedding_cnn(cpu_devices):
    name = "xminigrid:MiniGrid-DoorKey-5x5"
    config = AnakinConfig(env=name, num_envs=8, rollout_length=16, total_steps=8 * 16 * 2, updates_per_call=2,
                          num_devices=1, eval_episodes=2, eval_max_steps=20, logging=QUIET)
    result = train_anakin(config, PPOConfig(num_minibatches=2, hidden_sizes=(16,)), devices=cpu_devices[:1])
    torso = result.state.train_state.params["params"]["torso"]["input_img"]  # shared: the view is an image
    assert torso["Embed_0"]["embedding"].shape == (1, 13, 16)  # one seed, 13 ids x 16 features
    assert torso["Conv_0"]["kernel"].shape == (1, 3, 3, 2 * 16, 16)  # the MinAtar conv over both ids' embeddings
    metrics = {k: v for k, v in result.history[-1].items() if k.startswith("train/")}
    assert metrics and all(np.isfinite(v).all() for v in metrics.values()), metrics
