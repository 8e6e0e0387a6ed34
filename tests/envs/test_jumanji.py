"""Jumanji envs through `podrl.envs.jumanji`: nested specs and the action mask, a MultiDiscrete action flattened
with its mask, the time limit split from terminations, bad names, the host adapter, and a short Anakin PPO run
whose agent never takes an illegal Knapsack action (where an agent blind to the mask does)."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs

pytest.importorskip("jumanji", reason="the jumanji extra is not installed (pip install 'podrl[jumanji]')")

import jumanji  # noqa: E402

import podrl.envs  # noqa: E402
from podrl.agents.ppo import PPOConfig  # noqa: E402
from podrl.anakin import train_anakin  # noqa: E402
from podrl.anakin.config import AnakinConfig  # noqa: E402
from podrl.core.errors import ConfigError  # noqa: E402
from podrl.envs.adapters.make import make_host_env  # noqa: E402
from podrl.envs.adapters.optional import MissingExtraError  # noqa: E402
from podrl.envs.gymnax import UNREACHABLE_STEPS  # noqa: E402
from podrl.envs.jumanji import JumanjiEnv  # noqa: E402
from podrl.envs.registry import UnknownEnvError, check_name  # noqa: E402
from podrl.envs.types import LAST, MID  # noqa: E402
from podrl.run.config import LoggingConfig  # noqa: E402

KNAPSACK = "jumanji:Knapsack-v1"
QUIET = LoggingConfig(run_dir=None, console=False)


def first_legal(mask):
    return jnp.argmax(mask).astype(jnp.int32)


def test_knapsack_observation_is_a_dict_of_jumanjis_fields_with_its_mask():
    env = podrl.envs.make(KNAPSACK)
    assert isinstance(env, JumanjiEnv)  # no time limit: episodes end when no item fits
    spec = env.observation_spec()
    assert set(spec) == {"action_mask", "packed_items", "values", "weights"}
    assert spec["action_mask"].shape == (50,) and spec["action_mask"].dtype == np.bool_
    assert isinstance(spec["weights"], specs.BoundedArray) and spec["weights"].dtype == np.float32
    assert env.action_spec() == specs.DiscreteArray(50, dtype=np.int32, name="action")
    key = jax.random.key(4)
    state, ts = jax.jit(env.reset)(key)
    raw_state, raw = jax.jit(jumanji.make("Knapsack-v1").reset)(key)
    for field in spec:
        np.testing.assert_array_equal(ts.observation[field], getattr(raw.observation, field))
        spec[field].validate(np.asarray(ts.observation[field]))
    action = first_legal(ts.observation["action_mask"])
    _, ts = jax.jit(env.step)(state, action)
    _, raw = jax.jit(jumanji.make("Knapsack-v1").step)(raw_state, action)
    assert ts.reward == raw.reward > 0 and ts.step_type == MID and not ts.extras["truncated"]
    assert not ts.observation["action_mask"][action]  # a packed item is no longer legal


@pytest.mark.timeout(200)
def test_a_multidiscrete_action_is_one_discrete_over_the_joint_actions_with_its_mask_flattened():
    """Tetris' action is [rotation (4), column (10)] with a [4, 10] mask: one Discrete(40), action
    a = 10 * rotation + column, the mask flattened in the same order."""
    env = podrl.envs.make("jumanji:Tetris-v0")
    raw_env = env.unwrapped.env
    assert env.action_spec().num_values == 40 and env.observation_spec()["action_mask"].shape == (40,)
    np.testing.assert_array_equal(env.unwrapped._unflatten(jnp.int32(13)), [1, 3])
    key = jax.random.key(1)
    state, ts = jax.jit(env.reset)(key)
    raw_state, raw = jax.jit(raw_env.reset)(key)
    np.testing.assert_array_equal(ts.observation["action_mask"], raw.observation.action_mask.reshape(-1))
    mask = np.asarray(ts.observation["action_mask"])
    action = int(np.flatnonzero(mask)[-1])  # the last legal one: both coordinates matter
    _, ts = jax.jit(env.step)(state, jnp.int32(action))
    _, raw = jax.jit(raw_env.step)(raw_state, jnp.array(divmod(action, 10), jnp.int32))
    np.testing.assert_array_equal(ts.observation["grid"], raw.observation.grid)
    np.testing.assert_array_equal(ts.observation["action_mask"], raw.observation.action_mask.reshape(-1))
    assert ts.reward == raw.reward


def test_a_state_the_env_plays_on_from_with_no_legal_action_allows_every_action():
    """A Snake trapped by its own body has an all-False mask yet its episode goes on (the next move crashes
    it); podrl's agents refuse such a mask, so the adapter allows every action there, and nowhere else: not
    on an episode's final observation, which nothing acts on."""
    env = podrl.envs.make("jumanji:Snake-v1").unwrapped
    trapped = env.env.observation_spec.generate_value()  # Jumanji's zeros: an all-False mask
    assert not trapped.action_mask.any()
    np.testing.assert_array_equal(env._observe(trapped)["action_mask"], [True] * 4)
    np.testing.assert_array_equal(env._observe(trapped, ended=True)["action_mask"], [False] * 4)  # a final one
    cornered = trapped._replace(action_mask=jnp.array([False, True, False, False]))
    np.testing.assert_array_equal(env._observe(cornered)["action_mask"], [False, True, False, False])


def snake_rollout(env, steps, policy):
    """`[steps]` timesteps of `env` from reset(key 0), each action `policy(mask of the last observation)`."""

    def body(carry, _):
        state, ts = carry
        state, ts = env.step(state, policy(ts.observation["action_mask"]))
        return (state, ts), ts

    def run():
        return jax.lax.scan(body, env.reset(jax.random.key(0)), None, length=steps)[1]

    return jax.device_get(jax.jit(run)())


@pytest.mark.timeout(200)
def test_snakes_time_limit_is_a_truncation_and_a_crash_a_termination():
    env = podrl.envs.make("jumanji:Snake-v1,num_rows=6,num_cols=6,time_limit=4")
    assert env.max_steps == 4 and env.unwrapped.env.time_limit == UNREACHABLE_STEPS  # Jumanji's never ends it
    assert env.observation_spec()["step_count"].num_values == 4  # the spec read before, at the real limit
    ts = snake_rollout(env, 4, first_legal)  # legal moves: the snake survives
    np.testing.assert_array_equal(ts.step_type, [MID, MID, MID, LAST])
    np.testing.assert_array_equal(ts.discount, [1.0] * 4)
    np.testing.assert_array_equal(ts.extras["truncated"], [False, False, False, True])
    crash = snake_rollout(podrl.envs.make("jumanji:Snake-v1,num_rows=6,num_cols=6,time_limit=50"), 8,
                          lambda mask: jnp.int32(0))  # always up: into the wall
    end = int(np.argmax(crash.step_type == LAST))
    assert 0 < end < 6 and crash.discount[end] == 0.0 and not crash.extras["truncated"][end]
    assert not crash.observation["action_mask"][end - 1][0]  # the mask had said up was illegal


@pytest.mark.parametrize("name, fragment", [
    ("jumanji:Knapsak-v1", "did you mean ['Knapsack-v1'"),
    ("jumanji:Snake-v1,nope=3", "jumanji's Snake-v1 does not take the options {'nope': 3} (TypeError"),
    ("jumanji:Snake-v1,time_limit=0", "time_limit must be a positive number of steps, got 0"),
    ("jumanji:Snake-v1,num_rows=-1", "jumanji's Snake-v1 does not take the options {'num_rows': -1}"),
    ("jumanji:LevelBasedForaging-v0", "its reward has shape (2,) (one per agent)"),
    ("jumanji:Cleaner-v0", "action_mask of shape (3, 4), not one mask over the joint actions"),
    ("jumanji:JobShop-v0", "16,679,880,978,201 joint actions"),
])
def test_bad_names_are_unknown_env_errors_in_both_layouts(name, fragment):
    for build in (check_name, podrl.envs.make, lambda n: make_host_env(n, 1), lambda n: make_host_env("jax:" + n, 1)):
        with pytest.raises(UnknownEnvError) as info:
            build(name)
        assert fragment in str(info.value), str(info.value)
    with pytest.raises(ConfigError, match="^env: "):
        AnakinConfig(env=name)


def test_missing_jumanji_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jumanji", None)  # import jumanji raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'podrl\[jumanji\]'"):
        check_name(KNAPSACK)


def test_the_host_adapter_steps_the_same_env():
    for name in (KNAPSACK, "jax:" + KNAPSACK):
        host = make_host_env(name, 2)
        assert host.observation_spec() == podrl.envs.make(KNAPSACK).observation_spec()
        ts = host.reset(seed=0)
        assert ts.observation["action_mask"].shape == (2, 50) and ts.observation["action_mask"].all()
        ts = host.step(np.array([3, 7]))
        assert not ts.observation["action_mask"][0, 3] and not ts.observation["action_mask"][1, 7]
        host.close()


def act_on_knapsacks(agent, params, blind: bool, steps: int = 48, num_envs: int = 16):
    """Whether each action the agent sampled over `steps` steps of `num_envs` wrapped Knapsacks was legal,
    bool `[steps, num_envs]`; `blind`: the agent is shown an all-legal mask (it ignores the real one)."""
    env = podrl.envs.wrap_for_training(podrl.envs.make(KNAPSACK))

    def body(carry, key):
        state, ts = carry
        mask = ts.observation["action_mask"]
        shown = {**ts.observation, "action_mask": jnp.ones_like(mask)} if blind else ts.observation
        action, _, _ = agent.act(params, (), shown, key)
        legal = jnp.take_along_axis(ts.observation["action_mask"], action[:, None], axis=1)[:, 0]
        return jax.vmap(env.step)(state, action), legal

    def run():
        start = jax.vmap(env.reset)(jax.random.split(jax.random.key(5), num_envs))
        return jax.lax.scan(body, start, jax.random.split(jax.random.key(6), steps))[1]

    return np.asarray(jax.jit(run)())


@pytest.mark.timeout(300)
def test_anakin_ppo_on_knapsack_never_takes_an_illegal_action(cpu_devices):
    """Two PPO updates in Anakin; then its policy, sampling as the layouts act, over 768 Knapsack steps:
    every action legal, where the same policy shown an all-legal mask picks packed or too heavy items."""
    config = AnakinConfig(env=KNAPSACK, num_envs=8, rollout_length=16, total_steps=8 * 16 * 2, updates_per_call=2,
                          num_devices=1, eval_episodes=4, eval_max_steps=60, logging=QUIET)
    ppo = PPOConfig(num_minibatches=2, hidden_sizes=(32,))
    result = train_anakin(config, ppo, devices=cpu_devices[:1])
    metrics = {k: v for k, v in result.history[-1].items() if k.startswith("train/")}
    assert metrics and all(np.isfinite(v).all() for v in metrics.values()), metrics
    assert result.final_eval_return[0] > 0
    agent = ppo.make_agent(podrl.envs.env_spec(podrl.envs.make(KNAPSACK)), config.num_updates)
    params = jax.tree.map(lambda x: x[0], result.state.train_state.params)
    assert act_on_knapsacks(agent, params, blind=False).all()
    assert not act_on_knapsacks(agent, params, blind=True).all()  # the mask matters in Knapsack
