"""podrl.core.cluster_env and what `podrl.core.distributed.initialize` passes `jax.distributed.initialize`:
the GPUs a process owns under a simulated Slurm / Open MPI environment, where the coordinator binds, and
a JAX that lacks a keyword (a 2-process run under the fake srun is tests/deploy/test_slurm_scripts.py; the
coordinator's listening sockets, tests/system/test_coordinator_bind.py)."""

from __future__ import annotations

import inspect

import jax
import pytest

from podrl.core import cluster_env, distributed
from podrl.core.distributed import DistributedConfig
from podrl.core.errors import ConfigError

SLURM_ONE_PER_NODE = {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "gpu[01-04]", "SLURM_NTASKS": "4",
                      "SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_STEP_NUM_NODES": "4"}
"""srun's variables for task 2 of a 4-node step, one task per node (JAX's Slurm detection reads the first five)."""
SLURM_TWO_PER_NODE = {**SLURM_ONE_PER_NODE, "SLURM_NTASKS": "8", "SLURM_LOCALID": "1"}
NO_STEP_NODES = {k: v for k, v in SLURM_ONE_PER_NODE.items() if k != "SLURM_STEP_NUM_NODES"}


@pytest.fixture
def no_devices(tmp_path):
    """A /dev with no GPU node."""
    return str(tmp_path)


@pytest.mark.parametrize("setting, environ, expected", [
    # one task per node: every GPU Slurm gave it (JAX alone would give [SLURM_LOCALID] = [0])
    ("auto", {**SLURM_ONE_PER_NODE, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}, list(range(8))),
    ("auto", {**SLURM_ONE_PER_NODE, "CUDA_VISIBLE_DEVICES": "4,5"}, [0, 1]),  # ordinals as the process sees them
    ("auto", {**SLURM_ONE_PER_NODE, "CUDA_VISIBLE_DEVICES": "GPU-1a2b,GPU-3c4d"}, [0, 1]),  # UUIDs count too
    ("auto", {**NO_STEP_NODES, "SLURM_NNODES": "4", "CUDA_VISIBLE_DEVICES": "0,1"}, [0, 1]),  # the job's count
    ("auto", {**NO_STEP_NODES, "CUDA_VISIBLE_DEVICES": "0,1"}, None),  # no node count: JAX's choice, not a guess
    # several tasks share a node: JAX's one GPU per task; "all" overrides it
    ("auto", {**SLURM_TWO_PER_NODE, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}, None),
    ("all", {**SLURM_TWO_PER_NODE, "CUDA_VISIBLE_DEVICES": "0,1,2,3"}, [0, 1, 2, 3]),
    ("auto", {"OMPI_COMM_WORLD_LOCAL_SIZE": "1", "CUDA_VISIBLE_DEVICES": "0,1,2"}, [0, 1, 2]),
    ("auto", {"OMPI_COMM_WORLD_LOCAL_SIZE": "4", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}, None),
    # outside a cluster JAX already gives all; no GPU at all: nothing to pass (CPU, TPU)
    ("auto", {"CUDA_VISIBLE_DEVICES": "0,1"}, None),
    ("auto", dict(SLURM_ONE_PER_NODE), None),
    ("auto", {**SLURM_ONE_PER_NODE, "CUDA_VISIBLE_DEVICES": ""}, None),
    ("auto", {**SLURM_ONE_PER_NODE, "CUDA_VISIBLE_DEVICES": "-1"}, None),
    ("jax", {**SLURM_ONE_PER_NODE, "CUDA_VISIBLE_DEVICES": "0,1"}, None),
    ("1,3", {}, [1, 3]),
])
def test_local_device_ids_are_every_gpu_of_the_task(setting, environ, expected, no_devices):
    assert cluster_env.local_device_ids(setting, environ, dev=no_devices) == expected


def test_without_cuda_visible_devices_the_gpu_device_nodes_are_counted(tmp_path):
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-modeset"):
        (tmp_path / name).touch()
    assert cluster_env.visible_gpus({}, dev=str(tmp_path)) == 3
    assert cluster_env.local_device_ids("auto", SLURM_ONE_PER_NODE, dev=str(tmp_path)) == [0, 1, 2]


@pytest.mark.parametrize("coordinator, given, expected", [
    ("127.0.0.1:1234", None, "127.0.0.1:1234"),
    ("localhost:1234", None, "localhost:1234"),
    ("[::1]:1234", None, "[::1]:1234"),
    ("127.0.0.2:1234", None, "127.0.0.2:1234"),
    ("10.0.0.5:1234", None, None),  # another host's processes must reach it: JAX's default
    ("node01:1234", None, None),
    ("10.0.0.5:1234", "10.0.0.5:1234", "10.0.0.5:1234"),
    (None, None, None),  # auto-detected: JAX picks the coordinator
    (None, "127.0.0.1:7", "127.0.0.1:7"),
])
def test_a_loopback_coordinator_binds_to_its_own_address_only(coordinator, given, expected):
    assert cluster_env.bind_address(coordinator, given) == expected


@pytest.mark.parametrize("fields, field", [
    (dict(local_device_ids="gpus"), "local_device_ids"),
    (dict(local_device_ids="0,,1"), "local_device_ids"),
    (dict(local_device_ids="0,1,0"), "local_device_ids"),
    (dict(coordinator_bind_address="127.0.0.1"), "coordinator_bind_address"),
    (dict(coordinator_bind_address="127.0.0.1:99999"), "coordinator_bind_address"),
])
def test_bad_hosts_fields_are_named(fields, field):
    with pytest.raises(ConfigError) as info:
        DistributedConfig(distributed_auto=True, **fields)
    assert info.value.field == field


def test_a_slurm_process_passes_every_gpu_and_its_bind_address_to_jax(monkeypatch):
    """Auto-detected and by hand (`--coordinator` under srun: JAX's detection still runs while
    SLURM_JOB_ID is set, so the ids must be passed in both)."""
    for name, value in {**SLURM_ONE_PER_NODE, "CUDA_VISIBLE_DEVICES": "0,1,2,3"}.items():
        monkeypatch.setenv(name, value)
    auto = distributed.initialize_options(DistributedConfig(distributed_auto=True))
    assert auto == dict(initialization_timeout=60, heartbeat_timeout_seconds=100, local_device_ids=[0, 1, 2, 3])
    by_hand = distributed.initialize_options(DistributedConfig("127.0.0.1:5000", 4, 2, local_device_ids="all"))
    assert by_hand["local_device_ids"] == [0, 1, 2, 3] and by_hand["coordinator_bind_address"] == "127.0.0.1:5000"
    assert set(by_hand) <= set(inspect.signature(jax.distributed.initialize).parameters)


def test_a_jax_without_coordinator_bind_address_is_told_and_not_given_it(monkeypatch, capsys):
    def old_initialize(coordinator_address=None, num_processes=None, process_id=None, local_device_ids=None,
                       initialization_timeout=300, heartbeat_timeout_seconds=100):
        raise AssertionError("not called here")

    monkeypatch.setattr(jax.distributed, "initialize", old_initialize)
    options = distributed.initialize_options(DistributedConfig("127.0.0.1:5000", 2, 0))
    assert "coordinator_bind_address" not in options and options["initialization_timeout"] == 60
    assert "takes no coordinator_bind_address" in capsys.readouterr().err
