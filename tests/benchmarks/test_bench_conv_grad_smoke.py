"""Smoke test of benchmarks.conv_grad: one torso, both convolutions, both loops, JSON written.
Checks only that every row ran and produced positive numbers; no timing is asserted."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_conv_grad_benchmark_writes_every_row(tmp_path, user_env):
    out = tmp_path / "conv.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.conv_grad", "--torsos", "minatar_cnn", "--steps", "2",
                           "--repeats", "1", "--out", str(out)], capture_output=True, text=True, timeout=240,
                          env=user_env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "conv_grad" and doc["jax_version"] and doc["timestamp"]
    rows = doc["rows"]
    assert {(r["conv"], r["loop"]) for r in rows} == {("xla", "scan"), ("podrl", "scan"), ("xla", "unrolled"),
                                                     ("podrl", "unrolled")}
    for row in rows:
        assert row["torso"] == "minatar_cnn" and row["ms_per_step"] > 0 and row["compile_s"] > 0, row
    assert "| minatar_cnn | 512 | scan | podrl |" in proc.stdout
