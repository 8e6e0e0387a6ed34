"""MuZero's math against the papers' equations (NumPy transcriptions), and the sequence replay's
windows and targets aligned with the replayed steps across episode ends."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podrl.agents import replay
from podrl.agents.muzero import MuZeroConfig, scalar_to_two_hot, two_hot_to_scalar
from podrl.agents.muzero.agent import MuZeroParts, batch_from_windows, make_network, rollout_steps
from podrl.agents.muzero.targets import window_targets
from podrl.core.types import Trajectory
from podrl.envs.registry import make
from podrl.envs.types import env_spec
from references import numpy_two_hot


@pytest.mark.parametrize("x", [-7.0, -3.0, -2.25, 0.0, 0.4, 1.0, 2.999, 3.0, 42.0])
def test_two_hot_puts_the_scalar_on_its_two_neighbouring_atoms(x):
    s = 3
    probs = np.asarray(scalar_to_two_hot(jnp.float32(x), s))
    np.testing.assert_allclose(probs, numpy_two_hot(x, s), atol=1e-6)
    assert abs(float(two_hot_to_scalar(jnp.asarray(probs), s)) - min(max(x, -s), s)) < 1e-5


def numpy_window_targets(r, discount, end, policy, v_next, k_steps, n, gamma):
    """MuZero Appendix G, term by term: z_k = sum_{i<m} gamma^i r_{k+i} + [not terminated] gamma^m v(o'_{k+m-1}),
    m <= n cut after the step where the episode ends; a state past the window's first episode end is
    absorbing (z = 0, u = 0, uniform policy); u_k = r_{k-1}."""
    alive = [True]
    for k in range(1, k_steps + 1):
        alive.append(alive[-1] and not end[k - 1])
    values = []
    for k in range(k_steps + 1):
        z, weight, last = 0.0, 1.0, k
        for i in range(n):
            j = k + i
            z += weight * r[j]
            weight *= gamma * discount[j]
            last = j
            if end[j]:
                break
        values.append(z + weight * v_next[last] if alive[k] else 0.0)
    rewards = [r[k - 1] if alive[k - 1] else 0.0 for k in range(1, k_steps + 1)]
    a = policy.shape[-1]
    policies = [policy[k] if alive[k] else np.full(a, 1.0 / a) for k in range(k_steps + 1)]
    return np.asarray(rewards), np.asarray(values), np.asarray(policies), np.asarray(alive)


@pytest.mark.parametrize("case", ["no_end", "terminated", "truncated", "end_at_first_step"])
def test_window_targets_match_the_papers_definition(case):
    k_steps, n, gamma, a = 3, 2, 0.9, 3
    length = k_steps + n
    rng = np.random.default_rng(0)
    r = rng.normal(size=length).astype(np.float32)
    v_next = rng.normal(size=length).astype(np.float32)
    policy = rng.dirichlet(np.ones(a), size=length).astype(np.float32)
    discount = np.ones(length, np.float32)
    end = np.zeros(length, bool)
    where = {"terminated": 1, "truncated": 2, "end_at_first_step": 0}.get(case)
    if where is not None:
        end[where] = True
        if case != "truncated":
            discount[where] = 0.0
    got = window_targets(*(jnp.asarray(x) for x in (r, discount, end, policy, v_next)), k_steps, n, gamma)
    want = numpy_window_targets(r, discount, end, policy, v_next, k_steps, n, gamma)
    for name, g, w in zip(("reward", "value", "policy", "alive"), got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6, err_msg=name)
    if case == "terminated":  # by hand: the episode ends after step 1; states 2, 3 are absorbing
        assert list(np.asarray(got.alive)) == [True, True, False, False]
        assert abs(float(got.value[1]) - r[1]) < 1e-6  # r_1, then nothing to bootstrap (terminated)
        assert abs(float(got.value[0]) - (r[0] + gamma * r[1])) < 1e-6
        np.testing.assert_allclose(np.asarray(got.reward), [r[0], r[1], 0.0], atol=1e-6)


T, B = 12, 2
SPEC = env_spec(make("MatchCue-v0"))


def _counting_trajectory() -> Trajectory:
    """A `[T, B]` MatchCue-shaped rollout whose every field encodes (t, b): observation[t, b, 0] = t,
    [.., 1] = b; action = t % 4; reward = 10 b + t; policy = one-hot(t % 4). Env 0 terminates
    after t = 4, env 1 is truncated after t = 6; both restart at t + 1."""
    t = np.arange(T, dtype=np.float32)[:, None] * np.ones((1, B), np.float32)
    b = np.ones((T, 1), np.float32) * np.arange(B, dtype=np.float32)[None, :]
    obs = np.zeros((T, B, 4), np.float32)
    obs[..., 0], obs[..., 1] = t, b
    next_obs = obs.copy()
    next_obs[..., 0] += 1.0
    next_obs[..., 2] = 1.0  # marks "the observation after step t"
    discount = np.ones((T, B), np.float32)
    truncated = np.zeros((T, B), bool)
    discount[4, 0] = 0.0
    truncated[6, 1] = True
    action = (t % 4).astype(np.int32)
    policy = np.eye(4, dtype=np.float32)[action]
    return Trajectory(jnp.asarray(obs), jnp.asarray(action), jnp.asarray(10 * b + t), jnp.asarray(discount),
                      jnp.asarray(truncated), jnp.asarray(next_obs), {"policy": jnp.asarray(policy)}, ())


def test_sampled_windows_are_consecutive_steps_of_one_env_and_never_cross_the_write_position():
    traj = _counting_trajectory()
    steps = rollout_steps(traj, traj.reward)
    buffer = replay.init(2 * T * B - 2 * B, jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), steps))
    buffer = replay.add(replay.add(buffer, steps), steps)  # wrapped: the oldest 2 steps of each env overwritten
    length = 5
    windows = replay.sample_windows(buffer, jax.random.key(0), 512, length, B)
    t0 = np.asarray(windows.observation[:, 0, 0])
    env = np.asarray(windows.observation[:, :, 1])
    assert (env == env[:, :1]).all()  # one env per window
    times = np.asarray(windows.observation[..., 0])
    # written order: the 2nd half of the 1st add (t = 2..11), then the 2nd add (t = 0..11): consecutive mod T
    np.testing.assert_array_equal((times - t0[:, None]) % T, np.arange(length)[None, :].repeat(512, 0))
    # every start that keeps the window inside the 22 written steps of each env is drawn, no other
    assert sorted(set(zip(t0.tolist(), env[:, 0].tolist()))) == sorted(
        {((2 + i) % T, e) for i in range(22 - length + 1) for e in range(B)})


def test_batch_targets_align_rewards_values_actions_and_policies_with_the_replayed_steps():
    """Windows from t = 2 of both envs (K = 3, n = 2): env 0 terminates after t = 4 (window step 2), env 1 is
    truncated after t = 6 (window step 4, a bootstrap only). An off-by-one in the actions, rewards,
    value bootstraps or absorbing masks fails here."""
    config = MuZeroConfig(unroll_steps=3, td_steps=2, gamma=0.5, support_size=5, buffer_size=T * B, min_fill=T * B)
    network = make_network(config, SPEC)
    parts = MuZeroParts(config, network, None, None, None, SPEC)
    traj = _counting_trajectory()
    params = network.init(jax.random.key(1), traj.observation[0], traj.action[0])
    steps = jax.tree.map(lambda x: jnp.swapaxes(x.reshape((T, B) + x.shape[1:])[2:7], 0, 1),
                         rollout_steps(traj, traj.reward))
    batch = jax.jit(functools.partial(batch_from_windows, parts))(params, steps)
    np.testing.assert_array_equal(np.asarray(batch.observation[:, 0]), [2.0, 2.0])
    np.testing.assert_array_equal(np.asarray(batch.action), [[2, 3, 0], [2, 3, 0]])  # a_2, a_3, a_4
    # u_k = r_{k-1} (r = 10 b + t): env 0 ends after t = 4 (window step 2), so u_3 = r_4 still counts
    np.testing.assert_allclose(np.asarray(batch.targets.reward), [[2, 3, 4], [12, 13, 14]])
    np.testing.assert_array_equal(np.asarray(batch.targets.alive), [[True, True, True, False], [True] * 4])
    from podrl.agents.muzero.search import root

    values = np.asarray(jax.jit(lambda o: root(network, config.support_size, params, o).value)(
        traj.next_observation.reshape(T * B, 4))).reshape(T, B)
    def v(tb):
        return values[tb]

    g = config.gamma
    want0 = [2 + g * 3 + g * g * v((3, 0)), 3 + g * 4, 4.0, 0.0]  # terminated after t = 4: no bootstrap
    want1 = [12 + g * 13 + g * g * v((3, 1)), 13 + g * 14 + g * g * v((4, 1)),
             14 + g * 15 + g * g * v((5, 1)), 15 + g * 16 + g * g * v((6, 1))]  # truncated: bootstraps o'_6
    np.testing.assert_allclose(np.asarray(batch.targets.value), [want0, want1], rtol=1e-5, atol=1e-5)
    policy = np.asarray(batch.targets.policy)
    np.testing.assert_array_equal(policy[:, :3].argmax(-1), [[2, 3, 0], [2, 3, 0]])  # the policy stored at t
    np.testing.assert_allclose(policy[0, 3], 0.25)  # absorbing: uniform
    np.testing.assert_array_equal(policy[1, 3], np.eye(4)[1])
