"""SAC's and TD3's updates on hand-built networks: which networks their targets and actor steps use,
TD3's target policy smoothing and policy delay, each against a NumPy transcription of the paper.

The critics are set by hand so that Q_i(s, u) = slope * u + curvature * |u| + offset (one action
dimension, hidden_sizes (4,)), the actors so that their output is one constant; one update of a
ReachCue rollout with reward 1 and no episode end then has targets known in closed form
(Fujimoto et al. 2018, eqs. 10 and 14; Haarnoja et al. 2018b, eqs. 2-3), and the online and the
target networks are told apart by their values."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from continuous_tasks import GAMMA, ONE_STEP, SAMPLES, SPEC, B, T, reward_one_rollout
from one_device import update_on_one_device
from parity import max_diffs
from podrl.agents.sac import SACConfig
from podrl.agents.td3 import TD3Config


def hand_critic(critic, slope: float = 0.0, curvature: float = 0.0, offset: float = 0.0):
    """Twin critic params with every Q_i(s, u) = slope * u + curvature * |u| + offset for u in [-1, 1]:
    hidden units relu(u + 1), relu(1 - u), relu(u), relu(-u) (hidden_sizes (4,), relu), then a linear head."""
    towers = {}
    for name, tower in critic["params"].items():
        assert set(tower) == {"Dense_0", "Dense_1"} and tower["Dense_0"]["kernel"].shape == (5, 4), tower
        kernel = np.zeros((5, 4), np.float32)
        kernel[4] = [1.0, -1.0, 1.0, -1.0]  # input 4 is u, after the one-hot observation
        head = np.asarray([[slope / 2], [-slope / 2], [curvature], [curvature]], np.float32)
        towers[name] = {"Dense_0": {"kernel": kernel, "bias": np.asarray([1.0, 1.0, 0.0, 0.0], np.float32)},
                        "Dense_1": {"kernel": head, "bias": np.asarray([offset], np.float32)}}
    return jax.tree.map(jnp.asarray, {"params": towers})


def head_name(actor) -> str:
    """The name of the actor's head, its last layer (`Dense_n`)."""
    return max(actor["params"], key=lambda name: int(name.split("_")[-1]))


def constant_actor(actor, output: list[float]):
    """Actor params whose output is `output` for every observation (all weights 0, the head's bias `output`)."""
    layers = dict(jax.tree.map(jnp.zeros_like, actor)["params"])
    head = head_name(actor)
    layers[head] = {**layers[head], "bias": jnp.asarray(output, jnp.float32)}
    return {"params": layers}


def moved(before, after) -> list[float]:
    """Per leaf of two params trees: the largest absolute change."""
    return max_diffs(jax.tree.leaves(before), jax.tree.leaves(after))


def numpy_mean_std(samples: np.ndarray) -> tuple[float, float]:
    return float(np.mean(samples)), float(np.std(samples))


def test_td3_target_smooths_the_target_actors_action_and_uses_the_target_critics(cpu_devices):
    """y = r + gamma min_i Q'_i(s', clip(mu'(s') + clip(eps, -c, c), -1, 1)), eps ~ N(0, sigma) per sample
    (Fujimoto et al. 2018, eqs. 10 and 14). Target actor mu' = 0, target critics Q' = |u|: without the
    smoothing every y would be exactly 1; the online critics (-|u| - 5) and the online actor (tanh 1.5)
    differ from the targets, so using either moves y. The critic loss sum_i (Q_i(s, 0) - y)^2 / 2 checks
    the spread of y too (sigma 0.6, c 0.3: the noise clip binds on 62% of the draws)."""
    sigma, clip = 0.6, 0.3
    config = TD3Config(**ONE_STEP, policy_noise=sigma, noise_clip=clip)
    agent = config.make_agent(SPEC, 10)
    state = agent.init(jax.random.key(0), SPEC)
    learner = state.opt_state._replace(critic=hand_critic(state.opt_state.critic, curvature=-1.0, offset=-5.0),
                                       critic_target=hand_critic(state.opt_state.critic, curvature=1.0),
                                       actor_target=constant_actor(state.opt_state.actor_target, [0.0]))
    state = state._replace(params={**state.params, "actor": constant_actor(state.params["actor"], [1.5])},
                           opt_state=learner)
    _, metrics = update_on_one_device(agent)(state, reward_one_rollout(), jax.random.key(1))
    assert float(metrics["learning"]) == 1.0
    eps = np.random.default_rng(0).normal(0.0, sigma, size=1_000_000)
    y = 1.0 + GAMMA * np.abs(np.clip(0.0 + np.clip(eps, -clip, clip), -1.0, 1.0))
    mean, std = numpy_mean_std(y)
    tolerance = 5 * std / np.sqrt(SAMPLES)  # the update's mean over its SAMPLES draws
    assert abs(float(metrics["target_mean"]) - mean) < tolerance, (float(metrics["target_mean"]), mean)
    critic_loss = np.mean((-5.0 - y) ** 2)  # two critics, each Q_i(s, a = 0) = -5: 2 * (-5 - y)^2 / 2
    assert abs(float(metrics["critic_loss"]) - critic_loss) < 5 * np.std((-5.0 - y) ** 2) / np.sqrt(SAMPLES)
    assert float(metrics["q_mean"]) == -5.0


def test_td3_delays_the_actor_and_the_targets_and_the_actor_ascends_the_online_critic(cpu_devices):
    """policy_delay 3, two critic steps per update (Fujimoto et al. 2018, Algorithm 1): steps 1 and 2
    move the critics alone (actor and both targets bit-identical); step 3 takes one actor step on
    the updated online critic Q = u (the target critic, Q' = -u, would push the other way): from a
    zero actor, Adam's first step raises the head's bias by the learning rate, nothing else moves;
    then target <- tau * online + (1 - tau) * target for the actor (and the critics); step 4 moves
    the critics alone again."""
    lr, tau = 1e-2, 0.25
    config = TD3Config(**{**ONE_STEP, "replay_ratio": 2 / (T * B)}, policy_delay=3, actor_learning_rate=lr, tau=tau)
    agent = config.make_agent(SPEC, 10)
    state = agent.init(jax.random.key(0), SPEC)
    zero_actor = constant_actor(state.params["actor"], [0.0])
    learner = state.opt_state._replace(critic=hand_critic(state.opt_state.critic, slope=1.0),
                                       critic_target=hand_critic(state.opt_state.critic, slope=-1.0),
                                       actor_target=zero_actor)
    state = state._replace(params={**state.params, "actor": zero_actor}, opt_state=learner)
    update = update_on_one_device(agent)
    first, metrics = update(state, reward_one_rollout(0), jax.random.key(1))  # steps 1, 2
    assert max(moved(zero_actor, first.params["actor"])) == 0.0, "the actor moved before the delayed step"
    assert max(moved(learner.actor_target, first.opt_state.actor_target)) == 0.0
    assert max(moved(learner.critic_target, first.opt_state.critic_target)) == 0.0
    assert min(moved(learner.critic, first.opt_state.critic)) > 0.0  # every critic leaf learned
    assert float(metrics["actor_updated"]) == 0.0 and int(first.opt_state.sgd_steps) == 2
    second, metrics = update(first, reward_one_rollout(1), jax.random.key(2))  # steps 3 (delayed), 4
    assert float(metrics["actor_updated"]) == 0.5 and int(second.opt_state.sgd_steps) == 4
    expected = constant_actor(zero_actor, [lr])  # dQ/du = +1 at u = 0: Adam's first step is +lr on the bias
    for x, y in zip(jax.tree.leaves(expected), jax.tree.leaves(second.params["actor"]), strict=True):
        np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-9, err_msg="the actor's one step")
    for x, y in zip(jax.tree.leaves(second.params["actor"]), jax.tree.leaves(second.opt_state.actor_target)):
        np.testing.assert_allclose(y, tau * x, rtol=1e-6, atol=1e-12, err_msg="the target actor's Polyak step")
    assert max(moved(first.opt_state.critic_target, second.opt_state.critic_target)) > 0.0


def test_sac_soft_target_uses_the_target_critics_and_the_entropy_term_and_the_actor_the_online_critics(
        cpu_devices):
    """y = r + gamma (min_i Q'_i(s', u') - alpha log pi(u'|s')), u' = tanh(z), z ~ N(mean, std) of the
    online actor (Haarnoja et al. 2018b, eqs. 2-3; log pi with the tanh correction, 2018a eq. 21).
    Actor output 0: mean 0, log std the middle of [-4, -2] (std e^-3, log pi about 1.6, so
    alpha log pi is a large term); target critics Q' = |u| - u, online critics Q = u - 5. The actor's
    step (eq. 7, on the online critics) then raises its mean: from a zero actor, Adam's first step
    moves the mean's bias by +lr (the target critics would lower it)."""
    alpha, lr = 0.5, 1e-2
    config = SACConfig(**ONE_STEP, initial_temperature=alpha, learn_temperature=False, log_std_min=-4.0,
                       log_std_max=-2.0, actor_learning_rate=lr)
    agent = config.make_agent(SPEC, 10)
    state = agent.init(jax.random.key(0), SPEC)
    learner = state.opt_state._replace(critic=hand_critic(state.opt_state.critic, slope=1.0, offset=-5.0),
                                       critic_target=hand_critic(state.opt_state.critic, slope=-1.0, curvature=1.0))
    state = state._replace(params={**state.params, "actor": constant_actor(state.params["actor"], [0.0, 0.0])},
                           opt_state=learner)
    after, metrics = update_on_one_device(agent)(state, reward_one_rollout(), jax.random.key(1))
    assert float(metrics["learning"]) == 1.0 and abs(float(metrics["alpha"]) - alpha) < 1e-6
    std = np.exp(-3.0)
    z = np.random.default_rng(0).normal(0.0, std, size=1_000_000)
    log_pi = -0.5 * (z / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi) - np.log(1.0 - np.tanh(z) ** 2)
    y = 1.0 + GAMMA * (np.abs(np.tanh(z)) - np.tanh(z) - alpha * log_pi)
    mean, spread = numpy_mean_std(y)
    assert abs(float(metrics["target_mean"]) - mean) < 5 * spread / np.sqrt(SAMPLES), (float(metrics["target_mean"]),
                                                                                        mean)
    mean_bias = after.params["actor"]["params"][head_name(after.params["actor"])]["bias"][0]
    np.testing.assert_allclose(float(mean_bias), lr, rtol=1e-4)
