"""Pods that survive preemption (issue 38): real local processes on 127.0.0.1 started by `podrl launch`.

A SIGTERM to one process of a 2-process run stops both at the same update, one checkpoint is
written and both exit 0 naming the process that was told to stop; the checkpoint resumes on one
process and on 2 processes x 2 devices, to the original total, the env-step count continuing
exactly. A SIGKILL of one process ends the other within the heartbeat bound, naming the lost
process and the last good checkpoint, which resumes. All runs share two small programs (MatchCue,
PPO), so the suite's compilation cache serves them after the first.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from podrl.run.checkpoint import Checkpointer
from pods import PODRL, Pod, alive, records, run_pod

TOTAL_UPDATES = 60  # 3x the most updates measured before the stop (6-18), small enough to finish soon
PER_UPDATE = {"anakin": 8 * 16, "sebulba": 4 * 16}  # env steps of one update (Anakin: per seed; Sebulba: per process)
COMMANDS = {
    "anakin": ["anakin", "--env", "MatchCue-v0", "--num-envs", "8", "--rollout-length", "16", "--updates-per-call",
               "1", "--eval-every", "0", "--eval-episodes", "8"],
    "sebulba": ["sebulba", "--env", "jax:MatchCue-v0", "--envs-per-thread", "4", "--rollout-length", "16",
                "--log-every", "1", "--eval-episodes", "8"],
}
AGENT = ["agent:ppo", "--agent.learning-rate", "3e-3"]


def command(layout: str, tmp_path: Path, checkpoints: Path, *extra: str) -> list[str]:
    total = TOTAL_UPDATES * PER_UPDATE[layout]
    return COMMANDS[layout] + ["--total-steps", str(total), "--checkpoint.directory", str(checkpoints),
                               "--logging.run-dir", str(tmp_path / "runs"), "--logging.run-name", "r",
                               "--logging.no-tensorboard", *extra] + AGENT


def latest_step(directory: Path) -> int | None:
    checkpointer = Checkpointer(str(directory), read_only=True)
    try:
        return checkpointer.latest_step()
    finally:
        checkpointer.close()


def logged_steps(layout: str, stop: int, processes_after: int) -> int:
    """The env-step count logged at the end: Anakin's is per seed; Sebulba's adds every process's actors,
    2 processes up to the stop, then the resumed run's."""
    if layout == "anakin":
        return TOTAL_UPDATES * PER_UPDATE[layout]
    return PER_UPDATE[layout] * (2 * stop + processes_after * (TOTAL_UPDATES - stop))


EVALUATED = ["--eval-every", "1", "--eval-episodes", "16"]  # a greedy return in every update's log line
EVALUATED_AT_END = ["--eval-every", "0", "--eval-episodes", "16"]  # one greedy return, in the closing line
LOGGED_EVAL = r"^\[p0\] \[{layout}\] step .*\| eval ([\d.]+)"


@pytest.mark.learning
@pytest.mark.timeout(400)
@pytest.mark.parametrize("layout", ["anakin", "sebulba"])
def test_sigterm_to_one_process_stops_every_process_at_one_update_keeping_the_policy(tmp_path, layout):
    """MatchCue (optimum 16; an untrained greedy policy names every cue with one action: at most 8). Two
    processes train until the greedy return is at least 14, then SIGTERM to process 1: both stop at one
    agreed update with one complete checkpoint. It resumes on one process and on 2 processes x 2 devices
    to the original total, the env-step count continuing exactly; the one-process resume's first greedy
    return (after one update) is within 2 of the one before the stop: the learned policy was kept."""
    checkpoints, copy = tmp_path / "ckpt", tmp_path / "copy"
    with Pod(2, 1, command(layout, tmp_path, checkpoints, *EVALUATED)) as pod:
        pod.wait_for(rf"^\[p0\] \[{layout}\] step .*\| eval 1[4-6]\.", timeout=250)
        pod.kill(1, signal.SIGTERM)
        assert pod.finish(timeout=90) == 0, pod.text[-4000:]
    closing = pod.closing()
    assert set(closing) == {0, 1}, pod.text[-4000:]
    (why0, stop), (why1, stop1) = closing[0], closing[1]
    assert why0 == why1 == "SIGTERM to process 1" and stop == stop1, closing  # one agreed update, who asked
    assert 0 < stop < TOTAL_UPDATES, closing
    assert latest_step(checkpoints) == stop  # complete (finalized) at that update
    before = float(re.search(r"\[p0\] .* stopped by .* greedy return ([\d.]+)", pod.text).group(1))
    shutil.copytree(checkpoints, copy)

    for processes, devices, source in ((1, 1, checkpoints), (2, 2, copy)):
        # the one-process resume evaluates after every update (its first greedy return is compared), the
        # 2 x 2 one only at the end (a greedy evaluation on the new topology, not one after every update)
        evaluated = EVALUATED if processes == 1 else EVALUATED_AT_END
        resumed = run_pod(processes, devices, command(layout, tmp_path, source, *evaluated, "--resume", str(source)),
                          timeout=200)
        assert resumed.returncode == 0, resumed.text[-4000:]
        assert f"updates {stop}..{TOTAL_UPDATES} of {TOTAL_UPDATES}" in resumed.text, resumed.text[-4000:]
        assert set(resumed.closing().values()) == {("done", TOTAL_UPDATES)}, resumed.text[-4000:]
        assert latest_step(source) == TOTAL_UPDATES
        last = records(tmp_path / "runs" / "r")[-1]  # the first run's folder continues
        assert last["step"] == logged_steps(layout, stop, processes), (last, stop)
        if processes == 1:
            after = float(re.search(LOGGED_EVAL.format(layout=layout), resumed.text, re.MULTILINE).group(1))
            assert before >= 14.0 and after >= before - 2.0, (before, after)


@pytest.mark.timeout(300)
def test_stop_at_return_ends_every_process_of_a_sebulba_pod_at_the_same_update(tmp_path):
    """Only process 0 evaluates in a Sebulba pod: its decision (a target every return reaches) reaches
    process 1, and both stop after update 2's evaluation, with one checkpoint there."""
    checkpoints = tmp_path / "ckpt"
    pod = run_pod(2, 1, command("sebulba", tmp_path, checkpoints, "--eval-every", "2", "--stop-at-return=-100"),
                  timeout=250)
    assert pod.returncode == 0, pod.text[-4000:]
    assert pod.closing() == {0: ("stop_at_return", 2), 1: ("stop_at_return", 2)}, pod.text[-4000:]
    assert latest_step(checkpoints) == 2


@pytest.mark.timeout(400)
def test_sigkill_of_one_process_ends_the_other_within_the_heartbeat_bound(tmp_path):
    """The checkpoint the killed job has is its periodic one, the update it resumed from (no save
    after it, so the survivor is in a training call, not a save, when its peer dies). The launcher
    names the process that died first, and no process of the pod is left running."""
    checkpoints, heartbeat = tmp_path / "ckpt", 10
    first = run_pod(2, 1, command("anakin", tmp_path, checkpoints, "--checkpoint.every-updates", "8",
                                  "--checkpoint.stop-after-updates", "8"), timeout=200)
    assert first.returncode == 0 and latest_step(checkpoints) == 8, first.text[-4000:]

    killed = command("anakin", tmp_path, checkpoints, "--resume", str(checkpoints), "--checkpoint.every-updates", "0",
                     "--checkpoint.stop-after-updates", "None", "--heartbeat-timeout-s", str(heartbeat))
    with Pod(2, 1, killed) as pod:
        pod.wait_for(r"^\[p0\] \[anakin\] step ", timeout=200)
        sent = pod.kill(1, signal.SIGKILL)
        code = pod.finish(timeout=90)
        elapsed = time.monotonic() - sent
        time.sleep(0.5)
        left = [pid for pid in pod.pids.values() if alive(pid)]  # before the context's clean-up kills them
    assert code != 0, pod.text[-4000:]
    assert elapsed < heartbeat + 10, (elapsed, pod.text[-4000:])  # the launcher waits 30 s for a hung survivor
    message = f"last good checkpoint: update 8 in {checkpoints} (resumed from)"
    assert any(line.startswith("[p0] error: process 1 of this run stopped answering") and message in line
               for line in pod.lines), pod.text[-4000:]
    assert "[launcher] exit codes: [4, -9]" in pod.text, pod.text[-4000:]  # the survivor's own exit, not JAX's abort
    assert "process 1 exited with code -9 first" in pod.text, pod.text[-4000:]
    assert len(pod.pids) == 2 and not left, (pod.pids, left)
    assert latest_step(checkpoints) == 8

    resumed = run_pod(1, 1, command("anakin", tmp_path, checkpoints, "--resume", str(checkpoints),
                                    "--checkpoint.stop-after-updates", "4"), timeout=200)
    assert resumed.returncode == 0 and "updates 8..12" in resumed.text, resumed.text[-4000:]
    assert latest_step(checkpoints) == 12


def supervisor_demo() -> list[str]:
    """docs/scaling-out.md's supervisor command, shortened as tools/check_readme.py runs it."""
    from tools.check_readme import ROOT, extract, shorten

    _, commands, _ = extract((ROOT / "docs" / "scaling-out.md").read_text(), "docs/scaling-out.md")
    demo = [c for c in commands if "--supervise" in c.text]
    assert len(demo) == 1, [c.text for c in demo]
    words = shorten(demo[0].text.split(), scale=100, default_steps=2048)
    return [part for word in words for part in (PODRL if word == "podrl" else [word])]


@pytest.mark.timeout(400)
def test_the_supervisor_demo_preempts_relaunches_on_fewer_processes_and_finishes(tmp_path):
    """The docs' command as tools/check_readme.py runs it: SIGTERM to process 1 once compiled, one agreed
    stop, a relaunch with --resume on the one process that remains, which finishes the run."""
    result = subprocess.run(supervisor_demo(), capture_output=True, text=True, timeout=380, cwd=tmp_path)
    text = result.stdout
    assert result.returncode == 0, text[-4000:]
    assert "[launcher] simulating a preemption: SIGTERM to process 1" in text, text[-4000:]
    stops = re.findall(r"\[p0\] \[anakin\] stopped by SIGTERM to process 1 at update (\d+)", text)
    relaunched = re.search(r"\[launcher\] a stop signal: relaunch 1 of 1 on 1 process\(es\), resuming", text)
    assert len(stops) == 1 and relaunched and text.count("[launcher] process 0: pid") == 2, text[-4000:]
    total = int(re.search(r"updates 0\.\.(\d+) of", text).group(1))
    assert f"updates {stops[0]}..{total} of {total}" in text, text[-4000:]  # the relaunch resumed there
    assert re.search(rf"\[p0\] \[anakin\] done at update {total}: .*resumed on another topology: 2 processes", text)
