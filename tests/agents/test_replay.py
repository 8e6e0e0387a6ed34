"""The replay ring buffer (`podrl.agents.replay`) and per-learner-shard state (`podrl.core.learner_state`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from podrl.agents import replay
from podrl.core.learner_state import init_on_mesh
from podrl.core.mesh import data_mesh
from podrl.core.parallel import DATA_AXIS, mean_across_learners
from podrl.core.types import Agent, TrainState, Trajectory
from podrl.run.checkpoint import Checkpointer
from podrl.sebulba.learner import make_learner_step
from podrl.sebulba.transport import learner_shardings, place_on_learners


def test_add_wraps_around_and_counts_the_filled_slots():
    buffer = replay.init(5, {"x": jnp.zeros((), jnp.int32), "o": jnp.zeros((2,), jnp.uint8)})
    assert buffer.data["o"].dtype == jnp.uint8 and buffer.capacity == 5
    buffer = replay.add(buffer, {"x": jnp.arange(1, 4), "o": jnp.ones((3, 2), jnp.uint8)})
    assert (int(buffer.position), int(buffer.size)) == (3, 3)
    buffer = replay.add(buffer, {"x": jnp.arange(4, 8), "o": jnp.full((4, 2), 7, jnp.uint8)})
    assert (int(buffer.position), int(buffer.size)) == (2, 5)
    np.testing.assert_array_equal(buffer.data["x"], [6, 7, 3, 4, 5])  # 6 and 7 overwrote the oldest
    np.testing.assert_array_equal(buffer.data["o"][:, 0], [7, 7, 1, 7, 7])
    with pytest.raises(ValueError, match="capacity 5"):
        replay.add(buffer, {"x": jnp.arange(6), "o": jnp.zeros((6, 2), jnp.uint8)})


def test_sample_draws_only_from_filled_slots():
    buffer = replay.add(replay.init(100, jnp.zeros((), jnp.int32)), jnp.arange(1, 8))
    drawn = np.asarray(replay.sample(buffer, jax.random.key(0), 2000))
    assert set(drawn.tolist()) == set(range(1, 8))  # never an empty slot's 0, every filled slot seen


def reference_n_step(r, d, end, n, gamma):
    """NumPy transcription: R_t = sum_{k<m} gamma^k r_{t+k}, m stops after an episode end or at T."""
    T = len(r)
    out_r, out_w, out_last = np.zeros(T), np.zeros(T), np.zeros(T, int)
    for t in range(T):
        ret, w, k = 0.0, 1.0, 0
        while k < n and t + k < T:
            ret += w * r[t + k]
            w *= gamma * d[t + k]
            k += 1
            if end[t + k - 1]:
                break
        out_r[t], out_w[t], out_last[t] = ret, w, t + k - 1
    return out_r, out_w, out_last


@pytest.mark.parametrize("n", [1, 3])
def test_n_step_targets_match_the_definition(n):
    rng = np.random.default_rng(0)
    r = rng.normal(size=12).astype(np.float32)
    terminated = np.zeros(12, bool)
    terminated[4] = True
    truncated = np.zeros(12, bool)
    truncated[8] = True
    d = np.where(terminated, 0.0, 1.0).astype(np.float32)
    got = replay.n_step_targets(jnp.asarray(r), jnp.asarray(d), jnp.asarray(terminated | truncated), n, 0.9)
    want = reference_n_step(r, d, terminated | truncated, n, 0.9)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6)


def test_transitions_bootstrap_from_the_pre_reset_observation_and_never_cross_episodes():
    T, B = 4, 2
    obs = np.arange(T * B, dtype=np.float32).reshape(T, B, 1)
    next_obs = obs + 100.0  # "before auto-reset": distinct from the next row's observation
    truncated = np.zeros((T, B), bool)
    truncated[1, 0] = True  # env 0 cut by a time limit after step 1
    traj = Trajectory(obs, np.zeros((T, B), np.int32), np.ones((T, B), np.float32), np.ones((T, B), np.float32),
                      truncated, next_obs, {}, ())
    tr = replay.transitions(jax.tree.map(jnp.asarray, traj), 3, 0.5)
    rows = lambda x: np.asarray(x).reshape(T, B, *np.shape(x)[1:])  # noqa: E731
    # env 0, t=0: r0 + 0.5 r1, then the episode was truncated: bootstrap from next_obs[1, 0] with 0.5^2
    assert rows(tr.reward)[0, 0] == pytest.approx(1.5) and rows(tr.discount)[0, 0] == pytest.approx(0.25)
    assert rows(tr.next_observation)[0, 0, 0] == next_obs[1, 0, 0]
    # env 1, t=2: only 2 steps left in the rollout
    assert rows(tr.reward)[2, 1] == pytest.approx(1.5) and rows(tr.next_observation)[2, 1, 0] == next_obs[3, 1, 0]


def recording_agent(capacity: int) -> Agent:
    """A learner-only agent whose `update` adds this shard's rewards `[T * B_shard]` to its buffer."""

    def init(key, spec):
        return TrainState({"w": jnp.zeros(())}, (), jnp.zeros((), jnp.int32),
                          replay.init(capacity, jnp.zeros((), jnp.float32)))

    def update(state, traj, key):
        buffer = replay.add(state.shard_state, traj.reward.reshape(-1))
        return state._replace(update_step=state.update_step + 1, shard_state=buffer), \
            {"size": mean_across_learners(buffer.size.astype(jnp.float32))}

    return Agent(init, lambda b: (), None, None, update)


def test_each_learner_shard_keeps_its_own_buffer_and_it_checkpoints(cpu_devices, tmp_path):
    """Two learner shards get different halves of the batch, keep them across updates, and a
    checkpoint restores the sharded buffers exactly, laid out as before."""
    T, B, mesh = 2, 4, data_mesh(cpu_devices[:2])
    agent = recording_agent(capacity=8)
    state = init_on_mesh(agent, jax.random.key(0), None, mesh)
    assert state.shard_state.data.shape == (2, 8) and state.shard_state.position.shape == (2,)
    assert state.shard_state.data.sharding.spec == P(DATA_AXIS)
    step = make_learner_step(agent, mesh, 1)
    keys = jax.device_put(jax.random.split(jax.random.key(1), 2), jax.sharding.NamedSharding(mesh, P(DATA_AXIS)))
    zeros = lambda: np.zeros((T, B), np.float32)  # noqa: E731
    for i in range(2):
        reward = (np.arange(T * B, dtype=np.float32).reshape(T, B) + 10 * i)
        traj = Trajectory(zeros()[..., None], zeros(), reward, zeros(), zeros().astype(bool), zeros()[..., None],
                          {}, ())
        traj = place_on_learners(traj, learner_shardings(mesh, traj))
        state, metrics = step(state, keys, np.int32(i), traj)
    data = np.asarray(state.shard_state.data)
    np.testing.assert_array_equal(data[0, :8], [0, 1, 4, 5, 10, 11, 14, 15])  # envs 0-1 only
    np.testing.assert_array_equal(data[1, :8], [2, 3, 6, 7, 12, 13, 16, 17])  # envs 2-3 only
    assert float(metrics["size"]) == 8.0
    saver = Checkpointer(str(tmp_path / "ckpt"))
    saver.save(2, state, state.params, {})
    fresh = init_on_mesh(agent, jax.random.key(0), None, mesh)
    restored = saver.restore_state(fresh, 2)
    saver.close()
    np.testing.assert_array_equal(np.asarray(restored.shard_state.data), data)
    assert restored.shard_state.data.sharding == state.shard_state.data.sharding
