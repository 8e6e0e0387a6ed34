"""`podrl launch --supervise` decides from an attempt's exit codes and closing lines (podrl/cli/launch.py):
when to relaunch, on how many processes, and the command it relaunches."""

from __future__ import annotations

import pytest

from podrl.cli.launch import Attempt, main, next_processes, option_value, resumed


def attempt(processes: int, code: int, first_code: int | None = None, lines: tuple[str, ...] = ()) -> Attempt:
    done = Attempt(processes)
    done.code, done.first_code = code, first_code
    for line in lines:
        done.see(0, line)
    return done


@pytest.mark.parametrize("done, signalled, relaunch, expected", [
    # a preemption notice to process 1: relaunch on the processes that remain
    (attempt(3, 0, lines=("[anakin] stopped by SIGTERM to process 1 at update 64: 1 SPS",)), False, None, 2),
    (attempt(4, 0, lines=("[sebulba] stopped by SIGTERM to processes 0, 3 at update 9: 1 SPS",)), False, None, 2),
    (attempt(2, 0, lines=("[anakin] stopped by SIGTERM to process 1 at update 64: 1 SPS",)), False, 2, 2),  # given
    (attempt(1, 0, lines=("[anakin] stopped by SIGTERM at update 5: 1 SPS",)), False, None, 1),  # at least one
    # a lost process (killed by a signal first, or a survivor naming its lost peer first): one fewer
    (attempt(2, 1, first_code=-9), False, None, 1),
    (attempt(3, 1, first_code=4), False, None, 2),
    # no relaunch: finished, a person's Ctrl-C, stop_after_updates, a process's own error, the launcher signalled
    (attempt(2, 0, lines=("[anakin] done at update 97: 1 SPS",)), False, None, None),
    (attempt(2, 0, lines=("[anakin] stopped by SIGINT to process 0 at update 5: 1 SPS",)), False, None, None),
    (attempt(2, 0, lines=("[anakin] stopped by stop_after_updates at update 8: 1 SPS",)), False, None, None),
    (attempt(2, 1, first_code=2), False, None, None),
    (attempt(2, 0, lines=("[anakin] stopped by SIGTERM to processes 0, 1 at update 5: 1 SPS",)), True, None, None),
])
def test_when_and_on_how_many_processes_the_supervisor_relaunches(done, signalled, relaunch, expected):
    assert next_processes(done, signalled, relaunch) == expected


def test_a_relaunch_resumes_from_the_checkpoint_folder_once_it_holds_a_complete_step(tmp_path, capsys):
    command = ["podrl", "anakin", "--resume", "old", "--checkpoint.directory", str(tmp_path), "--resume=x", "-q"]
    assert option_value(command, "--checkpoint.directory") == str(tmp_path)
    (tmp_path / "3.orbax-checkpoint-tmp-17").mkdir()  # being written: not a checkpoint yet
    assert resumed(command, str(tmp_path)) == command
    assert f"no complete checkpoint in {tmp_path}" in capsys.readouterr().out
    (tmp_path / "2").mkdir()
    assert resumed(command, str(tmp_path)) == ["podrl", "anakin", "--checkpoint.directory", str(tmp_path), "-q",
                                               "--resume", str(tmp_path)]
    assert f"last good checkpoint: update 2 in {tmp_path}" in capsys.readouterr().out


def test_supervising_needs_the_folder_a_relaunch_resumes_from(capsys):
    with pytest.raises(SystemExit):
        main(["--supervise", "1", "--", "podrl", "anakin"])
    assert "--supervise needs --checkpoint.directory" in capsys.readouterr().err
