"""podrl.core.shared_compiles: the pieces that run in one process (a 2-process pod that loads every program
spanning processes from process 0 is tests/system/test_multihost.py's MuZero checkpoint test)."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from podrl.core import shared_compiles


def _devices(*placements, platform="cpu"):
    """Fake devices (global id, process index), as the cache key sees them."""
    return np.array([SimpleNamespace(id=i, process_index=p, device_kind="cpu", platform=platform)
                     for i, p in placements], dtype=object)


def _digest(hash_fn, devices) -> str:
    h = hashlib.sha256()
    hash_fn(h, devices)
    return h.hexdigest()


def test_cpu_programs_spanning_processes_get_one_key_everywhere():
    """JAX's own hash reads the calling process's CPU topology (it differs per process); the pod-wide one
    reads only the global device assignment and the host CPU, so every process computes the same key."""
    calls = []

    def per_process(hash_obj, accelerators):  # stands in for JAX's: a different value on every call
        calls.append(accelerators)
        hash_obj.update(str(len(calls)).encode())

    pod_wide = shared_compiles._pod_wide_accelerator_config(per_process)
    pod = _devices((0, 0), (1, 0), (2048, 1), (2049, 1))
    assert _digest(pod_wide, pod) == _digest(pod_wide, pod) and not calls
    assert _digest(pod_wide, pod) != _digest(pod_wide, _devices((0, 0), (2048, 1)))  # other devices, other key
    assert _digest(pod_wide, pod[::-1]) != _digest(pod_wide, pod)  # the device order is the program's too
    for local in (_devices((0, 0), (1, 0)), _devices((0, 0), (2048, 1), platform="tpu")):
        _digest(pod_wide, local)  # one process's program, or another platform: JAX's key, untouched
        assert calls[-1] is local
    assert shared_compiles.host_cpu()


def test_another_jax_leaves_sharing_off_with_a_warning(monkeypatch):
    from jax._src import compiler

    monkeypatch.setattr(compiler, "_cache_read", lambda key, options: (None, None))  # other arguments
    before = jax.config.jax_share_binary_between_hosts
    with pytest.warns(UserWarning, match="share_compiles is not supported"):
        assert shared_compiles.enable() is False
    assert jax.config.jax_share_binary_between_hosts == before and compiler._cache_read.__name__ == "<lambda>"
