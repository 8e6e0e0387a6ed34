"""What differs between the jax versions podrl supports (`podrl.core.compat`), one test per difference,
and the XLA bug that made pyproject.toml exclude jax 0.11.2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ZERO_SIZE_CONSTANT_IN_SHARD_MAP = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import PartitionSpec as P
mesh = jax.make_mesh((2,), ("d",), devices=jax.devices()[:2])
empty = np.zeros((0,), np.float32)  # a zero-size constant the shard_map body closes over
f = jax.shard_map(lambda x: jnp.concatenate([empty, x]), mesh=mesh, in_specs=P(), out_specs=P())
print(jax.jit(f)(jnp.ones(1)))
"""


@pytest.mark.timeout(120)
def test_xla_compiles_a_shard_map_that_closes_over_a_zero_size_constant():
    """jaxlib 0.11.2's XLA dies (SIGSEGV) in Shardy's canonicalizer (ManualComputationUnusedInputsPattern)
    compiling this program on 2+ devices; Brax's pipelines build such constants, so Anakin's evaluation on
    `brax:` envs crashed there. pyproject.toml excludes that jax; this fails if it comes back. In a child
    process, as a segfault would take the test worker with it."""
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", ZERO_SIZE_CONSTANT_IN_SHARD_MAP], capture_output=True, text=True,
                          env=env, timeout=100)
    assert done.returncode == 0, f"exit {done.returncode} (-11: XLA segfaulted): {done.stderr[-2000:]}"
    assert done.stdout.strip() == "[1.]"
