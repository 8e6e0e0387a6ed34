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
