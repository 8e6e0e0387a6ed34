"""Smoke test of benchmarks.sebulba: --quick on a tiny CartPole grid writes the JSON.

Only checks that every point ran and produced positive numbers; no timing is asserted.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_quick_benchmark_writes_every_point(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.sebulba", "--quick", "--envs", "CartPole-v1", "--threads", "1", "2",
         "--num-envs", "16", "--out", str(out)],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["jax_version"] and doc["cpu_count"] and doc["timestamp"]
    rows = doc["rows"]
    assert {(r["env"], r["threads"], r["envs_per_thread"], r["lag"]) for r in rows} == {
        ("CartPole-v1", 1, 16, "1"), ("CartPole-v1", 2, 16, "1")}
    for row in rows:
        assert "error" not in row, row
        assert row["steps_per_second"] > 0, row
        assert row["ceiling_steps_per_second"] > 0, row
        assert row["fraction_of_ceiling"] > 0 and row["target_fraction"] == 0.5, row
        assert row["compile_seconds"] > 0, row
        assert row["policy_lag_mean"] >= 0, row
        stages = row["stage_seconds_per_update"]
        assert stages["time/env_step_s"] > 0 and stages["time/inference_s"] > 0, stages
        assert stages["time/learner_step_s"] > 0, stages
        # float32 obs [4] twice, int32 action, float32 reward and discount, bool truncated, PPO's log_prob and value
        assert row["trajectory_bytes_per_step"]["total"] == 16 + 16 + 4 + 4 + 4 + 1 + 8, row
    assert "| env | threads x envs | lag |" in proc.stdout and "traj bytes/step" in proc.stdout
    assert "CartPole-v1: 53 (observation 16, " in proc.stdout
