"""Smoke test of benchmarks.mesh_floor: --quick runs every measurement and writes the report.

No timing is asserted; the all-reduce count is: PPO's default 4 epochs x 4 minibatches each
average the gradients once, plus the per-update metrics and episode totals.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(400)
def test_quick_mesh_floor_benchmark_reports_latency_count_and_gap(tmp_path):
    out = tmp_path / "floor.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.mesh_floor", "--quick", "--repeats", "1",
                           "--out", str(out)], capture_output=True, text=True, timeout=380, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(out.read_text())
    assert not doc["errors"], doc["errors"]
    assert doc["sizes"][0] == 1 and doc["sizes"][1] > 1000  # the PPO params' size
    assert all(doc["latency_us"][d][str(s)] > 0 for d in ("1", "2") for s in doc["sizes"])
    assert 16 < doc["all_reduces_per_update"] < 20, doc["collectives"]
    assert doc["steps_per_second"]["1"] > 0 and doc["steps_per_second"]["2"] > 0
    assert doc["observed_gap_ms_per_update"] is not None and doc["collective_floor_ms_per_update"] > 0
    assert "| all-reduce of |" in proc.stdout and "All-reduces per update" in proc.stdout
