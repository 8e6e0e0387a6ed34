"""Test session setup: a fake 8-device CPU mesh, set before JAX initialises, and a
session-wide persistent compilation cache (inherited by subprocesses through the
environment), so the many small runs that compile the same programs pay once."""

import os
import tempfile

TEST_XLA_FLAGS = "--xla_backend_optimization_level=1"
"""Compiler flags of the test programs: LLVM's optimisation level 1 instead of the default 2. The suite
is mostly XLA compilation (programs that run for seconds, compiled once each); measured on 2 cores
over 21 compile-heavy tests: CPU time -21%, wall -16%, the same results (parity and bit-identical
resume tests included). Subprocesses that inherit XLA_FLAGS compile the same way."""

# CLASSIC_EMITTERS: XLA:CPU's classic loop emitters instead of its fusion emitters: XLA compiles the suite's
# programs with 30-40% less CPU and runs them 20-35% slower, and their float results differ in the last bits
# (see CONTRIBUTING.md for the measurements and why the learning tests allow it). Added only where this
# jaxlib knows the flag (`xla_knows`, podrl.core.compat: jaxlib 0.11 dropped it): an unknown XLA flag aborts
# the process. Both names stay importable from here (tests import them from conftest).
from podrl.core.compat import CLASSIC_EMITTERS, xla_knows  # noqa: E402  (imports no jax)

if xla_knows(CLASSIC_EMITTERS):
    TEST_XLA_FLAGS += " " + CLASSIC_EMITTERS

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count=8 {TEST_XLA_FLAGS}"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="podrl-jax-cache-"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

USER_CACHE_HOME = tempfile.mkdtemp(prefix="podrl-user-cache-")
"""XDG_CACHE_HOME of the `user_env` subprocesses."""

import jax  # noqa: E402  (must come after XLA_FLAGS)
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def cpu_devices():
    devices = jax.devices("cpu")
    assert len(devices) == 8, f"expected the fake 8-device CPU mesh, got {len(devices)}"
    return devices


@pytest.fixture
def user_env() -> dict[str, str]:
    """Environment for a subprocess run as from a user's shell: no fake device mesh, no test
    compilation cache, this checkout importable; the default compilation cache
    (`$XDG_CACHE_HOME/podrl/jax`) goes to a folder of this test session, not the user's home.
    Only the suite's compiler flags (`TEST_XLA_FLAGS`: code generation, not behaviour) stay. Under
    `tools/check_mutations.py` (`PODRL_MUTATION_SITE`), the subprocess runs the mutated copy too."""
    from cli_runs import child_pythonpath

    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR")}
    return {**env, "PYTHONPATH": child_pythonpath(), "XDG_CACHE_HOME": USER_CACHE_HOME, "XLA_FLAGS": TEST_XLA_FLAGS}


MAX_WORKERS = 4
"""Most pytest-xdist workers `-n auto` starts: every worker holds its own JAX runtime with the fake
8-device mesh, and many tests start subprocesses of their own."""


def pytest_xdist_auto_num_workers(config):
    """One worker per core, up to MAX_WORKERS: the suite is mostly compilation, so it is CPU-bound
    (measured on 2 cores, 2026-12-04, the same 707 tests: 2 workers 25.7 min using 1.9 cores on
    average, 3 workers 32.9 min; a third worker only adds contention)."""
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))
