"""A Sebulba resume with lag 1 (Cleanba's one-version lag), not a learning test: the first resumed rollout
acts with the restored params (version `start`: there is no version start - 1 to wait for), the next one
lags by one; and the env-step count goes on from the checkpoint's own, here one written as a 2-process
run writes it (its topology: 2 processes and twice this process's steps), so the count continues exactly
across a change of process count."""

from __future__ import annotations

import json

import pytest

from parity import sebulba_threads, tiny
from podrl.agents.ppo import PPOConfig
from podrl.run.config import CheckpointConfig
from podrl.sebulba import train_sebulba

AGENT = PPOConfig(num_minibatches=2, hidden_sizes=(8,))


@pytest.mark.timeout(240)
def test_a_lag_1_resume_starts_from_the_restored_params_and_continues_the_step_count(tmp_path, cpu_devices):
    folder = tmp_path / "checkpoints"
    config = lambda **kw: tiny(lag="1", eval_episodes=0, learner_devices=(1,), log_every=1, timeout_s=15.0, **kw)  # noqa: E731
    first = train_sebulba(config(checkpoint=CheckpointConfig(directory=str(folder), stop_after_updates=3)), AGENT)
    per_update = 4 * 8  # one thread of 4 envs x 8 steps
    assert [(r["step"], r["policy_lag_mean"]) for r in first.history] == [(32, 0.0), (64, 1.0), (96, 1.0)]
    saved = folder / "3" / "config" / "metadata"
    written = json.loads(saved.read_text())
    assert written["topology"]["processes"] == 1 and written["topology"]["env_steps"] == 3 * per_update
    written["topology"].update(processes=2, env_steps=2 * 3 * per_update)  # as 2 processes would have saved it
    saved.write_text(json.dumps(written))

    rest = train_sebulba(config(checkpoint=CheckpointConfig(directory=str(folder), resume=str(folder),
                                                            stop_after_updates=2)), AGENT)
    assert [r["updates"] for r in rest.history] == [4, 5]
    assert [r["policy_lag_mean"] for r in rest.history] == [0.0, 1.0]  # version 3 (restored) for rollouts 3, 4
    assert [r["step"] for r in rest.history] == [6 * per_update + per_update, 6 * per_update + 2 * per_update]
    assert not sebulba_threads()
