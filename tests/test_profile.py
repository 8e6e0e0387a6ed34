"""`--profile DIR` writes a jax.profiler trace of a training call (Anakin and Sebulba)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script, flags, calls", [
    ("train_anakin.py", ["--total-steps", "4096", "--updates-per-call", "4", "--num-devices", "1"], "1..1"),
    ("train_sebulba.py", ["--total-steps", "2048", "--cpu-devices", "1"], "1..3"),  # 4 updates; 3 traced
])
def test_profile_writes_a_trace_of_a_training_call(tmp_path, script, flags, calls):
    done = subprocess.run([sys.executable, f"scripts/{script}", *flags, "--profile", str(tmp_path / "trace"),
                           "--logging.run-dir", "None", "--eval-episodes", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    traces = list((tmp_path / "trace").glob("plugins/profile/*/*.trace.json.gz"))
    assert len(traces) == 1 and traces[0].stat().st_size > 1000
    assert f"profile of training call(s) {calls} written to" in done.stdout + done.stderr
