"""Compile once per pod: process 0 compiles each program that spans processes; the others load its binary.

JAX has the mechanism (`jax_share_binary_between_hosts`). On a persistent-cache miss, the process that
holds the program's first device compiles it and puts the binary in the coordination service's
key-value store under the program's cache key; the other processes wait for it there instead of
compiling. Two gaps keep it from working as it is, and `enable` closes both:

- **XLA:CPU keys differ per process.** JAX's cache key hashes the topology of the process's own CPU
  client (local devices 0.. on process 0, 2048.. on process 1), so each process computes another
  key for the same program. The others then wait for a key that is never written (seen on jax 0.10.2:
  a 2-process `podrl anakin` pod timed out). For a CPU program whose devices span processes, the
  key here hashes the devices' global ids, process indices and kinds, and the host's CPU model and
  feature flags, in place of that topology. Other platforms keep JAX's key (theirs is global already).
- **A cache hit is not shared.** A process that finds the program in the persistent cache neither
  compiles nor shares it. If process 0 finds it and another process does not (an entry that a
  concurrent run, sharing the cache folder, wrote in between their lookups), that process would wait
  for the whole share timeout (20 minutes). Here process 0 also shares a program it loaded from the cache.

Both are patches of JAX internals (`jax._src.cache_key._hash_accelerator_config`,
`jax._src.compiler._cache_read`). `enable` checks that they are there with the arguments it expects;
where they are not (another JAX), sharing stays off, a warning says so, and every process compiles for
itself as before. Sharing needs the persistent compilation cache on (the key is the cache's key) and
the same cache folder path on every process (JAX writes the path into every program's compile
options, so another path is another key, and a process would wait for a binary never shared).
The binary is built for process 0's machine, so turn this on only for processes on machines of one
kind (a `podrl launch` pod does, on one machine; a homogeneous cluster).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import platform
import warnings

import jax

_published: set[str] = set()
"""Cache keys this process has shared after loading them from the persistent cache."""
_enabled = False


def enable() -> bool:
    """Turns on sharing for this process (call on every process, after `jax.distributed.initialize`);
    returns whether it is on. Idempotent."""
    global _enabled
    if _enabled:
        return True
    try:
        from jax._src import cache_key, compilation_cache, compiler

        wanted = {"cache_key", "backend", "executable_devices"}
        ok = (wanted <= set(inspect.signature(compiler._cache_read).parameters)
              and list(inspect.signature(cache_key._hash_accelerator_config).parameters)[:2]
              == ["hash_obj", "accelerators"]
              and hasattr(compiler._compile_and_share_module, "modules_cache")
              and all(hasattr(compilation_cache, name) for name in (
                  "_get_cache", "compress_executable", "decompress_executable", "extract_executable_and_time")))
    except (ImportError, AttributeError, ValueError):
        ok = False
    if not ok:
        warnings.warn(f"podrl: share_compiles is not supported on jax {jax.__version__} (its compile cache "
                      "internals differ); every process compiles its own programs", stacklevel=2)
        return False
    cache_key._hash_accelerator_config = _pod_wide_accelerator_config(cache_key._hash_accelerator_config)
    compiler._cache_read = _sharing_cache_hits(compiler._cache_read)
    jax.config.update("jax_share_binary_between_hosts", True)
    _enabled = True
    return True


def _spans_processes(devices) -> bool:
    return len({device.process_index for device in devices}) > 1


@functools.cache
def host_cpu() -> str:
    """The host CPU's model and feature flags (Linux's /proc/cpuinfo), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
        wanted = ("model name", "flags", "Features", "CPU part")  # x86 and Arm spellings
        first = {}
        for line in lines:
            name, _, value = line.partition(":")
            if name.strip() in wanted:
                first.setdefault(name.strip(), value.strip())
        if first:
            return repr(sorted(first.items()))
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def _pod_wide_accelerator_config(original):
    """JAX's accelerator-config hash, with CPU programs that span processes keyed alike on every process."""

    def hash_accelerator_config(hash_obj, accelerators, *args, **kwargs):
        devices = list(accelerators.flat)
        if not devices or devices[0].platform != "cpu" or not _spans_processes(devices):
            return original(hash_obj, accelerators, *args, **kwargs)
        text = ";".join(f"{d.id}:{d.process_index}:{d.device_kind}" for d in devices)
        hash_obj.update(hashlib.sha256(f"podrl-cpu-pod|{text}|{host_cpu()}".encode()).digest())
        return None

    return hash_accelerator_config


def _sharing_cache_hits(original):
    """JAX's persistent-cache read; on the process that would compile a program that spans processes,
    a hit is also put in the key-value store, where the others wait for it after a miss."""
    signature = inspect.signature(original)

    def cache_read(*args, **kwargs):
        executable, compile_time = original(*args, **kwargs)
        if executable is not None:
            given = signature.bind(*args, **kwargs).arguments
            _share_hit(given["cache_key"], given["backend"], list(given["executable_devices"]))
        return executable, compile_time

    return cache_read


def _share_hit(key: str, backend, devices: list) -> None:
    """Puts the persistent cache's entry `key` in the key-value store, as JAX's share path would after a
    compile. The cached bytes are shared as stored: an XLA:CPU executable loaded from the cache and
    serialized again lacks its compiled functions (jax 0.10.2: "NOT_FOUND: Function ... not found")."""
    from jax._src import compilation_cache, compiler, distributed

    client = distributed.global_state.client
    if (client is None or not jax.config.jax_share_binary_between_hosts or not _spans_processes(devices)
            or min(devices, key=lambda d: d.id).process_index != distributed.global_state.process_id
            or key in _published or key in compiler._compile_and_share_module.modules_cache):
        return
    entry = compilation_cache._get_cache(backend).get(key)
    serialized, _ = compilation_cache.extract_executable_and_time(compilation_cache.decompress_executable(entry))
    try:
        client.key_value_set_bytes(key, compilation_cache.compress_executable(serialized))
    except Exception as error:  # noqa: BLE001  (a key set before, e.g. by JAX's own share path)
        if "ALREADY_EXISTS" not in str(error).upper().replace(" ", "_"):
            raise
    _published.add(key)


__all__ = ["enable", "host_cpu"]
