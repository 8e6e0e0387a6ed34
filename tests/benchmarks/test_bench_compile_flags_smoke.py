"""Smoke test of benchmarks.compile_flags: --quick compiles and runs PPO's train call under both default
sets of flags (where this XLA knows the classic-emitters flag; two other sets where it does not), each in
its own process, and writes the JSON. No timing is asserted."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.compile_flags import DEFAULT_FLAGS, LEVEL_1, default_flags
from conftest import CLASSIC_EMITTERS, TEST_XLA_FLAGS, xla_knows

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_quick_compile_flags_benchmark_writes_a_row_per_set(tmp_path):
    # the benchmark's default sets are the suite's flags without and with the classic emitters
    assert DEFAULT_FLAGS == [LEVEL_1, f"{LEVEL_1} {CLASSIC_EMITTERS}"] and LEVEL_1 in TEST_XLA_FLAGS.split()
    assert default_flags() == (DEFAULT_FLAGS if xla_knows(CLASSIC_EMITTERS) else [LEVEL_1])  # none aborts
    out = tmp_path / "flags.json"
    sets = DEFAULT_FLAGS if xla_knows(CLASSIC_EMITTERS) else ["", LEVEL_1]
    command = [sys.executable, "-m", "benchmarks.compile_flags", "--quick", "--out", str(out)]
    proc = subprocess.run(command + [f"--flags={flags}" for flags in sets], capture_output=True, text=True,
                          timeout=280, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "compile_flags" and doc["jax_version"] and doc["repeats"] == 1
    rows = doc["rows"]
    assert [(r["flags"], r["agent"]) for r in rows] == [(flags, "ppo") for flags in sets]
    for row in rows:
        assert "error" not in row, row
        assert row["compile_cpu_seconds"] > 0 and row["compile_seconds"] > 0 and row["steps_per_second"] > 0, row
    assert "| XLA_FLAGS | agent | compile CPU s |" in proc.stdout
