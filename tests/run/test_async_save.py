"""Asynchronous saves (podrl/run/checkpoint.py): `save` returns before the step is on disk, and a save
in flight holds its own copy of the state, so the next compiled call may donate every buffer."""

from __future__ import annotations

import numpy as np
import pytest

from checkpoints import anakin, leaves
from podrl.agents.dqn import DQNConfig
from podrl.anakin.setup import build
from podrl.run.checkpoint import Checkpointer, RunCheckpoints
from podrl.run.config import CheckpointConfig


@pytest.mark.timeout(300)
def test_a_save_in_flight_keeps_the_state_the_next_call_donates(tmp_path, cpu_devices):
    """Anakin donates its whole state (DQN's replay buffers included) to the train call; the call runs
    while the save is in flight and the checkpoint still holds the state from before it."""
    config = anakin(tmp_path, "r")
    compiled = build(config, DQNConfig(buffer_size=1024, min_fill=64, batch_size=32, replay_ratio=1 / 16)).compiled
    state = compiled.init()
    compiled.compile(state)
    state, _ = compiled.train_call(state, 0)  # something in the buffers
    before = leaves(state)
    checkpoints = RunCheckpoints(CheckpointConfig(), str(tmp_path / "run"), {"note": "async"})
    checkpoints.save(3, state, state.train_state.params)
    assert checkpoints.in_flight == 3 and checkpoints.last_saved is None  # not known to be on disk yet
    after, _ = compiled.train_call(state, 3)  # donates `state`
    after_leaves = leaves(after)
    checkpoints.close()  # waits for the save
    assert checkpoints.last_saved == 3 and checkpoints.describe_last().startswith("last good checkpoint: update 3")
    assert any(not np.array_equal(a, b) for a, b in zip(before, after_leaves))  # the call changed the state
    restored = Checkpointer(checkpoints.directory, read_only=True).restore_state(after, 3)
    for a, b in zip(before, leaves(restored), strict=True):
        np.testing.assert_array_equal(a, b)
