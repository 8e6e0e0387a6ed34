"""Smoke test of benchmarks.minatar: --quick runs a PPO row and its env-only ceiling and
writes the JSON. Only checks that both ran and produced positive numbers; no timing is asserted."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_quick_minatar_benchmark_writes_ppo_and_ceiling(tmp_path, user_env):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.minatar", "--quick", "--devices", "1", "--envs", "4",
                           "--out", str(out)], capture_output=True, text=True, timeout=240, env=user_env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "anakin_minatar_breakout" and doc["jax_version"] and doc["timestamp"]
    rows = doc["rows"]
    assert {(r["name"], r["devices"], r["num_envs"]) for r in rows} == {("ppo", 1, 4), ("env_only", 1, 4)}
    for row in rows:
        assert "error" not in row, row
        assert row["steps_per_second"] > 0 and row["compile_seconds"] > 0, row
        assert row["config"]["env"] == "gymnax:Breakout-MinAtar"
    assert next(r for r in rows if r["name"] == "ppo")["config"]["torso"] == "minatar_cnn"
    (line,) = doc["table"]
    assert 0 < line["ppo_fraction_of_ceiling"] and not line["failed"]
    assert "| devices | envs x steps | PPO steps/s |" in proc.stdout and "| 1 | 4 x 4 |" in proc.stdout
