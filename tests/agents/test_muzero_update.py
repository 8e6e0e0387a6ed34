"""MuZero's update and loss on hand-set heads against NumPy transcriptions of the paper: the value
targets bootstrap from the target network (which then follows the online one), and every head,
the policy's included, is trained toward its stored target (Schrittwieser et al. 2020, Appendix G).

The prediction and reward heads start with zero kernels, so with their biases set by hand the
policy, value and reward logits are those biases at every state: the loss and its gradient are
then known in closed form, whatever the torso and the dynamics compute."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from one_device import update_on_one_device
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.muzero.agent import make_network
from podrl.agents.muzero.losses import MuZeroBatch, make_loss_fn
from podrl.agents.muzero.targets import WindowTargets
from podrl.core.types import Trajectory
from podrl.envs.registry import make
from podrl.envs.types import env_spec
from references import numpy_h, numpy_log_softmax, numpy_two_hot, numpy_value, with_head_biases

SPEC = env_spec(make("MatchCue-v0"))  # observations [4], 4 actions
SMALL = dict(hidden_sizes=(8,), latent_size=8, dynamics_sizes=(8,), prediction_sizes=(8,), support_size=3)
T, B = 8, 4


def test_value_targets_bootstrap_from_the_target_network_which_then_follows_the_online_one(cpu_devices):
    """Rewards 1, no episode end, K = 2, n = 3, gamma 0.5: every value target is
    z = 1 + gamma + gamma^2 + gamma^3 v'(o'), with v' the target network's value (its value head's
    bias set apart from the online network's: v' = -v, both far from 0). After the one gradient step,
    target <- tau * online + (1 - tau) * target (target_update_period 1, tau 0.25)."""
    gamma, tau = 0.5, 0.25
    config = MuZeroConfig(**SMALL, unroll_steps=2, td_steps=3, gamma=gamma, buffer_size=T * B, min_fill=T * B,
                          batch_size=16, replay_ratio=1 / (T * B), target_update_period=1, target_tau=tau)
    agent = config.make_agent(SPEC, 10)
    state = agent.init(jax.random.key(0), SPEC)
    bias = np.asarray([-2.0, -1.0, 0.0, 0.5, 1.0, 2.5, 3.0])  # 2S + 1 = 7 atoms
    target = with_head_biases(state.opt_state.target, value_head=bias)
    state = state._replace(params=with_head_biases(state.params, value_head=-bias),
                           opt_state=state.opt_state._replace(target=target))
    v_target = numpy_value(bias, 3)
    assert v_target > 3.0 and abs(numpy_value(-bias, 3) - v_target) > 3.0  # online and target far apart

    keys = jax.random.split(jax.random.key(1), 3)
    obs = jax.nn.one_hot(jax.random.randint(keys[0], (T + 1, B), 0, 4), 4)
    ones = jnp.ones((T, B), jnp.float32)
    extras = {"policy": jax.random.dirichlet(keys[1], jnp.ones(4), (T, B)), "search_value": jnp.zeros((T, B))}
    traj = Trajectory(obs[:-1], jax.random.randint(keys[2], (T, B), 0, 4), ones, ones, jnp.zeros((T, B), bool),
                      obs[1:], extras, ())
    after, metrics = update_on_one_device(agent)(state, traj, jax.random.key(2))
    assert float(metrics["learning"]) == 1.0
    want = 1.0 + gamma + gamma**2 + gamma**3 * v_target
    np.testing.assert_allclose(float(metrics["value_target_mean"]), want, rtol=1e-4)
    moved = max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(state.params),
                                                            jax.tree.leaves(after.params)))
    assert moved > 0
    for old, online, new in zip(jax.tree.leaves(target), jax.tree.leaves(after.params),
                                jax.tree.leaves(after.opt_state.target), strict=True):
        np.testing.assert_allclose(new, tau * online + (1 - tau) * old, rtol=1e-5, atol=1e-7)


def test_loss_and_its_gradient_match_the_papers_unroll_loss_toward_the_stored_targets():
    """Per window: sum_k w_k (0.25 CE(value_k, two-hot h(z_k)) + CE(policy_k, pi_k)) + sum_{k>=1} w_k
    CE(reward_k, two-hot h(u_k)), w = (1, 1/K, ..., 1/K), meaned over the windows; the policy head's
    gradient is mean_n sum_k w_k (softmax(p) - pi_k): toward the stored search policy pi, which is
    far from the prior softmax(p)."""
    k_steps, s, n, a = 2, 3, 3, 4
    config = MuZeroConfig(**SMALL, unroll_steps=k_steps, value_loss_weight=0.25)
    network = make_network(config, SPEC)
    rng = np.random.default_rng(0)
    p = np.asarray([3.0, 1.0, -1.0, -3.0])  # a prior sure of action 0
    v, r = rng.normal(size=2 * s + 1), rng.normal(size=2 * s + 1)
    params = network.init(jax.random.key(0), jnp.zeros((1, 4)), jnp.zeros((1,), jnp.int32))
    params = with_head_biases(params, policy_head=p, value_head=v, reward_head=r)
    u, z = rng.uniform(-4, 4, size=(n, k_steps)), rng.uniform(-20, 20, size=(n, k_steps + 1))
    pi = rng.dirichlet(0.3 * np.ones(a), size=(n, k_steps + 1))
    targets = WindowTargets(*(jnp.asarray(x, jnp.float32) for x in (u, z, pi)), jnp.ones((n, k_steps + 1), bool))
    batch = MuZeroBatch(jnp.asarray(rng.normal(size=(n, 4)), jnp.float32),
                        jnp.asarray(rng.integers(0, a, size=(n, k_steps)), jnp.int32), targets)
    loss_fn = make_loss_fn(config, network)
    (loss, metrics), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(params, batch, jax.random.key(1))

    def ce(logits, target):
        return -float(np.sum(target * numpy_log_softmax(logits)))

    w = [1.0] + [1.0 / k_steps] * k_steps
    value_ce = np.asarray([[ce(v, numpy_two_hot(numpy_h(z[i, k]), s)) for k in range(k_steps + 1)] for i in range(n)])
    policy_ce = np.asarray([[ce(p, pi[i, k]) for k in range(k_steps + 1)] for i in range(n)])
    reward_ce = np.asarray([[ce(r, numpy_two_hot(numpy_h(u[i, k]), s)) for k in range(k_steps)] for i in range(n)])
    want = np.mean([sum(w[k] * (0.25 * value_ce[i, k] + policy_ce[i, k]) for k in range(k_steps + 1))
                    + sum(w[k + 1] * reward_ce[i, k] for k in range(k_steps)) for i in range(n)])
    np.testing.assert_allclose(float(loss), want, rtol=1e-5)
    for name, ces in (("policy_loss", policy_ce), ("value_loss", value_ce), ("reward_loss", reward_ce)):
        np.testing.assert_allclose(float(metrics[name]), np.mean(ces), rtol=1e-5, err_msg=name)
    prior = np.exp(numpy_log_softmax(p))
    assert np.mean(policy_ce) > -np.sum(prior * np.log(prior)) + 1.0  # the search policies are far from the prior
    want_grad = np.mean([sum(w[k] * (prior - pi[i, k]) for k in range(k_steps + 1)) for i in range(n)], axis=0)
    np.testing.assert_allclose(np.asarray(grads["params"]["policy_head"]["bias"]), want_grad, rtol=1e-4, atol=1e-6)
    assert np.max(np.abs(want_grad)) > 0.5
