"""podrl.run.outcome: the one rule every restart loop follows (`podrl launch --supervise`, the deploy
scripts through `podrl retry-decision`), from an exit status and a run's closing lines."""

from __future__ import annotations

import pytest

from podrl.run import outcome
from podrl.run.outcome import Closing, decide

SIGTERM_POD = "[p0] [anakin] stopped by SIGTERM to process 1 at update 64: 1,234 SPS, greedy return 3.0"
SIGTERM_ONE = "[sebulba] stopped by SIGTERM at update 5: 12 SPS, greedy return n/a; checkpoint in /c"
DONE = "[anakin] done at update 97: 1 SPS, greedy return 16.0; checkpoint in /c"


@pytest.mark.parametrize("code, lines, action, gone", [
    (0, [SIGTERM_POD], "retry", 1),  # a preemption notice: the agreed stop
    (0, ["[anakin] stopped by SIGTERM to processes 0, 3 at update 9: 1 SPS"], "retry", 2),
    (0, [SIGTERM_ONE], "retry", 1),
    (0, ["step 1", DONE], "done", 0),
    (0, ["[anakin] stopped by stop_at_return at update 8: 1 SPS"], "done", 0),
    (0, ["[anakin] stopped by SIGINT to process 0 at update 5: 1 SPS"], "stop", 0),  # a person's Ctrl-C
    (0, ["[anakin] stopped by stop_after_updates at update 8: 1 SPS"], "stop", 0),
    (0, ["nothing podrl said"], "stop", 0),  # exit 0 without a closing line
    (1, [SIGTERM_POD], "stop", 0),  # a crash, a config error, a stall: deterministic
    (2, [], "stop", 0),
    (3, [], "stop", 0),
    (4, [], "retry", 1),  # a process that lost its peer
    (-9, [], "retry", 1),  # killed (Python's returncode)
    (137, [], "retry", 1),  # killed (a shell's 128 + 9)
    (143, [SIGTERM_POD], "retry", 1),
    (255, [], "retry", 1),  # ssh lost the worker
    (5, [], "stop", 0),
])
def test_the_rule(code, lines, action, gone):
    decision = decide(code, Closing.of(lines))
    assert (decision.action, decision.gone) == (action, gone), decision


def test_a_signalled_loop_stops_whatever_the_run_said():
    assert decide(0, Closing.of([SIGTERM_POD]), signalled=True).action == "stop"


def test_a_single_process_sigterm_line_names_the_process_that_printed_it():
    closing = Closing()
    closing.see(SIGTERM_ONE, process=3)
    assert closing.preempted == [3] and closing.update == 5 and closing.stopped_by == "SIGTERM"


def test_the_exit_codes_are_those_the_run_gives():
    from podrl.run.preemption import LOST_EXIT_CODE
    from podrl.run.watchdog import STALL_EXIT_CODE

    assert (LOST_EXIT_CODE, STALL_EXIT_CODE) == (outcome.LOST_EXIT_CODE, outcome.STALL_EXIT_CODE) == (4, 3)
