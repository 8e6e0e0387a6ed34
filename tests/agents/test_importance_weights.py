"""Importance weights reach the loss and its gradient (Schaul et al. 2016, sec. 3.4): one gradient step of
R2D2 and of prioritised DQN, and MuZero's prioritised loss, on hand-built replays with known priorities
and Q / prediction heads set to constants (kernels 0), against NumPy: the weights built with the config's
importance exponent from P(i) = p_i^alpha / sum p^alpha, each item's loss and gradient weighed by its own
weight, the new priorities set with the config's eta and priority exponent; a zero TD error still leaves a
drawable priority (`PRIORITY_FLOOR`). The step runs with plain SGD of step 1, so the params move by
exactly minus the gradient, and the heads' bias gradients have closed forms."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrl.envs
from hand_replay import (
    R2D2,
    R2D2_SPEC,
    B,
    T,
    constant_heads,
    drawn_windows,
    numpy_importance_weights,
    numpy_r2d2_targets,
    on_one_device,
    r2d2_replay,
    r2d2_steps,
    with_sgd,
)
from podrl.agents import prioritised, replay, sum_tree
from podrl.agents.dqn import DQNConfig
from podrl.agents.dqn import agent as dqn_agent
from podrl.agents.dqn import losses as dqn_losses
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.muzero import agent as muzero_agent
from podrl.agents.muzero import losses as muzero_losses
from podrl.agents.muzero.agent import make_network
from podrl.agents.muzero.losses import MuZeroBatch
from podrl.agents.muzero.targets import WindowTargets
from podrl.agents.off_policy import TargetLearnerState
from podrl.agents.q_learning import QParts, make_q_network
from podrl.agents.r2d2 import agent as r2d2_agent
from podrl.core.types import Trajectory
from references import constant_q, numpy_h, numpy_log_softmax, numpy_two_hot, numpy_value, with_head_biases

ONLINE, TARGET = np.array([1.0, 2.0]), np.array([3.0, -1.0])


def step_and_draw(parts, agent, buffer, params, target, key, priority):
    """One gradient step of a replay agent (`agent`: its module, whose `_sgd_step` and `_batch` take the
    envs per shard) as the frame runs it, from `(params, TargetLearnerState)` and the replay's priorities;
    and the batch that step drew (its sample key is the first half of `key`), whose importance weights must
    be (N P(i))^-beta / max with P(i) from `priority` by leaf and the config's exponents. Returns
    `(((params, TargetLearnerState), (Priorities, PendingPriorities)), metrics)` after the step, the drawn
    indices and their weights."""
    carry = ((params, TargetLearnerState(parts.optimizer.init(params), target, jnp.zeros((), jnp.int32))),
             (buffer.priorities, prioritised.nothing_pending(buffer.priorities, parts.config.batch_size)))
    out = on_one_device(lambda r, c, k: agent._sgd_step(parts, B, r, c, k))(buffer, carry, key)
    batch = jax.jit(functools.partial(agent._batch, parts, B))(buffer, jax.random.split(key)[0], params, target)
    index, cfg = np.asarray(batch.index), parts.config
    assert index.shape == (cfg.batch_size,)  # batch_size draws (not the default's)
    w = numpy_importance_weights(priority, index, cfg.priority_exponent, cfg.importance_exponent)
    np.testing.assert_allclose(np.asarray(batch.weight), w, rtol=1e-5)
    assert w.min() < 0.8  # unequal weights
    return out, index, w


def test_an_r2d2_step_weighs_each_sequence_and_sets_its_priority():
    """The drawn sequences' weights are (N P(i))^-beta / max with beta = importance_exponent (0.35); the
    heads' biases move by minus the gradient of sum_i w_i mean_t (y - Q)^2 / 2 / N (Q = V + A - mean A, y
    the NumPy targets); the target network follows with tau 0.3; the pending new priorities are
    (eta max|delta| + (1 - eta) mean|delta|)^alpha with eta 0.6, alpha 0.7."""
    config, steps = R2D2, r2d2_steps(0)
    parts = with_sgd(r2d2_agent.make_parts(config, R2D2_SPEC, 10))
    replay, priority = r2d2_replay(config, steps, 1)
    init = r2d2_agent._init(parts, jax.random.key(0), R2D2_SPEC).params
    online, target = constant_heads(init, ONLINE), constant_heads(jax.tree.map(lambda x: -x, init), TARGET)
    (((after, learner), (_, pending)), metrics), index, w = step_and_draw(parts, r2d2_agent, replay, online, target,
                                                                         jax.random.key(5), priority)

    start, column = drawn_windows(config, index)
    y = np.stack([numpy_r2d2_targets(config, steps, s, c, TARGET[np.argmax(ONLINE)]) for s, c in zip(start, column)])
    actions = np.stack([steps.action[s + config.burn_in:s + config.window, c] for s, c in zip(start, column)])
    td = y - ONLINE[actions]  # [N, m]
    n, m = td.shape
    d_q = -td * w[:, None] / (n * m)  # dL/dQ(o_t, a_t)
    grad_advantage = np.array([np.sum(d_q * ((actions == k) - 0.5)) for k in range(2)])
    heads = after["params"]
    np.testing.assert_allclose(heads["value"]["Dense_0"]["bias"], [ONLINE.mean() - d_q.sum()], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(heads["advantage"]["Dense_0"]["bias"], ONLINE - grad_advantage, rtol=1e-4, atol=1e-5)
    loss = np.mean(w * np.mean(0.5 * td ** 2, axis=1))
    np.testing.assert_allclose(float(metrics["q_loss"]), loss, rtol=1e-4)
    moved = learner.target["params"]["advantage"]["Dense_0"]["bias"]
    np.testing.assert_allclose(moved, 0.3 * (ONLINE - grad_advantage) + 0.7 * TARGET, rtol=1e-4, atol=1e-5)

    new = config.priority_eta * np.abs(td).max(1) + (1 - config.priority_eta) * np.abs(td).mean(1)
    np.testing.assert_array_equal(np.asarray(pending.index), index)
    np.testing.assert_allclose(np.asarray(pending.leaf), new ** config.priority_exponent, rtol=1e-4)


def test_a_zero_td_error_leaves_a_drawable_priority():
    """A sequence whose TD errors were all 0 gets PRIORITY_FLOOR^alpha, not 0: it stays drawable (with every
    other leaf 0, the draws are all it), and the largest priority seen does not move."""
    tree = sum_tree.update(sum_tree.init(8), jnp.arange(8), jnp.zeros(8))
    priorities = prioritised.Priorities(tree, jnp.ones((), jnp.float32))
    index = jnp.asarray([5])
    after = prioritised.set_priorities(priorities, index, jnp.zeros(1), 0.7)
    leaves = np.asarray(sum_tree.leaves(after.tree))
    assert leaves[5] == pytest.approx(prioritised.PRIORITY_FLOOR ** 0.7) and leaves[5] > 0
    assert np.count_nonzero(leaves) == 1 and float(after.max_priority) == 1.0
    np.testing.assert_array_equal(np.asarray(sum_tree.sample(after.tree, jax.random.key(0), 16)), 5)


DQN_SPEC = podrl.envs.env_spec(podrl.envs.make("CartPole-v1"))  # observations [4], 2 actions
DQN = DQNConfig(prioritised=True, buffer_size=2 * T * B, min_fill=T * B, batch_size=64, replay_ratio=1 / (T * B),
                priority_exponent=0.8, importance_exponent=0.25, hidden_sizes=(8,), target_update_period=1,
                target_tau=0.2)


def dqn_replay(config: DQNConfig, seed: int):
    """`(replay, transitions, priority by leaf)`: two rollouts of `[T, B]` random n-step transitions (returns
    spread over [-4, 4], so TD errors fall on both sides of Huber's 1; bootstrap weights 0 or 0.81) in a
    prioritised replay of single transitions (leaf = slot = t * B + b), with random priorities set."""
    rng = np.random.default_rng(seed)
    n = 2 * T * B
    flat = replay.Transition(rng.normal(size=(n, 4)).astype(np.float32), rng.integers(0, 2, n).astype(np.int32),
                             rng.uniform(-4, 4, n).astype(np.float32), rng.choice([0.0, 0.81], n).astype(np.float32),
                             rng.normal(size=(n, 4)).astype(np.float32))
    buffer = prioritised.init(config.buffer_size, replay.example_transition(DQN_SPEC), 1)
    for k in range(2):
        rollout = jax.tree.map(lambda x: jnp.asarray(x[k * T * B:(k + 1) * T * B].reshape((T, B) + x.shape[1:])), flat)
        buffer = prioritised.add(buffer, prioritised.SequenceItems(rollout, ()), 1, 1, config.priority_exponent)
    priority = rng.uniform(0.2, 3.0, n).astype(np.float32)
    priorities = prioritised.set_priorities(buffer.priorities, jnp.arange(n), jnp.asarray(priority),
                                            config.priority_exponent)
    return buffer._replace(priorities=priorities._replace(max_priority=jnp.ones((), jnp.float32))), flat, priority


@pytest.mark.parametrize("loss", ["huber", "mse"])
def test_a_prioritised_dqn_step_weighs_each_transition_and_sets_its_priority(loss):
    """Q_online = (1, 2), Q_target = (3, -1) (constant heads): y = R + d Q_target(o', argmax Q_online) =
    R - d; the weights are (N P(i))^-beta / max with beta 0.25 from p^0.8; the online head's bias moves by
    minus sum_i w_i l'(delta_i) [a_i = a] / N (l' = clip(delta, -1, 1) for Huber, delta for mse), the target
    head follows with tau 0.2, and the pending priorities are max(|delta|, floor)^0.8."""
    config = dataclasses.replace(DQN, loss=loss)
    network = make_q_network("dqn", config, DQN_SPEC)
    parts = QParts(config, network, optax.sgd(1.0), lambda step: 1.0,
                   jax.value_and_grad(dqn_losses.make_loss_fn(config, network), has_aux=True), lambda step: 0.0)
    buffer, flat, priority = dqn_replay(config, 0)
    init = network.init(jax.random.key(0), jnp.zeros((1, 4)))
    online, target = constant_q(init, list(ONLINE)), constant_q(init, list(TARGET))
    (((after, learner), (_, pending)), metrics), index, w = step_and_draw(parts, dqn_agent, buffer, online, target,
                                                                         jax.random.key(4), priority)

    action = flat.action[index]
    td = ONLINE[action] - (flat.reward[index] + flat.discount[index] * TARGET[np.argmax(ONLINE)])
    assert (np.abs(td) > 1).any() and (np.abs(td) < 1).any()
    slope = np.clip(td, -1.0, 1.0) if loss == "huber" else td
    grad = np.array([np.sum(w * slope * (action == a)) for a in range(2)]) / len(td)
    np.testing.assert_allclose(after["params"]["q_head"]["bias"], ONLINE - grad, rtol=1e-4, atol=1e-6)
    per_item = np.where(np.abs(td) <= 1, 0.5 * td ** 2, np.abs(td) - 0.5) if loss == "huber" else 0.5 * td ** 2
    np.testing.assert_allclose(float(metrics["q_loss"]), np.mean(w * per_item), rtol=1e-4)
    np.testing.assert_allclose(learner.target["params"]["q_head"]["bias"], 0.2 * (ONLINE - grad) + 0.8 * TARGET,
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(pending.index), index)
    np.testing.assert_allclose(np.asarray(pending.leaf), np.maximum(np.abs(td), prioritised.PRIORITY_FLOOR) ** 0.8,
                               rtol=1e-4)


MUZERO_SPEC = podrl.envs.env_spec(podrl.envs.make("MatchCue-v0"))  # observations [4], 4 actions
K, S = 2, 3
MUZERO = MuZeroConfig(hidden_sizes=(8,), latent_size=8, dynamics_sizes=(8,), prediction_sizes=(8,), support_size=S,
                      unroll_steps=K, td_steps=2, num_simulations=4, batch_size=32, prioritised=True,
                      priority_exponent=0.8, importance_exponent=0.3, value_loss_weight=0.5, buffer_size=2 * T * B,
                      min_fill=T * B, replay_ratio=1 / (T * B))


def test_muzero_weighs_each_windows_loss_and_gradient_by_its_importance_weight():
    """Heads with constant logits (kernels 0): per window sum_k s_k (0.5 CE(value, two-hot h(z_k)) +
    CE(policy, pi_k)) + sum_{k>=1} s_k CE(reward, two-hot h(u_k)), s = (1, 1/K, ..); the loss is
    mean_i w_i of it, and each head's bias gradient mean_i w_i sum_k s_k (softmax(bias) - its target k)
    (value's times 0.5): every window weighed by its own w_i. The priority is |v - z_0| per window."""
    n, a = 5, 4
    network = make_network(MUZERO, MUZERO_SPEC)
    rng = np.random.default_rng(0)
    p, v, r = rng.normal(size=a), rng.normal(size=2 * S + 1), rng.normal(size=2 * S + 1)
    params = network.init(jax.random.key(0), jnp.zeros((1, 4)), jnp.zeros((1,), jnp.int32))
    params = with_head_biases(params, policy_head=p, value_head=v, reward_head=r)
    u, z = rng.uniform(-4, 4, size=(n, K)), rng.uniform(-20, 20, size=(n, K + 1))
    pi = rng.dirichlet(0.3 * np.ones(a), size=(n, K + 1))
    w = np.array([1.0, 0.2, 0.6, 0.05, 0.9])
    targets = WindowTargets(*(jnp.asarray(x, jnp.float32) for x in (u, z, pi)), jnp.ones((n, K + 1), bool))
    batch = MuZeroBatch(jnp.asarray(rng.normal(size=(n, 4)), jnp.float32),
                        jnp.asarray(rng.integers(0, a, size=(n, K)), jnp.int32), targets, jnp.asarray(w, jnp.float32),
                        jnp.arange(n, dtype=jnp.int32))
    (loss, metrics), grads = jax.jit(jax.value_and_grad(muzero_losses.make_loss_fn(MUZERO, network), has_aux=True))(
        params, batch, jax.random.key(1))
    s = [1.0] + [1.0 / K] * K
    value_t = np.array([[numpy_two_hot(numpy_h(z[i, k]), S) for k in range(K + 1)] for i in range(n)])
    reward_t = np.array([[numpy_two_hot(numpy_h(u[i, k]), S) for k in range(K)] for i in range(n)])
    ce = lambda logits, target: -np.sum(target * numpy_log_softmax(logits), axis=-1)  # noqa: E731
    per_window = (np.sum(np.array(s) * (0.5 * ce(v, value_t) + ce(p, pi)), axis=1)
                  + np.sum(np.array(s[1:]) * ce(r, reward_t), axis=1))
    np.testing.assert_allclose(float(loss), np.mean(w * per_window), rtol=1e-5)
    soft = lambda logits: np.exp(numpy_log_softmax(logits))  # noqa: E731
    want = {"value_head": 0.5 * np.einsum("i,k,ikj->j", w, s, soft(v) - value_t) / n,
            "policy_head": np.einsum("i,k,ikj->j", w, s, soft(p) - pi) / n,
            "reward_head": np.einsum("i,k,ikj->j", w, s[1:], soft(r) - reward_t) / n}
    for name, grad in want.items():
        np.testing.assert_allclose(np.asarray(grads["params"][name]["bias"]), grad, rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    np.testing.assert_allclose(np.asarray(metrics["priority"]), np.abs(numpy_value(v, S) - z[:, 0]), rtol=1e-4)


def test_muzero_draws_windows_by_priority_with_the_configured_importance_exponent():
    """A prioritised MuZero replay of two rollouts: the windows they complete come in at the largest
    priority so far to the alpha (0.8); with random priorities set, `_batch`'s weights are
    (N P(i))^-0.3 / max with P(i) = p_i^0.8 / sum p^0.8 (a window may start at every step)."""
    agent_parts = muzero_agent.make_parts(MUZERO, MUZERO_SPEC, 10)
    state = muzero_agent._init(agent_parts, jax.random.key(0), MUZERO_SPEC)
    pieces = muzero_agent.replay_pieces(agent_parts)
    rng = np.random.default_rng(1)
    buffer = state.shard_state  # the largest priority seen so far 2: new windows come in at 2^alpha
    buffer = buffer._replace(priorities=buffer.priorities._replace(max_priority=jnp.asarray(2.0, jnp.float32)))
    for _ in range(2):
        obs = jax.nn.one_hot(rng.integers(0, 4, (T + 1, B)), 4)
        ones = jnp.ones((T, B), jnp.float32)
        extras = {"policy": jnp.asarray(rng.dirichlet(np.ones(4), (T, B)), jnp.float32), "search_value": ones}
        traj = Trajectory(obs[:-1], jnp.zeros((T, B), jnp.int32), jnp.asarray(rng.normal(size=(T, B)), jnp.float32),
                          ones, jnp.zeros((T, B), bool), obs[1:], extras, ())
        buffer = pieces.add(buffer, pieces.items(traj))
    added = np.asarray(sum_tree.leaves(buffer.priorities.tree))
    drawable = np.flatnonzero(added)
    np.testing.assert_allclose(added[drawable], 2.0 ** MUZERO.priority_exponent, rtol=1e-6)
    priority = np.zeros(2 * T * B, np.float32)
    priority[drawable] = rng.uniform(0.2, 3.0, drawable.size)
    buffer = buffer._replace(priorities=prioritised.set_priorities(
        buffer.priorities, jnp.asarray(drawable), jnp.asarray(priority[drawable]), MUZERO.priority_exponent))
    batch = jax.jit(functools.partial(muzero_agent._batch, agent_parts, B))(buffer, jax.random.key(3), state.params,
                                                                           state.params)
    index = np.asarray(batch.index)
    assert index.shape == (MUZERO.batch_size,) and set(index) <= set(drawable) and len(set(index)) > 10
    np.testing.assert_allclose(np.asarray(batch.weight), numpy_importance_weights(priority, index, 0.8, 0.3),
                               rtol=1e-5)
