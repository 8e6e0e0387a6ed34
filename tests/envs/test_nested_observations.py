"""Nested observations on the host and in JAX: gymnasium Dict / Tuple spaces and info["action_mask"], dm_env
nested specs, the spec check leaf by leaf, auto-reset of dict observations, JAX envs with dicts on the host.

The gymnasium adapter is compared with the same envs stepped directly (B single envs, seeds `seed + i`,
`reset()` after an episode end, as gymnasium's vector envs do), leaf by leaf.
"""

from __future__ import annotations

import collections

import dm_env
import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

import podrl.envs
from gym_tasks import make_masked_dict_task
from podrl.envs import observations
from podrl.envs.adapters import (
    DmEnvVectorEnv,
    EnvSpecMismatchError,
    GymnasiumVectorEnv,
    UnsupportedSpaceError,
    check_host_env,
    convert_observation_spec,
    make_host_env,
)
from podrl.envs.wrappers import AutoReset


def direct(factory, seed: int, num_envs: int, actions: np.ndarray) -> list[dict]:
    """What B envs from `factory` give when stepped one by one: per step the observations the next action
    sees (after any reset), the observations the actions led to (before it), their info masks, rewards and ends."""
    envs = [factory() for _ in range(num_envs)]
    firsts = [env.reset(seed=seed + i) for i, env in enumerate(envs)]
    out = [dict(obs=[o for o, _ in firsts], mask=[info.get("action_mask") for _, info in firsts])]
    for a in actions:
        step = dict(obs=[], mask=[], next_obs=[], next_mask=[], reward=[], terminated=[], truncated=[])
        for env, action in zip(envs, a):
            obs, reward, terminated, truncated, info = env.step(int(action))
            step["next_obs"].append(obs)
            step["next_mask"].append(info.get("action_mask"))
            if terminated or truncated:
                obs, info = env.reset()
            step["obs"].append(obs)
            step["mask"].append(info.get("action_mask"))
            step["reward"].append(reward)
            step["terminated"].append(terminated)
            step["truncated"].append(truncated and not terminated)
        out.append(step)
    for env in envs:
        env.close()
    return out


def stacked(per_env: list) -> dict | tuple:
    """B single-env observations (dicts or tuples) stacked leaf by leaf."""
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *[observations.as_tree(o) for o in per_env])


def assert_same_observation(got, expected_per_env: list, mask_per_env: list | None, where: str) -> None:
    expected = stacked(expected_per_env)
    if mask_per_env is not None:
        expected = {**expected, "action_mask": np.stack(mask_per_env) != 0}
    assert jax.tree.structure(got) == jax.tree.structure(expected), where
    got = observations.keyed_leaves(got)
    for key, leaf in observations.keyed_leaves(expected).items():
        np.testing.assert_array_equal(got[key], leaf.astype(got[key].dtype), err_msg=f"{where}, leaf {key}")


ACTIONS = np.random.default_rng(3).integers(0, 4, size=(24, 3))


@pytest.mark.parametrize("mode, vectorization", [(AutoresetMode.SAME_STEP, "sync"), (AutoresetMode.NEXT_STEP, "sync"),
                                                 (AutoresetMode.SAME_STEP, "async")])
def test_gymnasium_dict_observations_and_info_mask_match_the_envs_stepped_directly(mode, vectorization):
    """A Dict space's leaves and info["action_mask"] (joined as the `action_mask` leaf) of every observation,
    the final observation of an episode (terminated or truncated) with its own step's mask among them."""
    env = GymnasiumVectorEnv(make_masked_dict_task, 3, autoreset_mode=mode, vectorization=vectorization)
    spec = env.observation_spec()
    assert set(spec) == {"image", "position", "action_mask"}
    assert spec["image"].dtype == np.uint8 and spec["image"].shape == (3, 3, 1)
    assert spec["action_mask"].dtype == bool and spec["action_mask"].shape == (4,)
    expected = direct(make_masked_dict_task, 7, 3, ACTIONS)
    ts = env.reset(7)
    assert_same_observation(ts.observation, expected[0]["obs"], expected[0]["mask"], "reset")
    ends = 0
    for t, (a, exp) in enumerate(zip(ACTIONS, expected[1:])):
        ts = env.step(a)
        assert_same_observation(ts.observation, exp["obs"], exp["mask"], f"step {t}")
        assert_same_observation(ts.extras["next_obs"], exp["next_obs"], exp["next_mask"], f"step {t} next_obs")
        np.testing.assert_array_equal(ts.reward, exp["reward"])
        np.testing.assert_array_equal(ts.discount, np.where(exp["terminated"], 0.0, 1.0))
        np.testing.assert_array_equal(ts.extras["truncated"], exp["truncated"])
        ends += int(np.sum(ts.last()))
    assert ends >= 6  # resets happened (terminations and truncations) and were compared
    check_host_env(env, steps=10)
    env.close()


def test_blackjack_tuple_observations_match_the_env_stepped_directly():
    """gymnasium's Blackjack-v1: Tuple(Discrete(32), Discrete(11), Discrete(2)) as a tuple of int32 leaves."""
    env = make_host_env("Blackjack-v1", 4, seed=0)
    spec = env.observation_spec()
    assert isinstance(spec, tuple) and [s.num_values for s in spec] == [32, 11, 2]
    assert all(s.dtype == np.int32 and s.shape == () for s in spec)
    actions = np.random.default_rng(0).integers(0, 2, size=(20, 4))
    expected = direct(lambda: gymnasium.make("Blackjack-v1"), 5, 4, actions)
    assert_same_observation(env.reset(5).observation, expected[0]["obs"], None, "reset")
    for t, (a, exp) in enumerate(zip(actions, expected[1:])):
        ts = env.step(a)
        assert_same_observation(ts.observation, exp["obs"], None, f"step {t}")
        assert_same_observation(ts.extras["next_obs"], exp["next_obs"], None, f"step {t} next_obs")
        np.testing.assert_array_equal(ts.reward, exp["reward"])
    check_host_env(env)
    env.close()


def test_taxi_info_action_mask_becomes_the_observation_leaf():
    """Taxi-v4 reports its legal moves in info["action_mask"]: observations become {"observation": int32 [],
    "action_mask": bool [6]}, equal to the env's own info at every step (its 200-step limit included)."""
    env = make_host_env("Taxi-v4", 2, seed=0)
    spec = env.observation_spec()
    assert set(spec) == {"observation", "action_mask"} and spec["observation"].num_values == 500
    actions = np.random.default_rng(1).integers(0, 6, size=(210, 2))
    expected = direct(lambda: gymnasium.make("Taxi-v4"), 0, 2, actions)
    ts = env.reset(0)
    assert ts.observation["action_mask"].dtype == bool
    for t, (a, exp) in enumerate(zip(actions, expected[1:])):
        ts = env.step(a)
        np.testing.assert_array_equal(ts.observation["observation"], exp["obs"], err_msg=f"step {t}")
        np.testing.assert_array_equal(ts.observation["action_mask"], np.stack(exp["mask"]) != 0, err_msg=f"step {t}")
        np.testing.assert_array_equal(ts.extras["next_obs"]["action_mask"], np.stack(exp["next_mask"]) != 0)
    assert any(e for step in expected[1:] for e in step["truncated"])  # the time limit's bootstrap masks compared
    env.close()
    plain = GymnasiumVectorEnv("Taxi-v4", 2, info_action_mask=False)  # the mask can be left out
    assert not observations.is_nested(plain.observation_spec())
    plain.close()


def test_spec_conversion_of_nested_spaces_and_dm_env_specs():
    space = spaces.Dict({"b": spaces.Box(0.0, 1.0, (2,), np.float64), "a": spaces.Tuple(
        (spaces.Discrete(3), spaces.MultiBinary(4)))})
    spec = convert_observation_spec(space)
    assert list(spec) == ["a", "b"] and spec["b"].dtype == np.float32
    assert spec["a"][0].num_values == 3 and spec["a"][1].dtype == np.int8 and spec["a"][1].maximum == 1
    assert [key for key, _ in observations.leaf_specs(spec)] == ["a.0", "a.1", "b"]
    nested = collections.OrderedDict(z=specs.Array((1,), np.float64), y=[specs.BoundedArray((), np.int64, 0, 5)])
    converted = convert_observation_spec(nested)
    assert type(converted) is dict and isinstance(converted["y"], tuple) and converted["z"].dtype == np.float32
    for bad in (spaces.MultiDiscrete([2, 3]), spaces.Dict({"a": spaces.Text(4)})):
        with pytest.raises(UnsupportedSpaceError):
            convert_observation_spec(bad)


class NestedDmEnv(dm_env.Environment):
    """A dm_env with an OrderedDict observation {"z": float64 [2], "y": int64 []}: z = (k, t), y = t; episodes
    of 3 steps, the last LAST with discount 0."""

    def __init__(self, seed: int = 0):
        self.k, self.t = seed, 0

    def reset(self):
        self.t = 0
        return dm_env.restart(self._obs())

    def step(self, action):
        self.t += 1
        return dm_env.termination(1.0, self._obs()) if self.t == 3 else dm_env.transition(1.0, self._obs())

    def _obs(self):
        return collections.OrderedDict(z=np.array([self.k, self.t], np.float64), y=np.int64(self.t))

    def observation_spec(self):
        return collections.OrderedDict(z=specs.Array((2,), np.float64), y=specs.BoundedArray((), np.int64, 0, 3))

    def action_spec(self):
        return specs.DiscreteArray(2)


def test_dm_env_nested_observations_are_stacked_leaf_by_leaf():
    env = DmEnvVectorEnv(NestedDmEnv, 3, seed=10)
    spec = env.observation_spec()
    assert spec["z"].dtype == np.float32 and spec["y"].dtype == np.int64
    ts = env.reset(10)
    np.testing.assert_array_equal(ts.observation["z"], [[10, 0], [11, 0], [12, 0]])
    for t in range(1, 4):
        ts = env.step(np.zeros(3, np.int32))
        np.testing.assert_array_equal(ts.extras["next_obs"]["y"], [t] * 3)
        np.testing.assert_array_equal(ts.observation["y"], [t % 3] * 3)
    assert ts.last().all() and (ts.discount == 0).all()
    check_host_env(env)


def test_check_host_env_names_the_leaf_that_breaks_the_spec():
    env = make_host_env("jax:DictCue-v0", 2)
    check_host_env(env)

    class Shrunk:
        num_envs = 2

        def observation_spec(self):
            return env.observation_spec()

        def action_spec(self):
            return env.action_spec()

        def reset(self, seed):
            ts = env.reset(seed)
            return ts._replace(observation={**ts.observation, "noise": ts.observation["noise"][:, :1]})

    with pytest.raises(EnvSpecMismatchError, match=r"reset\(\): observation\['noise'\] shape: expected \(2, 2\)"):
        check_host_env(Shrunk())

    class Flattened(Shrunk):
        def reset(self, seed):
            return env.reset(seed)._replace(observation=np.zeros((2, 18), np.float32))

    with pytest.raises(EnvSpecMismatchError, match=r"observation structure"):
        check_host_env(Flattened())


def test_auto_reset_replaces_every_leaf_of_a_dict_observation():
    """`AutoReset.step` and `step_batch` (the batched cond) put the reset observation in every leaf of the
    rows whose episode ended (the inner env reset with the step's reset key), keep the final one in
    `next_obs`, and leave the rows that go on as they are."""
    inner = podrl.envs.make("DictCue-v0", episode_length=2)
    env, actions = AutoReset(inner), jnp.zeros(3, jnp.int32)
    state, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 3))
    for step in (jax.jit(jax.vmap(env.step)), jax.jit(env.step_batch)):
        middle, ts = step(state, actions)
        assert not ts.last().any()
        jax.tree.map(np.testing.assert_array_equal, ts.observation, ts.extras["next_obs"])
        _, expected = jax.vmap(inner.reset)(jax.vmap(lambda k: jax.random.split(k)[1])(middle.key))
        _, ts = step(middle, actions)
        assert ts.last().all()
        for key in ("image", "noise"):
            np.testing.assert_array_equal(ts.observation[key], expected.observation[key], err_msg=key)
        assert not np.array_equal(ts.extras["next_obs"]["noise"], ts.observation["noise"])


def test_a_jax_dict_env_on_the_host_gives_numpy_dicts():
    env = make_host_env("jax:DictCue-v0", 3)
    ts = env.reset(0)
    assert set(ts.observation) == {"image", "noise"} and ts.observation["image"].dtype == np.uint8
    assert isinstance(ts.observation["image"], np.ndarray) and ts.observation["image"].shape == (3, 4, 4, 1)
    # the lit quadrant is the cue: naming it earns 1
    cue = np.argmax(ts.observation["image"][:, ::2, ::2, 0].reshape(3, 4), axis=-1)
    np.testing.assert_array_equal(env.step(cue.astype(np.int32)).reward, [1.0, 1.0, 1.0])
    env.close()
