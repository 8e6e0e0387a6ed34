"""SIGINT/SIGTERM stop a training subprocess cleanly (exit 0, a checkpoint), and a resume continues it.

tests/test_checkpoint.py covers SIGTERM in Anakin; these cover SIGINT in both
layouts and SIGTERM in Sebulba. The signal goes to the training process after its
first progress line (the training loop, not compilation, is running). The resume
passes the original run's flags again (plus `--resume` and a checkpoint-only
`--checkpoint.stop-after-updates 2`: two more updates, a field that may change on resume) and must
start at the saved update and write its own checkpoint into the same folder. In Anakin (envs
checkpointed too) that checkpoint holds the very state, optimizer's included, of an uninterrupted
twin run to the same update; Sebulba's host envs start fresh episodes after a resume, so its
twin comparison is in tests/test_checkpoint.py and tests/test_resume_cli.py on a stateless env.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from podrl.run.checkpoint import Checkpointer
from podrl.run.checkpoint_folder import resume_dir
from resume_twins import assert_same_saved_state

ROOT = Path(__file__).resolve().parents[2]
TOTAL = "50000000"  # far more than the test runs: only the signal ends the first run

COMMANDS = {
    "anakin": ["train_anakin.py", "--cpu-devices", "2", "--num-envs", "4", "--rollout-length", "16",
               "--updates-per-call", "2", "--eval-every", "0", "--eval-episodes", "2",
               "agent:ppo", "--agent.num-minibatches", "2"],
    "sebulba": ["train_sebulba.py", "--cpu-devices", "2", "--env", "CartPole-v1", "--envs-per-thread", "4",
                "--rollout-length", "16", "--log-every", "1", "--eval-episodes", "0",
                "agent:ppo", "--agent.num-minibatches", "2"],
}
"""Each layout's tiny run; the agent subcommand comes last, so run flags go before it."""


def command(layout: str, tmp_path: Path, name: str, *extra: str) -> list[str]:
    script, *flags = COMMANDS[layout]
    agent = flags.index("agent:ppo")
    run_flags = ["--total-steps", TOTAL, "--logging.run-dir", str(tmp_path), "--logging.run-name", name,
                 "--logging.no-tensorboard", *extra]
    return [sys.executable, str(ROOT / "scripts" / script), *flags[:agent], *run_flags, *flags[agent:]]


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def interrupt(cmd: list[str], layout: str, sig: signal.Signals) -> str:
    """Runs `cmd`, sends `sig` after the first progress line; returns all output (exit status must be 0)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            env=environment())
    output = []
    try:
        for line in iter(proc.stdout.readline, ""):
            output.append(line)
            if line.startswith(f"[{layout}] step "):
                break
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = "".join(output) + rest
    assert proc.returncode == 0, text[-3000:]
    return text


def latest_step(tmp_path: Path, name: str) -> int | None:
    checkpointer = Checkpointer(resume_dir(str(tmp_path / name)), read_only=True)
    try:
        return checkpointer.latest_step()
    finally:
        checkpointer.close()


@pytest.mark.timeout(400)
@pytest.mark.parametrize("layout, sig", [("anakin", signal.SIGINT), ("sebulba", signal.SIGINT),
                                         ("sebulba", signal.SIGTERM)], ids=["anakin-SIGINT", "sebulba-SIGINT",
                                                                            "sebulba-SIGTERM"])
def test_signal_stops_with_a_checkpoint_that_resumes(tmp_path, layout, sig):
    text = interrupt(command(layout, tmp_path, "r"), layout, sig)
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    step = latest_step(tmp_path, "r")
    assert step is not None and step > 0, text[-3000:]  # stopped after at least one update, saved
    assert step < 1000, step  # by the signal, nowhere near the end

    target = step + 2  # stop_after_updates counts the updates of this job, from where it resumes
    resumed = subprocess.run(command(layout, tmp_path, "r2", "--resume", str(tmp_path / "r"),
                                     "--checkpoint.stop-after-updates", "2"),
                             capture_output=True, text=True, timeout=200, cwd=ROOT, env=environment())
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert f"updates {step}..{target}" in resumed.stdout, resumed.stdout[-2000:]
    assert latest_step(tmp_path, "r") == target  # the resumed run saved into the lineage it continued
    if layout == "anakin":
        twin = subprocess.run(command(layout, tmp_path, "twin", "--checkpoint.stop-after-updates", str(target)),
                              capture_output=True, text=True, timeout=200, cwd=ROOT, env=environment())
        assert twin.returncode == 0, twin.stdout[-2000:] + twin.stderr[-3000:]
        assert_same_saved_state(Path(resume_dir(str(tmp_path / "r"))), Path(resume_dir(str(tmp_path / "twin"))),
                                target)
