"""MuZero on the house prioritised sequence replay (`podrl.agents.prioritised`, whose own tests cover
its sampling): what an update stores and the priorities it sets (MuZero, Appendix G: |v - z|)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from one_device import sharded_update_on_one_device
from podrl.agents import sum_tree
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.muzero.agent import MuZeroParts, batch_from_windows, make_network, rollout_steps
from podrl.agents.muzero.search import root
from podrl.core.errors import ConfigError
from podrl.core.learner_state import shard_global
from podrl.core.types import Trajectory
from podrl.envs.registry import make
from podrl.envs.types import env_spec

SPEC = env_spec(make("MatchCue-v0"))  # observations [4], 4 actions
T, B, K, N_STEPS = 8, 4, 2, 2
WINDOW = K + N_STEPS
CONFIG = MuZeroConfig(hidden_sizes=(8,), latent_size=8, dynamics_sizes=(8,), prediction_sizes=(8,), support_size=5,
                      unroll_steps=K, td_steps=N_STEPS, gamma=0.9, num_simulations=4, batch_size=8, prioritised=True,
                      buffer_size=16 * B, min_fill=T * B, replay_ratio=1 / (T * B))


def test_prioritised_fields_are_checked():
    for overrides, field in ((dict(prioritised=1), "prioritised"), (dict(priority_exponent=-1.0), "priority_exponent"),
                             (dict(importance_exponent=1.5), "importance_exponent")):
        with pytest.raises(ConfigError) as info:
            MuZeroConfig(**overrides)
        assert info.value.field == field
    with pytest.raises(ConfigError, match="fewer than one rollout") as info:
        MuZeroConfig(prioritised=True, buffer_size=11 * B, min_fill=T * B).check_batch(T, B)
    assert info.value.field == "buffer_size"


def test_an_update_sets_the_drawn_windows_priorities_to_the_root_value_error():
    """One rollout of 8 steps x 4 envs (rewards drawn at random), one gradient step on 8 windows of 4
    steps: the 5 x 4 windows it completed are drawable at priority 1 (the largest so far); after
    the step, every drawn one holds |v(o_t) - z_t| (alpha 1) of its window, the root value the
    params before the step predict against the n-step target bootstrapped from the target network,
    and every other leaf is as it was."""
    agent = CONFIG.make_agent(SPEC, 10)
    state = agent.init(jax.random.key(0), SPEC)
    # fresh heads predict values near 0, where |v - z| and |z| agree: perturb the online params so that
    # the prediction counts (the target network stays the fresh copy)
    noise = jax.random.split(jax.random.key(3), len(jax.tree.leaves(state.params)))
    state = state._replace(params=jax.tree.unflatten(jax.tree.structure(state.params), [
        x + 0.3 * jax.random.normal(k, x.shape, x.dtype) for x, k in zip(jax.tree.leaves(state.params), noise)]))
    keys = jax.random.split(jax.random.key(1), 3)
    obs = jax.nn.one_hot(jax.random.randint(keys[0], (T + 1, B), 0, 4), 4)
    reward = jax.random.uniform(keys[1], (T, B), minval=-2.0, maxval=3.0)
    ones = jnp.ones((T, B), jnp.float32)
    policy = jax.random.dirichlet(keys[2], jnp.ones(4), (T, B))
    traj = Trajectory(obs[:-1], jnp.zeros((T, B), jnp.int32), reward, ones, jnp.zeros((T, B), bool), obs[1:],
                      {"policy": policy, "search_value": jnp.zeros((T, B))}, ())
    after, metrics = sharded_update_on_one_device(agent)(shard_global(state), traj, jax.random.key(2))
    assert float(metrics["learning"]) == 1.0
    priorities = jax.tree.map(lambda x: x[0], after.shard_state.priorities)
    leaves = np.asarray(sum_tree.leaves(priorities.tree))
    assert leaves.shape == (16 * B,)
    drawable = np.zeros(16 * B, bool)
    drawable[: (T - WINDOW + 1) * B] = True  # windows starting at rows 0..4 lie in the 8 stored rows
    np.testing.assert_array_equal(leaves[~drawable], 0.0)

    # every drawable window's priority, worked out from the params before the step
    network = make_network(CONFIG, SPEC)
    parts = MuZeroParts(CONFIG, network, None, None, None, SPEC)
    steps = jax.tree.map(lambda x: x.reshape((T, B) + x.shape[1:]), rollout_steps(traj, traj.reward))
    windows = jax.tree.map(lambda x: jnp.stack([x[r: r + WINDOW, b] for r in range(T - WINDOW + 1) for b in range(B)]),
                           steps)  # leaf (r, b) = r * B + b
    batch = batch_from_windows(parts, state.opt_state.target, windows)
    value = root(network, CONFIG.support_size, state.params, windows.observation[:, 0]).value
    want = np.abs(np.asarray(value) - np.asarray(batch.targets.value[:, 0]))
    assert np.min(np.abs(want - 1.0)) > 1e-3  # no window's error is the initial priority by chance
    # the prediction matters: |z| alone (a priority without the prediction) differs from every |v - z|
    assert np.min(np.abs(want - np.abs(np.asarray(batch.targets.value[:, 0])))) > 1e-2
    got = leaves[drawable]
    drawn = np.abs(got - 1.0) > 1e-6
    assert 1 <= drawn.sum() <= CONFIG.batch_size
    np.testing.assert_allclose(got[drawn], want[drawn], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(float(priorities.max_priority), max(1.0, want[drawn].max()),
                               rtol=1e-5)
