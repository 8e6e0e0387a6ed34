"""The one driver (`podrl.run.driver`): the evaluation schedule counts updates in both layouts, a run
stops at the first evaluation that reaches `stop_at_return`, and a NaN/Inf from the env stops a run
with one message naming the input and where it came from."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from faulty_envs import NaNAfter, NaNWhenRepeated
from podrl.anakin import train_anakin
from podrl.core.errors import ConfigError, NonFiniteError
from podrl.envs.adapters.jax_host import JaxHostVectorEnv
from podrl.run.checkpoint import Checkpointer
from podrl.run.config import CheckpointConfig, LoggingConfig
from podrl.run.driver import eval_due, reached_target
from podrl.sebulba import train_sebulba
from tiny_runs import AGENT, anakin, sebulba

ROOT = Path(__file__).resolve().parents[2]


def evaluated_at(history) -> list[int]:
    return [r["updates"] for r in history if "eval_return" in r]


def test_eval_due_counts_updates():
    assert [u for u in (4, 8, 12) if eval_due(8, u - 4, u, 12, 12)] == [8, 12]  # 8 in 5..8, and the end
    assert [u for u in (2, 4, 6, 8) if eval_due(3, u - 2, u, 8, 8)] == [4, 6, 8]
    assert not eval_due(0, 0, 4, 12, 12) and eval_due(0, 8, 12, 12, 12)


@pytest.mark.timeout(240)
def test_anakin_eval_every_counts_updates(cpu_devices):
    """12 updates, 4 per call, eval_every=8: after the call reaching update 8 and after the last."""
    result = train_anakin(anakin(eval_every=8), AGENT)
    assert evaluated_at(result.history) == [8, 12]


@pytest.mark.timeout(240)
def test_sebulba_eval_every_counts_updates_like_anakin(cpu_devices):
    """Records every 2 updates; eval_every=3: at the records whose window reached 3 and 6, and the last."""
    result = train_sebulba(sebulba(eval_every=3), AGENT)
    assert [r["updates"] for r in result.history] == [2, 4, 6, 8]
    assert evaluated_at(result.history) == [4, 6, 8]


def test_reached_target_needs_every_seed_at_or_above_it():
    assert reached_target(4.0, 4.0) and not reached_target(3.9, 4.0)
    assert reached_target(np.array([5.0, 4.0]), 4.0) and not reached_target(np.array([5.0, 3.0]), 4.0)
    assert not reached_target(None, -1e9)  # this process did not evaluate (one process: never reached)


@pytest.mark.parametrize("overrides, why", [
    (dict(stop_at_return=float("nan")), "finite number"),
    (dict(stop_at_return=400.0, eval_episodes=0), "eval_episodes is 0"),
    (dict(stop_at_return=400.0, eval_every=0), "eval_every is 0"),
    (dict(stop_at_return=400.0, eval_every=8, eval_async=True), "eval_async is on"),
])
def test_stop_at_return_without_periodic_evaluations_is_a_config_error(overrides, why):
    for make in (anakin, sebulba):
        with pytest.raises(ConfigError, match=why) as info:
            make(**overrides)
        assert info.value.field == "stop_at_return"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("layout", ["anakin", "sebulba"])
def test_stop_at_return_stops_at_the_first_evaluation_that_reaches_it(cpu_devices, tmp_path, layout):
    """The same programs as the tests above: a target every return reaches stops the run after its first
    evaluation (update 4 of 12, or 2 of 8) with the final checkpoint there; one no return reaches changes
    nothing (every evaluation, to the end)."""
    make, train, first, last = (anakin, train_anakin, 4, 12) if layout == "anakin" else (sebulba, train_sebulba, 2, 8)
    every = dict(eval_every=4) if layout == "anakin" else dict(eval_every=2)
    checkpoints = CheckpointConfig(directory=str(tmp_path / "ckpt"))
    stopped = train(make(stop_at_return=-1e9, checkpoint=checkpoints, **every), AGENT)
    assert stopped.stopped_by == "stop_at_return" and evaluated_at(stopped.history) == [first], stopped.history
    assert stopped.history[-1]["updates"] == first
    assert Checkpointer(str(tmp_path / "ckpt"), read_only=True).latest_step() == first
    ran = train(make(stop_at_return=1e9, **every), AGENT)
    assert ran.stopped_by is None and evaluated_at(ran.history)[-1] == last, ran.history


@pytest.mark.timeout(240)
def test_anakin_nan_reward_in_evaluation_only_stops_the_run(cpu_devices):
    with pytest.raises(NonFiniteError, match=r"non-finite \(NaN/Inf\) reward in 8 of 8 greedy episode\(s\) "
                                             r"of the evaluation after update 4"):
        train_anakin(anakin(total_steps=8 * 16 * 8, eval_every=4), AGENT, env=NaNWhenRepeated())


@pytest.mark.timeout(240)
def test_sebulba_nan_reward_in_evaluation_only_stops_the_run(cpu_devices):
    factory = lambda j, n: JaxHostVectorEnv(NaNWhenRepeated(), n)  # noqa: E731
    with pytest.raises(NonFiniteError, match=r"reward in 4 of 4 greedy episode\(s\) of the evaluation after update 2"):
        train_sebulba(sebulba(eval_every=2), AGENT, env_factory=factory)


@pytest.mark.timeout(240)
def test_anakin_nan_reward_in_training_names_the_reward_and_update(cpu_devices):
    """NaN from the 40th step of each env: rollout 2 (steps 33..48) of update 2, inside the call of updates 0..3."""
    with pytest.raises(NonFiniteError) as info:
        train_anakin(anakin(), AGENT, env=NaNAfter(40))
    assert str(info.value).startswith("the env returned a non-finite (NaN/Inf) reward in the training rollout "
                                      "of update 2; train/"), str(info.value)


@pytest.mark.timeout(240)
def test_sebulba_nan_reward_in_training_names_the_reward_thread_and_update(cpu_devices):
    factory = lambda j, n: JaxHostVectorEnv(NaNAfter(20), n)  # noqa: E731  steps 17..24: rollout 2
    with pytest.raises(NonFiniteError) as info:
        train_sebulba(sebulba(total_steps=4 * 8 * 50), AGENT, env_factory=factory)
    assert str(info.value).startswith("the env returned a non-finite (NaN/Inf) reward in the training rollout "
                                      "of update 2 (actor thread 0)"), str(info.value)


class CrashingEnv(JaxHostVectorEnv):
    def __init__(self, num_envs: int, k: int):
        super().__init__(NaNAfter(10**9), num_envs)
        self.k, self.count = k, 0

    def step(self, actions):
        self.count += 1
        if self.count >= self.k:
            raise RuntimeError(f"user env crashed at step {self.count}")
        return super().step(actions)


@pytest.mark.timeout(240)
def test_sebulba_env_crash_says_which_checkpoint_was_saved(cpu_devices, tmp_path):
    """The crash comes in rollout 2 or 3 (the env check steps the first env too); the learner's updates
    before it are saved, and the message names that checkpoint's update and folder."""
    logging = LoggingConfig(run_dir=str(tmp_path), run_name="r", console=False, tensorboard=False)
    config = sebulba(total_steps=4 * 8 * 50, logging=logging, eval_episodes=0, lag="0")
    with pytest.raises(RuntimeError, match="user env crashed at step 28") as info:
        train_sebulba(config, AGENT, env_factory=lambda j, n: CrashingEnv(n, 28))
    notes = "\n".join(getattr(info.value, "__notes__", []))
    found = re.search(r"checkpointed: last good checkpoint: update (\d+) in (\S+)", notes)
    assert found and found[2] == str(tmp_path / "r" / "checkpoints") and int(found[1]) >= 2, notes
    assert sorted(os.listdir(found[2])) == [found[1]]  # saved only because of the crash


def run_cli(*flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"),
                                                       os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "scripts/train_anakin.py", "--num-envs", "8", "--rollout-length", "16",
                           "--num-devices", "1", "--updates-per-call", "4", "--eval-episodes", "4",
                           "--logging.run-dir", "None", "--cpu-devices", "1", *flags],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.timeout(320)
@pytest.mark.parametrize("env, where", [
    ("faulty_envs:NaNWhenRepeated", "of the evaluation after update 4"),
    ("faulty_envs:NaNAfter", "in the training rollout of update 2"),
])
def test_cli_nan_from_the_env_prints_one_error_line(env, where):
    done = run_cli("--env", env, "--total-steps", str(8 * 16 * 8), "--eval-every", "4")
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert len(errors) == 1 and "non-finite (NaN/Inf) reward" in errors[0] and where in errors[0], done.stderr
