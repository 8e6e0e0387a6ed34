"""Smoke test of benchmarks.scaling: --quick with 1 and 2 local processes writes rows and a plot.

Only checks that every point ran through the launcher and produced a positive SPS;
no timing is asserted.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(420)
def test_quick_scaling_benchmark_writes_rows_and_plot(tmp_path):
    out, png = tmp_path / "scaling.json", tmp_path / "scaling.png"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.scaling", "--quick", "--processes", "1", "2", "--timeout", "180",
         "--out", str(out), "--plot", str(png)],
        capture_output=True, text=True, timeout=400, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(out.read_text())
    assert doc["jax_version"] and doc["cpu_count"] and doc["timestamp"] and len(doc["load_average_at_end"]) == 3
    rows = doc["rows"]
    assert {(r["layout"], r["processes"]) for r in rows} == {
        ("anakin", 1), ("anakin", 2), ("sebulba", 1), ("sebulba", 2)}
    for row in rows:
        assert "error" not in row, row
        assert row["steps_per_second"] > 0 and row["records"] >= 2, row
        assert row["devices_total"] == 2 * row["processes"], row
        assert row["envs_total"] == row["envs_per_process"] * row["processes"], row
        # process 0 logged the global step count: every process's envs are counted
        assert row["final_step"] == row["updates"] * row["envs_total"] * row["rollout_length"], row
    assert all(r["speedup_vs_1_process"] == 1.0 for r in rows if r["processes"] == 1)
    assert "| layout | processes | devices total |" in proc.stdout
    assert png.stat().st_size > 10_000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
