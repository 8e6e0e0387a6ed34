"""Legal-action masks in every discrete agent's acting and targets, against NumPy on hand-built batches.

The observations are dicts with an `action_mask` leaf; in every batch some illegal action has the highest
logit or Q value, so an agent (or a target) that ignored the mask would choose it and the comparison fails.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs

from one_device import update_on_one_device
from podrl.agents import masking
from podrl.agents.dqn import DQNConfig, q_learning_target
from podrl.agents.impala import ImpalaConfig
from podrl.agents.impala.losses import make_loss_fn as impala_loss_fn
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.networks import make_network
from podrl.agents.ppo import PPOConfig
from podrl.agents.ppo.losses import PPOBatch
from podrl.agents.ppo.losses import make_loss_fn as ppo_loss_fn
from podrl.agents.pqn import PQNConfig
from podrl.agents.pqn.agent import q_lambda_batch
from podrl.agents.q_learning import QParts, make_q_network
from podrl.agents.r2d2 import R2D2Config
from podrl.agents.r2d2.agent import make_network as r2d2_network
from podrl.agents.r2d2.losses import R2D2Batch, Step, learned_q_and_targets, n_step_q_targets
from podrl.core.types import Trajectory
from podrl.envs.types import EnvSpec

A, OBS = 4, 3
SPEC = EnvSpec({"x": specs.Array((OBS,), np.float32), "action_mask": specs.Array((A,), bool)},
               specs.DiscreteArray(A))


def masks(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Random bool masks `[*shape, A]`, each with at least one legal action and action 0 always illegal."""
    rng = np.random.default_rng(seed)
    mask = rng.random(shape + (A,)) < 0.5
    mask[..., 0] = False
    none = ~mask.any(-1)
    mask[none, rng.integers(1, A, size=int(none.sum()))] = True
    return mask


def observation(lead: tuple[int, ...], seed: int = 0) -> dict[str, jax.Array]:
    x = np.random.default_rng(seed + 100).normal(size=lead + (OBS,)).astype(np.float32)
    return {"x": jnp.asarray(x), "action_mask": jnp.asarray(masks(lead, seed))}


def numpy_log_softmax(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """log pi over the legal actions (float64), -inf elsewhere."""
    z = np.where(mask, np.asarray(logits, np.float64), -np.inf)
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


# ---------------------------------------------------------------- the masking math


def test_masked_argmax_max_and_epsilon_greedy_keep_to_the_legal_actions():
    q = np.array([[9.0, 1.0, 3.0, 2.0], [9.0, 5.0, -1.0, 0.0], [9.0, 0.0, 0.0, 0.0]], np.float32)
    mask = np.array([[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0]], bool)
    np.testing.assert_array_equal(masking.masked_argmax(q, mask)[:2], [2, 3])
    np.testing.assert_array_equal(masking.masked_max(q, mask), [3.0, 0.0, 0.0])  # none legal: 0
    np.testing.assert_array_equal(masking.masked_max(q, None), [9.0, 9.0, 9.0])
    np.testing.assert_array_equal(masking.select_value(q, -q, mask), [1.0, -1.0, 0.0])  # double Q, picked by -q
    logits = masking.masked_logits(jnp.asarray(q), jnp.asarray(mask))
    probs = jax.nn.softmax(logits[:2])
    assert float(jnp.max(jnp.where(mask[:2], 0.0, probs))) == 0.0  # exactly 0 on illegal actions
    # epsilon 1: uniform over the legal actions only
    keys = jax.random.split(jax.random.key(0), 4000)
    acts = np.asarray(jax.vmap(lambda k: masking.epsilon_greedy(k, q[:2], jnp.float32(1.0), mask[:2]))(keys))
    assert mask[[0, 1], acts].all()
    np.testing.assert_allclose(np.bincount(acts[:, 0], minlength=4) / 4000, [0, 1 / 3, 1 / 3, 1 / 3], atol=0.03)
    np.testing.assert_allclose(np.bincount(acts[:, 1], minlength=4) / 4000, [0, 0, 0.5, 0.5], atol=0.03)
    assert masking.invalid_actions(None) is None
    np.testing.assert_array_equal(masking.invalid_actions(jnp.asarray(mask)), ~mask)


# ---------------------------------------------------------------- PPO and IMPALA


def biased_towards_illegal(params, head_path: tuple[str, ...], bias: float = 3.0):
    """`params` with the policy head's bias raised on action 0 (always illegal here): the highest logit."""
    params = jax.tree.map(lambda x: x, params)
    node = params["params"]
    for name in head_path[:-1]:
        node = node[name]
    node[head_path[-1]]["bias"] = node[head_path[-1]]["bias"].at[0].add(bias)
    return params


def test_ppo_masks_acting_and_its_loss_ratio_and_entropy():
    config = PPOConfig(hidden_sizes=(8,), entropy_coef=0.03, normalize_advantages=False)
    network = make_network(SPEC, config.hidden_sizes, config.activation)
    agent = config.make_agent(SPEC, 10)
    params = biased_towards_illegal(agent.init(jax.random.key(0), SPEC).params, ("actor", "Dense_0"))
    n = 64
    obs = observation((n,))
    logits = np.asarray(network.apply(params, obs)[0])
    assert (logits.argmax(-1) == 0).mean() > 0.9  # the premise: unmasked, the illegal action 0 wins
    action, extras, _ = agent.act(params, (), obs, jax.random.key(1))
    greedy, _ = agent.act_greedy(params, (), obs)
    mask = np.asarray(obs["action_mask"])
    assert mask[np.arange(n), np.asarray(action)].all() and mask[np.arange(n), np.asarray(greedy)].all()
    log_pi = numpy_log_softmax(logits, mask)
    np.testing.assert_allclose(extras["log_prob"], log_pi[np.arange(n), action], rtol=1e-5)
    np.testing.assert_array_equal(greedy, np.where(mask, logits, -np.inf).argmax(-1))
    # the loss on a batch acted a little off-policy: its ratio and entropy are the masked ones
    old = np.asarray(extras["log_prob"]) - np.linspace(-0.3, 0.3, n)
    advantage = np.random.default_rng(2).normal(size=n).astype(np.float32)
    value = np.zeros(n, np.float32)
    batch = PPOBatch(obs, action, jnp.asarray(old, jnp.float32), advantage, value, value)
    _, metrics = jax.jit(ppo_loss_fn(config, network))(params, batch, jax.random.key(0))
    ratio = np.exp(log_pi[np.arange(n), action] - old)
    eps = config.clip_eps
    policy_loss = -np.minimum(ratio * advantage, np.clip(ratio, 1 - eps, 1 + eps) * advantage).mean()
    entropy = -np.where(mask, np.exp(log_pi) * np.where(mask, log_pi, 0.0), 0.0).sum(-1).mean()
    np.testing.assert_allclose(metrics["policy_loss"], policy_loss, rtol=1e-4)
    np.testing.assert_allclose(metrics["entropy"], entropy, rtol=1e-5)
    np.testing.assert_allclose(metrics["approx_kl"], ((ratio - 1) - np.log(ratio)).mean(), rtol=1e-3, atol=1e-7)


def test_impala_loss_takes_the_masked_policy_in_its_ratios_and_entropy():
    config = ImpalaConfig(hidden_sizes=(8,))
    network = make_network(SPEC, config.hidden_sizes, config.activation)
    agent = config.make_agent(SPEC, 10)
    params = biased_towards_illegal(agent.init(jax.random.key(0), SPEC).params, ("actor", "Dense_0"))
    t, b = 6, 4
    obs, next_obs = observation((t, b), 1), observation((t, b), 2)
    action, extras, _ = jax.vmap(lambda o, k: agent.act(params, (), o, k))(obs, jax.random.split(jax.random.key(3), t))
    mask = np.asarray(obs["action_mask"])
    assert np.take_along_axis(mask, np.asarray(action)[..., None], -1).all()
    mu = np.asarray(extras["log_prob"]) + np.random.default_rng(4).normal(0, 0.5, (t, b))
    ones = jnp.ones((t, b), jnp.float32)
    traj = Trajectory(obs, action, ones, ones, jnp.zeros((t, b), bool), next_obs, {"log_prob": jnp.asarray(mu)}, ())
    _, metrics = jax.jit(impala_loss_fn(config, network))(params, traj, None)
    log_pi = numpy_log_softmax(np.asarray(network.apply(params, obs)[0]), mask)
    taken = np.take_along_axis(log_pi, np.asarray(action)[..., None], -1)[..., 0]
    rho = np.exp(taken - mu)
    entropy = -np.where(mask, np.exp(log_pi) * np.where(mask, log_pi, 0.0), 0.0).sum(-1).mean()
    np.testing.assert_allclose(metrics["mean_rho"], rho.mean(), rtol=1e-4)
    np.testing.assert_allclose(metrics["entropy"], entropy, rtol=1e-5)


# ---------------------------------------------------------------- PQN, DQN, R2D2


def constant_q(params, values):
    """Q-network params with Q(o, a) = values[a] for every observation (weights 0, the head's bias)."""
    params = jax.tree.map(jnp.zeros_like, params)
    params["params"]["q_head"]["bias"] = jnp.asarray(values, jnp.float32)
    return params


Q_VALUES = [10.0, 1.0, 3.0, 2.0]  # action 0 (always illegal) the best by far


def test_pqn_bootstraps_from_the_best_legal_action_of_the_next_observation():
    """q_lambda 0: G_t = r_t + gamma d_t max_{legal a} Q(o_{t+1}, a), with Q constant (10, 1, 3, 2)."""
    config = PQNConfig(hidden_sizes=(4,), q_lambda=0.0, gamma=0.9)
    network = make_q_network("pqn", config, SPEC)
    params = constant_q(network.init(jax.random.key(0), observation((1,))), Q_VALUES)
    parts = QParts(config, network, None, None, None, None)
    t, b = 5, 3
    next_obs = observation((t, b), 7)
    reward = np.random.default_rng(0).normal(size=(t, b)).astype(np.float32)
    ones = jnp.ones((t, b), jnp.float32)
    traj = Trajectory(observation((t, b)), jnp.zeros((t, b), jnp.int32), jnp.asarray(reward), ones,
                      jnp.zeros((t, b), bool), next_obs, {}, ())
    batch = jax.jit(lambda p, tr: q_lambda_batch(parts, p, tr))(params, traj)
    best = np.where(np.asarray(next_obs["action_mask"]), Q_VALUES, -np.inf).max(-1)
    np.testing.assert_allclose(batch.target, (reward + 0.9 * best).reshape(-1), rtol=1e-6)
    assert best.max() < 10.0


@pytest.mark.parametrize("double", [False, True])
def test_dqn_target_picks_the_best_legal_action_at_the_bootstrap_state(double):
    rng = np.random.default_rng(0)
    r, d = rng.normal(size=16).astype(np.float32), rng.choice([0.0, 0.97], size=16).astype(np.float32)
    q_target, q_online = rng.normal(size=(2, 16, A)).astype(np.float32)
    q_target[:, 0] = q_online[:, 0] = 50.0  # illegal everywhere
    mask = masks((16,), 3)
    selector = q_online if double else q_target
    want = [r[i] + d[i] * q_target[i, np.argmax(np.where(mask[i], selector[i], -np.inf))] for i in range(16)]
    got = jax.vmap(q_learning_target)(r, d, q_target, selector, mask)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_dqn_update_regresses_on_targets_over_the_legal_actions(cpu_devices):
    """The update's targets (metric target_mean) read the sampled next observations' masks: with Q_target
    constant (10, 1, 3, 2), rewards 1, gamma 0.9 and no episode end, y = 1 + 0.9 max_{legal a} Q_target(a)."""
    config = DQNConfig(hidden_sizes=(4,), buffer_size=64, min_fill=1, batch_size=64, replay_ratio=1 / 20, n_step=1,
                       double_dqn=False, target_update_period=1000, gamma=0.9)
    agent = config.make_agent(SPEC, 10)
    state = agent.init(jax.random.key(0), SPEC)
    state = state._replace(opt_state=state.opt_state._replace(target=constant_q(state.opt_state.target, Q_VALUES)))
    t, b = 4, 4
    next_mask = np.zeros((t, b, A), bool)
    next_mask[..., 2] = True  # legal: action 2 only (Q 3) ...
    next_mask[:2, :, 1] = True  # ... or 1 and 2 (Q 1, 3): the best legal is 3 everywhere, action 0 never
    obs = observation((t, b))
    next_obs = {"x": obs["x"], "action_mask": jnp.asarray(next_mask)}
    ones = jnp.ones((t, b), jnp.float32)
    traj = Trajectory(obs, jnp.ones((t, b), jnp.int32), ones, ones, jnp.zeros((t, b), bool), next_obs, {}, ())
    _, metrics = update_on_one_device(agent)(state, traj, jax.random.key(2))
    assert float(metrics["learning"]) == 1.0
    np.testing.assert_allclose(float(metrics["target_mean"]), 1.0 + 0.9 * 3.0, rtol=1e-6)


def test_r2d2_n_step_targets_bootstrap_from_legal_actions():
    rng = np.random.default_rng(1)
    m, n, gamma = 6, 2, 0.9
    r = rng.normal(size=m).astype(np.float32)
    discount = np.ones(m, np.float32)
    end = np.zeros(m, bool)
    end[2] = True
    q_target, q_selector = rng.normal(size=(2, m, A)).astype(np.float32)
    q_target[:, 0] = q_selector[:, 0] = 40.0
    mask = masks((m,), 5)
    y = n_step_q_targets(r, discount, end, q_target, q_selector, n, gamma, False, mask)
    for t in range(m):  # the m_t <= n step return, cut at the episode end and at the sequence end
        ret, weight, last = 0.0, 1.0, t
        for k in range(n):
            if t + k >= m:
                break
            ret, weight, last = ret + weight * r[t + k], weight * gamma * discount[t + k], t + k
            if end[t + k]:
                break
        best = np.argmax(np.where(mask[last], q_selector[last], -np.inf))
        np.testing.assert_allclose(y[t], ret + weight * q_target[last, best], rtol=1e-5)


def test_r2d2_learner_takes_the_masks_of_the_replayed_next_observations():
    """`learned_q_and_targets` on a hand-built batch: the target network's Q (given in the batch) has its
    largest value on illegal action 0; the targets bootstrap from the best legal action instead."""
    config = R2D2Config(burn_in=1, sequence_length=3, n_step=1, double_q=False, value_rescaling=False, gamma=0.5,
                        core_size=8, hidden_sizes=(8,))
    network = r2d2_network(config, SPEC)
    n, w = 2, 4
    params = network.init(jax.random.key(0), observation((1,)))
    next_obs = observation((w, n), 9)
    window = Step(observation((w, n)), jnp.zeros((w, n), jnp.int32), jnp.ones((w, n)), jnp.ones((w, n)),
                  jnp.zeros((w, n), bool), next_obs)
    target_q = np.random.default_rng(0).normal(size=(w - 1, n, A)).astype(np.float32)
    target_q[..., 0] = 30.0
    batch = R2D2Batch(window, jax.tree.map(lambda x: x[:n], network.apply(params, observation((n,)))[1]),
                      jnp.ones(n), jnp.arange(n), jnp.asarray(target_q))
    _, y = jax.jit(lambda p, bt: learned_q_and_targets(config, network, p, bt))(params, batch)
    mask = np.asarray(next_obs["action_mask"])[1:]
    np.testing.assert_allclose(y, 1.0 + 0.5 * np.where(mask, target_q, -np.inf).max(-1), rtol=1e-6)


# ---------------------------------------------------------------- MuZero


@pytest.mark.parametrize("search", ["gumbel", "muzero"])
def test_muzero_searches_only_legal_actions_at_the_root(search):
    """mctx gets the root's `invalid_actions`: acting, greedy acting and the search policy (the policy
    targets) never put weight on an illegal action, though the untrained prior and values are arbitrary."""
    config = MuZeroConfig(search=search, num_simulations=8, hidden_sizes=(8,), latent_size=8, dynamics_sizes=(8,),
                          prediction_sizes=(8,))
    agent = config.make_agent(SPEC, 10)
    params = agent.init(jax.random.key(0), SPEC).params
    obs = observation((64,), 11)
    mask = np.asarray(obs["action_mask"])
    action, extras, _ = jax.jit(agent.act)(params, (), obs, jax.random.key(1))
    greedy, _ = jax.jit(agent.act_greedy)(params, (), obs)
    assert mask[np.arange(64), np.asarray(action)].all() and mask[np.arange(64), np.asarray(greedy)].all()
    assert float(np.max(np.where(mask, 0.0, np.asarray(extras["policy"])))) == 0.0
    np.testing.assert_allclose(np.asarray(extras["policy"]).sum(-1), 1.0, rtol=1e-5)
