"""IMPALA: config validation, the V-trace loss, sharded updates, and learning CartPole via Anakin."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from impala_parts import DISCRETE, OBS, T, _setup, _sharded_update, _trajectory
from podrl.agents.impala import ImpalaConfig, make_loss_fn
from podrl.agents.impala.agent import _minibatches
from podrl.agents.networks import ActorCritic, action_distribution
from podrl.agents.optimizers import make_optimizer
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.core.errors import ConfigError
from podrl.core.parallel import DATA_AXIS
from podrl.core.types import Trajectory
from podrl.envs.types import EnvSpec
from podrl.run.config import LoggingConfig
from references import numpy_vtrace
from untrained import anakin_initial_return

CONTINUOUS = EnvSpec(specs.Array((OBS,), np.float32), specs.BoundedArray((2,), np.float32, -1.0, 1.0))
SPECS = pytest.mark.parametrize("spec", [DISCRETE, CONTINUOUS], ids=["discrete", "continuous"])

# ---------------------------------------------------------------------- config


@pytest.mark.parametrize("field,value", [
    ("learning_rate", 0.0), ("anneal_lr", 1), ("optimizer", "sgd"), ("optimizer_eps", 0.0),
    ("gamma", 1.5), ("vtrace_lambda", -0.1), ("clip_rho", 0.0), ("clip_c", -1.0),
    ("clip_pg_rho", math.nan), ("value_coef", -1.0), ("entropy_coef", -0.01), ("max_grad_norm", 0.0),
    ("hidden_sizes", (64, 0)), ("activation", "sigmoid"), ("reward_scale", 0.0), ("num_minibatches", 0),
    ("num_minibatches", 2.0), ("loss_reduction", "max"), ("rmsprop_eps_in_sqrt", 0),
    ("rmsprop_eps_in_sqrt", False),  # with the default optimizer, adam
])
def test_invalid_fields_are_named(field, value):
    with pytest.raises(ConfigError, match=f"^{field}:") as info:
        ImpalaConfig(**{field: value})
    assert info.value.field == field


def test_defaults_are_valid_and_hidden_sizes_become_a_tuple():
    config = ImpalaConfig(hidden_sizes=[32, 32], optimizer="rmsprop")
    assert config.hidden_sizes == (32, 32)
    assert ImpalaConfig().num_optimizer_steps(10) == 10
    assert ImpalaConfig(num_minibatches=4).num_optimizer_steps(10) == 40


def test_check_batch_splits_along_envs_only():
    config = ImpalaConfig(num_minibatches=4)
    config.check_batch(rollout_length=3, envs_per_shard=8)  # T need not divide: sequences stay whole
    with pytest.raises(ConfigError, match="^num_minibatches:"):
        config.check_batch(rollout_length=128, envs_per_shard=6)
    run = AnakinConfig(env="CartPole-v1", num_envs=16, rollout_length=8, total_steps=1024)
    run.check_layout(2, config)  # 8 envs per shard
    with pytest.raises(ConfigError, match="^num_minibatches:"):
        run.check_layout(8, config)  # 2 envs per shard


@pytest.mark.parametrize("in_sqrt", [True, False])
def test_rmsprop_puts_eps_where_the_config_says(in_sqrt):
    """Two RMSProp steps (decay 0.99, eps 0.01) on gradients of 0.001 ... 10, checked against the two
    update rules written out: -lr g / sqrt(nu + eps) (TensorFlow) or -lr g / (sqrt(nu) + eps) (PyTorch)."""
    config = ImpalaConfig(optimizer="rmsprop", optimizer_eps=0.01, rmsprop_eps_in_sqrt=in_sqrt, anneal_lr=False,
                          learning_rate=0.5, max_grad_norm=1e6)
    optimizer, _ = make_optimizer(config, total_updates=10)
    params = {"w": jnp.zeros(4)}
    grads = [{"w": jnp.array([1e-3, 1e-2, 1.0, 10.0])}, {"w": jnp.array([-2e-3, 3e-2, 0.5, -10.0])}]
    state, nu = optimizer.init(params), np.zeros(4)
    for g in grads:
        updates, state = optimizer.update(g, state, params)
        nu = 0.99 * nu + 0.01 * np.asarray(g["w"]) ** 2
        denominator = np.sqrt(nu + 0.01) if in_sqrt else np.sqrt(nu) + 0.01
        np.testing.assert_allclose(updates["w"], -0.5 * np.asarray(g["w"]) / denominator, rtol=1e-5)


# ------------------------------------------------------------------------ loss


def test_summed_loss_is_the_mean_times_the_steps_and_keeps_mean_metrics():
    """`loss_reduction="sum"` (the paper's and Cleanba's, for RMSProp eps 0.01 and clip 40): the loss and
    its gradient are `T * B` times the mean's; the logged metrics are the same means."""
    config, agent, state, network = _setup(DISCRETE)
    batch = _trajectory(agent, state.params, 6, log_prob_noise=0.5)
    steps = batch.reward.size
    results = [jax.jit(jax.value_and_grad(make_loss_fn(dataclasses.replace(config, loss_reduction=r), network),
                                          has_aux=True))(state.params, batch, jax.random.key(0))
               for r in ("mean", "sum")]
    ((mean_loss, mean_metrics), mean_grads), ((sum_loss, sum_metrics), sum_grads) = results
    assert steps > 1 and float(sum_loss) == pytest.approx(steps * float(mean_loss), rel=1e-5)
    for m, s in zip(jax.tree.leaves(mean_grads), jax.tree.leaves(sum_grads)):
        np.testing.assert_allclose(s, steps * m, rtol=1e-4, atol=1e-6)
    assert sum_metrics.keys() == mean_metrics.keys()
    for name in mean_metrics:
        assert float(sum_metrics[name]) == pytest.approx(float(mean_metrics[name]), rel=1e-6), name


@SPECS
def test_loss_is_finite_with_nonzero_grads(spec):
    config, agent, state, network = _setup(spec)
    batch = _trajectory(agent, state.params, 6, log_prob_noise=0.5)
    (loss, metrics), grads = jax.jit(jax.value_and_grad(make_loss_fn(config, network), has_aux=True))(
        state.params, batch, jax.random.key(0))
    assert loss.shape == () and np.isfinite(loss)
    assert set(metrics) >= {"policy_loss", "value_loss", "entropy", "mean_rho", "approx_kl",
                            "rho_clip_fraction", "c_clip_fraction", "pg_rho_clip_fraction"}
    for name, value in metrics.items():
        assert value.shape == () and np.isfinite(value), name
    assert 0.0 < float(metrics["rho_clip_fraction"]) < 1.0  # off-policy: some ratios clipped
    for path, g in jax.tree_util.tree_leaves_with_path(grads):
        assert np.all(np.isfinite(g)) and np.abs(g).max() > 0, path


def test_on_policy_batch_has_unit_ratios():
    config, agent, state, network = _setup(DISCRETE)
    batch = _trajectory(agent, state.params, 4)
    _, metrics = make_loss_fn(config, network)(state.params, batch, None)
    np.testing.assert_allclose(metrics["mean_rho"], 1.0, rtol=1e-5)
    np.testing.assert_allclose(metrics["approx_kl"], 0.0, atol=1e-6)
    assert float(metrics["rho_clip_fraction"]) == 0.0


def test_loss_matches_numpy_vtrace_with_large_clipped_ratios():
    """Importance ratios far above every threshold (log mu noised by N(0, 2)): the loss's policy and
    value terms equal a float64 NumPy transcription of V-trace (`test_vtrace.numpy_vtrace`) with rho,
    c and pg-rho clipped at the config's (distinct) thresholds. Dropping or swapping a clip changes them."""
    clips = dict(clip_rho=1.2, clip_pg_rho=1.5, clip_c=0.9)
    config, agent, state, network = _setup(DISCRETE, **clips)
    batch = _trajectory(agent, state.params, 6, log_prob_noise=2.0)
    _, metrics = make_loss_fn(config, network)(state.params, batch, None)

    dist_params, value = network.apply(state.params, batch.observation)
    next_value = network.apply(state.params, batch.next_observation, method=ActorCritic.value)
    log_pi = np.asarray(action_distribution(True).log_prob(dist_params, batch.action), np.float64)
    rho = np.exp(log_pi - np.asarray(batch.agent_extras["log_prob"], np.float64))
    assert (rho > 3.0).mean() > 0.2 and (rho < 0.5).mean() > 0.2  # the premise: clipping binds, widely
    columns = [numpy_vtrace(value[:, b], next_value[:, b], config.reward_scale * batch.reward[:, b],
                            config.gamma * batch.discount[:, b], batch.episode_end[:, b], rho[:, b],
                            config.vtrace_lambda, clips["clip_rho"], clips["clip_pg_rho"], clips["clip_c"])
               for b in range(6)]
    vs, pg = (np.stack(x, axis=1) for x in zip(*columns))
    np.testing.assert_allclose(metrics["policy_loss"], -np.mean(pg * log_pi), rtol=1e-4)
    np.testing.assert_allclose(metrics["value_loss"], 0.5 * np.mean((vs - np.asarray(value, np.float64)) ** 2),
                               rtol=1e-4)
    np.testing.assert_allclose(metrics["mean_advantage"], np.mean(pg), rtol=1e-4)


def test_targets_carry_no_gradient():
    """V-trace targets and advantages are stop_gradient'ed: without the baseline loss
    the critic gets no gradient, and the baseline weight leaves the actor's gradient alone."""
    def grads(value_coef):
        config, agent, state, network = _setup(DISCRETE, value_coef=value_coef, entropy_coef=0.0)
        batch = _trajectory(agent, state.params, 4, log_prob_noise=0.3)
        return jax.grad(lambda p: make_loss_fn(config, network)(p, batch, None)[0])(state.params)["params"]

    no_baseline, with_baseline = grads(0.0), grads(0.5)
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree.leaves(no_baseline["critic"]))
    assert all(float(jnp.abs(g).max()) > 0.0 for g in jax.tree.leaves(with_baseline["critic"]))
    for a, b in zip(jax.tree.leaves(no_baseline["actor"]), jax.tree.leaves(with_baseline["actor"]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------- update


def _mesh(n):
    return Mesh(np.array(jax.devices()[:n]), (DATA_AXIS,))


def test_minibatches_are_whole_env_sequences():
    column_ids = jnp.broadcast_to(jnp.arange(6), (T, 6))
    obs = jnp.stack([column_ids, -column_ids], axis=-1)  # [T, 6, 2]
    traj = Trajectory(obs, column_ids, column_ids, column_ids, column_ids, obs,
                      {"log_prob": column_ids}, {"h": jnp.arange(6)[:, None]})
    split = _minibatches(traj, 3)
    assert split.observation.shape == (3, T, 2, 2) and split.reward.shape == (3, T, 2)
    assert split.actor_state["h"].shape == (3, 2, 1)
    for i, leaf in enumerate([split.reward, split.agent_extras["log_prob"], split.observation[..., 0]]):
        for m in range(3):
            np.testing.assert_array_equal(leaf[m], column_ids[:, 2 * m: 2 * m + 2], err_msg=str(i))
    np.testing.assert_array_equal(split.actor_state["h"][:, :, 0], [[0, 1], [2, 3], [4, 5]])


@SPECS
def test_update_is_deterministic_and_shard_count_invariant(spec):
    _, agent, state, _ = _setup(spec, num_minibatches=2)
    traj = _trajectory(agent, state.params, 4, log_prob_noise=0.2)
    key = jax.random.key(9)
    one = _sharded_update(agent, 1)
    new_state, metrics = one(state, traj, key)
    again, _ = one(state, traj, key)
    for x, y in zip(jax.tree.leaves(new_state), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(x, y)
    assert int(new_state.update_step) == 1
    for name, value in metrics.items():
        assert value.shape == () and np.isfinite(value), name
    for old, new in zip(jax.tree.leaves(state.params), jax.tree.leaves(new_state.params), strict=True):
        assert not np.array_equal(old, new)  # every leaf moved (log_std included)

    # Four shards that each see the same data take the same step as one shard.
    tiled = jax.tree.map(lambda x: jnp.concatenate([x] * 4, axis=1), traj)
    four_state, four_metrics = _sharded_update(agent, 4)(state, tiled, key)
    for x, y in zip(jax.tree.leaves(four_state.params), jax.tree.leaves(new_state.params), strict=True):
        np.testing.assert_allclose(x, y, atol=1e-6, rtol=0)
    for name in metrics:
        np.testing.assert_allclose(four_metrics[name], metrics[name], rtol=1e-5, atol=1e-7, err_msg=name)


def test_four_shards_with_distinct_data_end_with_identical_params():
    _, agent, state, _ = _setup(DISCRETE, num_minibatches=2)
    traj = _trajectory(agent, state.params, 16, log_prob_noise=0.2)
    per_shard = jax.jit(jax.shard_map(
        lambda s, t, k: jax.tree.map(lambda x: x[None], agent.update(s, t, k)[0].params),
        mesh=_mesh(4), in_specs=(P(), P(None, DATA_AXIS), P()), out_specs=P(DATA_AXIS), check_vma=False,
    ))(state, traj, jax.random.key(3))
    for leaf in jax.tree.leaves(per_shard):
        np.testing.assert_array_equal(leaf, jnp.broadcast_to(leaf[0], leaf.shape))
    local, _ = _sharded_update(agent, 1)(state, jax.tree.map(lambda x: x[:, :4], traj), jax.random.key(3))
    assert not np.allclose(jax.tree.leaves(per_shard)[0][0], jax.tree.leaves(local.params)[0])


def test_update_rejects_envs_not_divisible_by_minibatches():
    _, agent, state, _ = _setup(DISCRETE, num_minibatches=3)
    traj = _trajectory(agent, state.params, 4)
    with pytest.raises(ConfigError, match="num_minibatches"):
        _sharded_update(agent, 1)(state, traj, jax.random.key(0))


# -------------------------------------------------------------------- learning


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.timeout(300)
def test_impala_solves_cartpole_through_anakin(cpu_devices):
    """Default ImpalaConfig, 16 envs x 16 steps per update (one SGD step each), 2 devices:
    greedy return 500 on every seed tried in ~5 s of training (measured on 2 CPU cores)."""
    config = AnakinConfig(env="CartPole-v1", num_envs=16, rollout_length=16, total_steps=300_000,
                          num_devices=2, updates_per_call=64, eval_every=64, eval_episodes=64, stop_at_return=475.0,
                          logging=LoggingConfig(run_dir=None, console=False))
    result = train_anakin(config, ImpalaConfig())
    assert result.final_eval_return.shape == (1,)
    assert result.final_eval_return[0] >= 475.0, result.final_eval_return


@pytest.mark.learning
@pytest.mark.timeout(300)
def test_impala_learns_continuous_reach_cue_through_anakin(cpu_devices):
    """ReachCue: a 1-D continuous action must hit the target of a one-hot cue; optimum 16.
    The untrained Gaussian head answers ~0 (return ~5.7); 100 updates reach 13-14."""
    config = AnakinConfig(env="ReachCue-v0", num_envs=16, rollout_length=16, total_steps=16 * 16 * 100,
                          num_devices=2, updates_per_call=25, eval_every=1, eval_episodes=16,
                          logging=LoggingConfig(run_dir=None, console=False))
    agent_config = ImpalaConfig(entropy_coef=0.0)
    initial = float(anakin_initial_return(config, agent_config, cpu_devices[:2])[0])
    result = train_anakin(config, agent_config)
    evals = [float(record["eval_return"][0]) for record in result.history]
    assert len(evals) == 4 and initial <= 7.0, (initial, evals)
    assert evals[-1] >= 12.0 and evals[-1] - initial >= 5.0, (initial, evals)
