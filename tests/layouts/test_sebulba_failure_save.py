"""A Sebulba failure that lands while the learner step holds the train state's donated replay (a second
Ctrl-C while the main thread waits for the step, here raised where it publishes the step's params):
the user gets that interrupt, and the checkpoint written first is the state the step returned, bit for
bit a twin run's after as many updates, never an "Array has been deleted" from the donated buffers."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from checkpoints import leaves
from parity import sebulba_threads
from podrl.agents.dqn import DQNConfig
from podrl.run import driver
from podrl.run.checkpoint import Checkpointer
from podrl.run.config import CheckpointConfig, LoggingConfig
from podrl.sebulba import SebulbaConfig, train_sebulba
from podrl.sebulba.params import ParamsSource

AGENT = DQNConfig(buffer_size=256, min_fill=32, batch_size=16, replay_ratio=1 / 16, hidden_sizes=(16,))
"""A replay agent (its replay is the donated `shard_state`) learning from its first update, 2 steps an update."""


def config(**overrides) -> SebulbaConfig:
    base = dict(env="jax:MatchSign-v0", envs_per_thread=4, rollout_length=8, total_steps=4 * 8 * 20,
                actor_devices=(0,), learner_devices=(1,), eval_episodes=0, log_every=1, timeout_s=30.0, lag="0",
                logging=LoggingConfig(run_dir=None, console=False))
    return SebulbaConfig(**{**base, **overrides})


@pytest.mark.timeout(240)
def test_an_interrupt_during_the_learner_step_checkpoints_the_steps_state(tmp_path, monkeypatch, cpu_devices):
    twin = train_sebulba(config(checkpoint=CheckpointConfig(stop_after_updates=3)), AGENT).train_state
    publish = ParamsSource.publish

    def publish_or_interrupt(self, params, version):
        if version == 3:  # update 2's step ran (and took the replay); its params are being published
            raise KeyboardInterrupt
        return publish(self, params, version)

    monkeypatch.setattr(ParamsSource, "publish", publish_or_interrupt)
    folder = tmp_path / "checkpoints"
    with pytest.raises(KeyboardInterrupt) as info:
        train_sebulba(config(checkpoint=CheckpointConfig(directory=str(folder))), AGENT)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "deleted" not in notes and "checkpointed" in notes and "update 3" in notes, notes
    assert not sebulba_threads()
    saved = Checkpointer(str(folder), read_only=True)
    try:
        assert saved.latest_step() == 3
        state = saved.restore_state(twin)
    finally:
        saved.close()
    assert int(state.update_step) == 3 and int(state.shard_state.size[0]) == 3 * 4 * 8
    for x, y in zip(leaves(state), leaves(twin), strict=True):  # params, target, Adam, replay
        assert (x == y).all()


class FakeCheckpoints:
    def describe_last(self) -> str:
        return "last good checkpoint: update 2 in ckpt"

    def wait(self) -> None:
        pass


class FakeRun:
    """The driver's view of a run: it must not be asked to save a donated state."""

    checkpoints = FakeCheckpoints()

    def __init__(self):
        self.saved: list[int] = []

    def save(self, update, state, params) -> None:
        jax.tree.map(np.asarray, state)  # what a save reads: a deleted array raises here
        self.saved.append(update)


class FakeProgram:
    def __init__(self, newer):
        self.newer = newer

    def failure_state(self, done, state):
        return self.newer if self.newer is not None else (done, state)

    def params(self, state):
        return state["params"]


@pytest.mark.parametrize("newer", [False, True], ids=["only-the-donated-state", "the-steps-result"])
def test_the_failure_path_never_saves_a_donated_state(newer):
    """The driver's state lost its replay to a call (deleted, as donation leaves it): with no newer state
    from the program, nothing is saved and the note names the last good checkpoint; with one, that is
    saved at its update. Either way the error raised is the failure's own."""
    replay = jnp.ones(4)
    state = {"params": jnp.zeros(2), "replay": replay}
    replay.delete()
    newer_state = (3, {"params": jnp.ones(2), "replay": jnp.ones(4)}) if newer else None
    run, error = FakeRun(), KeyboardInterrupt()
    driver._save_after_failure(FakeProgram(newer_state), run, SimpleNamespace(done=2, state=state), error)
    notes = "\n".join(error.__notes__)
    if newer:
        assert run.saved == [3] and "was checkpointed" in notes, notes
    else:
        assert run.saved == [] and "not checkpointed; last good checkpoint: update 2" in notes, notes
