"""Sebulba's pipeline in one small run (2 actor threads x 2 env groups, lag 1), checked by what it records,
not by learning: each rollout's buffer goes back to its actor thread only after the learner step that
read it has run and its params are published (on CPU the learner's arrays alias the buffer), and every
env group's actor state is made for its own global env columns (an agent whose actors differ by column,
R2D2's Ape-X epsilons, depends on it; across hosts: tests/system/test_multihost.py)."""

from __future__ import annotations

import pytest

from multihost_worker import recording_columns
from parity import sebulba_threads, tiny
from podrl.agents.ppo import PPOConfig
from podrl.sebulba import train_sebulba
from podrl.sebulba.learner import LearnerStep
from podrl.sebulba.params import ParamsSource
from podrl.sebulba.rollout import ActorPool


@pytest.mark.timeout(240)
def test_buffers_go_back_after_their_learner_step_and_groups_get_their_own_columns(monkeypatch, cpu_devices):
    events: list[tuple[str, int]] = []
    checked, publish, recycle = LearnerStep.checked, ParamsSource.publish, ActorPool.recycle

    def record_step(self, train_state, keys, index, *pieces):
        out = checked(self, train_state, keys, index, *pieces)
        events.append(("step", int(index)))
        return out

    def record_publish(self, params, version):
        publish(self, params, version)
        events.append(("published", version))

    def record_recycle(self, rollouts):
        assert len({r.index for r in rollouts}) == 1
        events.append(("recycled", rollouts[0].index))
        recycle(self, rollouts)

    monkeypatch.setattr(LearnerStep, "checked", record_step)
    monkeypatch.setattr(ParamsSource, "publish", record_publish)
    monkeypatch.setattr(ActorPool, "recycle", record_recycle)
    columns: list[tuple[list[int], int]] = []
    config = tiny(threads_per_actor_device=2, env_groups=2, envs_per_thread=4, lag="1", eval_episodes=0,
                  learner_devices=(1,))
    train_sebulba(config, recording_columns(PPOConfig(num_minibatches=2, hidden_sizes=(8,)), columns))
    assert not sebulba_threads()
    updates = config.num_updates
    assert events[0] == ("published", 0)  # the initial params
    for i in range(updates):
        order = [events.index(e) for e in (("step", i), ("published", i + 1), ("recycled", i))]
        assert order == sorted(order), (i, events)
    assert sorted(columns) == [([0, 1], 8), ([2, 3], 8), ([4, 5], 8), ([6, 7], 8)]
