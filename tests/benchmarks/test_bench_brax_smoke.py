"""Smoke test of benchmarks.brax: --quick runs a brax-ppo row and its env-only ceiling on
8 envs and writes the JSON. Only checks that both ran and produced positive numbers; no timing is asserted.

The benchmark's rows run on the JAX Pendulum-v1 (continuous actions, like Brax's): every line of the
benchmark runs, and the two programs compile in seconds where a Brax env's take ~40 s each on 2 cores.
Brax envs under Anakin PPO (the same `train_anakin` path, normalisation included) are tested in
tests/test_brax.py."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = "Pendulum-v1"


@pytest.mark.timeout(300)
def test_quick_brax_benchmark_writes_ppo_and_ceiling(tmp_path, user_env):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.brax", "--quick", "--devices", "1", "--envs", "8",
                           "--out", str(out), "--env", ENV],
                          capture_output=True, text=True, timeout=280, env=user_env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "anakin_brax" and doc["jax_version"] and doc["preset"] == "brax-ppo"
    rows = doc["rows"]
    assert {(r["name"], r["devices"], r["num_envs"]) for r in rows} == {("ppo", 1, 8), ("env_only", 1, 8)}
    for row in rows:
        assert "error" not in row, row
        assert row["steps_per_second"] > 0 and row["compile_seconds"] > 0, row
        assert row["config"]["env"] == ENV
    assert next(r for r in rows if r["name"] == "ppo")["config"]["agent_fields"]["normalize_observations"] is True
    (line,) = doc["table"]
    assert 0 < line["ppo_fraction_of_ceiling"] and not line["failed"]
    assert "| 1 | 8 x 4 |" in proc.stdout
