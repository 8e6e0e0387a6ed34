"""Smoke test of benchmarks.anakin (and of benchmarks.peer_ppo without its peer): --quick runs every row
(on the 2-device mesh: each row is a child process, and one device count exercises them all) and writes
the JSON.

Only checks that each row ran and produced positive numbers; no timing is asserted.
"""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import anakin

ROOT = Path(__file__).resolve().parents[2]

EXPECTED_ROWS = {
    (name, devices, num_envs)
    for devices in (2,)
    for name, num_envs in (("a_reference", 4), ("b_throughput", 2048), ("c_env_only", 4), ("c_env_only", 2048))
}


@pytest.mark.timeout(300)
def test_quick_benchmark_writes_every_row(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.anakin", "--quick", "--devices", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["jax_version"] and doc["cpu_count"] and doc["timestamp"]
    rows = doc["rows"]
    assert {(r["name"], r["devices"], r["num_envs"]) for r in rows} == EXPECTED_ROWS
    for row in rows:
        assert "error" not in row, row
        assert row["steps_per_second"] > 0, row
        assert row["compile_seconds"] > 0, row
        assert row["rollout_length"] > 0 and row["config"]["env"] == "CartPole-v1"
    assert not any("reference" in key for r in rows for key in r if key != "name")  # no ratio to another run
    assert all(r["training_fraction_of_ceiling"] > 0 for r in rows if r["name"] == "c_env_only")
    assert "| row | devices |" in proc.stdout


@pytest.mark.timeout(300)
def test_agents_option_adds_training_rows_for_each_agent(cpu_devices):
    """--agents ppo,pqn plans rows a and b for each agent (any registered name, nothing agent-specific
    in the benchmark); a PQN row trains in-process; an unknown name is refused by the parser."""
    args = anakin.parse_args(["--quick", "--devices", "1", "--agents", "ppo,pqn"])
    rows = anakin.plan(args)
    assert [(m.name, m.agent) for m in rows if m.is_training] == [
        ("a_reference", "ppo"), ("b_throughput", "ppo"), ("a_reference", "pqn"), ("b_throughput", "pqn")]
    assert anakin.describe(rows[2])["agent"] == "pqn"
    with pytest.raises(SystemExit):
        anakin.parse_args(["--agents", "ppo,nope"])
    result = anakin.measure_training(dataclasses.replace(rows[2], total_steps=4 * 128 * 2, updates_per_call=2))
    assert result["steps_per_second"] > 0 and result["steps_measured"] == 4 * 128 * 2


def test_bench_peers_without_the_peer_says_not_measured(tmp_path):
    """Without the peer venv the peer's cells say so, never a number; podrl's row is measured."""
    out = tmp_path / "peers.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.peer_ppo", "--quick", "--repeats", "1", "--only", "4x128",
         "--peer-python", str(tmp_path / "no-such-python"), "--out", str(out)],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(out.read_text())["rows"][0]
    assert row["podrl"]["measured"] and row["podrl"]["steps_per_second"] > 0
    assert not row["rejax"]["measured"] and row["steps_ratio"] is None
    assert "| 4x128 | rejax | not measured |" in proc.stdout and "not checked" in proc.stdout
