"""Host vector envs (Sebulba): autoreset/truncation semantics, specs, checks, dispatch.

The scripted gymnasium env below has known episode ends, so every adapter
output can be compared with a plain-Python reference of the `podrl.envs.host` contract.
"""

from __future__ import annotations

import importlib.util
import types

import dm_env
import gymnasium
import jax
import numpy as np
import pytest
from dm_env import specs
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import TimeLimit

import podrl.envs
from dev_extra import require
from podrl.anakin.rollout import reset_batch
from podrl.envs.adapters import (
    DmEnvVectorEnv,
    EnvSpecMismatchError,
    GymnasiumVectorEnv,
    JaxHostVectorEnv,
    ResetMaskError,
    UnsupportedSpaceError,
    check_host_env,
    convert_action_spec,
    convert_observation_spec,
    make_host_env,
)
from podrl.envs.host import HostVectorEnv
from podrl.envs.types import FIRST, LAST, MID

# ---------------------------------------------------------------- a scripted gymnasium env

SCHEDULE = (3, 6, 4)  # episode k terminates at step SCHEDULE[k % 3]
TIME_LIMIT = 4  # so episode 1 is truncated at 4; episode 2 terminates AND truncates at 4


class ScriptedEnv(gymnasium.Env):
    """obs = [offset*1000 + episode*10 + t]; reward = t + action; ends per SCHEDULE.

    `reset(seed=s)` sets offset s and starts at episode s % 3 (so envs are out of phase);
    later resets go to the next episode.
    """

    observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float64)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.offset, self.episode = seed, seed % 3
        else:
            self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(action), f"invalid action {action!r}"
        self.t += 1
        terminated = self.t == SCHEDULE[self.episode % 3]
        return self._obs(), float(self.t + int(action)), terminated, False, {}

    def _obs(self):
        return np.array([self.offset * 1000 + self.episode * 10 + self.t], np.float64)


def make_scripted():
    return TimeLimit(ScriptedEnv(), TIME_LIMIT)


def reference(seed: int, num_envs: int, actions: np.ndarray) -> list[dict]:
    """Expected host timesteps (as dicts) for `actions` `[T, B]`, the first entry the reset."""
    offset = seed + np.arange(num_envs)
    episode, t = offset % 3, np.zeros(num_envs, int)
    ret, length = np.zeros(num_envs, np.float32), np.zeros(num_envs, np.int32)
    obs_of = lambda: (offset * 1000 + episode * 10 + t)[:, None].astype(np.float32)  # noqa: E731
    out = [dict(step_type=np.full(num_envs, FIRST), reward=np.zeros(num_envs), discount=np.ones(num_envs),
                observation=obs_of(), next_obs=obs_of(), truncated=np.zeros(num_envs, bool),
                episode_return=ret.copy(), episode_length=length.copy())]
    for a in actions:
        t = t + 1
        reward = (t + a).astype(np.float32)
        term = t == np.array(SCHEDULE)[episode % 3]
        trunc = (t >= TIME_LIMIT) & ~term
        ended = term | trunc
        ret, length = ret + reward, length + 1
        next_obs = obs_of()
        episode, t = np.where(ended, episode + 1, episode), np.where(ended, 0, t)
        out.append(dict(step_type=np.where(ended, LAST, MID), reward=reward, discount=np.where(term, 0.0, 1.0),
                        observation=obs_of(), next_obs=next_obs, truncated=trunc,
                        episode_return=ret.copy(), episode_length=length.copy()))
        ret, length = np.where(ended, 0, ret).astype(np.float32), np.where(ended, 0, length).astype(np.int32)
    return out


def run(env: HostVectorEnv, seed: int, actions: np.ndarray) -> list:
    return [env.reset(seed)] + [env.step(a) for a in actions]


def assert_matches(timesteps: list, expected: list[dict]) -> None:
    for i, (ts, exp) in enumerate(zip(timesteps, expected, strict=True)):
        got = dict(step_type=ts.step_type, reward=ts.reward, discount=ts.discount, observation=ts.observation,
                   **{k: ts.extras[k] for k in ("next_obs", "truncated", "episode_return", "episode_length")})
        for key, value in exp.items():
            np.testing.assert_array_equal(got[key], value, err_msg=f"timestep {i}, {key}")
        assert ts.step_type.dtype == np.int32 and ts.reward.dtype == np.float32
        assert ts.discount.dtype == np.float32 and ts.observation.dtype == np.float32


ACTIONS = np.random.default_rng(0).integers(0, 2, size=(14, 3))


def scripted_vector(mode: AutoresetMode, **kwargs) -> GymnasiumVectorEnv:
    return GymnasiumVectorEnv(make_scripted, 3, autoreset_mode=mode, **kwargs)


# ---------------------------------------------------------------- gymnasium adapter


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED])
def test_gymnasium_autoreset_modes_match_reference(mode):
    env = scripted_vector(mode)
    assert env.autoreset_mode == mode
    timesteps = run(env, 5, ACTIONS)
    expected = reference(5, 3, ACTIONS)
    assert_matches(timesteps, expected)
    # the schedule covers termination, truncation, and both at once (termination wins)
    steps = expected[1:]
    assert any(np.any((s["discount"] == 0) & (s["episode_length"] == 3)) for s in steps)  # terminated
    assert any(s["truncated"].any() for s in steps)  # truncated by the time limit
    both = [np.any((s["discount"] == 0) & (s["episode_length"] == TIME_LIMIT)) for s in steps]
    assert any(both)  # terminated on the time-limit step: termination wins
    env.close()


def test_gymnasium_user_vector_env_next_step():
    """A user's VectorEnv in NEXT_STEP mode: no junk reset transition reaches the output."""
    vec = SyncVectorEnv([make_scripted] * 3, autoreset_mode=AutoresetMode.NEXT_STEP)
    env = GymnasiumVectorEnv(vec)
    assert_matches(run(env, 2, ACTIONS), reference(2, 3, ACTIONS))
    check_host_env(env)


class NoMaskVectorEnv(SyncVectorEnv):
    def reset(self, *, seed=None, options=None):
        if options and "reset_mask" in options:
            raise NotImplementedError("no partial resets here")
        return super().reset(seed=seed, options=options)


class IgnoresMaskVectorEnv(SyncVectorEnv):
    def reset(self, *, seed=None, options=None):
        return super().reset(seed=seed)


@pytest.mark.parametrize("cls, match", [(NoMaskVectorEnv, "reset_mask"), (IgnoresMaskVectorEnv, "ignores reset_mask")])
def test_gymnasium_reset_mask_unsupported_is_a_clear_error(cls, match):
    env = GymnasiumVectorEnv(cls([make_scripted] * 3, autoreset_mode=AutoresetMode.NEXT_STEP))
    env.reset(0)
    with pytest.raises(ResetMaskError, match=match):
        for a in ACTIONS:
            env.step(a)


def test_gymnasium_async_spawn_matches_sync():
    for mode in (AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP):
        env = scripted_vector(mode, vectorization="async")
        assert env.env.context == "spawn"
        try:
            assert_matches(run(env, 7, ACTIONS), reference(7, 3, ACTIONS))
        finally:
            env.close()
    with pytest.raises(ValueError, match="fork"):
        scripted_vector(AutoresetMode.SAME_STEP, vectorization="async", context="fork")


def test_gymnasium_cartpole_terminations_and_float32():
    env = GymnasiumVectorEnv("CartPole-v1", 4)
    check_host_env(env, steps=40)
    ts = env.reset(0)
    for _ in range(60):  # random-ish actions end CartPole episodes quickly
        ts = env.step(np.zeros(4, np.int32))
        done = ts.step_type == LAST
        if done.any():
            break
    assert done.any() and np.all(ts.discount[done] == 0) and not ts.extras["truncated"].any()
    assert np.all(ts.extras["episode_length"][done] > 0)
    assert not np.array_equal(ts.observation[done], ts.extras["next_obs"][done])
    env.close()


# ---------------------------------------------------------------- dm_env adapter


class ScriptedDmEnv(dm_env.Environment):
    """Even episodes terminate (discount 0) at step 2, odd ones truncate (discount 1) at step 3."""

    def __init__(self, seed: int = 0):
        self.seed, self.episode, self.t = seed, -1, 0

    def reset(self):
        self.episode, self.t = self.episode + 1, 0
        return dm_env.restart(self._obs())

    def step(self, action):
        self.t += 1
        reward = float(action) + 1.0
        if self.episode % 2 == 0 and self.t == 2:
            return dm_env.termination(reward, self._obs())
        if self.episode % 2 == 1 and self.t == 3:
            return dm_env.truncation(reward, self._obs())  # LAST with discount 1
        return dm_env.transition(reward, self._obs())

    def _obs(self):
        return np.array([self.seed, self.episode * 10 + self.t], np.float64)

    def observation_spec(self):
        return specs.Array((2,), np.float64, name="observation")

    def action_spec(self):
        return specs.DiscreteArray(3, name="action")


def test_dm_env_termination_vs_truncation_by_discount():
    env = DmEnvVectorEnv(ScriptedDmEnv, 2)
    assert env.observation_spec().dtype == np.float32
    ts = env.reset(seed=4)
    np.testing.assert_array_equal(ts.observation, [[4, 0], [5, 0]])
    kinds = []
    for step in range(1, 6):
        ts = env.step(np.array([2, 0]))
        kinds.append((ts.step_type[0], ts.discount[0], ts.extras["truncated"][0]))
        np.testing.assert_array_equal(ts.reward, [3.0, 1.0])
    assert kinds == [(MID, 1, False), (LAST, 0, False), (MID, 1, False), (MID, 1, False), (LAST, 1, True)]
    # on the truncating step the observation is already the next episode's first one
    np.testing.assert_array_equal(ts.extras["next_obs"][0], [4, 13])
    np.testing.assert_array_equal(ts.observation[0], [4, 20])
    assert ts.extras["episode_return"][0] == 9.0 and ts.extras["episode_length"][0] == 3
    check_host_env(env)


# ---------------------------------------------------------------- JAX env on the host


@pytest.mark.parametrize("name", ["CartPole-v1", "MatchSign-v0"])
def test_jax_host_equals_anakin_reset_and_step(name):
    env, num_envs, seed = podrl.envs.make(name), 4, 11
    host = JaxHostVectorEnv(env, num_envs)
    ts = host.reset(seed)
    # Anakin, one device, one seed: podrl.anakin.AnakinCompiled._init_shard + podrl.anakin.rollout.reset_batch
    _, env_key, _ = jax.random.split(jax.random.key(np.uint32(seed)), 3)
    env_keys = jax.random.split(env_key, num_envs)
    training_env = podrl.envs.wrap_for_training(env)
    agent = types.SimpleNamespace(init_actor_state=lambda batch, columns=None: ())
    acting = reset_batch(training_env, agent, env_keys)
    np.testing.assert_array_equal(ts.observation, np.asarray(acting.timestep.observation))
    state = acting.env_state
    step = jax.jit(jax.vmap(training_env.step))
    actions = np.random.default_rng(1).integers(0, 2, size=(30, num_envs)).astype(np.int32)
    for a in actions:
        ts = host.step(a)
        state, expected = step(state, a)
        np.testing.assert_array_equal(ts.observation, np.asarray(expected.observation))
        np.testing.assert_array_equal(ts.reward, np.asarray(expected.reward))
        np.testing.assert_array_equal(ts.step_type, np.asarray(expected.step_type))
    assert isinstance(ts.observation, np.ndarray) and "truncated" in ts.extras
    first = host.reset_from_keys(env_keys)
    np.testing.assert_array_equal(first.observation, np.asarray(acting.timestep.observation))
    check_host_env(host)


# ---------------------------------------------------------------- specs


def test_spec_conversion():
    box = convert_observation_spec(spaces.Box(-1.0, 2.0, (3,), np.float64))
    assert isinstance(box, specs.BoundedArray) and box.dtype == np.float32 and box.shape == (3,)
    frames = convert_observation_spec(spaces.Box(0, 255, (4, 84, 84), np.uint8))
    assert frames.dtype == np.uint8
    action = convert_action_spec(spaces.Discrete(5))
    assert isinstance(action, specs.DiscreteArray) and action.num_values == 5 and action.dtype == np.int32
    cont = convert_action_spec(spaces.Box(-2.0, 2.0, (1,), np.float32))
    assert isinstance(cont, specs.BoundedArray) and cont.maximum == 2.0
    dm_spec = specs.DiscreteArray(4)
    assert convert_action_spec(dm_spec) is dm_spec
    assert convert_observation_spec(specs.Array((2,), np.float64)).dtype == np.float32
    # Dict / Tuple spaces and nested dm_env specs are converted (tests/envs/test_nested_observations.py)
    for space in [spaces.MultiDiscrete([2, 3]), spaces.Text(4)]:
        with pytest.raises(UnsupportedSpaceError, match=type(space).__name__):
            convert_observation_spec(space)
    with pytest.raises(UnsupportedSpaceError, match="MultiBinary"):
        convert_action_spec(spaces.MultiBinary(3))
    with pytest.raises(UnsupportedSpaceError, match="start at 0"):
        convert_action_spec(spaces.Discrete(3, start=1))
    with pytest.raises(UnsupportedSpaceError):
        convert_observation_spec(object())


class Tampered:
    """Wraps a host env and breaks one thing about it."""

    def __init__(self, env, obs_fn=None, observation_spec=None, action_spec=None):
        self.env, self.num_envs, self.obs_fn = env, env.num_envs, obs_fn or (lambda o: o)
        self._obs_spec = observation_spec or env.observation_spec()
        self._action_spec = action_spec or env.action_spec()

    def observation_spec(self):
        return self._obs_spec

    def action_spec(self):
        return self._action_spec

    def reset(self, seed):
        return self._fix(self.env.reset(seed))

    def step(self, actions):
        return self._fix(self.env.step(actions))

    def _fix(self, ts):
        return ts._replace(observation=self.obs_fn(ts.observation))

    def close(self):
        self.env.close()


def test_check_host_env_catches_mismatches():
    env = scripted_vector(AutoresetMode.SAME_STEP)
    check_host_env(env)
    with pytest.raises(EnvSpecMismatchError, match=r"reset\(\): observation shape") as info:
        check_host_env(Tampered(env, observation_spec=specs.Array((2,), np.float32)))
    assert info.value.method == "reset" and info.value.expected == (3, 2) and info.value.got == (3, 1)
    with pytest.raises(EnvSpecMismatchError, match=r"observation dtype: expected float32, got float64"):
        check_host_env(Tampered(env, obs_fn=lambda o: o.astype(np.float64)))
    with pytest.raises(EnvSpecMismatchError, match=r"step\(\): action") as info:
        check_host_env(Tampered(env, action_spec=specs.DiscreteArray(3)))
    assert "invalid action" in str(info.value)

    class MissingExtras(Tampered):
        def _fix(self, ts):
            return ts._replace(extras={k: v for k, v in ts.extras.items() if k != "truncated"})

    with pytest.raises(EnvSpecMismatchError, match=r"extras keys"):
        check_host_env(MissingExtras(env))
    env.close()


# ---------------------------------------------------------------- make_host_env


def make_dm_env(seed: int = 0):
    return ScriptedDmEnv(seed)


def make_scripted_vector(num_envs: int):
    return SyncVectorEnv([make_scripted] * num_envs, autoreset_mode=AutoresetMode.NEXT_STEP)


def make_own_host_env(num_envs: int):
    return DmEnvVectorEnv(ScriptedDmEnv, num_envs)


def make_nothing():
    return object()


@pytest.mark.parametrize(
    "name, cls",
    [
        ("CartPole-v1", GymnasiumVectorEnv),
        ("jax:CartPole-v1", JaxHostVectorEnv),
        ("dm_env:test_host_envs:make_dm_env", DmEnvVectorEnv),
        ("test_host_envs:make_scripted", GymnasiumVectorEnv),
        ("test_host_envs:make_scripted_vector", GymnasiumVectorEnv),
        ("test_host_envs:make_own_host_env", DmEnvVectorEnv),
    ],
)
def test_make_host_env_dispatch(name, cls):
    env = make_host_env(name, num_envs=2, seed=0)
    assert isinstance(env, cls) and isinstance(env, HostVectorEnv) and env.num_envs == 2
    check_host_env(env, steps=4)
    env.close()


@pytest.mark.parametrize(
    "name", ["NoSuchEnv-v0", "no_such_module_xyz:factory", "jax:NoSuchEnv-v0", "test_host_envs:make_nothing",
             "test_host_envs:no_such_attr", "dm_env:nomodule"],
)
def test_make_host_env_unknown(name):
    with pytest.raises(podrl.envs.UnknownEnvError, match="env"):
        make_host_env(name, num_envs=2, seed=0)


# ---------------------------------------------------------------- optional backends


def test_ale_pong_smoke():
    import ale_py  # noqa: F401  (in [dev]: a broken install fails here, never skips)
    with pytest.raises(podrl.envs.UnknownEnvError, match="NoSuchGame"):
        make_host_env("ale:NoSuchGame", num_envs=1, seed=0)
    env = make_host_env("ale:Pong", num_envs=2, seed=0, max_episode_frames=80)
    assert env.observation_spec().shape == (4, 84, 84) and env.observation_spec().dtype == np.uint8
    check_host_env(env, steps=4)
    ts = env.reset(0)
    for _ in range(30):
        ts = env.step(np.ones(2, np.int32))
        if (ts.step_type == LAST).any():
            break
    assert (ts.step_type == LAST).all() and ts.extras["truncated"].all() and (ts.discount == 1).all()
    assert ts.extras["episode_length"][0] == 20  # 80 frames / frame skip 4
    assert not np.array_equal(ts.observation, ts.extras["next_obs"])  # reset in the same step
    env.close()
    if importlib.util.find_spec("cv2") is None:  # gymnasium's AtariPreprocessing needs opencv
        with pytest.raises(ImportError, match="opencv"):
            make_host_env("ale:ALE/Pong-v5", num_envs=1, seed=0, use_vector_env=False)
        return
    fallback = make_host_env("ale:ALE/Pong-v5", num_envs=1, seed=0, use_vector_env=False)
    assert fallback.observation_spec().shape == (4, 84, 84)
    check_host_env(fallback, steps=3)
    fallback.close()


def test_envpool_pong_smoke():
    require("envpool", "envpool")  # in the dev extra where it has wheels: a missing install fails, it is not skipped

    with pytest.raises(podrl.envs.UnknownEnvError, match="NoSuch-v5"):
        make_host_env("envpool:NoSuch-v5", num_envs=1, seed=0)
    env = make_host_env("envpool:Pong-v5", num_envs=2, seed=0, max_episode_frames=40)
    check_host_env(env, steps=4)
    first = env.reset(3)
    for _ in range(10):
        ts = env.step(np.zeros(2, np.int32))
    assert (ts.step_type == LAST).all() and ts.extras["truncated"].all()
    ts = env.step(np.zeros(2, np.int32))  # no junk reset step: the new episode is running
    assert (ts.step_type == MID).all() and (ts.extras["episode_length"] == 1).all()
    np.testing.assert_array_equal(env.reset(3).observation, first.observation)
    env.close()
