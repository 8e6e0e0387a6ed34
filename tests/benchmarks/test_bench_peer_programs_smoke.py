"""Smoke tests of benchmarks.peer_programs (peers missing) and benchmarks.gpu (dry run).

No timing is asserted: only that each side that can run ran, and that a missing peer is
reported as "not measured" with the way to get it, never as a number.
"""

import importlib.metadata
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


def test_a_same_jax_row_runs_no_control_and_says_so():
    """A `-samejax` row: the same peer program and podrl spec, the peer's same_jax venv, no control sides,
    and its table cells say "same jax: no control" instead of a control figure."""
    from benchmarks import peer_programs as pp

    row = pp.ROWS["sebulba-samejax"]
    assert registry.PEERS[row.peer].same_jax and row.peer_spec == pp.ROWS["sebulba"].peer_spec
    assert registry.PEERS[row.peer].source() == registry.PEERS["stoix"].source()  # Stoix's own tree
    assert pp.sides(row) == ("peer", "podrl", "ceiling")
    assert "control_peer" in pp.sides(pp.ROWS["sebulba"])
    assert pp.quick(pp.ROWS["minatar-ppo-samejax"]).peer_spec["total_timesteps"] == 8192  # one PPO update
    run = {"steps_per_second": 200.0, "wall_seconds": 10.0, "final_return": 20.0, "jax_version": "0.10.2"}
    mine = importlib.metadata.version("jax")
    entry = pp.summarize(row, {"peer": [run], "podrl": [{**run, "steps_per_second": 300.0, "jax_version": mine}],
                               "ceiling": [{"steps_per_second": 600.0}]})
    assert entry["steps_ratio"] == 1.5 and entry["control"] is None and entry["framework_ratio"] is None
    text = pp.markdown([entry])
    assert "| sebulba-samejax | stoix-samejax (jax 0.10.2) |" in text
    assert f"| sebulba-samejax | podrl (jax {mine}) |" in text  # podrl's venv's jax
    assert ("NOT the same" in text) == (mine != "0.10.2")  # a venv made for another jax is said to be
    assert text.count("same jax: no control") == 3  # both control cells and podrl's ratio cell
    assert "actor control" not in text.split("\n\n")[0]  # no actor control figure in the table


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ["minatar-ppo-samejax", "minatar-pqn-samejax", "sebulba-samejax"])
def test_same_jax_row_runs_the_peer_on_podrls_jax(tmp_path, name):
    """--quick end to end where the peer's `-samejax` venv and source tree are present (skipped where not:
    `--setup-peer <peer>-samejax` and the clone it prints): the peer's program ran on podrl's jax."""
    import jax

    from benchmarks import peer_programs as pp

    peer = registry.PEERS[pp.ROWS[name].peer]
    if not peer.python().exists() or registry.source_status(peer):
        pytest.skip(f"{peer.name} venv or source absent (python -m benchmarks.peer_programs --setup-peer {peer.name})")
    venv_jax = subprocess.run([str(peer.python()), "-c", "import jax; print(jax.__version__)"], capture_output=True,
                              text=True, timeout=120).stdout.strip()
    if venv_jax != jax.__version__:
        pytest.skip(f"{peer.name} venv has jax {venv_jax}, this podrl {jax.__version__}: made for another podrl "
                    f"(python -m benchmarks.peer_programs --setup-peer {peer.name})")
    out = tmp_path / "peers.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.peer_programs", "--quick", "--repeats", "1", "--rows",
                           name, "--out", str(out)], capture_output=True, text=True, timeout=580, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(out.read_text())["rows"][0]
    assert row["peer"]["measured"], row["peer"]["runs"]
    assert row["peer"]["jax_version"] == jax.__version__ and row["podrl"]["measured"]
    assert "control_peer" not in row and row["control"] is None and row["steps_ratio"] > 0
    assert "same jax: no control" in proc.stdout
