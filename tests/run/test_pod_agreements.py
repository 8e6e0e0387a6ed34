"""What the processes of a pod must agree on, with two fake processes (the real pods are in tests/system):
a time-based save is process 0's clock's decision on every process (a save is collective: a process whose
own clock says "due" must not save alone), and a process that finds the coordination service gone after
a failed collective names process 0 (which hosts it) as the one lost."""

from __future__ import annotations

import jax
import pytest
from jax.experimental import multihost_utils

from podrl.run import control, preemption


class Clock:
    """A stand-in for `time.monotonic` that a test moves by hand."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_a_time_based_save_is_process_0s_decision_on_every_process(monkeypatch):
    """Process 1's clock runs ahead of process 0's: while process 0's says a 60 s save is not due, process 1
    does not save although its own says it is; once process 0's says due, process 1 saves too, although
    its clock was set back (the count-based rule stays each process's own, the same everywhere)."""
    clock, zero_says = Clock(), {"due": False}
    monkeypatch.setattr(control, "time", clock)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "broadcast_one_to_all", lambda mine: zero_says["due"])
    process_1 = control.SaveSchedule(every_updates=0, every_seconds=60.0, start_update=0)
    clock.now += 90.0  # process 1's own clock: due
    assert not process_1.due(5)
    zero_says["due"] = True
    clock.now -= 80.0  # process 1's own clock: 10 s, not due
    assert process_1.due(6)
    by_count = control.SaveSchedule(every_updates=4, every_seconds=0.0, start_update=0)
    assert not by_count.due(3) and by_count.due(4)


class GoneService:
    """The coordination service's client after its host, process 0, is gone: every call fails."""

    def key_value_set(self, *args, **kwargs):
        raise RuntimeError("UNAVAILABLE: failed to connect to the coordination service")

    def key_value_dir_get(self, *args, **kwargs):
        raise RuntimeError("UNAVAILABLE: failed to connect to the coordination service")


@pytest.mark.parametrize("me, lost", [(1, [0]), (0, [])])
def test_a_survivor_that_finds_the_coordinator_gone_names_process_0(monkeypatch, me, lost):
    monkeypatch.setattr(preemption, "_client", GoneService)
    monkeypatch.setattr(jax, "process_index", lambda: me)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    assert preemption.lost_processes(0.1) == lost
    if lost:
        message = str(preemption.ProcessLost(lost, "after update 8", "last good checkpoint: update 8 in ckpt"))
        assert message.startswith("process 0 of this run stopped answering after update 8"), message
