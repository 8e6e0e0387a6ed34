"""SAC and TD3: their math against NumPy transcriptions of the papers, config and env refusals,
the action scaling and warm-up, sharded updates (deterministic, shard-count invariant), learning."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs
from jax.sharding import Mesh

from checkpoints import anakin as checkpointed_anakin
from checkpoints import leaves
from continuous_tasks import REACH, REACH_TD3, REACH_THRESHOLDS, SMALL
from podrl.agents.continuous import action_bounds, twin_q_loss
from podrl.agents.sac import SACConfig, actor_loss, soft_q_target, tanh_gaussian_log_prob, temperature_loss
from podrl.agents.td3 import TD3Config, clipped_double_q_target, smoothed_target_action
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.core.errors import ConfigError
from podrl.core.learner_state import init_on_mesh
from podrl.core.parallel import DATA_AXIS
from podrl.core.types import Trajectory
from podrl.envs.registry import make
from podrl.envs.types import EnvSpec, env_spec
from podrl.run.config import LoggingConfig
from podrl.testing import layout_update
from untrained import anakin_initial_return

QUIET = LoggingConfig(run_dir=None, console=False)
AGENTS = pytest.mark.parametrize("config_type", [SACConfig, TD3Config], ids=["sac", "td3"])

# ------------------------------------------------------------------ the math


def test_tanh_gaussian_log_prob_matches_the_change_of_variables():
    """Haarnoja et al. 2018a, eq. 21, term by term in float64: log N(z; mu, sigma) - sum log(1 - tanh(z)^2);
    and in 1-D the density it defines on u = tanh(z) integrates to 1 over (-1, 1)."""
    rng = np.random.default_rng(0)
    mean, log_std = rng.normal(size=(2, 16, 3))
    z = mean + np.exp(log_std) * rng.normal(size=(16, 3)) * 2.0
    want = [np.sum(-0.5 * ((z[i] - mean[i]) / np.exp(log_std[i])) ** 2 - log_std[i] - 0.5 * np.log(2 * np.pi)
                   - np.log(1.0 - np.tanh(z[i]) ** 2)) for i in range(16)]
    got = jax.vmap(tanh_gaussian_log_prob)(*(jnp.asarray(x, jnp.float32) for x in (z, mean, log_std)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    u = np.linspace(-1.0, 1.0, 200_001)[1:-1]  # the density of u = tanh(z), z ~ N(0.3, 0.8^2)
    z1 = jnp.asarray(np.arctanh(u), jnp.float32)[:, None]
    density = np.exp(np.asarray(jax.vmap(tanh_gaussian_log_prob, in_axes=(0, None, None))(
        z1, jnp.asarray([0.3]), jnp.log(jnp.asarray([0.8])))))
    assert abs(np.sum(density) * (u[1] - u[0]) - 1.0) < 1e-3


def test_sac_targets_and_losses_match_the_papers_definitions():
    """Haarnoja et al. 2018b: y = r + gamma d (min_i Q'_i - alpha log pi) (eqs. 2-3 with twin critics),
    J_pi = alpha log pi - min_i Q_i (eq. 7), J(alpha) = -alpha (log pi + H) (eq. 18), whose gradient
    w.r.t. log alpha is -alpha (log pi + H) and w.r.t. log pi is 0."""
    rng = np.random.default_rng(1)
    r, log_pi = rng.normal(size=(2, 16)).astype(np.float32)
    d = rng.choice([0.0, 0.99], size=16).astype(np.float32)
    q = rng.normal(size=(16, 2)).astype(np.float32)
    alpha = np.float32(0.3)
    want = [r[i] + d[i] * (min(q[i]) - alpha * log_pi[i]) for i in range(16)]
    got = jax.vmap(soft_q_target, in_axes=(0, 0, 0, 0, None))(r, d, q, log_pi, alpha)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)
    got = jax.vmap(actor_loss, in_axes=(0, 0, None))(q, log_pi, alpha)
    np.testing.assert_allclose(np.asarray(got), [alpha * log_pi[i] - min(q[i]) for i in range(16)], rtol=1e-6)
    log_alpha, entropy = np.log(alpha), -2.0
    value, (g_alpha, g_pi) = jax.value_and_grad(temperature_loss, argnums=(0, 1))(log_alpha, log_pi[0], entropy)
    np.testing.assert_allclose([value, g_alpha, g_pi], [-alpha * (log_pi[0] + entropy)] * 2 + [0.0], rtol=1e-5)


def test_td3_target_matches_the_papers_definition():
    """Fujimoto et al. 2018, eqs. 10 and 14: a' = clip(mu'(s') + clip(eps, -c, c), -1, 1);
    y = r + gamma d min_i Q'_i(s', a'); the critics' loss 0.5 sum_i (Q_i - y)^2."""
    rng = np.random.default_rng(2)
    mu, noise = rng.uniform(-1, 1, size=(16, 2)), rng.normal(size=(16, 2))
    want = np.clip(mu + np.clip(noise, -0.5, 0.5), -1, 1)
    got = jax.vmap(smoothed_target_action, in_axes=(0, 0, None))(mu, noise, 0.5)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-7)
    assert np.any(np.abs(noise) > 0.5) and np.any(np.abs(mu + np.clip(noise, -0.5, 0.5)) > 1)  # both clips bind
    r, d, q = rng.normal(size=16), rng.choice([0.0, 0.9], size=16), rng.normal(size=(16, 2))
    y = jax.vmap(clipped_double_q_target)(r, d, q)
    np.testing.assert_allclose(np.asarray(y), [r[i] + d[i] * min(q[i]) for i in range(16)], rtol=1e-6, atol=1e-6)
    loss = jax.vmap(twin_q_loss)(q, y)
    np.testing.assert_allclose(np.asarray(loss), 0.5 * np.sum((q - np.asarray(y)[:, None]) ** 2, axis=1), rtol=1e-5)


# ------------------------------------------------------- configs, envs, bounds


@pytest.mark.parametrize("config_type, overrides, field", [
    (SACConfig, dict(buffer_size=0), "buffer_size"), (SACConfig, dict(warmup_steps=-1), "warmup_steps"),
    (SACConfig, dict(warmup_steps=10, buffer_size=5), "warmup_steps"), (SACConfig, dict(tau=0.0), "tau"),
    (SACConfig, dict(gamma=1.5), "gamma"), (SACConfig, dict(replay_ratio=0), "replay_ratio"),
    (SACConfig, dict(hidden_sizes=(0,)), "hidden_sizes"), (SACConfig, dict(initial_temperature=0.0),
                                                           "initial_temperature"),
    (SACConfig, dict(log_std_max=-6.0), "log_std_max"), (SACConfig, dict(learn_temperature=1), "learn_temperature"),
    (SACConfig, dict(actor_learning_rate=0), "actor_learning_rate"), (TD3Config, dict(policy_delay=0), "policy_delay"),
    (TD3Config, dict(noise_clip=-1.0), "noise_clip"), (TD3Config, dict(batch_size=0), "batch_size"),
])
def test_invalid_fields_are_named(config_type, overrides, field):
    with pytest.raises(ConfigError) as info:
        config_type(**overrides)
    assert info.value.field == field


@AGENTS
def test_discrete_and_unbounded_action_specs_are_refused_before_compiling(cpu_devices, config_type):
    name = config_type.__name__[:-6].lower()
    with pytest.raises(ConfigError, match=f"'{name}'.*continuous") as info:
        train_anakin(AnakinConfig(env="CartPole-v1", num_envs=4, rollout_length=4, total_steps=64, num_devices=1,
                                  logging=QUIET), config_type(**SMALL))
    assert info.value.field == "env" and "DiscreteArray" in str(info.value)
    unbounded = EnvSpec(specs.Array((3,), np.float32), specs.Array((2,), np.float32))
    with pytest.raises(ConfigError, match="no finite bounds") as info:
        config_type().make_agent(unbounded, 1)
    assert info.value.field == "env"


def test_actions_map_to_the_env_bounds_and_back():
    bounds = action_bounds("sac", env_spec(make("Pendulum-v1")))  # torque in [-2, 2]
    u = jnp.asarray([[-1.0], [0.0], [0.5], [1.0]])
    np.testing.assert_allclose(np.asarray(bounds.to_env(u)), [[-2.0], [0.0], [1.0], [2.0]])
    np.testing.assert_allclose(np.asarray(bounds.from_env(bounds.to_env(u))), np.asarray(u), atol=1e-7)
    box = EnvSpec(specs.Array((1,), np.float32), specs.BoundedArray((2, 2), np.float32, [[0, 1], [2, 3]], 5.0))
    bounds = action_bounds("td3", box)
    assert bounds.to_env(jnp.zeros((7, 4))).shape == (7, 2, 2)
    np.testing.assert_allclose(np.asarray(bounds.to_env(-jnp.ones((4,)))), [[0, 1], [2, 3]])


# ---------------------------------------------------------------------- update

T, B = 8, 8


def _mesh(n):
    return Mesh(np.array(jax.devices()[:n]), (DATA_AXIS,))


def _sharded_update(agent, n):
    """`agent.update` on `n` learner shards as the layouts run it (`shard_state` `[n, ...]`)."""
    return layout_update(agent, jax.devices()[:n])


def _rollout(agent, params, seed: int) -> Trajectory:
    """A `[T, B]` ReachCue rollout from `agent.act` (random cues; continuous actions in [-1, 1])."""
    keys = jax.random.split(jax.random.key(seed), 3)
    obs = jax.nn.one_hot(jax.random.randint(keys[0], (T + 1, B), 0, 4), 4)
    action, _, _ = jax.vmap(lambda o, k: agent.act(params, (), o, k))(obs[:-1], jax.random.split(keys[1], T))
    reward = 1.0 - jnp.abs(action[..., 0] - 0.3)
    ended = jax.random.bernoulli(keys[2], 0.1, (T, B))
    return Trajectory(obs[:-1], action, reward, jnp.where(ended, 0.0, 1.0), jnp.zeros((T, B), bool), obs[1:], {}, ())


def _setup(config_type, n: int):
    spec = env_spec(make("ReachCue-v0"))
    agent = config_type(**SMALL).make_agent(spec, 10)
    return agent, init_on_mesh(agent, jax.random.key(0), spec, _mesh(n))


@AGENTS
def test_warmup_acts_uniformly_then_learning_starts(cpu_devices, config_type):
    """warmup_steps 128 = two 8 x 8 updates: params say warm-up for rollouts 0 and 1 (uniform actions over
    the box, whatever the actor), no gradient step in update 0, gradient steps from update 1 on."""
    agent, state = _setup(config_type, 1)
    assert float(state.params["warmup"]) == 1.0
    obs = jax.nn.one_hot(jnp.zeros(4096, jnp.int32), 4)
    uniform = np.asarray(agent.act(state.params, (), obs, jax.random.key(1))[0])
    policy = np.asarray(agent.act({**state.params, "warmup": jnp.float32(0)}, (), obs, jax.random.key(1))[0])
    assert uniform.min() < -0.95 and uniform.max() > 0.95 and abs(uniform.mean()) < 0.05
    assert np.std(policy) < 0.5 * np.std(uniform)  # the untrained actor answers near its mean
    update = _sharded_update(agent, 1)
    warmups, learning = [], []
    for i in range(3):
        before = state.params["warmup"]
        state, metrics = update(state, _rollout(agent, state.params, i), jax.random.key(10 + i))
        warmups.append(float(before)), learning.append(float(metrics["learning"]))
        assert float(metrics["warmup"]) == warmups[-1]
    assert warmups == [1.0, 1.0, 0.0] and learning == [0.0, 1.0, 1.0]
    assert int(state.shard_state.size[0]) == 3 * T * B and float(metrics["critic_loss"]) > 0


@AGENTS
def test_update_is_deterministic_and_shard_count_invariant(cpu_devices, config_type):
    """Two updates twice with the same keys: bit-identical. Four shards that each hold the same data as
    one shard take the same steps (each samples its own buffer with the same key; gradients pmean'd)."""
    agent, state = _setup(config_type, 1)
    update = _sharded_update(agent, 1)
    runs = []
    for _ in range(2):
        s = state
        for i in range(2):
            s, metrics = update(s, _rollout(agent, s.params, i), jax.random.key(10 + i))
        runs.append((s, metrics))
    for x, y in zip(jax.tree.leaves(runs[0][0]), jax.tree.leaves(runs[1][0]), strict=True):
        np.testing.assert_array_equal(x, y)
    moved = [float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(state.params["actor"]),
                                                         jax.tree.leaves(runs[0][0].params["actor"]))]
    assert min(moved) > 0, moved  # every actor leaf learned
    agent4, state4 = _setup(config_type, 4)
    update4 = _sharded_update(agent4, 4)
    for i in range(2):
        traj = _rollout(agent, state4.params, i)
        state4, metrics4 = update4(state4, jax.tree.map(lambda x: jnp.concatenate([x] * 4, axis=1), traj),
                                   jax.random.key(10 + i))
    for x, y in zip(jax.tree.leaves(state4.params), jax.tree.leaves(runs[0][0].params), strict=True):
        np.testing.assert_allclose(x, y, atol=1e-5, rtol=0)
    for name, value in runs[0][1].items():
        np.testing.assert_allclose(metrics4[name], value, rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.timeout(300)
@AGENTS
def test_anakin_stop_resume_with_the_buffer_is_bit_identical(tmp_path, cpu_devices, config_type):
    """Two learner devices (two buffers), 10 updates of 8 envs x 16 steps (64 transitions per shard each;
    warm-up 128: learning from update 1): stopped after 4 updates and resumed, the run ends bit-identical
    to an uninterrupted one: buffers, critics, targets (TD3: the actor's too), SAC's temperature, Adam
    states, the gradient-step count (TD3's policy_delay phase), envs and keys."""
    agent = config_type(**SMALL)

    def reach(name, **checkpoint):
        return dataclasses.replace(checkpointed_anakin(tmp_path, name, **checkpoint), env="ReachCue-v0")

    whole = train_anakin(reach("whole"), agent)
    train_anakin(reach("part", stop_after_updates=4), agent)
    rest = train_anakin(reach("rest", resume=str(tmp_path / "part")), agent)
    assert float(rest.history[-1]["train/learning"][0]) == 1.0
    assert int(rest.state.train_state.shard_state.size[0, 1]) == 10 * 64  # holds the first run's transitions
    # updates 1..9 took 4 gradient steps each (64 items x replay_ratio 1/16): the count went on from the checkpoint
    assert int(np.asarray(rest.state.train_state.opt_state.sgd_steps).ravel()[0]) == 9 * 4
    for a, b in zip(leaves(whole.state), leaves(rest.state), strict=True):
        np.testing.assert_array_equal(a, b)


# -------------------------------------------------------------------- learning

REACH_CASES = pytest.mark.parametrize("agent_config, threshold", [
    (SACConfig(**REACH), REACH_THRESHOLDS["sac"]), (TD3Config(**REACH_TD3), REACH_THRESHOLDS["td3"])],
    ids=["sac", "td3"])


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.timeout(300)
@REACH_CASES
def test_agents_learn_reach_cue_through_anakin(cpu_devices, agent_config, threshold):
    """ReachCue-v0 (a 1-D action in [-1, 1] must hit the cue's target; optimum 16), 8 envs x 8 steps per
    update, one device, 4096 steps (~30 s on 2 cores); the untrained greedy policy returns ~5.3."""
    config = AnakinConfig(env="ReachCue-v0", num_envs=8, rollout_length=8, total_steps=4096, num_devices=1,
                          updates_per_call=64, eval_every=0, eval_episodes=32, logging=QUIET)
    initial = float(anakin_initial_return(config, agent_config, cpu_devices[:1])[0])
    result = train_anakin(config, agent_config)
    assert initial <= 7.0 and result.final_eval_return[0] >= threshold, (initial, result.final_eval_return)
