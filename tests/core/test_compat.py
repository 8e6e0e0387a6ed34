"""What differs between the jax versions podrl supports (`podrl.core.compat`), one test per difference,
and the XLA bug that made pyproject.toml exclude jax 0.11.2."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P
from packaging.requirements import Requirement

from podrl.core import compat
from podrl.core.mesh import data_mesh, population_mesh
from podrl.core.parallel import DATA_AXIS
from podrl.envs.varying import vary_over, varying_axes

ROOT = Path(__file__).resolve().parents[2]

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


def test_the_excluded_jax_is_named_with_what_to_install(monkeypatch, cpu_devices):
    assert compat.excluded_reason("0.11.1") is None and compat.excluded_reason("0.10.2") is None
    reason = compat.excluded_reason("0.11.2")
    assert "jax/jaxlib 0.11.2 is excluded: its XLA segfaults" in reason and "pip install 'jax!=0.11.2'" in reason
    assert compat.excluded_reason() is None  # the suite never runs on an excluded jaxlib
    monkeypatch.setattr(compat, "jaxlib_version", lambda: "0.11.2")
    compat.check_jax.cache_clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            data_mesh(cpu_devices[:1])  # one device: nothing to warn about
        with pytest.warns(RuntimeWarning, match="0.11.2 is excluded"):
            population_mesh(cpu_devices[:2])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            data_mesh(cpu_devices[:2])  # once a process
    finally:
        compat.check_jax.cache_clear()


def test_pyproject_excludes_every_excluded_jax():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    jax_requirement = next(Requirement(d) for d in dependencies if Requirement(d).name == "jax")
    for version in compat.EXCLUDED_JAX:
        assert not jax_requirement.specifier.contains(version), (version, str(jax_requirement))
    assert jax_requirement.specifier.contains("0.10.2") and jax_requirement.specifier.contains("0.12.1")


def test_values_vary_over_mesh_axes_through_pcast_on_this_jax(cpu_devices):
    """jax 0.11 removed `jax.lax.pvary`; podrl casts with `pcast(..., to="varying")` (`podrl.envs.varying`),
    which every supported jax has. A cast value varies over the axis; its value is unchanged."""
    mesh = data_mesh(cpu_devices[:2])

    def body(x):
        varying = vary_over(x, [DATA_AXIS])
        assert DATA_AXIS in varying_axes(varying) and DATA_AXIS not in varying_axes(x)
        return jax.lax.psum(varying, DATA_AXIS)

    out = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(), out_specs=P()))(jnp.float32(1.5))
    assert float(out) == 3.0
    sources = [p for folder in ("podrl", "agents", "envs") for p in (ROOT / folder).rglob("*.py")]
    assert sources and not [p for p in sources if "pvary(" in p.read_text()]  # a call would break jax 0.11+


def test_a_deprecation_warning_from_podrl_code_fails_the_suite():
    """pyproject.toml's filterwarnings: a DeprecationWarning attributed to a podrl module is an error; one
    from another package stays a warning."""
    code = compile("import warnings\nwarnings.warn('old API', DeprecationWarning)", "<module>", "exec")
    with pytest.raises(DeprecationWarning, match="old API"):
        exec(code, {"__name__": "podrl.cli.somewhere"})
    with pytest.warns(DeprecationWarning, match="old API"):
        exec(code, {"__name__": "somelib.module"})
