"""Recurrent cores (podrl.agents.cores, podrl.agents.unroll): the learner's re-unroll against the actor's
states, Anakin/Sebulba parity, config refusals, and the memory task only a core solves."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrl.envs
from parity import anakin_sebulba_params, max_diffs
from podrl.agents.impala import ImpalaConfig
from podrl.agents.networks import make_network
from podrl.agents.ppo import PPOConfig
from podrl.agents.unroll import trajectory_outputs, unroll
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.anakin.rollout import reset_batch, rollout
from podrl.core.errors import ConfigError
from podrl.envs.tiny import RecallCue
from podrl.envs.types import LAST
from podrl.envs.wrappers import TimeLimit, wrap_for_training
from podrl.run.config import LoggingConfig

QUIET = LoggingConfig(run_dir=None, console=False)


def recording(agent):
    """`agent` whose `act` also returns the core state it was given ("carry") and the one it
    made ("next_carry", before the layout's reset) as extras `[B, ...]`."""

    def act(params, actor_state, observation, key):
        action, extras, next_state = agent.act(params, actor_state, observation, key)
        return action, {**extras, "carry": actor_state, "next_carry": next_state}, next_state

    return agent._replace(act=act)


def close(a, b, atol=1e-6) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol, rtol=0)


@pytest.mark.parametrize("core", ["lstm", "gru"])
def test_learner_unroll_recomputes_the_actors_core_states(core):
    """CartPole cut at 12 steps: a random-ish policy's episodes both terminate (pole falls)
    and truncate inside each 40-step rollout. The second rollout starts from a carried,
    non-zero state. The learner's re-unroll must give the state the actor used at every
    step, the actor's values, and bootstrap values equal to the core applied to the state
    after step t and next_observation[t]."""
    T, B = 40, 6
    env = TimeLimit(podrl.envs.make("CartPole-v1"), 12)
    spec = podrl.envs.env_spec(env)
    config = PPOConfig(core=core, core_size=16)
    agent = recording(config.make_agent(spec, 1))
    network = make_network(spec, config.hidden_sizes, config.activation, config.torso, None, core, 16)
    params = agent.init(jax.random.key(1), spec).params
    acting = reset_batch(wrap_for_training(env), agent, jax.random.split(jax.random.key(2), B))
    run = jax.jit(lambda s, k: rollout(agent, wrap_for_training(env), params, s, k, T))
    acting, _, _ = run(acting, jax.random.key(3))
    _, traj, _ = run(acting, jax.random.key(4))

    terminated, truncated = np.asarray(traj.discount == 0), np.asarray(traj.truncated)
    assert terminated[:-1].any() and truncated[:-1].any(), "the rollout must cross both kinds of episode end"
    assert np.abs(np.asarray(jax.tree.leaves(traj.actor_state)[0])).max() > 1e-2  # carried in, not zeros

    rolled = jax.jit(lambda p, t: unroll(network, p, t.actor_state, t.observation, t.episode_end))(params, traj)
    close(rolled.carry, traj.agent_extras["carry"])
    close(rolled.next_carry, traj.agent_extras["next_carry"])
    close(rolled.value, traj.agent_extras["value"])
    _, _, next_value = jax.jit(lambda p, t: trajectory_outputs(network, p, t))(params, traj)
    flat = lambda x: x.reshape((T * B,) + x.shape[2:])  # noqa: E731
    # the act path (not the learner's): value of next_observation[t] seen with the actor's state after step t
    after_step = jax.tree.map(flat, traj.agent_extras["next_carry"])
    expected = network.apply(params, flat(traj.next_observation), after_step)[1]
    close(next_value, expected.reshape(T, B))
    value = np.asarray(traj.agent_extras["value"])
    going_on = ~np.asarray(traj.episode_end)[:-1]
    np.testing.assert_allclose(np.asarray(next_value)[:-1][going_on], value[1:][going_on], atol=1e-6, rtol=0)

    # The check can fail: an unroll that ignores episode ends does not reproduce the actor.
    no_resets = unroll(network, params, traj.actor_state, traj.observation, jnp.zeros_like(traj.episode_end))
    gaps = [np.abs(np.asarray(a) - np.asarray(b)).max()
            for a, b in zip(jax.tree.leaves(no_resets.carry), jax.tree.leaves(traj.agent_extras["carry"]))]
    assert max(gaps) > 1e-3


@pytest.mark.parametrize("core", ["none", "lstm"])
def test_bootstrap_values_from_the_shifted_unroll_equal_those_of_next_observation(core):
    """IMPALA's `trajectory_outputs` takes step t's bootstrap from the value at t+1 when no
    episode is truncated before the last step (`shifted_bootstrap`). On CartPole rollouts that
    terminate inside (pole falls) but never truncate (500-step limit), it must equal
    V(next_observation[t]) computed directly wherever the episode goes on and at the last step;
    at a terminated step (discount 0) it is the reset observation's value, which differs."""
    T, B = 40, 6
    spec = podrl.envs.env_spec(podrl.envs.make("CartPole-v1"))
    config = ImpalaConfig(core=core, core_size=16)
    agent = config.make_agent(spec, 1)
    network = make_network(spec, config.hidden_sizes, config.activation, config.torso, None, core, 16)
    params = agent.init(jax.random.key(5), spec).params
    env = wrap_for_training(podrl.envs.make("CartPole-v1"))
    acting = reset_batch(env, agent, jax.random.split(jax.random.key(6), B))
    run = jax.jit(lambda s, k: rollout(agent, env, params, s, k, T))
    acting, _, _ = run(acting, jax.random.key(7))
    _, traj, _ = run(acting, jax.random.key(8))
    terminated = np.asarray(traj.discount == 0)
    assert terminated[:-1].any() and not np.asarray(traj.truncated)[:-1].any()

    _, value, next_value = jax.jit(lambda p, t: trajectory_outputs(network, p, t))(params, traj)
    flat = lambda x: x.reshape((T * B,) + x.shape[2:])  # noqa: E731
    if core == "none":
        direct = network.apply(params, flat(traj.next_observation), method=type(network).value)
    else:
        rolled = unroll(network, params, traj.actor_state, traj.observation, traj.episode_end)
        direct = network.apply(params, flat(traj.next_observation), jax.tree.map(flat, rolled.next_carry))[1]
    direct = np.asarray(direct).reshape(T, B)
    next_value = np.asarray(next_value)
    going_on = ~terminated
    np.testing.assert_allclose(next_value[going_on], direct[going_on], atol=1e-5, rtol=0)
    np.testing.assert_allclose(next_value[-1], direct[-1], atol=1e-5, rtol=0)
    np.testing.assert_allclose(next_value[:-1], np.asarray(value)[1:], atol=0, rtol=0)  # the shifted branch ran
    assert np.abs(next_value[terminated] - direct[terminated]).max() > 1e-4


@pytest.mark.timeout(300)
@pytest.mark.parametrize("agent_config", [
    PPOConfig(core="lstm", core_size=32, num_minibatches=2),
    ImpalaConfig(core="gru", core_size=32, num_minibatches=2),
], ids=["ppo-lstm", "impala-gru"])
def test_recurrent_parity_with_anakin_same_seed(cpu_devices, agent_config):
    """As `test_sebulba.test_parity_with_anakin_same_seed` (lag 0, one actor thread, JAX
    CartPole through the host adapter): the Sebulba actor carries, resets and ships the core
    state as Anakin's rollout does, so both learners re-unroll the same states."""
    anakin, sebulba, init = anakin_sebulba_params(agent_config)
    assert max(max_diffs(anakin, sebulba)) < 1e-6, max_diffs(anakin, sebulba)
    assert max(max_diffs(anakin, init)) > 1e-3


def test_configs_refuse_bad_cores():
    for config in (PPOConfig, ImpalaConfig):
        with pytest.raises(ConfigError) as info:
            config(core="rnn")
        assert info.value.field == "core" and "'rnn'" in str(info.value)
        for size in (0, -4, 1.5):
            with pytest.raises(ConfigError) as info:
                config(core="lstm", core_size=size)
            assert info.value.field == "core_size"
        with pytest.raises(ConfigError) as info:
            config(core="gru", shared_torso=False)
        assert info.value.field == "shared_torso"
        config(core="gru", shared_torso=True)  # fine


def test_recurrent_ppo_minibatches_whole_env_columns():
    """With a core num_minibatches must divide the envs per shard (never time); without one,
    the T * B transitions."""
    run = AnakinConfig(env="RecallCue-v0", num_envs=12, rollout_length=16, logging=QUIET)
    with pytest.raises(ConfigError) as info:
        run.check_layout(2, PPOConfig(core="lstm", num_minibatches=4))
    assert info.value.field == "num_minibatches" and "6 envs per shard" in str(info.value)
    run.check_layout(2, PPOConfig(num_minibatches=4))  # feed-forward: 16 * 6 = 96 transitions split
    run.check_layout(2, PPOConfig(core="lstm", num_minibatches=3))


@pytest.mark.parametrize("num_cues, delay", [(2, 4), (3, 0)])
def test_recall_cue_pays_only_for_remembering(num_cues, delay):
    """The cue is visible at step 0 only, the query at step delay + 1, the episode ends after
    the answer; answering from memory scores 1, a fixed answer scores chance (2 / num_cues - 1)."""
    env, n = RecallCue(num_cues, delay), 3000

    def episode(key, remember: bool):
        state, ts = env.reset(key)
        cue = jnp.argmax(ts.observation[:num_cues])  # read once, at step 0
        seen, total, types = [ts.observation], 0.0, []
        for _ in range(delay + 2):
            state, ts = env.step(state, jnp.where(remember, cue, 0))
            seen.append(ts.observation)
            total, types = total + ts.reward, types + [ts.step_type]
        return total, jnp.stack(seen), jnp.stack(types), cue

    run = jax.jit(jax.vmap(episode, in_axes=(0, None)), static_argnums=1)
    keys = jax.random.split(jax.random.key(0), n)
    remembered, seen, types, cue = run(keys, True)
    np.testing.assert_array_equal(remembered, 1.0)
    assert abs(float(run(keys, False)[0].mean()) - env.chance_return) < 0.05
    np.testing.assert_array_equal(seen[:, 0, :num_cues], jax.nn.one_hot(cue, num_cues))
    assert not np.asarray(seen[:, 1:, :num_cues]).any()  # the cue is never shown again
    np.testing.assert_array_equal(seen[:, :, -1].mean(0), np.eye(delay + 3)[delay + 1])  # query at delay + 1
    assert (np.asarray(types[:, -1]) == LAST).all() and (np.asarray(types[:, :-1]) != LAST).all()


@pytest.mark.learning
@pytest.mark.timeout(300)
def test_only_a_recurrent_core_solves_the_memory_task(cpu_devices):
    """RecallCue-v0 (2 cues, delay 4): chance is 0 for any memoryless policy (+1 right, -1
    wrong); remembering scores 1. Same PPO, budget and seed, with and without an LSTM core.
    The greedy evaluation averages 64 episodes of +-1, so a memoryless policy scores 0 +- 0.125
    (one std). Measured (this budget, greedy over 256 episodes, seeds 0-2): uniformly random
    policy -0.01 (10,000 episodes), feed-forward -0.03 / -0.02 / +0.04, LSTM and GRU 1.0 on
    every seed (LSTM solved by ~20 updates). Without updates the LSTM scores 0.0, so it is the
    recurrent threshold, not the feed-forward bound, that the no-update check trips."""
    assert RecallCue().chance_return == 0.0
    run = AnakinConfig(env="RecallCue-v0", num_envs=32, rollout_length=16, total_steps=32 * 16 * 40,
                       num_devices=1, updates_per_call=10, eval_every=0, eval_episodes=64, logging=QUIET)
    ppo = dict(learning_rate=1e-3, num_minibatches=4, core_size=64)
    feed_forward = train_anakin(run, PPOConfig(**ppo))
    assert abs(float(feed_forward.final_eval_return[0])) < 0.5, feed_forward.final_eval_return
    lstm = train_anakin(run, PPOConfig(core="lstm", **ppo))
    assert float(lstm.final_eval_return[0]) >= 0.9, lstm.final_eval_return
