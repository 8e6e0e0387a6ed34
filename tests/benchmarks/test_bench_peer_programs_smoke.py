"""Smoke tests of scripts/bench_peer_programs.py (peers missing) and scripts/bench_gpu.py (dry run).

No timing is asserted: only that each side that can run ran, and that a missing peer is
reported as "not measured" with the way to get it, never as a number.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(SCRIPTS / "peers"))
import bench_gpu  # noqa: E402  (the scripts folder is not a package)
import registry  # noqa: E402


def test_gpu_dry_run_lists_every_step_within_the_budget():
    proc = subprocess.run([sys.executable, str(SCRIPTS / "bench_gpu.py"), "--dry-run"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for step in ("anakin_cartpole", "anakin_minatar", "sebulba_pong"):
        assert step in proc.stdout
    assert "bench_sebulba.py --envs ale:Pong --threads 1 2 4" in proc.stdout
    assert "--rows gpu" in proc.stdout and "--envs 1024 4096" in proc.stdout
    assert sum(s.budget_s for s in bench_gpu.STEPS) <= 480 and "PLAN PROBLEM" not in proc.stderr


def test_gpu_plan_check_refuses_bad_flags_and_an_over_budget_plan():
    bad = bench_gpu.Step("bad", "bench_sebulba.py", ("--threads", "0"), 10)
    slow = bench_gpu.Step("slow", "bench_minatar.py", ("--devices", "1"), 500)
    problems = bench_gpu.check_plan((bad, slow))
    assert any(p.startswith("bad: bench_sebulba.py refuses --threads 0") for p in problems), problems
    assert any("510 s > 480 s" in p for p in problems), problems
    assert bench_gpu.check_plan(bench_gpu.STEPS) == []


def test_missing_peer_source_says_how_to_get_it(tmp_path):
    peer = registry.PEERS["stoix"]
    message = registry.source_status(peer, tmp_path)
    assert f"git clone {peer.repo} {tmp_path / 'stoix'}" in message and peer.commit in message
    (tmp_path / "stoix" / Path(peer.entry).parent).mkdir(parents=True)
    (tmp_path / "stoix" / peer.entry).write_text("")
    assert registry.source_status(peer, tmp_path) is None


@pytest.mark.timeout(300)
def test_peer_programs_without_the_peer_say_not_measured(tmp_path):
    """Sebulba row, --quick, no peer venv or source: podrl, its ceiling and its control are measured."""
    out = tmp_path / "peers.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "bench_peer_programs.py"), "--quick", "--repeats", "1", "--rows", "sebulba",
         "--venv-root", str(tmp_path / "venvs"), "--src-root", str(tmp_path / "src"), "--out", str(out)],
        capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(out.read_text())["rows"][0]
    assert row["podrl"]["measured"] and row["podrl"]["steps_per_second"] > 0
    assert row["ceiling"]["steps_per_second"] > 0 and row["fraction_of_ceiling"] > 0
    assert row["control_podrl"]["us_per_update"] > 0
    assert not row["peer"]["measured"] and not row["control_peer"]["measured"]
    assert row["steps_ratio"] is None and row["control"] is None
    assert "| sebulba | stoix | not measured (stoix source not found" in proc.stdout
    assert "git clone https://github.com/EdanToledo/Stoix" in proc.stdout
    assert "- sebulba: advantages:" in proc.stdout  # the differences are listed
