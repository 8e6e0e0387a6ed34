"""What a process of a multi-process run passes `jax.distributed.initialize` beyond who it is: the
GPUs it owns (`local_device_ids`) and where process 0's coordinator listens
(`coordinator_bind_address`). Read from the environment with the standard library alone.

GPUs. Where JAX detects a cluster that names a local rank (Slurm: `SLURM_LOCALID`; Open MPI:
`OMPI_COMM_WORLD_LOCAL_RANK`) and the caller passes no `local_device_ids`, JAX makes the process
see ONE GPU, the one of its local rank (jax/_src/clusters/cluster.py), never on a Cloud TPU VM.
That fits one process per GPU; with one process per host (podrl's layouts: one process drives
all of its host's devices) every process would see GPU 0 only. So `local_device_ids("auto")` is
every GPU the process sees when it is the only process of the run on its host, and JAX's own
choice when several share the host. JAX applies the ids to CUDA/ROCm only
(`jax_cuda_visible_devices`); on CPU and TPU they change nothing.

Binding. Without `coordinator_bind_address`, JAX's coordinator service listens on `[::]:<port>`,
every interface of the host; a coordinator named by a loopback address is for processes of this
host only, so it binds there (`bind_address`).
"""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Mapping

LOCAL_DEVICE_CHOICES = ("auto", "all", "jax")
"""The words `local_device_ids` takes besides a list of ids ('0,1,2,3')."""

VISIBLE_DEVICES_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
"""The variables that list the GPUs a process sees (Slurm sets CUDA_VISIBLE_DEVICES to a job's GPUs)."""

SLURM_DETECTED = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")
"""The variables whose presence turns on JAX's Slurm detection (jax/_src/clusters/slurm_cluster.py)."""


def check_local_device_ids(value: str) -> str | None:
    """Why `value` is not a `local_device_ids` setting, or None when it is one."""
    if value in LOCAL_DEVICE_CHOICES or re.fullmatch(r"\d+(,\d+)*", value):
        ids = [] if value in LOCAL_DEVICE_CHOICES else value.split(",")
        return None if len(set(ids)) == len(ids) else f"{value!r} names a device twice"
    return f"expected one of {', '.join(LOCAL_DEVICE_CHOICES)} or device ids like '0,1,2,3', got {value!r}"


def visible_gpus(environ: Mapping[str, str] = os.environ, dev: str = "/dev") -> int:
    """How many GPUs this process sees: the entries of the first of `VISIBLE_DEVICES_VARS` that is set
    (ids or UUIDs; empty or -1: none), else the NVIDIA device nodes (`/dev/nvidia<N>`)."""
    for name in VISIBLE_DEVICES_VARS:
        if name in environ:
            entries = [e for e in environ[name].split(",") if e.strip()]
            return 0 if entries[:1] in ([], ["-1"], ["NoDevFiles"]) else len(entries)
    try:
        return sum(1 for name in os.listdir(dev) if re.fullmatch(r"nvidia\d+", name))
    except OSError:
        return 0


def alone_on_host(environ: Mapping[str, str] = os.environ) -> bool | None:
    """Whether a cluster JAX detects runs this process alone on its host (Slurm: no more tasks than
    nodes; Open MPI: a local size of 1); None outside such a cluster."""
    if all(name in environ for name in SLURM_DETECTED):
        nodes = next((environ[n] for n in ("SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES")
                      if n in environ), None)
        return nodes is not None and int(environ["SLURM_NTASKS"]) <= int(nodes)
    if "OMPI_COMM_WORLD_LOCAL_SIZE" in environ:
        return int(environ["OMPI_COMM_WORLD_LOCAL_SIZE"]) == 1
    return None


def local_device_ids(setting: str, environ: Mapping[str, str] = os.environ, dev: str = "/dev") -> list[int] | None:
    """The `local_device_ids` to pass `jax.distributed.initialize` for `setting` (None: pass none, JAX chooses).

    'auto': every GPU this process sees when a detected cluster runs it alone on its host (else
    JAX's choice: outside a cluster all devices, with several processes per host the GPU of the
    local rank); 'all': every GPU it sees; 'jax': JAX's choice; '0,1,3': those. No GPU seen: None.
    """
    if setting == "jax":
        return None
    if setting not in LOCAL_DEVICE_CHOICES:
        return [int(i) for i in setting.split(",")]
    if setting == "auto" and not alone_on_host(environ):
        return None
    gpus = visible_gpus(environ, dev)
    return list(range(gpus)) if gpus else None


def split_host_port(address: str) -> tuple[str, str]:
    """('host', 'port') of 'host:port' or '[v6]:port' (brackets dropped)."""
    host, _, port = address.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), port


def is_loopback(host: str) -> bool:
    """Whether `host` names this host's loopback interface (localhost, 127.0.0.0/8, ::1)."""
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_address(coordinator: str | None, given: str | None) -> str | None:
    """Where process 0's coordinator service listens: `given`, else the coordinator's own address when
    its host is a loopback address, else None (JAX's default: every interface, or
    JAX_COORDINATOR_BIND_ADDRESS)."""
    if given is not None:
        return given
    if coordinator is not None and is_loopback(split_host_port(coordinator)[0]):
        return coordinator
    return None
