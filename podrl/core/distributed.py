"""Many hosts through `jax.distributed` (the engine TPU pods use); a no-op for one process.

One process per host runs the same command. After `initialize`, `jax.devices()`
lists the devices of every process and the layouts build their meshes from it;
each process feeds only its local devices. On CPU, cross-process collectives use
gloo. On a TPU VM `jax.distributed.initialize()` needs no arguments, and on SLURM
JAX reads the job's environment (`distributed_auto=True` does either). Each process owns every GPU
it sees unless several processes share its host (`local_device_ids`), and a coordinator named by a
loopback address listens there only (`podrl.core.cluster_env`).
"""

from __future__ import annotations

import dataclasses
import inspect
import socket
import sys
import time

import jax
import numpy as np
from jax.experimental import multihost_utils

from podrl.core import cluster_env, shared_compiles
from podrl.core.errors import ConfigError, require_int


@dataclasses.dataclass(frozen=True)
class DistributedConfig:
    """How this process joins a multi-process run."""

    coordinator: str | None = None
    """host:port of process 0's coordinator service (e.g. 127.0.0.1:12355); None = single process unless
    distributed_auto."""
    num_processes: int | None = None
    """Number of processes (hosts) in the run."""
    process_id: int | None = None
    """This process's index, 0 .. num_processes - 1."""
    distributed_auto: bool = False
    """Let JAX read the cluster from the environment (TPU VM pod slice, SLURM, ...)."""
    init_timeout_s: int = 60
    """Seconds to wait for every process to reach the coordinator before failing."""
    heartbeat_timeout_s: int = 100
    """Seconds without a heartbeat after which JAX's coordination service declares a process lost and ends the others
    (bounds how long a vanished host stalls the run)."""
    share_compiles: bool = False
    """Compile each program that spans processes once, on process 0; the others load its binary through the coordinator
    (needs the compilation cache on; machines of one kind only: the binary is built for process 0's; `podrl launch`
    turns it on)."""
    local_device_ids: str = "auto"
    """The GPUs this process owns: auto (every GPU it sees, unless several processes of a Slurm/MPI run share its host:
    then JAX's one GPU per local rank), all, jax (JAX's choice), or ids like 0,1,2,3."""
    coordinator_bind_address: str | None = None
    """host:port process 0's coordinator service listens on; None = the coordinator's address when it is a loopback one,
    else every interface (JAX's default)."""

    def __post_init__(self):
        require_int(self, "init_timeout_s")
        require_int(self, "heartbeat_timeout_s", minimum=2)
        self._check_hosts_fields()
        if self.distributed_auto:
            return
        given = [f for f in ("coordinator", "num_processes", "process_id") if getattr(self, f) is not None]
        if given and len(given) < 3:
            missing = sorted({"coordinator", "num_processes", "process_id"} - set(given))
            raise ConfigError(missing[0], f"a multi-process run needs coordinator, num_processes and process_id "
                                          f"(got only {given})")
        if not given:
            return
        require_int(self, "num_processes")
        require_int(self, "process_id", minimum=0)
        if self.process_id >= self.num_processes:
            raise ConfigError("process_id", f"{self.process_id} is out of range for num_processes="
                                            f"{self.num_processes} (expected 0 .. {self.num_processes - 1})")
        if not _is_host_port(self.coordinator):
            raise ConfigError("coordinator", f"expected 'host:port', got {self.coordinator!r}")

    def _check_hosts_fields(self) -> None:
        """ConfigError naming `local_device_ids` or `coordinator_bind_address` when malformed."""
        problem = cluster_env.check_local_device_ids(self.local_device_ids) \
            if isinstance(self.local_device_ids, str) else f"expected a string, got {self.local_device_ids!r}"
        if problem:
            raise ConfigError("local_device_ids", problem)
        bind = self.coordinator_bind_address
        if bind is not None and not (isinstance(bind, str) and _is_host_port(bind)):
            raise ConfigError("coordinator_bind_address", f"expected 'host:port' (e.g. 127.0.0.1:12355), got {bind!r}")

    @property
    def enabled(self) -> bool:
        return self.distributed_auto or (self.num_processes is not None and self.num_processes > 1)


_joined: DistributedConfig | None = None
"""The config this process joined its run with (None: one process)."""


def initialize(config: DistributedConfig) -> None:
    """Joins the run described by `config` (no-op for a single process). JAX's preemption service
    starts with it (`podrl.run.preemption` agrees on stops through it)."""
    global _joined
    if not config.enabled:
        return
    # CPU collectives across processes (harmless where the run uses TPUs/GPUs);
    # must be set before the backend starts, so no device query here.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    options = initialize_options(config)
    if config.distributed_auto:
        jax.distributed.initialize(**options)
    else:
        if config.process_id != 0:
            _check_reachable(config.coordinator, config.init_timeout_s)
        jax.distributed.initialize(coordinator_address=config.coordinator, num_processes=config.num_processes,
                                   process_id=config.process_id, **options)
    if config.share_compiles:
        shared_compiles.enable()
    _joined = config


def initialize_options(config: DistributedConfig) -> dict:
    """The keyword arguments of `jax.distributed.initialize` beyond who this process is: timeouts, the
    GPUs it owns and where the coordinator binds (`podrl.core.cluster_env`), each only when given and
    only those the installed JAX takes (a JAX without `coordinator_bind_address` gets a warning)."""
    wanted = dict(initialization_timeout=config.init_timeout_s, heartbeat_timeout_seconds=config.heartbeat_timeout_s,
                  local_device_ids=cluster_env.local_device_ids(config.local_device_ids),
                  coordinator_bind_address=cluster_env.bind_address(config.coordinator,
                                                                    config.coordinator_bind_address))
    known = inspect.signature(jax.distributed.initialize).parameters
    dropped = [name for name, value in wanted.items() if value is not None and name not in known]
    if dropped:
        consequence = "; its coordinator listens on every interface" if "coordinator_bind_address" in dropped else ""
        print(f"warning: the installed JAX's jax.distributed.initialize takes no {', '.join(dropped)}, so podrl "
              f"cannot pass it (upgrade JAX){consequence}", file=sys.stderr)
    return {name: value for name, value in wanted.items() if value is not None and name in known}


def heartbeat_timeout_s() -> int:
    """The heartbeat timeout this process's run was joined with (JAX's default, 100, for one process)."""
    return _joined.heartbeat_timeout_s if _joined is not None else DistributedConfig.heartbeat_timeout_s


def _check_reachable(coordinator: str, timeout_s: float) -> None:
    """Fails fast, naming the field, when no coordinator answers within `timeout_s`."""
    host, port = cluster_env.split_host_port(coordinator)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                return
        except OSError as e:
            if time.monotonic() > deadline:
                raise ConfigError("coordinator", f"no coordinator answered at {coordinator} within "
                                                 f"{timeout_s}s ({e}); is process 0 running?") from None
            time.sleep(0.2)


def _is_host_port(address: str) -> bool:
    host, port = cluster_env.split_host_port(address)
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


def is_main_process() -> bool:
    """True on the process that logs and writes files (process 0)."""
    return jax.process_index() == 0


def host_sum(values: np.ndarray) -> np.ndarray:
    """Sums a small float64 vector over all processes, exactly in float64 (identity for one process).

    JAX runs with 64-bit types off, so a float64 handed to a collective would travel as float32, whose
    integers are exact only up to 2^24 (Sebulba's env-step counts pass that at ~67M steps per process
    at 5 envs x 20 steps): each value travels as the two uint32 words of its float64 bits
    (`float64_words`), and the sum is NumPy's float64 over the processes in index order, the same on
    every process."""
    values = np.asarray(values, np.float64)
    if jax.process_count() == 1:
        return values
    gathered = np.asarray(multihost_utils.process_allgather(float64_words(values)))
    return words_float64(gathered, values.shape).sum(axis=0)


def float64_words(values: np.ndarray) -> np.ndarray:
    """uint32 `[2 * n]`: the bits of float64 `values` (any shape, n elements), two words each."""
    return np.ascontiguousarray(np.asarray(values, np.float64).reshape(-1)).view(np.uint32)


def words_float64(words: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """float64 `[P, *shape]`: `float64_words`' words of P processes, `[P, 2 * n]`, back as values."""
    words = np.ascontiguousarray(np.asarray(words, np.uint32))
    return words.view(np.float64).reshape((words.shape[0],) + tuple(shape))


__all__ = ["DistributedConfig", "initialize", "heartbeat_timeout_s", "is_main_process", "host_sum"]
