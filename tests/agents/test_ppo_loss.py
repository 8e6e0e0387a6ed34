"""PPO loss and action distributions against NumPy / closed forms."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs

from podrl.agents import networks as nets
from podrl.agents.networks import make_network
from podrl.agents.ppo import PPOBatch, PPOConfig, make_loss_fn
from podrl.envs.types import EnvSpec

# ---------------------------------------------------------------- distributions


def test_categorical_log_prob_entropy_mode():
    logits = jnp.array([[1.0, 2.0, 0.5], [0.0, 0.0, 0.0]])
    p = np.exp(np.asarray(logits)) / np.exp(np.asarray(logits)).sum(-1, keepdims=True)
    action = jnp.array([1, 2])
    np.testing.assert_allclose(nets.categorical_log_prob(logits, action), np.log(p[[0, 1], [1, 2]]), rtol=1e-6)
    np.testing.assert_allclose(nets.categorical_entropy(logits), -(p * np.log(p)).sum(-1), rtol=1e-6)
    np.testing.assert_allclose(nets.categorical_entropy(logits)[1], math.log(3), rtol=1e-6)
    np.testing.assert_array_equal(nets.categorical_mode(logits), [1, 0])


def test_categorical_sample_frequencies():
    logits = jnp.log(jnp.array([0.2, 0.5, 0.3]))
    samples = nets.categorical_sample(jax.random.key(0), jnp.broadcast_to(logits, (20000, 3)))
    assert samples.dtype == jnp.int32 and samples.shape == (20000,)
    np.testing.assert_allclose(np.bincount(samples, minlength=3) / 20000, [0.2, 0.5, 0.3], atol=0.015)


def test_gaussian_log_prob_entropy_mode():
    mean = jnp.array([[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]])
    log_std = jnp.array([0.0, math.log(2.0)])
    action = jnp.array([[1.0, 1.0], [0.0, 3.0], [0.5, -0.5]])
    std = np.exp(np.asarray(log_std))
    z = (np.asarray(action) - np.asarray(mean)) / std
    expected = (-0.5 * z ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(-1)
    np.testing.assert_allclose(nets.gaussian_log_prob((mean, log_std), action), expected, rtol=1e-6)
    entropy = nets.gaussian_entropy((mean, log_std))
    assert entropy.shape == (3,)
    np.testing.assert_allclose(entropy, np.full(3, (0.5 * np.log(2 * np.pi * np.e * std**2)).sum()), rtol=1e-6)
    np.testing.assert_array_equal(nets.gaussian_mode((mean, log_std)), mean)


def test_gaussian_sample_moments():
    mean = jnp.broadcast_to(jnp.array([1.0, -2.0]), (20000, 2))
    log_std = jnp.log(jnp.array([0.5, 3.0]))
    samples = np.asarray(nets.gaussian_sample(jax.random.key(1), (mean, log_std)))
    np.testing.assert_allclose(samples.mean(0), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(samples.std(0), [0.5, 3.0], rtol=0.03)


# ------------------------------------------------------------------------ loss

OBS, N = 3, 16


def _numpy_mlp(layers, x):
    """Dense_0..Dense_k with tanh between, as flax lays them out."""
    names = sorted(layers, key=lambda s: int(s.split("_")[1]))
    for i, name in enumerate(names):
        x = x @ np.asarray(layers[name]["kernel"], np.float64) + np.asarray(layers[name]["bias"], np.float64)
        if i < len(names) - 1:
            x = np.tanh(x)
    return x


def _numpy_loss(config, params, batch, discrete):
    p = params["params"]
    obs = np.asarray(batch.observation, np.float64)
    out, value = _numpy_mlp(p["actor"], obs), _numpy_mlp(p["critic"], obs)[:, 0]
    action = np.asarray(batch.action)
    if discrete:
        log_p = out - out.max(-1, keepdims=True)
        log_p = log_p - np.log(np.exp(log_p).sum(-1, keepdims=True))
        new_log_prob = log_p[np.arange(N), action]
        entropy = -(np.exp(log_p) * log_p).sum(-1).mean()
    else:
        log_std = np.asarray(p["log_std"], np.float64)
        new_log_prob = (-0.5 * ((action - out) / np.exp(log_std)) ** 2 - log_std - 0.5 * np.log(2 * np.pi)).sum(-1)
        entropy = (log_std + 0.5 * np.log(2 * np.pi * np.e)).sum()
    ratio = np.exp(new_log_prob - np.asarray(batch.log_prob, np.float64))
    adv = np.asarray(batch.advantage, np.float64)
    if config.normalize_advantages:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    eps = config.clip_eps
    unclipped, clipped = ratio * adv, np.clip(ratio, 1 - eps, 1 + eps) * adv
    policy_loss = -np.minimum(unclipped, clipped).mean()
    target, old_value = np.asarray(batch.target, np.float64), np.asarray(batch.value, np.float64)
    err = (value - target) ** 2
    err_clipped = (old_value + np.clip(value - old_value, -eps, eps) - target) ** 2
    if config.clip_value_loss:
        err = np.maximum(err, err_clipped)
    value_loss = 0.5 * err.mean()
    loss = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
    info = {
        "policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy,
        "clip_fraction": (np.abs(ratio - 1) > eps).mean(),
        "approx_kl": ((ratio - 1) - np.log(ratio)).mean(),
        "policy_clip_binds": (clipped < unclipped).mean(),
        "value_clip_binds": (err_clipped > (value - target) ** 2).mean(),
    }
    return loss, info


def _spec(discrete):
    action = specs.DiscreteArray(3) if discrete else specs.BoundedArray((2,), np.float32, -1.0, 1.0)
    return EnvSpec(specs.Array((OBS,), np.float32), action)


def _fixed_batch(network, params, discrete):
    """A batch whose old log-probs put ratios in [e^-0.6, e^0.6]: clipping binds on some samples."""
    keys = jax.random.split(jax.random.key(42), 6)
    obs = jax.random.normal(keys[0], (N, OBS))
    dist_params, value = network.apply(params, obs)
    dist = nets.action_distribution(discrete)
    action = dist.sample(keys[1], dist_params)
    new_log_prob = dist.log_prob(dist_params, action)
    log_prob = new_log_prob - jnp.linspace(-0.6, 0.6, N)
    advantage = jax.random.normal(keys[2], (N,))
    target = value + 2.0 * jax.random.normal(keys[3], (N,))
    old_value = value + jax.random.uniform(keys[4], (N,), minval=-0.5, maxval=0.5)
    return PPOBatch(obs, action, log_prob, advantage, target, old_value)


@pytest.mark.parametrize(
    "discrete,clip_value_loss,normalize",
    [(True, True, True), (True, False, False), (False, True, True), (False, False, True)],
)
def test_loss_matches_numpy(discrete, clip_value_loss, normalize):
    config = PPOConfig(hidden_sizes=(5, 4), clip_value_loss=clip_value_loss, normalize_advantages=normalize,
                       entropy_coef=0.03, value_coef=0.7)
    network = make_network(_spec(discrete), config.hidden_sizes, config.activation)
    params = network.init(jax.random.key(7), jnp.zeros((1, OBS)))
    if not discrete:  # a non-trivial log_std
        params["params"]["log_std"] = jnp.array([0.3, -0.4])
    batch = _fixed_batch(network, params, discrete)
    loss, metrics = jax.jit(make_loss_fn(config, network))(params, batch, jax.random.key(0))
    expected, info = _numpy_loss(config, params, batch, discrete)

    assert 0.2 < info["policy_clip_binds"] < 0.8  # clipping active on some samples only
    if clip_value_loss:
        assert 0.0 < info["value_clip_binds"] < 1.0
    np.testing.assert_allclose(loss, expected, rtol=1e-5, atol=1e-6)
    for name in ("policy_loss", "value_loss", "entropy", "clip_fraction", "approx_kl"):
        assert metrics[name].shape == ()
        np.testing.assert_allclose(metrics[name], info[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_clipped_samples_carry_no_policy_gradient():
    """Samples whose ratio is clipped in the direction of their advantage get zero gradient."""
    config = PPOConfig(hidden_sizes=(5,), normalize_advantages=False, value_coef=0.0, entropy_coef=0.0)
    network = make_network(_spec(True), config.hidden_sizes, config.activation)
    params = network.init(jax.random.key(3), jnp.zeros((1, OBS)))
    batch = _fixed_batch(network, params, True)
    loss_fn = make_loss_fn(config, network)
    ratio = np.exp(np.linspace(-0.6, 0.6, N))  # new / old, from _fixed_batch
    # advantage > 0 and ratio > 1 + eps: clipped, flat.
    binds = ratio > 1.2
    only = lambda mask: batch._replace(advantage=jnp.where(mask, 1.0, 0.0))  # noqa: E731
    grads_bound = jax.grad(lambda p: loss_fn(p, only(binds), None)[0])(params)
    grads_free = jax.grad(lambda p: loss_fn(p, only(~binds), None)[0])(params)
    assert binds.any() and (~binds).any()
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(grads_bound)) == 0.0
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(grads_free)) > 0.0
