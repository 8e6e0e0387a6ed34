"""PPO under jit(shard_map): gradients are the global mean, updates are deterministic."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from podrl.agents.networks import make_network
from podrl.agents.ppo import PPOBatch, PPOConfig, make_loss_fn
from podrl.core.errors import ConfigError
from podrl.core.parallel import DATA_AXIS, learner_metrics, learner_value_and_grad, mean_across_learners
from podrl.core.types import Trajectory
from podrl.envs.types import EnvSpec
from podrl.testing import layout_update

OBS = 4
DISCRETE = EnvSpec(specs.Array((OBS,), np.float32), specs.DiscreteArray(2))
CONTINUOUS = EnvSpec(specs.Array((OBS,), np.float32), specs.BoundedArray((2,), np.float32, -1.0, 1.0))


def _mesh(n):
    return Mesh(np.array(jax.devices()[:n]), (DATA_AXIS,))


def _random_batch(network, params, n):
    keys = jax.random.split(jax.random.key(5), 6)
    obs = jax.random.normal(keys[0], (n, OBS))
    logits, value = network.apply(params, obs)
    action = jax.random.categorical(keys[1], logits).astype(jnp.int32)
    log_prob = jax.nn.log_softmax(logits)[jnp.arange(n), action] + 0.3 * jax.random.normal(keys[2], (n,))
    return PPOBatch(obs, action, log_prob, jax.random.normal(keys[3], (n,)),
                    value + jax.random.normal(keys[4], (n,)), value + 0.1 * jax.random.normal(keys[5], (n,)))


def _loss_setup():
    # Advantage normalization is per shard (per minibatch), so the global-mean
    # identity only holds without it.
    config = PPOConfig(hidden_sizes=(16, 16), normalize_advantages=False)
    network = make_network(DISCRETE, config.hidden_sizes, config.activation)
    params = network.init(jax.random.key(0), jnp.zeros((1, OBS)))
    return params, _random_batch(network, params, 64), jax.value_and_grad(make_loss_fn(config, network), has_aux=True)


def _assert_trees_close(a, b, atol):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


@pytest.mark.parametrize("check_vma", [True, False])
def test_sharded_grads_equal_single_device_grads(check_vma):
    params, batch, grad_fn = _loss_setup()
    (_, _), expected = grad_fn(params, batch, None)

    def shard_grads(b):
        (_, _), grads = learner_value_and_grad(grad_fn, params, b, None)
        return grads

    got = jax.jit(jax.shard_map(
        shard_grads, mesh=_mesh(4), in_specs=P(DATA_AXIS), out_specs=P(), check_vma=check_vma
    ))(batch)
    _assert_trees_close(got, expected, atol=1e-6)


def test_naive_grad_of_replicated_params_is_a_sum_not_a_mean():
    """Why `learner_value_and_grad` casts params to varying: without it JAX already psums."""
    params, batch, grad_fn = _loss_setup()
    (_, _), expected = grad_fn(params, batch, None)
    naive = jax.jit(jax.shard_map(
        lambda b: mean_across_learners(grad_fn(params, b, None)[1]), mesh=_mesh(4), in_specs=P(DATA_AXIS),
        out_specs=P(),
    ))(batch)
    _assert_trees_close(naive, jax.tree.map(lambda g: 4 * g, expected), atol=4e-6)


# ---------------------------------------------------------------------- update

T = 16


def _trajectory(agent, params, b, seed=1):
    keys = jax.random.split(jax.random.key(seed), 6)
    obs = jax.random.normal(keys[0], (T, b, OBS))
    action, extras, _ = jax.vmap(lambda o, k: agent.act(params, (), o, k))(obs, jax.random.split(keys[1], T))
    discount = (jax.random.uniform(keys[2], (T, b)) > 0.1).astype(jnp.float32)
    truncated = (jax.random.uniform(keys[3], (T, b)) > 0.9) & (discount == 1.0)
    next_obs = jnp.where(discount[..., None] == 1.0, obs + 0.1 * jax.random.normal(keys[4], obs.shape), obs)
    return Trajectory(obs, action, jax.random.normal(keys[5], (T, b)), discount, truncated, next_obs, extras, ())


def _sharded_update(agent, n):
    """`agent.update` on `n` learner shards as the layouts run it (the metrics averaged by the layout)."""
    return layout_update(agent, jax.devices()[:n])


def _tile_shards(traj, n):
    """The same per-shard trajectory on each of `n` shards (batch axis 1)."""
    return jax.tree.map(lambda x: jnp.concatenate([x] * n, axis=1), traj)


@pytest.mark.parametrize("spec", [DISCRETE, CONTINUOUS], ids=["discrete", "continuous"])
def test_update_runs_sharded_and_is_deterministic(spec):
    config = PPOConfig(hidden_sizes=(16,), num_minibatches=2, num_epochs=2)
    agent = config.make_agent(spec, total_updates=10)
    state = agent.init(jax.random.key(0), spec)
    traj = _trajectory(agent, state.params, 4)
    key = jax.random.key(9)

    one = _sharded_update(agent, 1)
    new_state, metrics = one(state, traj, key)
    again, _ = one(state, traj, key)
    for x, y in zip(jax.tree.leaves(new_state), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(x, y)
    assert int(new_state.update_step) == 1
    assert set(metrics) >= {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "learning_rate"}
    for name, value in metrics.items():
        assert value.shape == () and np.isfinite(value), name
    for old, new in zip(jax.tree.leaves(state.params), jax.tree.leaves(new_state.params), strict=True):
        assert not np.array_equal(old, new)  # every leaf moved (log_std included)

    # Four shards that each see the same data take the same step as one shard:
    # gradients and metrics are means across learners, not sums.
    four_state, four_metrics = _sharded_update(agent, 4)(state, _tile_shards(traj, 4), key)
    _assert_trees_close(four_state.params, new_state.params, atol=1e-6)
    for name in metrics:
        np.testing.assert_allclose(four_metrics[name], metrics[name], rtol=1e-5, atol=1e-7, err_msg=name)


def test_update_on_four_shards_differs_from_local_data():
    """Distinct shard data: every shard ends with the same params, unlike a local-only step."""
    config = PPOConfig(hidden_sizes=(16,), num_minibatches=2, num_epochs=1)
    agent = config.make_agent(DISCRETE, total_updates=10)
    state = agent.init(jax.random.key(0), DISCRETE)
    traj = _trajectory(agent, state.params, 8)
    key = jax.random.key(3)
    # out_specs=P(DATA_AXIS) keeps each shard's own copy of the params to compare them.
    per_shard = jax.jit(jax.shard_map(
        lambda s, t, k: jax.tree.map(lambda x: x[None], agent.update(s, t, k)[0].params),
        mesh=_mesh(4), in_specs=(P(), P(None, DATA_AXIS), P()), out_specs=P(DATA_AXIS), check_vma=False,
    ))(state, traj, key)
    for leaf in jax.tree.leaves(per_shard):
        np.testing.assert_array_equal(leaf, jnp.broadcast_to(leaf[0], leaf.shape))
    local, _ = _sharded_update(agent, 1)(state, jax.tree.map(lambda x: x[:, :2], traj), key)
    assert not np.allclose(jax.tree.leaves(per_shard)[0][0], jax.tree.leaves(local.params)[0])


def test_update_rejects_batch_not_divisible_by_minibatches():
    agent = PPOConfig(num_minibatches=3).make_agent(DISCRETE, total_updates=10)
    state = agent.init(jax.random.key(0), DISCRETE)
    traj = _trajectory(agent, state.params, 2)
    with pytest.raises(ConfigError, match="num_minibatches"):
        _sharded_update(agent, 1)(state, traj, jax.random.key(0))


# ---------------------------------------------------------------------- the layout's metrics


@pytest.mark.parametrize("check_vma", [True, False])
def test_learner_metrics_average_what_varies_over_the_shards_and_keep_what_does_not(check_vma):
    """A shard's own loss is averaged over the 3 shards; a value the same on every shard comes back bit for
    bit (a pmean of 3 equal float32s does not: (x + x + x) / 3 rounds)."""
    same = np.float32(0.1)
    per_shard = np.array([1.0, 2.0, 4.5], np.float32)

    def metrics(x):
        blind = jax.lax.pmean(x[0] * 0.0 + same, DATA_AXIS)  # what averaging every leaf would make of it
        return learner_metrics({"loss": x[0], "rate": jnp.float32(same), "count": jnp.int32(7)}, check_vma), blind

    got, blind = jax.jit(jax.shard_map(metrics, mesh=_mesh(3), in_specs=P(DATA_AXIS), out_specs=P(),
                                       check_vma=check_vma))(per_shard)
    assert blind != same  # XLA's pmean multiplies the sum by 1/3: a blind average would move it
    np.testing.assert_allclose(got["loss"], per_shard.mean(), rtol=1e-6)
    assert got["rate"] == same and got["rate"].dtype == np.float32
    assert got["count"] == 7 and got["count"].dtype == np.int32
