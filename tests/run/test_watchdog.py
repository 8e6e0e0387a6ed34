"""The stage watchdog: a stalled init, compile or train call becomes an error naming the stage,
and the command-line run exits non-zero instead of waiting for ever."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from podrl.anakin.config import AnakinConfig
from podrl.core.errors import ConfigError
from podrl.run.watchdog import STALL_EXIT_CODE, StageTimeout, within

ROOT = Path(__file__).resolve().parents[2]


def test_within_returns_the_ready_result():
    state, metrics = within("train call", 60, lambda: (jnp.arange(4.0) * 2, {"loss": jnp.ones(())}))
    np.testing.assert_array_equal(state, [0.0, 2.0, 4.0, 6.0])
    assert float(metrics["loss"]) == 1.0


def test_within_reraises_the_stage_error():
    def broken():
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        within("init", 60, broken)


def test_a_stalled_stage_raises_naming_stage_and_timeout():
    release = threading.Event()
    start = time.monotonic()
    try:
        with pytest.raises(StageTimeout) as info:
            within("compile", 0.5, release.wait)
    finally:
        release.set()
    assert time.monotonic() - start < 10
    assert info.value.stage == "compile" and info.value.timeout_s == 0.5
    assert str(info.value).startswith("compile did not finish within 0.5s (timeout_s)")


def test_zero_timeout_waits_in_the_calling_thread():
    assert within("init", 0, threading.current_thread) is threading.current_thread()


def test_timeout_field_is_checked():
    assert AnakinConfig().timeout_s == 600.0
    with pytest.raises(ConfigError) as info:
        AnakinConfig(timeout_s=-1.0)
    assert info.value.field == "timeout_s"


STALL_ENV = '''
import os
import threading

import jax

import podrl.envs


class StallIn:
    """CartPole whose reset or step (env var PODRL_TEST_STALL) blocks for ever inside XLA."""

    def __init__(self):
        self.env = podrl.envs.make("CartPole-v1")
        self.where = os.environ["PODRL_TEST_STALL"]

    def _gate(self, name, timestep):
        if name != self.where:
            return timestep
        obs = timestep.observation
        stalled = jax.pure_callback(lambda x: threading.Event().wait() and x,  # never returns
                                    jax.ShapeDtypeStruct(obs.shape, obs.dtype), obs, vmap_method="sequential")
        return timestep._replace(observation=stalled)

    def reset(self, key):
        state, timestep = self.env.reset(key)
        return state, self._gate("reset", timestep)

    def step(self, state, action):
        state, timestep = self.env.step(state, action)
        return state, self._gate("step", timestep)

    def observation_spec(self):
        return self.env.observation_spec()

    def action_spec(self):
        return self.env.action_spec()
'''


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where, timeout_s, stage", [
    ("reset", 10, "init"),
    ("step", 30, "train call (updates 0..31)"),  # leaves init and compile time to finish (~5 s each, 15 s loaded)
])
def test_cli_stalled_stage_exits_naming_it(tmp_path, user_env, where, timeout_s, stage):
    (tmp_path / "stall_env.py").write_text(STALL_ENV)
    env = {**user_env, "PODRL_TEST_STALL": where, "PYTHONPATH": f"{user_env['PYTHONPATH']}{os.pathsep}{tmp_path}"}
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train_anakin.py"), "--env", "stall_env:StallIn",
         "--total-steps", "16384", "--timeout-s", str(timeout_s), "--logging.run-dir", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env)
    assert result.returncode == STALL_EXIT_CODE, result.stderr[-3000:]
    assert f"error: {stage} did not finish within {timeout_s}s (timeout_s)" in result.stderr, result.stderr[-3000:]
    assert time.monotonic() - start < 200
