"""The README's resume commands, run as written (defaults shortened only by total steps).

`--resume RUN` alone continues the checkpoint's own config to its own total, in
the same run directory, with env steps continuing; a total that does not go past
the checkpoint is a one-line error (exit 2), never an orbax traceback. A resumed
run ends with the very state (params, optimizer state, ...) of an uninterrupted twin;
the Sebulba one runs on `resume_twins.ConstantBandit` for that (its host envs start
fresh episodes after a resume, which on CartPole would change the data).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from resume_twins import assert_same_saved_state

ROOT = Path(__file__).resolve().parents[2]
STEPS_PER_UPDATE = 4 * 128  # the Anakin defaults: 4 envs x 128 steps; Sebulba's: 8 envs x 64 steps


def cli(script: str, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])})


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def checkpoint_steps(run_dir: Path) -> list[int]:
    return sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())


@pytest.mark.timeout(400)
def test_anakin_bare_resume_continues_its_own_total_in_its_own_run_dir(tmp_path):
    total = 12 * STEPS_PER_UPDATE  # not the CLI default: a bare resume must not fall back to 500k steps
    first = cli("train_anakin.py", "--logging.run-name", "long", "--total-steps", str(total),
                "--checkpoint.stop-after-updates", "6", "--cpu-devices", "1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = tmp_path / "runs" / "long"
    assert checkpoint_steps(run_dir) == [6]

    rest = cli("train_anakin.py", "--resume", "runs/long", "--cpu-devices", "1", cwd=tmp_path)
    assert rest.returncode == 0, rest.stderr[-3000:]
    assert "updates 6..12 of 12" in rest.stdout, rest.stdout
    assert checkpoint_steps(run_dir) == [6, 12]
    # one run directory, continued: its metrics go on from the checkpoint's step to the run's total
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["long"]
    steps = [r["step"] for r in records(run_dir)]
    assert steps == [6 * STEPS_PER_UPDATE, 12 * STEPS_PER_UPDATE]
    walls = [r["wall_time"] for r in records(run_dir)]
    assert walls[1] > walls[0]  # the clock continues too
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2  # TensorBoard: the same run, a second file
    twin = cli("train_anakin.py", "--logging.run-name", "twin", "--total-steps", str(total), "--cpu-devices", "1",
               cwd=tmp_path)
    assert twin.returncode == 0, twin.stderr[-3000:]
    assert_same_saved_state(run_dir / "checkpoints", tmp_path / "runs" / "twin" / "checkpoints", 12)


@pytest.mark.timeout(300)
def test_a_total_that_does_not_pass_the_checkpoint_is_a_one_line_error(tmp_path):
    first = cli("train_anakin.py", "--logging.run-name", "r", "--total-steps", str(4 * STEPS_PER_UPDATE),
                "--cpu-devices", "1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    for total in (4 * STEPS_PER_UPDATE, 2 * STEPS_PER_UPDATE):  # at and below the checkpoint's update 4
        again = cli("train_anakin.py", "--resume", "runs/r", "--total-steps", str(total), "--cpu-devices", "1",
                    cwd=tmp_path)
        assert again.returncode == 2, again.stderr[-3000:]
        assert "error: invalid config: total_steps: " in again.stderr and "update 4" in again.stderr
        assert "Traceback" not in again.stderr
    assert checkpoint_steps(tmp_path / "runs" / "r") == [4]


@pytest.mark.timeout(400)
def test_sebulba_resume_continues_the_step_count(tmp_path):
    per_update = 8 * 64  # Sebulba defaults: one thread of 8 envs x 64 steps
    env = ("--env", "jax:resume_twins:ConstantBandit")
    first = cli("train_sebulba.py", "--cpu-devices", "2", *env, "--logging.run-name", "s",
                "--total-steps", str(20 * per_update), "--checkpoint.stop-after-updates", "10", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    # the total given again explicitly (an explicit flag is taken as given; the bare form is tested above)
    rest = cli("train_sebulba.py", "--cpu-devices", "2", *env, "--resume", "runs/s", "--total-steps",
               str(20 * per_update), cwd=tmp_path)
    assert rest.returncode == 0, rest.stderr[-3000:]
    assert "updates 10..20 of 20" in rest.stdout
    assert f"step {20 * per_update:,}/{20 * per_update:,} (100%)" in rest.stdout
    run_dir = tmp_path / "runs" / "s"
    assert [r["step"] for r in records(run_dir)] == [10 * per_update, 20 * per_update]  # log_every 10
    assert checkpoint_steps(run_dir) == [10, 20]
    twin = cli("train_sebulba.py", "--cpu-devices", "2", *env, "--logging.run-name", "twin",
               "--total-steps", str(20 * per_update), cwd=tmp_path)
    assert twin.returncode == 0, twin.stderr[-3000:]
    assert_same_saved_state(run_dir / "checkpoints", tmp_path / "runs" / "twin" / "checkpoints", 20)
