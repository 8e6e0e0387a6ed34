"""Our JAX classic-control envs against gymnasium's, step by step.

gymnasium computes in float64 and we in float32 (and Acrobot is chaotic), so
the step-parity tests copy gymnasium's state into ours before every step and
compare one step's outcome (state, observation, reward, termination) tightly,
jumping to random states now and then so that clipping, wrapping and
terminations are covered; the trajectory tests run ours freely for a short
horizon with a looser tolerance.
"""

from __future__ import annotations

import math

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs

import podrl.envs
from podrl.envs import observations
from podrl.envs.acrobot import Acrobot, AcrobotState
from podrl.envs.cartpole import CartPole, CartPoleState
from podrl.envs.pendulum import Pendulum, PendulumState
from podrl.envs.tiny import MatchSign
from podrl.envs.types import FIRST, LAST, MID

TIGHT = dict(atol=1e-5, rtol=1e-5)
LOOSE = dict(atol=1e-4, rtol=1e-4)


def _cartpole_action(rng, obs):
    return int(rng.integers(2))


def _acrobot_action(rng, obs):
    # Mostly energy pumping (torque along dtheta2), which reaches the goal in
    # ~100 steps, so the terminal step gets compared too; 20% random actions.
    if rng.random() < 0.2:
        return int(rng.integers(3))
    return 2 if obs[5] > 0 else 0


def _pendulum_action(rng, obs):
    # Beyond the torque bounds on purpose: both envs must clip.
    return rng.uniform(-3.0, 3.0, size=(1,)).astype(np.float32)


CASES = {
    "CartPole-v1": (CartPole, CartPoleState, _cartpole_action),
    "Acrobot-v1": (Acrobot, AcrobotState, _acrobot_action),
    "Pendulum-v1": (Pendulum, PendulumState, _pendulum_action),
}

# Every SCRAMBLE_EVERY steps the resync test jumps to a state drawn from these
# boxes, so that velocity clipping, angle wrapping and terminations happen.
SCRAMBLE_BOXES = {
    "CartPole-v1": ([-2.4, -3.0, -0.2, -3.0], [2.4, 3.0, 0.2, 3.0]),
    "Acrobot-v1": ([-math.pi, -math.pi, -4 * math.pi, -9 * math.pi],
                   [math.pi, math.pi, 4 * math.pi, 9 * math.pi]),
    "Pendulum-v1": ([-3 * math.pi, -8.0], [3 * math.pi, 8.0]),
}
SCRAMBLE_EVERY = 10


def _our_state(state_cls, gym_state):
    return state_cls(*jnp.asarray(np.asarray(gym_state, np.float64), jnp.float32))


def _coverage(env_id, before, after):
    """Which edge cases gymnasium's step from `before` to `after` went through."""
    if env_id == "Acrobot-v1":
        clipped = abs(after[2]) == 4 * math.pi or abs(after[3]) == 9 * math.pi
        wrapped = bool(np.any(np.abs(after[:2] - before[:2]) > math.pi))
        return {"clip": clipped, "wrap": wrapped}
    if env_id == "Pendulum-v1":
        return {"clip": abs(after[1]) == 8.0}
    return {}


@pytest.mark.parametrize("env_id", sorted(CASES))
def test_step_parity_with_resync(env_id):
    env_cls, state_cls, policy = CASES[env_id]
    step = jax.jit(env_cls().step)
    gym_env = gymnasium.make(env_id).unwrapped
    rng = np.random.default_rng(0)
    obs, _ = gym_env.reset(seed=0)
    counts = {"terminated": 0, "clip": 0, "wrap": 0}
    for t in range(300):
        if t % SCRAMBLE_EVERY == SCRAMBLE_EVERY // 2:
            gym_env.state = rng.uniform(*SCRAMBLE_BOXES[env_id])
        before = np.array(gym_env.state, np.float64)
        state = _our_state(state_cls, before)
        action = policy(rng, obs)
        obs, reward, terminated, truncated, _ = gym_env.step(action)
        new_state, ts = step(state, jnp.asarray(action))
        # The state too: Acrobot's angle wrapping does not show in its observation.
        np.testing.assert_allclose(
            np.stack(new_state), gym_env.state, **TIGHT, err_msg=f"state, step {t}"
        )
        np.testing.assert_allclose(ts.observation, obs, **TIGHT, err_msg=f"step {t}")
        np.testing.assert_allclose(ts.reward, reward, **TIGHT, err_msg=f"step {t}")
        assert bool(ts.last()) == terminated, f"step {t}"
        assert float(ts.discount) == (0.0 if terminated else 1.0), f"step {t}"
        assert not truncated
        for case, hit in _coverage(env_id, before, np.asarray(gym_env.state)).items():
            counts[case] += hit
        if terminated:
            counts["terminated"] += 1
            obs, _ = gym_env.reset(seed=t)
    # The edge cases must actually have been compared, or the test proves little.
    expected = {"CartPole-v1": ["terminated"], "Acrobot-v1": ["terminated", "clip", "wrap"],
                "Pendulum-v1": ["clip"]}[env_id]
    for case in expected:
        assert counts[case] >= 3, f"{case} happened {counts[case]} times: {counts}"


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_trajectory_parity_without_resync(env_id):
    env_cls, state_cls, policy = CASES[env_id]
    step = jax.jit(env_cls().step)
    gym_env = gymnasium.make(env_id).unwrapped
    rng = np.random.default_rng(1)
    obs, _ = gym_env.reset(seed=1)
    state = _our_state(state_cls, gym_env.state)
    for t in range(50):
        action = policy(rng, obs)
        obs, reward, terminated, _, _ = gym_env.step(action)
        state, ts = step(state, jnp.asarray(action))
        np.testing.assert_allclose(ts.observation, obs, **LOOSE, err_msg=f"step {t}")
        np.testing.assert_allclose(ts.reward, reward, **LOOSE, err_msg=f"step {t}")
        assert bool(ts.last()) == terminated, f"step {t}"
        if terminated:
            break
    assert t >= 8, "trajectory too short to say anything"


@pytest.mark.parametrize(
    "env_cls, lows, highs",
    [
        (CartPole, [-0.05] * 4, [0.05] * 4),
        (Acrobot, [-0.1] * 4, [0.1] * 4),
        (Pendulum, [-math.pi, -1.0], [math.pi, 1.0]),
    ],
)
def test_reset_distribution(env_cls, lows, highs):
    keys = jax.random.split(jax.random.PRNGKey(3), 2000)
    state, ts = jax.jit(jax.vmap(env_cls().reset))(keys)
    values = np.stack([np.asarray(v) for v in state], axis=1)
    lows, highs = np.asarray(lows), np.asarray(highs)
    span = highs - lows
    assert np.all(values >= lows) and np.all(values <= highs)
    # Uniform over the whole box: extremes near the bounds, mean near the centre.
    np.testing.assert_allclose(values.min(0), lows, atol=0.01 * span.max())
    np.testing.assert_allclose(values.max(0), highs, atol=0.01 * span.max())
    np.testing.assert_allclose(values.mean(0), (lows + highs) / 2, atol=0.05 * span.max())
    assert np.all(np.asarray(ts.step_type) == FIRST)


def _some_actions(spec, n, key):
    if isinstance(spec, specs.DiscreteArray):
        return jax.random.randint(key, (n,), 0, spec.num_values)
    return jax.random.uniform(key, (n, *spec.shape), jnp.float32, spec.minimum, spec.maximum)


@pytest.mark.parametrize("name", podrl.envs.registered())
def test_make_returns_jittable_vmappable_env(name):
    env = podrl.envs.make(name)
    obs_spec, act_spec = env.observation_spec(), env.action_spec()
    n = 3
    state, ts = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), n))
    step = jax.jit(jax.vmap(env.step))
    for i in range(3):
        leaves = observations.keyed_leaves(ts.observation)  # a dict observation: every leaf (DictCue, MaskedCue)
        for key, leaf_spec in observations.leaf_specs(obs_spec):
            assert leaves[key].shape == (n, *leaf_spec.shape) and leaves[key].dtype == leaf_spec.dtype, key
            leaf_spec.validate(np.asarray(leaves[key][0]))
        assert ts.reward.dtype == jnp.float32 and ts.reward.shape == (n,)
        assert ts.discount.dtype == jnp.float32 and ts.discount.shape == (n,)
        assert ts.step_type.dtype == jnp.int32 and ts.step_type.shape == (n,)
        actions = _some_actions(act_spec, n, jax.random.PRNGKey(i))
        mask = observations.action_mask(ts.observation)
        if mask is not None:  # a legal action (MaskedCue ends an episode at an illegal one)
            actions = jnp.argmax(mask, axis=-1).astype(actions.dtype)
        state, ts = step(state, actions)
    assert np.all(np.asarray(ts.step_type) == MID)


def test_make_unknown_env_names_it():
    with pytest.raises(podrl.envs.UnknownEnvError, match="nope"):
        podrl.envs.make("nope")


def test_make_adds_gymnasium_time_limits():
    for name in ["CartPole-v1", "Acrobot-v1", "Pendulum-v1"]:
        expected = gymnasium.spec(name).max_episode_steps
        assert podrl.envs.make(name).max_steps == expected, name
    assert not isinstance(podrl.envs.make("MatchSign-v0"), podrl.envs.TimeLimit)


def test_pendulum_g_argument_changes_dynamics():
    state = PendulumState(jnp.float32(1.0), jnp.float32(0.0))
    action = jnp.zeros((1,), jnp.float32)
    _, slow = Pendulum(g=1.0).step(state, action)
    _, fast = Pendulum().step(state, action)
    # theta_dot after one step is 1.5 * g * sin(1) * dt.
    np.testing.assert_allclose(slow.observation[2], 1.5 * 1.0 * math.sin(1.0) * 0.05, rtol=1e-5)
    np.testing.assert_allclose(fast.observation[2], 1.5 * 10.0 * math.sin(1.0) * 0.05, rtol=1e-5)


def _run_match_sign(env, policy, key, n_envs):
    """Returns the summed reward per env and the [T, B] step types of one episode."""
    keys = jax.random.split(key, n_envs)
    state, ts = jax.vmap(env.reset)(keys)

    def body(carry, key):
        state, ts = carry
        action = policy(ts.observation[:, 0], key)
        state, ts = jax.vmap(env.step)(state, action)
        return (state, ts), (ts.reward, ts.step_type, ts.discount)

    step_keys = jax.random.split(jax.random.PRNGKey(7), env.episode_length)
    _, (rewards, step_types, discounts) = jax.jit(
        lambda c, k: jax.lax.scan(body, c, k)
    )((state, ts), step_keys)
    return rewards.sum(0), np.asarray(step_types), np.asarray(discounts)


def test_match_sign_returns():
    env = MatchSign(episode_length=10)
    optimal = lambda obs, key: (obs > 0).astype(jnp.int32)  # noqa: E731
    wrong = lambda obs, key: (obs < 0).astype(jnp.int32)  # noqa: E731
    rand = lambda obs, key: jax.random.randint(key, obs.shape, 0, 2)  # noqa: E731
    key = jax.random.PRNGKey(0)
    best, step_types, discounts = _run_match_sign(env, optimal, key, 256)
    np.testing.assert_array_equal(best, 10.0)
    np.testing.assert_array_equal(_run_match_sign(env, wrong, key, 256)[0], 0.0)
    random_mean = float(_run_match_sign(env, rand, key, 256)[0].mean())
    assert abs(random_mean - 5.0) < 0.5, random_mean
    # MID for 9 steps, then a terminating LAST.
    assert np.all(step_types[:-1] == MID) and np.all(step_types[-1] == LAST)
    assert np.all(discounts[:-1] == 1.0) and np.all(discounts[-1] == 0.0)


def test_match_sign_signs_are_random():
    env = MatchSign()
    state, ts = env.reset(jax.random.PRNGKey(0))
    signs = [float(ts.observation[0])]
    for _ in range(40):
        state, ts = env.step(state, jnp.int32(1))
        signs.append(float(ts.observation[0]))
    assert set(signs) == {-1.0, 1.0}
    assert 5 < sum(s > 0 for s in signs) < 36
    keys = jax.random.split(jax.random.PRNGKey(1), 200)
    _, ts = jax.vmap(env.reset)(keys)
    assert 60 < int((ts.observation[:, 0] > 0).sum()) < 140
