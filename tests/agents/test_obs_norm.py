"""Observation normalisation (`podrl.agents.obs_norm`): the running moments against NumPy, identical
statistics on every learner shard, the inner update fed with the statistics the actors acted with
(a recording inner agent), PPO with it through both layouts, and bad fields named."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs
from jax.sharding import PartitionSpec as P

from one_device import update_on_one_device
from parity import anakin_sebulba_states, max_diffs
from podrl.agents.obs_norm import (
    VARIANCE_EPS,
    RunningStats,
    batch_moments,
    init_stats,
    merge,
    normalize,
    update_stats,
    with_observation_norm,
)
from podrl.agents.ppo import PPOConfig
from podrl.core.errors import ConfigError
from podrl.core.mesh import data_mesh
from podrl.core.parallel import DATA_AXIS
from podrl.core.types import Agent, TrainState, Trajectory
from podrl.envs.types import EnvSpec


def numpy_stats(batches: list[np.ndarray]) -> tuple[float, np.ndarray, np.ndarray]:
    """count, mean and population variance over the rows of all `batches` `[n_i, *obs]`."""
    rows = np.concatenate(batches).astype(np.float64)
    return len(rows), rows.mean(axis=0), rows.var(axis=0)


def test_running_moments_of_unequal_batches_match_numpy_over_their_union():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 3)).astype(np.float32) * [1.0, 10.0, 0.1] for n in (1, 7, 64, 5)]
    stats = init_stats((3,))
    for batch in batches:
        stats = merge(stats, batch_moments(jnp.asarray(batch), feature_ndim=1))
    count, mean, var = numpy_stats(batches)
    assert float(stats.count) == count
    np.testing.assert_allclose(np.asarray(stats.mean), mean, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(stats.var), var, rtol=1e-4)


def test_batch_moments_reduce_time_and_batch_axes_of_a_trajectory():
    x = np.random.default_rng(1).normal(size=(4, 6, 2, 3)).astype(np.float32)  # [T, B, *obs]
    stats = batch_moments(jnp.asarray(x), feature_ndim=2)
    count, mean, var = numpy_stats([x.reshape(24, 2, 3)])
    assert float(stats.count) == count
    np.testing.assert_allclose(np.asarray(stats.mean), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(stats.var), var, rtol=1e-5)


def test_normalize_standardises_then_clips():
    stats = RunningStats(jnp.float32(10.0), jnp.asarray([1.0, -2.0]), jnp.asarray([4.0, 0.25]))
    obs = np.asarray([[3.0, -2.5], [100.0, -2.0]], np.float32)
    expected = np.clip((obs - [1.0, -2.0]) / np.sqrt(np.asarray([4.0, 0.25]) + 1e-8), -5.0, 5.0)
    np.testing.assert_allclose(np.asarray(normalize(stats, obs, clip=5.0)), expected, rtol=1e-6)
    assert float(normalize(stats, obs, clip=5.0)[1, 0]) == 5.0  # (100 - 1) / 2 clipped


def test_statistics_are_identical_on_every_learner_shard_and_cover_all_shards_data(cpu_devices):
    """Each of 4 shards sees different observations (different means and spreads); every shard
    comes out with the moments of the union, as NumPy computes them."""
    mesh = data_mesh(jax.devices()[:4])
    rng = np.random.default_rng(2)
    first = (rng.normal(size=(4 * 8, 5, 2)) * np.arange(1, 5).repeat(8)[:, None, None]).astype(np.float32)
    second = (rng.normal(size=(4 * 8, 5, 2)) + np.arange(4).repeat(8)[:, None, None]).astype(np.float32)

    def per_shard(a, b):  # a, b: this shard's [8, 5, 2] batch (B, T, *obs)
        stats = update_stats(update_stats(init_stats((2,)), a), b)
        return jax.tree.map(lambda x: x[None], stats)

    fn = jax.jit(jax.shard_map(per_shard, mesh=mesh, in_specs=(P(DATA_AXIS), P(DATA_AXIS)), out_specs=P(DATA_AXIS)))
    stats = jax.device_get(fn(first, second))
    for leaf in stats:  # [4 shards, ...]: all rows equal
        np.testing.assert_array_equal(leaf, np.broadcast_to(leaf[:1], leaf.shape))
    _, mean, var = numpy_stats([first.reshape(-1, 2), second.reshape(-1, 2)])
    np.testing.assert_allclose(stats.mean[0], mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats.var[0], var, rtol=1e-4)
    assert stats.count[0] == 2 * 8 * 5  # per shard: two batches of 8 x 5 observations


def recording_agent() -> Agent:
    """An inner agent that shows what it is given: `act` returns its observation as the action, `update`
    returns the trajectory's observations as metrics (and the state unchanged)."""

    def update(state, traj, key):
        return state, {"observation": traj.observation, "next_observation": traj.next_observation}

    return Agent(init=lambda key, spec: TrainState({"w": jnp.zeros(())}, (), jnp.zeros((), jnp.int32)),
                 init_actor_state=lambda batch_size, columns=None: (),
                 act=lambda params, actor_state, obs, key: (obs, {}, actor_state),
                 act_greedy=lambda params, actor_state, obs: (obs, actor_state), update=update)


def test_the_inner_update_sees_the_observations_normalised_as_the_actors_saw_them(cpu_devices):
    """Two updates on batches of different means and spreads: the second one hands the inner update its
    observations (and bootstrap observations) normalised with the statistics of the first batch, the ones
    the params carried while the actors acted, exactly what `act` gives with those params; only then are
    the statistics those of both batches."""
    clip = 10.0
    agent = with_observation_norm(recording_agent(), clip)
    rng = np.random.default_rng(3)
    batches = [(rng.normal(size=(5, 4, 2, 3)) * scale + shift).astype(np.float32)  # [T + 1, B, *obs]
               for scale, shift in ((1.0, 0.0), (4.0, -3.0))]
    trajectories = [Trajectory(jnp.asarray(x[:-1]), jnp.zeros((4, 4)), jnp.zeros((4, 4)), jnp.ones((4, 4)),
                               jnp.zeros((4, 4), bool), jnp.asarray(x[1:]), {}, ()) for x in batches]
    update = update_on_one_device(agent)
    state = agent.init(jax.random.key(0), EnvSpec(specs.Array((2, 3), np.float32), specs.Array((1,), np.float32)))
    state, _ = update(state, trajectories[0], jax.random.key(1))
    acting = state.params
    state, seen = update(state, trajectories[1], jax.random.key(2))
    _, mean, var = numpy_stats([batches[0][:-1].reshape(-1, 2, 3)])
    for name, x in (("observation", batches[1][:-1]), ("next_observation", batches[1][1:])):
        want = np.clip((x - mean) / np.sqrt(var + VARIANCE_EPS), -clip, clip)
        np.testing.assert_allclose(np.asarray(seen[name]), want, rtol=1e-4, atol=1e-5, err_msg=name)
        acted = jax.vmap(lambda o: agent.act(acting, (), o, jax.random.key(0))[0])(jnp.asarray(x))
        np.testing.assert_array_equal(np.asarray(seen[name]), np.asarray(acted), err_msg=name)
    count, mean, var = numpy_stats([b[:-1].reshape(-1, 2, 3) for b in batches])
    assert float(state.params["obs_norm"].count) == count
    np.testing.assert_allclose(np.asarray(state.params["obs_norm"].mean), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(state.params["obs_norm"].var), var, rtol=1e-4)


@pytest.mark.parametrize("field, value", [("normalize_observations", 1), ("obs_norm_clip", 0.0)])
def test_bad_fields_are_named(field, value):
    with pytest.raises(ConfigError) as info:
        PPOConfig(**{field: value})
    assert info.value.field == field


@pytest.mark.timeout(300)
def test_ppo_with_obs_norm_matches_across_layouts_and_actors_get_the_statistics(cpu_devices):
    """Anakin and Sebulba (lag 0: its actors act with the published params, statistics included)
    end with the same weights and the same statistics, which have counted every observation."""
    anakin, sebulba = anakin_sebulba_states(PPOConfig(normalize_observations=True), T=8, B=8, U=3)
    stats = anakin.params["obs_norm"]
    assert float(stats.count) == 8 * 8 * 3
    assert 0.0 < float(np.max(np.abs(stats.mean))) and not np.allclose(stats.var, 1.0)
    diffs = max_diffs([np.asarray(x) for x in jax.tree.leaves(anakin.params)],
                      [np.asarray(x) for x in jax.tree.leaves(sebulba.params)])
    assert max(diffs) < 1e-5, diffs
