"""Smoke tests of benchmarks.peer_programs (peers missing) and benchmarks.gpu (dry run).

No timing is asserted: only that each side that can run ran, and that a missing peer is
reported as "not measured" with the way to get it, never as a number.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu
from benchmarks.peers import registry

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_dry_run_lists_every_step_within_the_budget():
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--dry-run"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for step in ("anakin_cartpole", "anakin_minatar", "sebulba_pong"):
        assert step in proc.stdout
    assert "python -m benchmarks.sebulba --envs ale:Pong --threads 1 2 4" in proc.stdout
    assert "--rows gpu" in proc.stdout and "--envs 1024 4096" in proc.stdout
    assert sum(s.budget_s for s in gpu.STEPS) <= 480 and "PLAN PROBLEM" not in proc.stderr


def test_gpu_plan_check_refuses_bad_flags_and_an_over_budget_plan():
    bad = gpu.Step("bad", "sebulba", ("--threads", "0"), 10)
    slow = gpu.Step("slow", "minatar", ("--devices", "1"), 500)
    problems = gpu.check_plan((bad, slow))
    assert any(p.startswith("bad: benchmarks.sebulba refuses --threads 0") for p in problems), problems
    assert any("510 s > 480 s" in p for p in problems), problems
    assert gpu.check_plan(gpu.STEPS) == []


def test_missing_peer_source_says_how_to_get_it(tmp_path):
    peer = registry.PEERS["stoix"]
    message = registry.source_status(peer, tmp_path)
    assert f"git clone {peer.repo} {tmp_path / 'stoix'}" in message and peer.commit in message
    (tmp_path / "stoix" / Path(peer.entry).parent).mkdir(parents=True)
    (tmp_path / "stoix" / peer.entry).write_text("")
    assert registry.source_status(peer, tmp_path) is None


@pytest.mark.timeout(300)
def test_peer_programs_without_the_peer_say_not_measured(tmp_path):
    """Sebulba row, --quick, no peer venv or source: podrl, its ceiling and its controls are measured."""
    out = tmp_path / "peers.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.peer_programs", "--quick", "--repeats", "1", "--rows", "sebulba",
         "--venv-root", str(tmp_path / "venvs"), "--src-root", str(tmp_path / "src"), "--out", str(out)],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(out.read_text())["rows"][0]
    assert row["podrl"]["measured"] and row["podrl"]["steps_per_second"] > 0
    assert row["ceiling"]["steps_per_second"] > 0 and row["fraction_of_ceiling"] > 0
    assert row["control_podrl"]["us_per_update"] > 0
    assert not row["peer"]["measured"] and not row["control_peer"]["measured"]
    assert row["actor_kernel"] == "act64" and row["actor_control_podrl"]["us_per_step"] > 0  # the actor control
    assert not row["actor_control_peer"]["measured"] and row["actor_control"] is None
    assert row["steps_ratio"] is None and row["control"] is None
    assert "| sebulba | stoix | not measured (stoix source not found" in proc.stdout
    assert "git clone https://github.com/EdanToledo/Stoix" in proc.stdout
    assert "- sebulba: advantages:" in proc.stdout  # the differences are listed


def test_the_actor_control_times_steps_in_this_venv():
    """benchmarks/peers/jax_control.py's actor kernel (run in each peer's venv too): a per-step time, not an
    update's; the update kernels still report per update."""
    from benchmarks.peers.jax_control import measure_spec

    actor = measure_spec({"kernel": "act64", "steps": 20, "repeats": 2})
    assert actor["us_per_step"] > 0 and "us_per_update" not in actor and actor["steps"] == 20
    update = measure_spec({"kernel": "mlp64", "steps": 2, "repeats": 1})
    assert update["us_per_update"] > 0 and "us_per_step" not in update
