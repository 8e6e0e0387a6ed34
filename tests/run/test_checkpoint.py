"""Checkpoints: exact Anakin resume, Sebulba resume, stop signals, atomic writes, refusals."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from checkpoints import anakin, leaves, logs
from compile_spy import spy_compiles
from podrl.agents.ppo import PPOConfig
from podrl.agents.pqn import PQNConfig
from podrl.anakin import train_anakin
from podrl.core.errors import ConfigError
from podrl.envs.adapters.jax_host import JaxHostVectorEnv
from podrl.run.checkpoint import Checkpointer
from podrl.run.checkpoint_folder import resume_dir
from podrl.run.config import CheckpointConfig
from podrl.sebulba import SebulbaConfig, train_sebulba
from resume_twins import ConstantBandit

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("agent", [PPOConfig(), PPOConfig(core="lstm", core_size=16),
                                   PQNConfig(epsilon_decay_fraction=1.0), PPOConfig(normalize_observations=True)],
                         ids=["ppo", "ppo-lstm", "pqn", "ppo-obs-norm"])
def test_anakin_stop_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path, cpu_devices, agent, monkeypatch):
    """With an LSTM core the actors' core states (`acting.actor_state`) resume too; PQN's params
    carry epsilon (its first leaf, still decaying at update 4 with the decay over the whole run); with
    normalize_observations the params carry the running statistics (their count shows the resume).
    The restored state is laid out as a fresh one, so the resumed run loads its programs from the
    compilation cache instead of compiling them again."""
    whole = train_anakin(anakin(tmp_path, "whole"), agent)
    first = train_anakin(anakin(tmp_path, "part", stop_after_updates=4), agent)
    assert first.stopped_by == "stop_after_updates"
    assert int(np.asarray(first.state.train_state.update_step)[0]) == 4
    assert [r["updates"] for r in first.history] == [3, 4]
    compiled = spy_compiles(patch=monkeypatch.setattr)
    rest = train_anakin(anakin(tmp_path, "rest", resume=str(tmp_path / "part")), agent)
    assert not {"jit__call_shard", "jit__eval_shard"} & set(compiled), compiled
    assert rest.stopped_by is None
    assert int(np.asarray(rest.state.train_state.update_step)[0]) == 10
    # it started at update 4 and ran exactly the 6 missing updates (calls 4..7 and 7..10);
    # a restore that returned a fresh state would redo all 10 and still end bit-identical
    assert [r["updates"] for r in rest.history] == [7, 10]
    assert [r["step"] for r in rest.history] == [7 * 8 * 16, 10 * 8 * 16]
    for a, b in zip(leaves(whole.state), leaves(rest.state), strict=True):  # params, optimizer, env states, keys
        np.testing.assert_array_equal(a, b)
    if getattr(agent, "core", "none") != "none":  # the carried core states are among the leaves compared, and not zeros
        assert np.abs(leaves(rest.state.acting.actor_state)[0]).max() > 0
    assert not np.array_equal(leaves(first.state.train_state.params)[0], leaves(rest.state.train_state.params)[0])
    if getattr(agent, "normalize_observations", False):  # the statistics counted all 10 updates' observations
        assert float(np.asarray(rest.state.train_state.params["obs_norm"].count)[0]) == 10 * 8 * 16 / 2
    # the resumed run kept writing into the checkpoint folder it resumed from
    assert Checkpointer(resume_dir(str(tmp_path / "part")), read_only=True).latest_step() == 10


@pytest.mark.timeout(300)
def test_resume_refuses_a_different_config_naming_the_fields(tmp_path, cpu_devices):
    train_anakin(anakin(tmp_path, "a", stop_after_updates=2), PPOConfig())
    changed = dataclasses.replace(anakin(tmp_path, "b", resume=str(tmp_path / "a")), num_envs=4)
    with pytest.raises(ConfigError) as info:
        train_anakin(changed, PPOConfig(learning_rate=1e-3))
    assert info.value.field == "resume"
    assert "run.num_envs (checkpoint: 8, now: 4)" in str(info.value)
    assert "agent.learning_rate (checkpoint: 0.00025, now: 0.001)" in str(info.value)
    # safe fields (total steps, logging, evaluation) may change
    longer = dataclasses.replace(anakin(tmp_path, "c", resume=str(tmp_path / "a")), total_steps=8 * 16 * 12)
    assert train_anakin(longer, PPOConfig()).stopped_by is None


@pytest.mark.timeout(300)
def test_sebulba_resume_restores_the_learner_exactly(tmp_path, cpu_devices):
    """Sebulba (lag 0, one actor thread) saves and restores the learner state exactly; host envs
    are not checkpointed (a gymnasium env's state can't be saved in general), so after a resume
    actors start fresh episodes and the continuation differs from an uninterrupted run, except
    in the optimizer's step counters (bit-for-bit equality on a stateless env is the next test)."""
    def config(name, **checkpoint):
        return SebulbaConfig(env="jax:CartPole-v1", envs_per_thread=4, rollout_length=16, total_steps=4 * 16 * 8,
                             actor_devices=(0,), learner_devices=(1,), lag="0", eval_episodes=0,
                             logging=logs(tmp_path, name), checkpoint=CheckpointConfig(**checkpoint))

    first = train_sebulba(config("part", stop_after_updates=3), PPOConfig(num_minibatches=2))
    assert first.stopped_by == "stop_after_updates" and first.env_steps == 3 * 4 * 16
    saved = Checkpointer(resume_dir(str(tmp_path / "part")), read_only=True)
    assert saved.latest_step() == 3
    restored = saved.restore_params(first.train_state.params)
    for a, b in zip(leaves(first.train_state.params), leaves(restored), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(leaves(first.train_state), leaves(saved.restore_state(first.train_state)), strict=True):
        np.testing.assert_array_equal(a, b)  # the whole learner state is on disk, the optimizer's too
    saved.close()
    rest = train_sebulba(config("rest", resume=str(tmp_path / "part")), PPOConfig(num_minibatches=2))
    assert int(np.asarray(rest.train_state.update_step)) == 8
    assert rest.env_steps == 5 * 4 * 16  # only the updates after the resume
    assert (rest.policy_lags[3:] == 0).all()
    # The uninterrupted twin saw other episodes after update 3, so its float leaves differ; its
    # optimizer's step counters (Adam's, the annealed learning rate's) must not: a resume that
    # restarted the optimizer would have counted only the 5 updates after the resume.
    whole = train_sebulba(config("whole"), PPOConfig(num_minibatches=2))
    counters = [(a, b) for a, b in zip(leaves(whole.train_state.opt_state), leaves(rest.train_state.opt_state),
                                       strict=True) if np.issubdtype(a.dtype, np.integer)]
    assert counters and all(int(a.max()) > 8 for a, _ in counters), counters
    for a, b in counters:
        np.testing.assert_array_equal(a, b)


@pytest.mark.timeout(300)
def test_sebulba_resume_continues_from_the_checkpoint(tmp_path, cpu_devices):
    """On an env whose episodes carry nothing over, 3 updates + a resume + 5 updates equal
    8 uninterrupted updates: params, optimizer state and update counter, bit for bit."""
    def config(name, **checkpoint):
        return SebulbaConfig(env="jax:resume_twins:ConstantBandit", envs_per_thread=4, rollout_length=8,
                             total_steps=4 * 8 * 8, log_every=2,
                             actor_devices=(0,), learner_devices=(1,), lag="0", eval_episodes=0,
                             logging=logs(tmp_path, name), checkpoint=CheckpointConfig(**checkpoint))

    def run(name, **checkpoint):
        factory = lambda j, n: JaxHostVectorEnv(ConstantBandit(), n)  # noqa: E731
        return train_sebulba(config(name, **checkpoint), PPOConfig(num_minibatches=2), env_factory=factory)

    whole = run("whole")
    part = run("part", stop_after_updates=3)
    rest = run("rest", resume=str(tmp_path / "part"))
    assert [r["updates"] for r in rest.history] == [4, 6, 8] and rest.env_steps == 5 * 4 * 8
    assert int(np.asarray(rest.train_state.update_step)) == 8
    for a, b in zip(leaves(whole.train_state), leaves(rest.train_state), strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(leaves(part.train_state.params)[0], leaves(rest.train_state.params)[0])


@pytest.mark.timeout(300)
def test_sigterm_stops_cleanly_with_a_checkpoint_that_resumes(tmp_path):
    command = [sys.executable, str(ROOT / "scripts" / "train_anakin.py"), "--cpu-devices", "2", "--num-envs", "4",
               "--total-steps", "50000000", "--updates-per-call", "4", "--logging.run-dir", str(tmp_path),
               "--logging.run-name", "r", "--eval-every", "0"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    output = []
    for line in iter(proc.stdout.readline, ""):
        output.append(line)
        if "[anakin] step" in line:
            break
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=120)
    text = "".join(output) + rest
    assert proc.returncode == 0, text[-3000:]
    assert "stopped by SIGTERM" in text
    step = Checkpointer(resume_dir(str(tmp_path / "r")), read_only=True).latest_step()
    assert step is not None and step % 4 == 0 and step > 0
    resumed = subprocess.run(command[:6] + ["--total-steps", str(4 * 128 * (step + 4)), "--updates-per-call", "4",
                                            "--logging.run-dir", str(tmp_path), "--logging.run-name", "r2",
                                            "--eval-every", "0", "--resume", str(tmp_path / "r")],
                             capture_output=True, text=True, timeout=200, cwd=ROOT)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"updates {step}..{step + 4}" in resumed.stdout
    assert Checkpointer(resume_dir(str(tmp_path / "r")), read_only=True).latest_step() == step + 4


KILL_DURING_SAVE = r"""
import os, signal, sys, threading, time
import numpy as np
import jax.numpy as jnp
from podrl.run.checkpoint import Checkpointer
directory = sys.argv[1]
ckpt = Checkpointer(directory, keep=3)
state = {"w": jnp.full((4096, 4096), 1.0)}
ckpt.save(1, state, state, {"note": "first"})
def kill_when_writing():
    while True:
        if any(".orbax-checkpoint-tmp" in name or name.startswith("2.") for name in os.listdir(directory)):
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.0005)
threading.Thread(target=kill_when_writing, daemon=True).start()
state = {"w": jnp.full((4096, 4096), 2.0)}
ckpt.save(2, state, state, {"note": "second"})
print("save 2 finished before the kill", flush=True)
"""


@pytest.mark.timeout(120)
def test_sigkill_during_a_save_leaves_the_previous_checkpoint_loadable(tmp_path):
    directory = tmp_path / "ckpt"
    result = subprocess.run([sys.executable, "-c", KILL_DURING_SAVE, str(directory)], capture_output=True,
                            text=True, timeout=100, cwd=ROOT,
                            env={**os.environ,
                                 "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert result.returncode == -signal.SIGKILL, result.stdout + result.stderr[-2000:]
    assert "finished before the kill" not in result.stdout
    ckpt = Checkpointer(str(directory), read_only=True)
    assert ckpt.latest_step() == 1
    like = {"w": jax.numpy.zeros((4096, 4096))}
    assert float(ckpt.restore_params(like)["w"][0, 0]) == 1.0
    assert ckpt.read_config() == {"note": "first"}
