"""A dict-observation env learned in both layouts (a recurrent core in Anakin, a replay agent in Sebulba) and
resumed bit for bit with its dict observations in the replay buffer.

`DictCue-v0` (`podrl.envs.tiny`): `{"image": uint8 [4, 4, 1], "noise": float32 [2]}`; only the image tells
the cue (its lit quadrant), the noise leaf is a distractor. Optimum 16; an untrained greedy policy maps each
cue to one fixed action (about 4). The torso reads the image with the MinAtar CNN (pixels scaled inside) and
the noise with an MLP (`podrl.agents.inputs`).
"""

from __future__ import annotations

import numpy as np
import pytest

from checkpoints import leaves, logs
from podrl.agents.dqn import DQNConfig
from podrl.agents.ppo import PPOConfig
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.cli.evaluate import evaluate_checkpoint
from podrl.run.config import CheckpointConfig, LoggingConfig
from podrl.sebulba import SebulbaConfig, train_sebulba
from untrained import anakin_initial_return, sebulba_initial_return

QUIET = LoggingConfig(run_dir=None, console=False, tensorboard=False)

RECURRENT = PPOConfig(core="lstm", core_size=32, learning_rate=1e-2, num_minibatches=2)
"""PPO with an LSTM core on DictCue (seed 0, 2026-12-08: greedy 12.75, 15.81 after 8 and 16 updates)."""

REPLAY = DQNConfig(buffer_size=4096, min_fill=256, batch_size=32, replay_ratio=0.125, learning_rate=1e-3,
                   epsilon_decay_fraction=0.3, target_update_period=1, target_tau=0.05)
"""DQN on DictCue through the JAX host adapter (seed 0, 2026-12-08: greedy 16.0 after 25 updates of 8 x 8)."""


@pytest.mark.learning
@pytest.mark.timeout(300)
def test_a_recurrent_ppo_learns_the_dict_cue_through_anakin(cpu_devices):
    """8 envs x 16 steps per update, one device, evaluated (16 greedy episodes) every 8 updates, stopping at
    the first evaluation of 14 or more within 48 updates; the untrained greedy policy is measured first."""
    config = AnakinConfig(env="DictCue-v0", num_envs=8, rollout_length=16, total_steps=8 * 16 * 48, num_devices=1,
                          updates_per_call=8, eval_every=8, eval_episodes=16, stop_at_return=14.0, logging=QUIET)
    initial = float(anakin_initial_return(config, RECURRENT, cpu_devices[:1])[0])
    assert initial <= 8.0, initial
    result = train_anakin(config, RECURRENT)
    assert result.final_eval_return[0] >= 14.0, (initial, [r.get("eval_return") for r in result.history])


@pytest.mark.learning
@pytest.mark.timeout(300)
def test_dqn_learns_the_dict_cue_under_sebulba(cpu_devices):
    """`jax:DictCue-v0` on the host, 1 actor device, 1 learner device, lag 1, 8 envs x 8 steps per update,
    evaluated every 25 updates, stopping at the first evaluation of 15 or more within 200 updates."""
    initial = sebulba_initial_return(REPLAY, "jax:DictCue-v0")
    assert initial <= 8.0, initial
    config = SebulbaConfig(env="jax:DictCue-v0", total_steps=8 * 8 * 200, envs_per_thread=8, rollout_length=8, lag="1",
                           actor_devices=(0,), learner_devices=(1,), log_every=25, eval_every=25, eval_episodes=16,
                           stop_at_return=15.0, logging=QUIET)
    result = train_sebulba(config, REPLAY)
    assert result.final_eval_return >= 15.0, (initial, [r.get("eval_return") for r in result.history])


@pytest.mark.timeout(300)
def test_anakin_resume_with_dict_observations_in_the_replay_is_bit_identical(tmp_path, cpu_devices):
    """DQN on DictCue stopped after 4 of 8 updates and resumed equals the uninterrupted run leaf by leaf: its
    replay buffer (a dict of image and noise leaves, for o_t and o_{t+n}) among the leaves, and not empty;
    `podrl evaluate` then plays the checkpoint's greedy policy."""
    agent = DQNConfig(buffer_size=512, min_fill=64, batch_size=16, replay_ratio=1 / 16, hidden_sizes=(16,))

    def config(name, **checkpoint):
        return AnakinConfig(env="DictCue-v0", num_envs=8, rollout_length=8, total_steps=8 * 8 * 8, num_devices=1,
                            updates_per_call=2, eval_every=0, eval_episodes=4, logging=logs(tmp_path, name),
                            checkpoint=CheckpointConfig(**checkpoint))

    whole = train_anakin(config("whole"), agent)
    first = train_anakin(config("part", stop_after_updates=4), agent)
    assert first.stopped_by == "stop_after_updates"
    rest = train_anakin(config("rest", resume=str(tmp_path / "part")), agent)
    assert int(np.asarray(rest.state.train_state.update_step)[0]) == 8
    buffer = rest.state.train_state.shard_state
    assert set(buffer.data.observation) == {"image", "noise"} and int(np.asarray(buffer.size).max()) == 8 * 8 * 8
    assert np.asarray(buffer.data.next_observation["image"]).max() == 255
    for a, b in zip(leaves(whole.state), leaves(rest.state), strict=True):
        np.testing.assert_array_equal(a, b)
    # `podrl evaluate` rebuilds the agent for the dict spec and plays greedy episodes from the checkpoint
    summary = evaluate_checkpoint(str(tmp_path / "part"), episodes=4, max_steps=40)
    assert summary["step"] == 8 and summary["finished"] == 4 and len(summary["returns"]) == 4


@pytest.mark.timeout(300)
def test_blackjack_tuple_observations_train_and_evaluate_under_sebulba(cpu_devices):
    """gymnasium's Blackjack-v1 (a Tuple of three Discretes: three embedded int32 leaves) through Sebulba's actors,
    learner and greedy evaluation."""
    config = SebulbaConfig(env="Blackjack-v1", total_steps=8 * 8 * 2, envs_per_thread=8, rollout_length=8,
                           actor_devices=(0,), learner_devices=(1,), eval_episodes=8, logging=QUIET)
    result = train_sebulba(config, PPOConfig(num_minibatches=2, hidden_sizes=(16,)))
    embedding = result.train_state.params["params"]["actor"]["torso"]["input_0"]["embedding"]
    assert np.asarray(embedding).shape == (32, 16)
    assert -1.0 <= result.final_eval_return <= 1.0 and result.env_steps == 8 * 8 * 2
