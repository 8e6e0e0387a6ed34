"""What differs between the jax versions podrl supports, decided in one place.

podrl runs on jax >= 0.10 (Python 3.11 stays on 0.10.x; 3.12+ gets 0.11 or 0.12). Where the versions
differ as podrl uses them, the decision is here or is written down here with where it lives; each has
its test in tests/core/test_compat.py:

- **jax 0.11.2 is excluded** (pyproject.toml): its XLA segfaults (SIGSEGV, in Shardy's
  `ManualComputationUnusedInputsPattern`) compiling a `shard_map` whose body closes over a zero-size
  NumPy constant on 2+ devices, which Brax's pipelines build, so Anakin's evaluation of a `brax:` env
  killed the process; 0.11.0, 0.11.1 and 0.12.x compile it. Where 0.11.2 is installed anyway (a
  `--no-deps` install, a pinned environment) `check_jax` warns once, when a mesh of 2+ devices is built.
- **`jax.lax.pvary` is gone in 0.11** (deprecated in 0.10): podrl marks values as varying over mesh axes
  with `jax.lax.pcast(x, axes, to="varying")`, which both have (`podrl.envs.varying`, below the floors
  this module stands on).
- **XLA:CPU's classic loop emitters flag** (`CLASSIC_EMITTERS`) exists up to jaxlib 0.10 only (0.11's
  XLA has no equivalent: `--xla_cpu_opt_preset=FAST_COMPILE`, in both, saves no compile CPU, see
  CONTRIBUTING.md), and an unknown XLA flag aborts the process: `xla_knows` tries a flag in a child
  process, and the suite (tests/conftest.py) and `benchmarks.compile_flags`' default sets add the flag
  only where it is known.
- The rest of what podrl uses is the same on both: `jax.shard_map` (top level), `jax.typeof(x)
  .manual_axis_type`, `jax.sharding.Mesh(..., axis_types=(AxisType.Auto, ...))` (podrl builds its meshes
  with explicit Auto axes, so `jax.make_mesh`'s Explicit default does not reach it), no `with mesh:` /
  `jax.set_mesh`. The suite fails on a DeprecationWarning from podrl's modules (pyproject.toml's
  `filterwarnings`), on every jax it runs on.

Imports no jax at module level: it reads versions from the installed distributions.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import warnings
from importlib import metadata

EXCLUDED_JAX = {
    "0.11.2": "its XLA segfaults compiling a shard_map that closes over a zero-size constant on 2+ devices "
              "(Anakin's evaluation of brax: envs does)",
}
"""jaxlib versions pyproject.toml excludes -> why."""


def jaxlib_version() -> str:
    """The installed jaxlib's version (XLA ships in jaxlib)."""
    return metadata.version("jaxlib")


def excluded_reason(version: str | None = None) -> str | None:
    """Why podrl excludes jaxlib `version` (default: the installed one), or None where it does not."""
    version = jaxlib_version() if version is None else version
    why = EXCLUDED_JAX.get(version)
    return None if why is None else (f"podrl: jax/jaxlib {version} is excluded: {why}; install another "
                                     f"version, e.g. pip install 'jax!={version}' 'jaxlib!={version}'")


@functools.cache
def check_jax() -> str | None:
    """Warns (once a process) where the installed jaxlib is one podrl excludes; returns the warning."""
    reason = excluded_reason()
    if reason is not None:
        warnings.warn(reason, RuntimeWarning, stacklevel=2)
    return reason


CLASSIC_EMITTERS = "--xla_cpu_use_fusion_emitters=false"
"""XLA:CPU's classic loop emitters instead of its fusion emitters (jaxlib <= 0.10 knows the flag): less
compile CPU, slower programs, float results that differ in the last bits (CONTRIBUTING.md)."""


def xla_knows(flag: str) -> bool:
    """Whether a child process with `flag` in XLA_FLAGS starts JAX's CPU backend (about 1 s, once: the
    answer is kept in this process's environment, which its children, e.g. test workers, inherit)."""
    name = "PODRL_XLA_KNOWS_" + "".join(c if c.isalnum() else "_" for c in flag.strip("-")).upper()
    if name not in os.environ:
        probe = subprocess.run([sys.executable, "-c", "import jax; jax.devices('cpu')"], capture_output=True,
                               env={**os.environ, "XLA_FLAGS": flag, "JAX_PLATFORMS": "cpu"}, timeout=300)
        os.environ[name] = str(int(probe.returncode == 0))
    return os.environ[name] == "1"
