"""Test session setup: a fake 8-device CPU mesh, set before JAX initialises, and a
session-wide persistent compilation cache (inherited by subprocesses through the
environment), so the many small runs that compile the same programs pay once."""

import os
import tempfile

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
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
    (`$XDG_CACHE_HOME/podrl/jax`) goes to a folder of this test session, not the user's home."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR")}
    return {**env, "PYTHONPATH": root, "XDG_CACHE_HOME": USER_CACHE_HOME}


MAX_WORKERS = 4
"""Most pytest-xdist workers `-n auto` starts: every worker holds its own JAX runtime with the fake
8-device mesh, and many tests start subprocesses of their own."""


def pytest_xdist_auto_num_workers(config):
    """One worker per core plus one, up to MAX_WORKERS: many tests spend much of their time waiting
    on subprocesses they started (multi-process launches, CLI runs, watchdog timeouts), so a spare
    worker keeps the cores busy (measured on 2 cores: 3 workers finish the suite in 30 min, the
    same suite in one process took 68)."""
    return max(1, min((os.cpu_count() or 1) + 1, MAX_WORKERS))
