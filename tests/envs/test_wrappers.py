"""Scripted-episode tests of TimeLimit, EpisodeStats and AutoReset.

`Counter` makes every expected value hand-computable: the step `t` of an
episode (1, 2, ...) is both the observation's first entry and the reward, so an
episode of n steps returns n (n + 1) / 2; the observation's second entry is a
tag drawn from the reset key, telling episodes apart.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs

import podrl.envs
from podrl.envs import FIRST, LAST, MID, AutoReset, EpisodeStats, TimeLimit, wrap_for_training
from podrl.envs.types import restart, transition


class CounterState(NamedTuple):
    t: jax.Array  # int32 [], steps taken in this episode
    tag: jax.Array  # float32 [], drawn at reset, in [1, 2)


class Counter:
    """Observation [t, tag], reward t; terminates at step `terminate_at` (None: never)."""

    def __init__(self, terminate_at: int | None = None):
        self.terminate_at = terminate_at

    def reset(self, key):
        tag = jax.random.uniform(key, (), jnp.float32, 1.0, 2.0)
        state = CounterState(jnp.asarray(0, jnp.int32), tag)
        return state, restart(self._obs(state))

    def step(self, state, action):
        state = CounterState(state.t + 1, state.tag)
        terminated = False if self.terminate_at is None else state.t == self.terminate_at
        return state, transition(self._obs(state), state.t.astype(jnp.float32), terminated)

    def observation_spec(self):
        return specs.Array((2,), np.float32)

    def action_spec(self):
        return specs.DiscreteArray(2)

    @staticmethod
    def _obs(state):
        return jnp.stack([state.t.astype(jnp.float32), state.tag])


def _rollout(env, n_steps, seed=0):
    """The reset timestep and the `n_steps` step timesteps (as numpy, jitted)."""
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    state, first = reset(jax.random.PRNGKey(seed))
    steps = []
    for _ in range(n_steps):
        state, ts = step(state, jnp.int32(0))
        steps.append(jax.tree.map(np.asarray, ts))
    return jax.tree.map(np.asarray, first), steps


def _column(steps, field, key=None):
    values = [getattr(ts, field) if key is None else ts.extras[key] for ts in steps]
    return np.stack(values).tolist()


# ----------------------------------------------------------------- TimeLimit


def test_time_limit_truncates_as_last_with_discount_one():
    first, steps = _rollout(TimeLimit(Counter(terminate_at=None), max_steps=3), 3)
    assert first.step_type == FIRST and first.extras["truncated"] == False  # noqa: E712
    assert _column(steps, "step_type") == [MID, MID, LAST]
    assert _column(steps, "discount") == [1.0, 1.0, 1.0]
    assert _column(steps, "extras", "truncated") == [False, False, True]
    assert _column(steps, "reward") == [1.0, 2.0, 3.0]


def test_time_limit_lets_an_earlier_termination_through():
    _, steps = _rollout(TimeLimit(Counter(terminate_at=2), max_steps=5), 2)
    assert _column(steps, "step_type") == [MID, LAST]
    assert _column(steps, "discount") == [1.0, 0.0]
    assert _column(steps, "extras", "truncated") == [False, False]


def test_time_limit_termination_wins_on_the_same_step():
    _, steps = _rollout(TimeLimit(Counter(terminate_at=3), max_steps=3), 3)
    assert _column(steps, "step_type") == [MID, MID, LAST]
    assert _column(steps, "discount") == [1.0, 1.0, 0.0]
    assert _column(steps, "extras", "truncated") == [False, False, False]


@pytest.mark.parametrize("inner, outer", [(3, 10), (10, 3)])
def test_nested_time_limits_truncate_at_the_shorter(inner, outer):
    # e.g. a user's TimeLimit around podrl.envs.make(...), which already has one.
    env = TimeLimit(TimeLimit(Counter(), max_steps=inner), max_steps=outer)
    _, steps = _rollout(env, 3)
    assert _column(steps, "step_type") == [MID, MID, LAST]
    assert _column(steps, "discount") == [1.0, 1.0, 1.0]
    assert _column(steps, "extras", "truncated") == [False, False, True]


def test_time_limit_rejects_non_positive_limits():
    with pytest.raises(ValueError, match="max_steps"):
        TimeLimit(Counter(), max_steps=0)


# -------------------------------------------------------------- EpisodeStats


def test_episode_stats_running_totals():
    first, steps = _rollout(EpisodeStats(Counter(terminate_at=4)), 4)
    assert first.extras["episode_return"] == 0.0 and first.extras["episode_length"] == 0
    assert _column(steps, "extras", "episode_return") == [1.0, 3.0, 6.0, 10.0]
    assert _column(steps, "extras", "episode_length") == [1, 2, 3, 4]
    assert steps[-1].step_type == LAST
    assert steps[0].extras["episode_return"].dtype == np.float32
    assert steps[0].extras["episode_length"].dtype == np.int32


def test_episode_stats_count_truncated_episodes():
    _, steps = _rollout(EpisodeStats(TimeLimit(Counter(), max_steps=5)), 5)
    assert steps[-1].step_type == LAST and steps[-1].extras["truncated"]
    assert steps[-1].extras["episode_return"] == 15.0
    assert steps[-1].extras["episode_length"] == 5


# ----------------------------------------------------------------- AutoReset


def test_auto_reset_on_termination():
    first, steps = _rollout(AutoReset(EpisodeStats(Counter(terminate_at=3))), 7)
    tag0 = first.observation[1]
    # Reset: next_obs is the observation itself.
    np.testing.assert_array_equal(first.extras["next_obs"], first.observation)
    assert _column(steps, "step_type") == [MID, MID, LAST, MID, MID, LAST, MID]
    assert _column(steps, "reward") == [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0]
    assert _column(steps, "discount") == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    assert _column(steps, "extras", "episode_return") == [1.0, 3.0, 6.0, 1.0, 3.0, 6.0, 1.0]
    assert _column(steps, "extras", "episode_length") == [1, 2, 3, 1, 2, 3, 1]

    last = steps[2]
    # The action's outcome is in next_obs; the observation is the next episode's first.
    np.testing.assert_array_equal(last.extras["next_obs"], [3.0, tag0])
    assert last.observation[0] == 0.0
    tag1 = last.observation[1]
    assert tag1 != tag0, "the new episode must come from a fresh reset key"
    # The inner state was reset together with the observation: the next step continues it.
    np.testing.assert_array_equal(steps[3].observation, [1.0, tag1])
    np.testing.assert_array_equal(steps[5].extras["next_obs"], [3.0, tag1])
    assert steps[5].observation[1] not in (tag0, tag1)

    for i in (0, 1, 3, 4, 6):
        np.testing.assert_array_equal(steps[i].extras["next_obs"], steps[i].observation)


def test_auto_reset_on_truncation_keeps_final_step_fields():
    env = AutoReset(EpisodeStats(TimeLimit(Counter(), max_steps=2)))
    first, steps = _rollout(env, 4)
    assert _column(steps, "step_type") == [MID, LAST, MID, LAST]
    assert _column(steps, "discount") == [1.0, 1.0, 1.0, 1.0]
    assert _column(steps, "extras", "truncated") == [False, True, False, True]
    assert _column(steps, "reward") == [1.0, 2.0, 1.0, 2.0]
    assert _column(steps, "extras", "episode_return") == [1.0, 3.0, 1.0, 3.0]
    # Bootstrapping a truncated episode needs the final observation.
    np.testing.assert_array_equal(steps[1].extras["next_obs"], [2.0, first.observation[1]])
    assert steps[1].observation[0] == 0.0


def test_wrapped_env_scans_batched():
    """jit(scan(vmap(step))) keeps one extras structure; batch members stay independent."""
    env = wrap_for_training(TimeLimit(Counter(terminate_at=3), max_steps=2))
    env_long = wrap_for_training(TimeLimit(Counter(terminate_at=3), max_steps=5))

    def run(env, n_envs=4, n_steps=6):
        state, ts = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(1), n_envs))

        def body(state, _):
            state, ts = jax.vmap(env.step)(state, jnp.zeros(n_envs, jnp.int32))
            return state, ts

        return jax.jit(lambda s: jax.lax.scan(body, s, None, length=n_steps))(state)[1]

    ts = run(env)  # truncated every 2 steps, before the termination at 3
    np.testing.assert_array_equal(ts.step_type, np.tile([[MID], [LAST]] * 3, 4))
    np.testing.assert_array_equal(ts.discount, 1.0)
    np.testing.assert_array_equal(ts.extras["truncated"], np.tile([[False], [True]] * 3, 4))
    ts = run(env_long)  # terminated every 3 steps
    np.testing.assert_array_equal(ts.step_type, np.tile([[MID], [MID], [LAST]] * 2, 4))
    np.testing.assert_array_equal(ts.discount, np.tile([[1.0], [1.0], [0.0]] * 2, 4))
    returns = np.tile([[1.0], [3.0], [6.0]] * 2, 4)
    np.testing.assert_array_equal(ts.extras["episode_return"], returns)
    tags = np.asarray(ts.observation[..., 1])
    assert len(np.unique(tags[0])) == 4, "each env needs its own reset key"


def test_wrappers_forward_attributes_and_specs():
    inner = Counter(terminate_at=7)
    env = wrap_for_training(TimeLimit(inner, max_steps=9))
    assert env.terminate_at == 7 and env.max_steps == 9
    assert env.unwrapped is inner
    assert env.observation_spec().shape == (2,)
    assert env.action_spec().num_values == 2
    assert podrl.envs.env_spec(env).discrete
    with pytest.raises(AttributeError):
        env.no_such_attribute  # noqa: B018


class CountingResets(Counter):
    """`Counter` that records, on the host, every batch of resets it computes."""

    def __init__(self, terminate_at: int, calls: list):
        super().__init__(terminate_at)
        self.calls = calls

    def reset(self, key):
        state, ts = super().reset(key)
        jax.debug.callback(lambda: self.calls.append(1))
        return state, ts


def _batch_rollout(step_fn, env, num_envs, n_steps, seed=0):
    """`n_steps` batched steps of `step_fn` (jitted scan) from one batched reset; the step timesteps."""
    state, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(seed), num_envs))
    actions = jax.random.randint(jax.random.key(seed + 1), (n_steps, num_envs), 0, 2)
    _, steps = jax.jit(lambda s, a: jax.lax.scan(lambda c, x: step_fn(c, x), s, a))(state, actions)
    return steps


def test_step_batch_equals_vmapped_step_value_for_value():
    # CartPole with random actions: episodes end at different steps in different envs.
    env = wrap_for_training(podrl.envs.make("CartPole-v1"))
    vmapped = _batch_rollout(jax.vmap(env.step), env, 6, 200)
    batched = _batch_rollout(podrl.envs.batch_step(env), env, 6, 200)
    assert 0 < int(jnp.sum(vmapped.step_type == LAST)) < 6 * 200  # some episodes ended, not all steps
    for a, b in zip(jax.tree.leaves(vmapped), jax.tree.leaves(batched)):
        np.testing.assert_array_equal(a, b)


def test_step_batch_under_an_outer_vmap_equals_vmapped_step():
    env = wrap_for_training(podrl.envs.make("CartPole-v1"))
    per_seed = [_batch_rollout(jax.vmap(env.step), env, 3, 120, seed=s) for s in (0, 5)]

    def seeds_rollout(step_fn):
        keys = jnp.stack([jax.random.split(jax.random.key(s), 3) for s in (0, 5)])
        state, _ = jax.vmap(jax.vmap(env.reset))(keys)
        actions = jnp.stack([jax.random.randint(jax.random.key(s + 1), (120, 3), 0, 2) for s in (0, 5)])
        run = lambda s, a: jax.lax.scan(lambda c, x: step_fn(c, x), s, a)[1]  # noqa: E731
        return jax.jit(jax.vmap(run))(state, actions)

    together = seeds_rollout(podrl.envs.batch_step(env))
    for i, alone in enumerate(per_seed):
        for a, b in zip(jax.tree.leaves(alone), jax.tree.leaves(together)):
            np.testing.assert_array_equal(a, b[i])


def test_step_batch_computes_resets_only_on_steps_where_an_episode_ends():
    calls: list = []
    env = AutoReset(EpisodeStats(CountingResets(terminate_at=5, calls=calls)))
    steps = _batch_rollout(podrl.envs.batch_step(env), env, 4, 12)
    ended = np.asarray(jnp.any(steps.step_type == LAST, axis=1))
    assert ended.tolist() == [t in (5, 10) for t in range(1, 13)]
    assert 0 < len(calls) <= 2 * 4  # 2 steps ended episodes (at most one callback per env)
    calls.clear()
    vmapped = _batch_rollout(jax.vmap(env.step), env, 4, 12)
    assert len(calls) >= 12  # the plain vmapped step resets on every step
    np.testing.assert_array_equal(vmapped.observation, steps.observation)


def test_batch_step_uses_a_wrappers_own_step_not_a_forwarded_one():
    class Doubling(podrl.envs.Wrapper):  # a wrapper over AutoReset: its step must not be skipped
        def step(self, state, action):
            state, ts = self.env.step(state, action)
            return state, ts._replace(reward=2 * ts.reward)

    env = Doubling(wrap_for_training(Counter(terminate_at=3)))
    steps = _batch_rollout(podrl.envs.batch_step(env), env, 2, 4)
    np.testing.assert_array_equal(steps.reward[:, 0], [2.0, 4.0, 6.0, 2.0])


class ConstantObservation(Counter):
    """`Counter` whose steps show the same observation on every shard (it varies over no mesh axis)."""

    def step(self, state, action):
        state, ts = super().step(state, action)
        return state, ts._replace(observation=jnp.zeros(2, jnp.float32))


def test_step_batch_inside_shard_map_when_the_step_varies_over_fewer_axes_than_the_reset():
    from jax.sharding import PartitionSpec as P

    from podrl.core.mesh import data_mesh, local_devices
    from podrl.core.parallel import DATA_AXIS, match_varying
    from podrl.envs.varying import vary_over

    env = wrap_for_training(ConstantObservation(terminate_at=3))
    keys = jax.random.split(jax.random.key(0), 4)

    def shard(keys):
        state, _ = jax.vmap(env.reset)(keys)
        state = vary_over(state, (DATA_AXIS,))  # as Anakin's env states, which enter the shard_map sharded
        step = podrl.envs.batch_step(env)

        def body(carry, _):
            carry_out, ts = step(carry, jnp.zeros(keys.shape[0], jnp.int32))
            return match_varying(carry_out, carry), ts

        _, steps = jax.lax.scan(body, state, None, 5)
        return steps.observation, steps.step_type

    mapped = jax.jit(jax.shard_map(shard, mesh=data_mesh(local_devices(2)), in_specs=P(DATA_AXIS),
                                   out_specs=P(None, DATA_AXIS)))
    observation, step_type = mapped(keys)
    state, _ = jax.vmap(env.reset)(keys)
    _, expected = jax.lax.scan(lambda c, _: jax.vmap(env.step)(c, jnp.zeros(4, jnp.int32)), state, None, 5)
    np.testing.assert_array_equal(step_type, expected.step_type)
    np.testing.assert_array_equal(observation, expected.observation)  # zeros, and the reset's tags after step 3
