"""deploy/tpu_spot_loop.sh and deploy/tpu_vm.sh as written, against a simulated Cloud TPU (fakes/gcloud:
queued resources, slices of 2 local workers, `ssh --worker=all` as one `bash -c` per worker, fresh
homes for every slice; fakes/worker_tool.sh: the workers' curl, git, sudo, apt-get, mount).

A Spot slice is requested (the largest size waits in the queue, then a smaller one comes up), set up
(uv's Python 3.12 environment, podrl, jax[tpu], the share mounted and made writable), and trains;
a SIGTERM to worker 1 (a preemption notice) stops both workers at one update with a checkpoint;
the loop deletes the slice, decides to retry (`podrl retry-decision`), gets a new slice, sets it up
afresh and resumes to the total. A run that fails by itself, and a failed setup, stop the loop at
once, the slice deleted.
"""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess

import pytest
from simulation import DEPLOY, PER_UPDATE, STEP_LINE, TOTAL_UPDATES, TRAIN, Simulation, sigterm, stopped_at

from podrl.run.checkpoint_folder import complete_steps

LOOP = str(DEPLOY / "tpu_spot_loop.sh")
SHELLCHECK = shutil.which("shellcheck")


@pytest.fixture
def sim(tmp_path) -> Simulation:
    return Simulation(tmp_path)


def loop_env(sim: Simulation, **extra: str) -> dict[str, str]:
    mount = sim.root / "mnt"
    return dict(TPU_NAME="spot", ZONE="us-central2-b", PODRL_REPO="https://example.com/you/podrl.git",
                PODRL_REF="v1.2", SHARE="10.0.0.2:/share", MOUNT=str(mount), CKPT=str(mount / "runs/r/checkpoints"),
                LOGS=str(sim.root / "logs"), ACCELERATOR_TYPES="v4-32 v4-16", QUEUE_TIMEOUT_S="1", POLL_S="1",
                RETRY_SLEEP_S="1", **extra)


def queued(sim: Simulation, verb: str) -> list[list[str]]:
    return [argv for argv in sim.calls("gcloud") if argv[2:4] == ["queued-resources", verb]]


def ssh_commands(sim: Simulation) -> list[str]:
    return [next(a.partition("=")[2] for a in argv if a.startswith("--command=")) for argv in sim.calls("gcloud")
            if argv[2:4] == ["tpu-vm", "ssh"]]


@pytest.mark.timeout(420)
def test_a_preempted_spot_slice_is_recreated_set_up_afresh_and_resumes_to_the_total(sim):
    (sim.state / "plan.json").write_text(json.dumps({"v4-32": ["WAITING_FOR_RESOURCES", "FAILED"]}))
    mount = sim.root / "mnt"
    train = TRAIN + ["--logging.run-dir", str(mount / "runs")]
    with sim.start([LOOP, *train], **loop_env(sim)) as loop:
        loop.wait_for(STEP_LINE, timeout=240)
        first_slice = max((sim.state / "slices").iterdir(), key=lambda p: int(p.name.rsplit("-", 1)[1]))
        sigterm(first_slice / "w1.pid")
        code = loop.finish(timeout=150)
    text = loop.text
    assert code == 0, text[-4000:]
    stop = stopped_at(text)
    assert 0 < stop < TOTAL_UPDATES, text[-4000:]
    assert re.search(rf"attempt 1 \(exit 0\): retry: stopped by SIGTERM to process 1 at update {stop} ", text), text
    assert f"updates {stop}..{TOTAL_UPDATES} of {TOTAL_UPDATES}" in text, text[-4000:]  # resumed, on the new slice
    assert f"attempt 2 (exit 0): done: done at update {TOTAL_UPDATES}" in text, text[-4000:]
    assert complete_steps(str(mount / "runs/r/checkpoints"))[-1] == TOTAL_UPDATES
    last = json.loads((mount / "runs/r/metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == TOTAL_UPDATES * PER_UPDATE  # the first run's folder continued

    # Spot capacity through queued resources, largest size first; every request released
    sizes = [next(a for a in argv if a.startswith("--accelerator-type=")) for argv in queued(sim, "create")]
    assert sizes == ["--accelerator-type=v4-32", "--accelerator-type=v4-16"] * 2, sizes
    assert all({"--spot", "--node-id=spot", "--runtime-version=tpu-ubuntu2204-base"} <= set(argv)
               for argv in queued(sim, "create"))
    assert len(queued(sim, "delete")) == 4 and all("--force" in argv for argv in queued(sim, "delete"))
    assert not list((sim.state / "tpus").iterdir())  # nothing left running

    # one log per attempt: the first has the stop and no end, the second the end and no stop
    logs = sorted((sim.root / "logs").iterdir())
    assert [p.name.split("-attempt-")[1] for p in logs] == ["1-v4-16.log", "2-v4-16.log"], logs
    first, second = (p.read_text() for p in logs)
    assert "stopped by SIGTERM" in first and "done at update" not in first
    assert "done at update" in second and "stopped by" not in second

    # each new slice was set up from scratch on every worker, as a fresh VM needs
    setups = [c for c in ssh_commands(sim) if "podrl-venv" in c and "--distributed-auto" not in c]
    assert len(setups) == 2 and all('/.local/bin/uv" venv -p 3.12 --seed podrl-venv' in c for c in setups)
    calls = sim.worker_calls()
    for tool, args in [("curl", "-LsSf https://astral.sh/uv/install.sh"),
                       ("git", "clone -q https://example.com/you/podrl.git podrl"),
                       ("git", "-C podrl fetch -q origin v1.2"),
                       ("apt-get", "-q -o DPkg::Lock::Timeout=600 install -y nfs-common"),
                       ("mount", f"-t nfs 10.0.0.2:/share {mount}"), ("sudo", f"install -d -m 1777 {mount}/runs")]:
        assert sorted(w for w, t, a in calls if (t, a) == (tool, args)) == ["w0", "w0", "w1", "w1"], (tool, calls)
    assert ("w0", "uv", "pip install -q --python podrl-venv/bin/python -e ./podrl jax[tpu]") in calls
    assert stat.S_IMODE((mount / "runs").stat().st_mode) == 0o1777
    runs = [c for c in ssh_commands(sim) if "--distributed-auto" in c]
    assert len(runs) == 2 and all('exec "$podrl"' in c and f"RESUME_FROM={mount}/runs/r/checkpoints" in c
                                  for c in runs)
    if SHELLCHECK:  # what the workers ran, as bash read it: shellcheck clean too
        for command in set(setups + runs):
            done = subprocess.run([SHELLCHECK, "-s", "bash", "-"], input=command, capture_output=True, text=True)
            assert done.returncode == 0, done.stdout + command


@pytest.mark.timeout(240)
@pytest.mark.parametrize("case", ["run error", "failed setup"])
def test_the_loop_stops_at_once_on_an_error_that_a_retry_would_repeat(sim, case):
    """A config error (exit 2) and a setup that fails (here: git) are not preemptions: one attempt,
    the slice deleted, exit 1."""
    extra = {"FAKE_FAIL": "git"} if case == "failed setup" else {}
    bad = ["anakin", "--env", "MatchCue-v0", "--total-steps", "100", "--cpu-devices", "1"]  # < one update: exit 2
    with sim.start([LOOP, *bad], **loop_env(sim, **extra)) as loop:
        code = loop.finish(timeout=200)
    assert code == 1, loop.text[-4000:]
    assert len(queued(sim, "create")) == 1 and len(queued(sim, "delete")) == 1  # one attempt, its slice deleted
    assert not list((sim.state / "tpus").iterdir())
    if case == "failed setup":
        assert "setup failed: stopping" in loop.text and not [c for c in ssh_commands(sim) if "--distributed-auto" in c]
    else:
        assert "attempt 1 (exit 2): stop: a process's own error (exit 2: a config or input error)" in loop.text, \
            loop.text[-4000:]
