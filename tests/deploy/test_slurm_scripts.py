"""deploy/slurm.sbatch and deploy/slurm_requeue.sbatch as written, against a simulated Slurm (fakes/sbatch,
srun, scontrol: tasks as local processes with the variables JAX's Slurm detection reads; the
coordinator on the node list's first host, `localhost`, at the port JAX derives from the job id).

* Every GPU of a task is its own: with one task per node and 4 GPUs a node, each of the 2 processes
  hands JAX all 4 (`jax_cuda_visible_devices` 0,1,2,3; JAX alone would give each GPU 0 only); with
  2 tasks sharing a node, each keeps JAX's one GPU, its SLURM_LOCALID's.
* The requeue script: a SIGTERM to task 1 stops both tasks at one update with a checkpoint; the
  script requeues the job (`scontrol requeue`), whose second run resumes to the total in a log of its
  own; a run that fails by itself is not requeued.
"""

from __future__ import annotations

import json
import re
import sys

import pytest
from simulation import DEPLOY, PER_UPDATE, STEP_LINE, TOTAL_UPDATES, TRAIN, Simulation, sigterm, stopped_at

from podrl.run.checkpoint_folder import complete_steps

REPORT = f"""#!{sys.executable}
# A stand-in for the podrl command: joins the run as `podrl anakin` does, then says what JAX made of it.
import json, sys
from podrl.cli.train import set_up_devices
set_up_devices(sys.argv[2:])
import jax
report = dict(process=jax.process_index(), processes=jax.process_count(), local_devices=jax.local_device_count(),
              gpus=jax.config.values["jax_cuda_visible_devices"])
sys.stdout.write("REPORT " + json.dumps(report) + "\\n")  # one write: the tasks share srun's output
sys.stdout.flush()
"""


@pytest.fixture
def sim(tmp_path) -> Simulation:
    return Simulation(tmp_path)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nodes, per_node, gpus, expected", [
    (2, 1, 4, ["0,1,2,3", "0,1,2,3"]),  # one task per node: all of the node's GPUs
    (1, 2, 2, ["0", "1"]),  # two tasks share a node: JAX's one GPU each, by SLURM_LOCALID
])
def test_each_slurm_task_owns_every_gpu_of_its_node_unless_tasks_share_it(sim, nodes, per_node, gpus, expected):
    report = sim.root / "report"
    report.write_text(REPORT)
    report.chmod(0o755)
    options = [f"--nodes={nodes}", f"--ntasks-per-node={per_node}", f"--gpus-per-node={gpus}"]
    with sim.start(["sbatch", *options, str(DEPLOY / "slurm.sbatch"), "anakin", "--cpu-devices", "1"],
                   PODRL=str(report)) as job:
        code = job.finish(timeout=100)
    assert code == 0, job.text[-4000:]
    reports = sorted((json.loads(line.split(" ", 1)[1]) for line in job.lines if line.startswith("REPORT ")),
                     key=lambda r: r["process"])
    assert [r["gpus"] for r in reports] == expected, job.text[-4000:]
    assert all(r["processes"] == 2 and r["local_devices"] == 1 for r in reports), reports  # one real 2-process run
    srun = sim.calls("srun")
    assert srun == [[str(report), "anakin", "--cpu-devices", "1", "--distributed-auto"]], srun


@pytest.mark.timeout(420)
def test_the_requeue_script_resumes_a_preempted_job_to_the_total_in_a_log_per_run(sim):
    checkpoints = sim.root / "runs/r/checkpoints"
    train = TRAIN + ["--logging.run-dir", str(sim.root / "runs")]
    with sim.start(["sbatch", "--nodes=2", str(DEPLOY / "slurm_requeue.sbatch"), *train], CKPT=str(checkpoints)) as job:
        job.wait_for(STEP_LINE, timeout=240)
        sigterm(next((sim.state / "steps").iterdir()) / "task1.pid")
        code = job.finish(timeout=150)
    text = job.text
    assert code == 0, text[-4000:]
    stop = stopped_at(text)
    assert 0 < stop < TOTAL_UPDATES, text[-4000:]
    assert re.search(rf"restart 0 \(srun exit 0\): retry: stopped by SIGTERM to process 1 at update {stop} ", text)
    assert f"updates {stop}..{TOTAL_UPDATES} of {TOTAL_UPDATES}" in text, text[-4000:]
    assert f"restart 1 (srun exit 0): done: done at update {TOTAL_UPDATES}" in text, text[-4000:]
    assert complete_steps(str(checkpoints))[-1] == TOTAL_UPDATES
    last = json.loads((sim.root / "runs/r/metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == TOTAL_UPDATES * PER_UPDATE
    job_id = text.split("Submitted batch job ")[1].split()[0]
    assert sim.calls("scontrol") == [["requeue", job_id]]
    srun = sim.calls("srun")
    assert len(srun) == 2 and "--resume" not in srun[0] and srun[1][-2:] == ["--resume", str(checkpoints)], srun
    first, second = (sim.state / f"podrl-logs/job-{job_id}-{n}.log" for n in (0, 1))  # in the submit folder
    assert "stopped by SIGTERM" in first.read_text() and "done at update" not in first.read_text()
    assert "done at update" in second.read_text() and "stopped by" not in second.read_text()


@pytest.mark.timeout(120)
def test_the_requeue_script_does_not_requeue_a_run_that_fails_by_itself(sim):
    bad = ["anakin", "--env", "MatchCue-v0", "--total-steps", "100", "--cpu-devices", "1"]  # < one update: exit 2
    checkpoints = sim.root / "ckpt"
    with sim.start(["sbatch", "--nodes=2", str(DEPLOY / "slurm_requeue.sbatch"), *bad], CKPT=str(checkpoints)) as job:
        code = job.finish(timeout=100)
    assert code == 1, job.text[-4000:]
    assert "restart 0 (srun exit 2): stop: a process's own error (exit 2" in job.text, job.text[-4000:]
    assert sim.calls("scontrol") == [] and len(sim.calls("srun")) == 1
