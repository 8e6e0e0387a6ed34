"""What the fake cloud and cluster commands of tests/deploy share: the simulation's state folder
(FAKE_STATE), the record of every call, a job id whose JAX coordinator port is free, and the
variables through which a simulated host tells JAX who it is.

A real TPU VM worker learns its place in the slice from the TPU runtime (the metadata server), which
no CPU machine has; a simulated worker gets the variables of JAX's Slurm detection instead
(jax/_src/clusters/slurm_cluster.py: SLURM_JOB_ID, SLURM_STEP_NODELIST, SLURM_NTASKS, SLURM_PROCID,
SLURM_LOCALID), the one detector that works on CPU, so `--distributed-auto` finds the simulated
slice as it would the real one. The node list's first host, the coordinator, is `localhost`, and
JAX derives the port from the job id (`job_id % 4096 + 61440`): `free_job_id` picks an id whose
port is free. JAX_COORDINATOR_BIND_ADDRESS keeps that coordinator on loopback (no cluster network
here).
"""

from __future__ import annotations

import json
import os
import random
import socket
import time

STATE = os.environ["FAKE_STATE"]


def record(tool: str, argv: list[str], **extra) -> None:
    """Appends one call to FAKE_STATE/calls.jsonl."""
    with open(os.path.join(STATE, "calls.jsonl"), "a") as f:
        f.write(json.dumps({"tool": tool, "argv": argv, "time": time.time(), **extra}) + "\n")


def jax_slurm_port(job_id: int) -> int:
    """The coordinator port JAX's Slurm detection derives from the job id."""
    return job_id % 2**12 + (65535 - 2**12 + 1)


def free_job_id() -> int:
    """A job id whose JAX coordinator port nothing listens on now (on 127.0.0.1)."""
    for _ in range(200):
        job_id = random.randint(10_000, 9_999_999)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", jax_slurm_port(job_id)))
            except OSError:
                continue
        return job_id
    raise RuntimeError("no free port in JAX's Slurm range")


def slurm_task_env(job_id: int, nodes: int, per_node: int, procid: int, gpus: int) -> dict[str, str]:
    """The variables srun gives task `procid` of a step of `nodes` x `per_node` tasks (and JAX's bind address)."""
    hosts = ",".join(["localhost"] + [f"127.0.0.{n + 1}" for n in range(1, nodes)])
    env = {
        "SLURM_JOB_ID": str(job_id), "SLURM_STEP_NODELIST": hosts, "SLURM_NTASKS": str(nodes * per_node),
        "SLURM_STEP_NUM_TASKS": str(nodes * per_node), "SLURM_STEP_NUM_NODES": str(nodes),
        "SLURM_STEP_TASKS_PER_NODE": f"{per_node}(x{nodes})", "SLURM_PROCID": str(procid),
        "SLURM_LOCALID": str(procid % per_node), "SLURM_NODEID": str(procid // per_node),
        "JAX_COORDINATOR_BIND_ADDRESS": f"127.0.0.1:{jax_slurm_port(job_id)}",
    }
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, range(gpus)))
    return env


def passed_on(environ: dict[str, str]) -> dict[str, str]:
    """What a simulated host keeps of the test's environment: JAX and XLA settings (the suite's
    compiler flags and compilation cache), caches, and the simulation's own FAKE_* variables."""
    keep = ("XDG_CACHE_HOME", "TMPDIR", "LANG")
    return {k: v for k, v in environ.items() if k.startswith(("JAX_", "XLA_", "FAKE_")) or k in keep}
