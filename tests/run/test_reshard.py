"""A checkpoint restored onto another number of learner shards (issue 38): the replay rules
(`podrl.agents.replay.redistribute` for item buffers, `refill` for MuZero's sequence buffers) and
Anakin DQN written on 2 devices, resumed on 1 and on 4, with every transition kept when the new
shards hold them all and what was dropped stated (closing line, metrics) when they do not."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from checkpoints import anakin
from podrl.agents.dqn import DQNConfig
from podrl.agents.replay import ReplayBuffer, redistribute, refill
from podrl.anakin import train_anakin
from podrl.anakin.program import AnakinProgram
from podrl.anakin.setup import build
from podrl.run.context import RunContext
from pods import records


def buffers(sizes: list[int], positions: list[int], capacity: int = 8) -> ReplayBuffer:
    """D buffers whose item k of buffer d is `100 * d + k` (by slot), with the given sizes and positions."""
    data = np.arange(capacity)[None, :] + 100 * np.arange(len(sizes))[:, None]
    return ReplayBuffer({"x": data.astype(np.float32)}, np.asarray(positions, np.int32), np.asarray(sizes, np.int32))


def stored(buffer: ReplayBuffer, shard: int) -> list[float]:
    """Buffer `shard`'s items, oldest first."""
    size, position = int(buffer.size[shard]), int(buffer.position[shard])
    capacity = buffer.data["x"].shape[1]
    return [float(buffer.data["x"][shard, (position - size + k) % capacity]) for k in range(size)]


@pytest.mark.parametrize("count", [2, 3, 4])
def test_items_that_fit_are_all_kept_and_dealt_evenly(count):
    old = buffers(sizes=[8, 5], positions=[3, 5])  # shard 0 full and wrapped, shard 1 partly filled
    new, counts = redistribute(old, count)
    assert counts == {"kept": 13, "dropped": 0}
    kept = sorted(x for shard in range(count) for x in stored(new, shard))
    assert kept == sorted(stored(old, 0) + stored(old, 1))
    assert max(new.size) - min(new.size) <= 2  # an even share (each old shard's rounded separately)
    np.testing.assert_array_equal(new.position, new.size % 8)
    for shard in range(count):  # each old shard's items stay oldest first within a new shard
        for source in (0, 1):
            mine = [x for x in stored(new, shard) if x // 100 == source]
            assert mine == [x for x in stored(old, source) if x in mine]


def test_items_that_do_not_fit_drop_the_oldest_of_each_shard():
    old = buffers(sizes=[8, 8], positions=[3, 0])
    new, counts = redistribute(old, 1)
    assert counts == {"kept": 8, "dropped": 8}
    assert sorted(stored(new, 0)) == sorted(stored(old, 0)[4:] + stored(old, 1)[4:])  # the newest half of each
    assert int(new.size[0]) == 8 and int(new.position[0]) == 0
    new, counts = redistribute(buffers(sizes=[8, 2], positions=[3, 2]), 1)  # the room a small shard leaves is used
    assert counts == {"kept": 8, "dropped": 2} and sorted(stored(new, 0)) == [0, 1, 2, 5, 6, 7, 100, 101]


def test_sequence_buffers_refill_and_say_how_many_steps_they_dropped():
    new, counts = refill(buffers(sizes=[8, 3], positions=[2, 3]), 3)
    assert counts == {"kept": 0, "dropped": 11}
    assert new.size.tolist() == [0, 0, 0] and new.data["x"].shape == (3, 8)


def saved_items(state) -> np.ndarray:
    """Every stored transition's observation of a `[1, D, C, 4]` buffer, as sorted rows."""
    shard_state = state.train_state.shard_state
    data, sizes, positions = (np.asarray(x)[0] for x in (shard_state.data.observation, shard_state.size,
                                                         shard_state.position))
    capacity = data.shape[1]
    rows = [data[d, (positions[d] - sizes[d] + np.arange(sizes[d])) % capacity] for d in range(len(sizes))]
    rows = np.concatenate(rows)
    return rows[np.lexsort(rows.T[::-1])]


def restored_on(config, agent) -> tuple:
    """The state a resume of `config` starts from (the real restore path), and the run's note."""
    program = AnakinProgram(config, build(config, agent))
    with RunContext(config, agent) as run:
        state = program.init()
        state = run.restore(state, program.placement())
    return state, run.resume_note


@pytest.mark.timeout(300)
def test_anakin_dqn_written_on_two_devices_resumes_on_one_and_on_four(tmp_path, cpu_devices):
    agent = DQNConfig(buffer_size=1024, min_fill=64, batch_size=32, replay_ratio=1 / 16)
    first = train_anakin(anakin(tmp_path, "r", stop_after_updates=4), agent)  # 2 shards x 4 updates x 64 items
    saved = saved_items(first.state)
    assert len(saved) == 2 * 4 * 64
    for devices in (1, 4):
        config = dataclasses.replace(anakin(tmp_path, "r", resume=str(tmp_path / "r")), num_devices=devices)
        state, note = restored_on(config, agent)
        sizes = np.asarray(state.train_state.shard_state.size)
        assert sizes.shape == (1, devices) and int(sizes.sum()) == len(saved)  # every transition kept...
        np.testing.assert_array_equal(saved_items(state), saved)  # ...as it was
        assert note == (f"resumed on another topology: 1 process with 2 learner shards in all -> 1 process with "
                        f"{devices} learner shard{'s' if devices > 1 else ''} in all; per-shard state (replay) kept "
                        "512 items, dropped 0"), note
    rest = train_anakin(dataclasses.replace(anakin(tmp_path, "r", resume=str(tmp_path / "r"),
                                                   stop_after_updates=3), num_devices=4), agent)
    assert [r["updates"] for r in rest.history] == [7] and rest.stopped_by == "stop_after_updates"
    assert int(np.asarray(rest.state.train_state.shard_state.size).sum()) == 512 + 3 * 8 * 16  # it trained on


@pytest.mark.timeout(300)
def test_a_buffer_too_big_for_the_new_shards_says_what_it_dropped(tmp_path, cpu_devices, capsys):
    agent = DQNConfig(buffer_size=192, min_fill=64, batch_size=32, replay_ratio=1 / 16)
    train_anakin(anakin(tmp_path, "r", stop_after_updates=4), agent)  # 256 items per shard: both full
    config = dataclasses.replace(anakin(tmp_path, "r", resume=str(tmp_path / "r"), stop_after_updates=3),
                                 num_devices=1)
    rest = train_anakin(dataclasses.replace(config, logging=dataclasses.replace(config.logging, console=True)), agent)
    closing = [line for line in capsys.readouterr().out.splitlines() if "at update 7" in line]
    assert len(closing) == 1 and "per-shard state (replay) kept 192 items, dropped 192 (the oldest of each shard" \
        in closing[0], closing
    resume_record = [r for r in records(tmp_path / "r") if "resume/kept" in r]
    assert resume_record == [{**resume_record[0], "step": 4 * 8 * 16, "updates": 4, "resume/kept": 192,
                              "resume/dropped": 192}]
    assert int(np.asarray(rest.state.train_state.shard_state.size).sum()) == 192  # full again
