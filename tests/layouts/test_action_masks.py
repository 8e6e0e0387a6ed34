"""Legal-action masks through both layouts: every discrete agent, acting and in greedy evaluation, never takes an
illegal action of `MaskedCue-v0`; an observation to act on whose mask allows nothing stops the run naming the env.

MaskedCue (`podrl.envs.tiny`) ends an episode at its first illegal action (which pays the most, 2), so every
finished episode lasts its full 16 steps exactly when no illegal action was taken: the layouts' mean episode
length and the greedy episodes' lengths are the count. An agent that ignored the mask would take one within a
few steps (half the actions are illegal at each step).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import podrl.envs
from podrl.agents.dqn import DQNConfig
from podrl.agents.impala import ImpalaConfig
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.ppo import PPOConfig
from podrl.agents.pqn import PQNConfig
from podrl.agents.r2d2 import R2D2Config
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.core.errors import NoLegalActionError
from podrl.core.finite import check_evaluation
from podrl.envs.adapters.jax_host import JaxHostVectorEnv
from podrl.envs.tiny import MaskedCue
from podrl.run.config import LoggingConfig
from podrl.run.evaluation import evaluate_greedy, evaluate_host_greedy
from podrl.sebulba import SebulbaConfig, train_sebulba

QUIET = LoggingConfig(run_dir=None, console=False, tensorboard=False)
LENGTH, ENVS, STEPS, UPDATES = 16, 8, 16, 3
SMALL = dict(hidden_sizes=(16,))
AGENTS = {
    "ppo": PPOConfig(num_minibatches=2, **SMALL),
    "impala": ImpalaConfig(num_minibatches=2, **SMALL),
    "pqn": PQNConfig(num_minibatches=2, **SMALL),
    "dqn": DQNConfig(buffer_size=512, min_fill=64, batch_size=16, replay_ratio=1 / 16, **SMALL),
    "r2d2": R2D2Config(burn_in=2, sequence_length=4, buffer_size=512, min_fill=128, batch_size=4, replay_ratio=1 / 64,
                       core_size=16, **SMALL),
    "muzero": MuZeroConfig(num_simulations=4, unroll_steps=2, td_steps=2, latent_size=16, dynamics_sizes=(16,),
                           prediction_sizes=(16,), buffer_size=512, min_fill=128, batch_size=8, replay_ratio=1 / 64,
                           **SMALL),
}
SPEC = podrl.envs.env_spec(podrl.envs.make("MaskedCue-v0"))


def assert_full_episodes(history: list[dict], layout: str) -> None:
    """Every record's finished episodes lasted LENGTH steps (none ended on an illegal action)."""
    lengths = [record["episode_length"] for record in history if record.get("episode_length") is not None]
    lengths = [float(np.asarray(x).reshape(-1)[0]) for x in lengths]
    assert lengths and all(x == LENGTH for x in lengths), (layout, lengths)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(AGENTS))
def test_no_illegal_action_through_anakin(cpu_devices, name):
    config = AnakinConfig(env="MaskedCue-v0", num_envs=ENVS, rollout_length=STEPS, total_steps=ENVS * STEPS * UPDATES,
                          num_devices=1, updates_per_call=UPDATES, eval_episodes=0, logging=QUIET)
    result = train_anakin(config, AGENTS[name])
    assert_full_episodes(result.history, "anakin")
    agent = AGENTS[name].make_agent(SPEC, config.num_updates)
    params = jax.tree.map(lambda x: x[0], result.state.train_state.params)
    keys = jax.random.split(jax.random.key(3), 16)
    greedy = jax.jit(lambda p: evaluate_greedy(agent, podrl.envs.make("MaskedCue-v0"), p, keys, 2 * LENGTH))(params)
    assert np.asarray(greedy.finished).all()
    np.testing.assert_array_equal(greedy.lengths, LENGTH)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(AGENTS))
def test_no_illegal_action_under_sebulba(cpu_devices, name):
    config = SebulbaConfig(env="jax:MaskedCue-v0", envs_per_thread=ENVS, rollout_length=STEPS,
                           total_steps=ENVS * STEPS * UPDATES, actor_devices=(0,), learner_devices=(1,), lag="1",
                           log_every=1, eval_episodes=0, logging=QUIET)
    result = train_sebulba(config, AGENTS[name])
    assert_full_episodes(result.history, "sebulba")
    agent = AGENTS[name].make_agent(SPEC, config.num_updates)
    env = JaxHostVectorEnv(podrl.envs.make("MaskedCue-v0"), 16)
    greedy = evaluate_host_greedy(agent, jax.device_get(result.train_state.params), env, seed=3, max_steps=2 * LENGTH)
    assert np.asarray(greedy.finished).all()
    np.testing.assert_array_equal(greedy.lengths, LENGTH)


class DeadEndCue(MaskedCue):
    """MaskedCue whose observations allow no action from the 4th step of an episode on (the env's bug)."""

    def step(self, state, action):
        state, ts = super().step(state, action)
        dead = state.t >= 3
        return state, ts._replace(observation={**ts.observation,
                                               "action_mask": ts.observation["action_mask"] & ~dead})


@pytest.mark.timeout(300)
def test_an_observation_without_a_legal_action_stops_the_run_naming_the_env(cpu_devices):
    small = PPOConfig(num_minibatches=2, **SMALL)
    anakin = AnakinConfig(env="test_action_masks:DeadEndCue", num_envs=ENVS, rollout_length=STEPS,
                          total_steps=ENVS * STEPS * 2, num_devices=1, updates_per_call=1, eval_episodes=0,
                          logging=QUIET)
    with pytest.raises(NoLegalActionError) as info:
        train_anakin(anakin, small)
    message = str(info.value)
    assert "env test_action_masks:DeadEndCue" in message and "update 0" in message, message
    assert "action_mask allows no action" in message
    sebulba = SebulbaConfig(env="jax:test_action_masks:DeadEndCue", envs_per_thread=ENVS, rollout_length=STEPS,
                            total_steps=ENVS * STEPS * 2, actor_devices=(0,), learner_devices=(1,), lag="0",
                            eval_episodes=0, logging=QUIET)
    with pytest.raises(NoLegalActionError, match=r"update 0 \(actor thread 0\)"):
        train_sebulba(sebulba, small)


def test_greedy_evaluation_flags_an_observation_without_a_legal_action(cpu_devices):
    """Both evaluation loops flag each episode that reached an all-False mask (DeadEndCue: every episode, at its
    4th step, since the masked greedy policy never ends one earlier) and no MaskedCue episode; the layouts'
    check turns a flag into NoLegalActionError naming the env and the update."""
    agent = AGENTS["ppo"].make_agent(SPEC, 1)
    params = agent.init(jax.random.key(0), SPEC).params
    keys = jax.random.split(jax.random.key(3), 4)
    for env, expected in ((MaskedCue(), False), (DeadEndCue(), True)):
        greedy = jax.jit(lambda p, e=env: evaluate_greedy(agent, e, p, keys, 2 * LENGTH))(params)
        np.testing.assert_array_equal(greedy.no_legal, expected)
        host = evaluate_host_greedy(agent, params, JaxHostVectorEnv(env, 4), seed=3, max_steps=2 * LENGTH)
        np.testing.assert_array_equal(host.no_legal, expected)
    check_evaluation(0, 0, 4, 7, no_legal=np.zeros(2), env="MaskedCue-v0")
    with pytest.raises(NoLegalActionError, match=r"env my:DeadEnd .* in 3 of 4 episode\(s\) of the evaluation after "
                                                 r"update 7"):
        check_evaluation(0, 0, 4, 7, no_legal=np.array([0, 3]), env="my:DeadEnd")


@pytest.mark.timeout(300)
def test_anakin_evaluation_counts_each_members_episodes_without_a_legal_action(cpu_devices):
    """The Anakin evaluation program returns, per member, how many of its episodes met an all-False mask."""
    from podrl.anakin.compiled import AnakinCompiled
    from podrl.core.mesh import data_mesh

    config = AnakinConfig(env="MaskedCue-v0", num_envs=ENVS, rollout_length=STEPS, total_steps=ENVS * STEPS,
                          num_devices=2, num_seeds=2, eval_episodes=4, eval_max_steps=2 * LENGTH, logging=QUIET)
    agent = AGENTS["ppo"].make_agent(SPEC, config.num_updates)
    for env, expected in ((MaskedCue(), 0), (DeadEndCue(), 4)):
        program = AnakinCompiled(agent, env, config, data_mesh(cpu_devices[:2]), SPEC)
        returns, bad_reward, bad_observation, no_legal = program.evaluate_params(
            program.init().train_state.params, 5)
        np.testing.assert_array_equal(no_legal, [expected, expected])
        np.testing.assert_array_equal(bad_reward + bad_observation, 0)


@pytest.mark.timeout(300)
def test_podrl_evaluate_plays_only_legal_actions_and_names_an_env_without_one(tmp_path, cpu_devices):
    """`podrl evaluate` on a MaskedCue checkpoint: every greedy episode lasts its 16 steps (no illegal action
    ended one); the same checkpoint on DeadEndCue (same spec, no legal action from step 4) is NoLegalActionError
    naming that env, and the command exits 2 with the sentence."""
    from checkpoints import logs
    from podrl.cli.evaluate import evaluate_checkpoint, main

    config = AnakinConfig(env="MaskedCue-v0", num_envs=ENVS, rollout_length=STEPS, total_steps=ENVS * STEPS,
                          num_devices=1, eval_episodes=0, logging=logs(tmp_path, "run"))
    train_anakin(config, AGENTS["ppo"])
    summary = evaluate_checkpoint(str(tmp_path / "run"), episodes=6, max_steps=2 * LENGTH)
    assert summary["finished"] == 6 and summary["env"] == "MaskedCue-v0"
    with pytest.raises(NoLegalActionError, match=r"env test_action_masks:DeadEndCue .* in 6 of 6 episode"):
        evaluate_checkpoint(str(tmp_path / "run"), env="test_action_masks:DeadEndCue", episodes=6,
                            max_steps=2 * LENGTH)
    assert main([str(tmp_path / "run"), "--env", "test_action_masks:DeadEndCue", "--episodes", "2"]) == 2
