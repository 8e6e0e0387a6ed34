"""What must not get gradients, checked with jax.grad (not values only): R2D2's burn-in (the core warmed up
from the stored state gives the learned part its start state, no gradient), R2D2's targets (fixed: the loss's
gradient is that of the squared error toward constants), and MuZero's unroll, whose gradient into each hidden
state that the next dynamics step reads is halved (Schrittwieser et al. 2020, the pseudocode's
`scale_gradient(hidden_state, 0.5)`), against a transcription of that pseudocode. Prioritised DQN's and
R2D2's whole gradient step toward fixed targets from the target network: test_importance_weights.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

import podrl.envs
from hand_replay import R2D2, R2D2_SPEC, replace
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.muzero.agent import make_network as make_muzero_network
from podrl.agents.muzero.losses import MuZeroBatch, step_weights
from podrl.agents.muzero.losses import make_loss_fn as make_muzero_loss
from podrl.agents.muzero.networks import MuZeroNetwork
from podrl.agents.muzero.targets import WindowTargets, scalar_to_target
from podrl.agents.r2d2 import agent as r2d2_agent
from podrl.agents.r2d2 import losses as r2d2_losses
from podrl.agents.r2d2.losses import R2D2Batch, Step
from podrl.agents.r2d2.networks import q_unroll
from podrl.agents.unroll import reset_before

N = 6


def r2d2_batch(config, seed: int) -> R2D2Batch:
    """N hand-made sequences of burn_in + m steps: random observations, actions, rewards, a random non-zero
    stored state, episode ends inside the learned part only (none at the burn-in's last step), unequal
    weights, random target-network Q values."""
    rng = np.random.default_rng(seed)
    w, m = config.window, config.sequence_length
    discount = np.ones((w, N), np.float32)
    discount[config.burn_in + 1, :2] = 0.0  # terminations inside the learned part
    truncated = np.zeros((w, N), bool)
    truncated[config.burn_in + 2, 3] = True
    window = Step(rng.normal(size=(w, N, 3)).astype(np.float32), rng.integers(0, 2, (w, N)).astype(np.int32),
                  rng.normal(size=(w, N)).astype(np.float32), discount, truncated,
                  rng.normal(size=(w, N, 3)).astype(np.float32))
    start = tuple(rng.normal(size=(N, config.core_size)).astype(np.float32) for _ in range(2))  # LSTM (c, h)
    return jax.tree.map(jnp.asarray, R2D2Batch(window, start, rng.uniform(0.1, 1.0, N).astype(np.float32),
                                               np.arange(N, dtype=np.int32),
                                               rng.normal(size=(m, N, 2)).astype(np.float32)))


def test_r2d2_burn_in_warms_the_core_up_without_gradient():
    """The loss with a burn-in equals, in value and in gradient, the loss without one started from the state
    the burn-in reached (a constant): no gradient flows through the burn-in into the params."""
    config = replace(R2D2, burn_in=3)
    parts = r2d2_agent.make_parts(config, R2D2_SPEC, 10)
    params = r2d2_agent._init(parts, jax.random.key(0), R2D2_SPEC).params
    batch = r2d2_batch(config, 0)
    burn = config.burn_in
    reset = reset_before(batch.window.episode_end)
    assert not np.asarray(reset[burn]).any()  # the learned part starts where the burn-in left the core
    _, carries = q_unroll(parts.network, params, batch.start_state, batch.window.observation[:burn], reset[:burn])
    warmed = batch._replace(window=jax.tree.map(lambda x: x[burn:], batch.window),
                            start_state=jax.tree.map(lambda x: x[-1], carries))  # a constant now
    with_burn_in = jax.value_and_grad(r2d2_losses.make_loss_fn(config, parts.network), has_aux=True)
    without = jax.value_and_grad(r2d2_losses.make_loss_fn(replace(config, burn_in=0), parts.network), has_aux=True)
    (loss, _), grads = jax.jit(with_burn_in)(params, batch, jax.random.key(1))
    (want, _), want_grads = jax.jit(without)(params, warmed, jax.random.key(1))
    np.testing.assert_allclose(float(loss), float(want), rtol=1e-5)
    assert float(optax.tree.norm(want_grads)) > 1e-2
    for got, expected in zip(jax.tree.leaves(grads), jax.tree.leaves(want_grads), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def test_r2d2_targets_are_fixed_for_the_gradient():
    """The gradient of the loss is that of sum_i w_i mean_t (y - Q(o_t, a_t))^2 / 2 / N with y computed first
    and held constant (double Q's online selector and the value rescaling carry no gradient)."""
    parts = r2d2_agent.make_parts(R2D2, R2D2_SPEC, 10)
    params = r2d2_agent._init(parts, jax.random.key(0), R2D2_SPEC).params
    batch = r2d2_batch(R2D2, 1)
    _, y = r2d2_losses.learned_q_and_targets(R2D2, parts.network, params, batch)

    def toward_constants(p):
        q_taken, _ = r2d2_losses.learned_q_and_targets(R2D2, parts.network, p, batch)
        return jnp.mean(batch.weight * jnp.mean(0.5 * jnp.square(y - q_taken), axis=0))

    grads = jax.grad(lambda p: r2d2_losses.make_loss_fn(R2D2, parts.network)(p, batch, None)[0])(params)
    want = jax.grad(toward_constants)(params)
    for got, expected in zip(jax.tree.leaves(grads), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-7)


def pseudocode_loss(config: MuZeroConfig, network: MuZeroNetwork, params, batch: MuZeroBatch, halve: bool = True):
    """MuZero's `update_weights` (Schrittwieser et al. 2020, pseudocode) with the house's loss terms: the
    representation, then per action the dynamics, after which `hidden_state = scale_gradient(hidden_state,
    0.5)`; each prediction's terms scaled by 1 / K past the root; cross-entropies against the two-hot of
    h(target)."""
    def ce(logits, target):
        return optax.softmax_cross_entropy(logits, target)

    def halve_gradient(x):
        return 0.5 * x + 0.5 * jax.lax.stop_gradient(x) if halve else x

    s, k_steps = config.support_size, config.unroll_steps
    hidden = network.apply(params, batch.observation, method=MuZeroNetwork.represent)
    total = 0.0
    for k in range(k_steps + 1):
        scale = 1.0 if k == 0 else 1.0 / k_steps
        if k:  # recurrent_inference from the hidden state, halved if the dynamics made it
            hidden, reward_logits = network.apply(params, hidden, batch.action[:, k - 1], method=MuZeroNetwork.dynamics)
            total = total + scale * ce(reward_logits, scalar_to_target(batch.targets.reward[:, k - 1], s))
        policy_logits, value_logits = network.apply(params, hidden, method=MuZeroNetwork.predict)
        value_ce = ce(value_logits, scalar_to_target(batch.targets.value[:, k], s))
        total = total + scale * (config.value_loss_weight * value_ce + ce(policy_logits, batch.targets.policy[:, k]))
        if k:
            hidden = halve_gradient(hidden)
    return jnp.mean(total)


def test_muzero_halves_the_gradient_into_each_hidden_state_the_dynamics_reads():
    """K = 3 unrolled steps of random params (every kernel, the heads' too, perturbed): the loss's gradient
    equals the pseudocode's, with its halved gradient into each hidden state the next dynamics step reads;
    the pseudocode's without the halving differs."""
    spec = podrl.envs.env_spec(podrl.envs.make("MatchCue-v0"))
    config = MuZeroConfig(hidden_sizes=(8,), latent_size=8, dynamics_sizes=(8,), prediction_sizes=(8,), support_size=3,
                          unroll_steps=3, value_loss_weight=0.5)
    network = make_muzero_network(config, spec)
    params = network.init(jax.random.key(0), jnp.zeros((1, 4)), jnp.zeros((1,), jnp.int32))
    noise = jax.random.split(jax.random.key(3), len(jax.tree.leaves(params)))  # the heads start at zero kernels
    params = jax.tree.unflatten(jax.tree.structure(params), [x + 0.3 * jax.random.normal(key, x.shape)
                                                             for x, key in zip(jax.tree.leaves(params), noise)])
    rng = np.random.default_rng(0)
    n, k = 5, config.unroll_steps
    targets = WindowTargets(jnp.asarray(rng.uniform(-3, 3, (n, k)), jnp.float32),
                            jnp.asarray(rng.uniform(-5, 5, (n, k + 1)), jnp.float32),
                            jnp.asarray(rng.dirichlet(np.ones(4), (n, k + 1)), jnp.float32), jnp.ones((n, k + 1), bool))
    batch = MuZeroBatch(jnp.asarray(rng.normal(size=(n, 4)), jnp.float32),
                        jnp.asarray(rng.integers(0, 4, (n, k)), jnp.int32), targets)
    grads = jax.grad(lambda p: make_muzero_loss(config, network)(p, batch, None)[0])(params)
    want = jax.grad(lambda p: pseudocode_loss(config, network, p, batch))(params)
    np.testing.assert_allclose(float(make_muzero_loss(config, network)(params, batch, None)[0]),
                               float(pseudocode_loss(config, network, params, batch)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(step_weights(k)), [1.0] + [1.0 / k] * k)
    for got, expected in zip(jax.tree.leaves(grads), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
    unhalved = jax.grad(lambda p: pseudocode_loss(config, network, p, batch, halve=False))(params)
    assert max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(unhalved), jax.tree.leaves(want))) > 1e-3
