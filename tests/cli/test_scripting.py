"""`podrl checkpoints` and `podrl retry-decision` (podrl/cli/scripting.py): what the deploy scripts ask,
answered from the standard library (no JAX), with exit statuses a shell can test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from podrl.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_checkpoints_lists_complete_steps_only(tmp_path, capsys):
    ckpt = tmp_path / "run" / "checkpoints"
    (ckpt / "8.orbax-checkpoint-tmp-1765").mkdir(parents=True)  # orbax still writing its first save
    assert run(capsys, "checkpoints", str(ckpt), "--last") == (1, "", f"no complete checkpoint in {ckpt}\n")
    assert run(capsys, "checkpoints", str(tmp_path / "none"), "--last")[:2] == (1, "")  # no folder yet: none
    for name in ("16", "4", "24.orbax-checkpoint-tmp-99"):
        (ckpt / name).mkdir()
    (ckpt / "32").touch()  # a file named like a step is not a checkpoint
    assert run(capsys, "checkpoints", str(ckpt))[:2] == (0, "4\n16\n")
    assert run(capsys, "checkpoints", str(ckpt), "--last")[:2] == (0, "16\n")
    assert run(capsys, "checkpoints", str(tmp_path / "run"), "--last")[:2] == (0, "16\n")  # a run folder
    with pytest.raises(SystemExit):
        main(["checkpoints", str(ckpt / "32")])
    assert "is a file" in capsys.readouterr().err


def test_retry_decision_reads_this_jobs_log(tmp_path, capsys):
    log = tmp_path / "job.log"
    log.write_text("[p0] step 1\n[p1] [anakin p1] stopped by SIGTERM to process 1 at update 6: 1 SPS\n")
    assert run(capsys, "retry-decision", "--exit-code", "0", str(log))[:2] == (
        0, "retry: stopped by SIGTERM to process 1 at update 6 (a preemption notice)\n")
    code, out, _ = run(capsys, "retry-decision", "--exit-code", "2", str(log))
    assert out.startswith("stop: a process's own error (exit 2")
    assert run(capsys, "retry-decision", "--exit-code", "0", str(tmp_path / "missing.log"))[1].startswith("stop: ")


@pytest.mark.timeout(60)
def test_the_script_subcommands_start_no_jax(tmp_path):
    (tmp_path / "3").mkdir()
    code = ("import sys; from podrl.cli.main import main; "
            f"assert main(['checkpoints', {str(tmp_path)!r}, '--last']) == 0; "
            f"assert main(['retry-decision', '--exit-code', '4', {str(tmp_path / 'x')!r}]) == 0; "
            "assert not [m for m in sys.modules if m == 'jax' or m.startswith('jax.')], 'jax imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=50)
    assert done.returncode == 0 and done.stdout == "3\nretry: a process lost a peer of its run (exit 4)\n", \
        done.stdout + done.stderr
