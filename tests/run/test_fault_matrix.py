"""The fault matrix: every fault a run can meet, the error it must raise, and a message naming the cause.

Each row of FAULTS names a fault, the error type it must raise and a regex the
message (with its notes) must match. After every row the run must have left no
actor thread ("sebulba-actor-*") and no child process behind.
"""

from __future__ import annotations

import dataclasses
import gc
import glob
import multiprocessing
import os
import re
import shutil
import threading
import time
from typing import Any, Callable, NamedTuple

import jax
import numpy as np
import pytest
from dm_env import specs

import podrl.envs
from checkpoints import AGENT, leaves, tiny_anakin_run
from faulty_envs import NaNAfter
from podrl.agents.dqn import DQNConfig
from podrl.agents.impala import ImpalaConfig
from podrl.agents.ppo import PPOConfig
from podrl.agents.pqn import PQNConfig
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.core.distributed import DistributedConfig
from podrl.core.errors import ConfigError, NonFiniteError
from podrl.envs.adapters.jax_host import JaxHostVectorEnv
from podrl.envs.adapters.specs import EnvSpecMismatchError, check_host_env
from podrl.run.checkpoint import Checkpointer, CheckpointError
from podrl.run.config import CheckpointConfig, LoggingConfig
from podrl.sebulba import SebulbaConfig, train_sebulba
from podrl.sebulba.rollout import JOIN_GRACE_S
from untrained import sebulba_initial_params

# orbax leaves un-awaited read coroutines behind when a corrupted checkpoint fails to restore
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

QUIET = LoggingConfig(run_dir=None, console=False)


def logged(run_dir) -> LoggingConfig:
    return LoggingConfig(run_dir=str(run_dir), run_name="r", console=False, tensorboard=False)


def tiny_sebulba(**overrides) -> SebulbaConfig:
    """1 actor thread x 4 envs x 8 steps per update; 50 updates (faults come long before)."""
    base = dict(env="jax:MatchSign-v0", envs_per_thread=4, rollout_length=8, total_steps=4 * 8 * 50,
                actor_devices=(0,), learner_devices=(1, 2), eval_episodes=0, log_every=2, timeout_s=20.0,
                logging=QUIET)
    return SebulbaConfig(**{**base, **overrides})


# ---------------------------------------------------------------- cleanliness after every case


def actor_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("sebulba-actor")]


def child_pids() -> set[int]:
    """Live (non-zombie) children of this process, read from /proc (no psutil)."""
    me, children = os.getpid(), set()
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            children.add(int(stat.split("/")[2]))
    return children


@pytest.fixture
def leaves_nothing_behind():
    before = child_pids()
    yield
    deadline = time.monotonic() + 10  # a released hang needs a moment to notice the stop
    while actor_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not actor_threads(), "actor threads still alive"
    assert not multiprocessing.active_children()
    assert not child_pids() - before, "child processes left behind"


def full_message(error: BaseException) -> str:
    return "\n".join([str(error), *getattr(error, "__notes__", [])])


# ---------------------------------------------------------------- faulty environments


class FaultyHostEnv(JaxHostVectorEnv):
    """MatchSign on the host that misbehaves from its `k`-th step after a reset (or at once).

    modes: "raise", "hang" (until `release` is set), "nan" (NaN rewards),
    "obs_shape" (reset returns [B, 3] observations), "obs_dtype" (step returns
    float64 observations), "narrow_actions" (declares 3 actions, rejects action 2).
    """

    def __init__(self, mode: str, num_envs: int, k: int = 1, release: threading.Event | None = None):
        super().__init__(podrl.envs.make("MatchSign-v0"), num_envs)
        self.mode, self.k, self.count, self.release = mode, k, 0, release
        self.hung_at: float | None = None  # time.monotonic() when a "hang" began

    def action_spec(self):
        return specs.DiscreteArray(3, dtype=np.int32) if self.mode == "narrow_actions" else super().action_spec()

    def reset_from_keys(self, keys):
        self.count = 0
        ts = super().reset_from_keys(keys)
        if self.mode == "obs_shape":
            ts = ts._replace(observation=np.repeat(ts.observation, 3, axis=1))
        return ts

    def step(self, actions):
        self.count += 1
        if self.mode == "narrow_actions" and np.any(actions > 1):
            raise ValueError(f"action {int(actions.max())} is not 0 or 1")
        due = self.count >= self.k
        if due and self.mode == "raise":
            raise RuntimeError(f"env exploded at step {self.count}")
        if due and self.mode == "hang":
            self.hung_at = time.monotonic()
            self.release.wait(60)
        ts = super().step(actions)
        if due and self.mode == "nan":
            ts = ts._replace(reward=np.full_like(ts.reward, np.nan))
        if self.mode == "obs_dtype":
            ts = ts._replace(observation=ts.observation.astype(np.float64))
        return ts


class NoStepEnv:
    """A user's JAX env that forgot `step`."""

    def reset(self, key):
        return podrl.envs.make("MatchSign-v0").reset(key)

    def observation_spec(self):
        return podrl.envs.make("MatchSign-v0").observation_spec()

    def action_spec(self):
        return podrl.envs.make("MatchSign-v0").action_spec()


# ---------------------------------------------------------------- a trained checkpoint (shared)


@pytest.fixture(scope="module")
def checkpoint_run(tmp_path_factory) -> str:
    """A run folder holding checkpoints/3 of the tiny Anakin run test_evaluate.py trains too."""
    result = train_anakin(tiny_anakin_run(str(tmp_path_factory.mktemp("runs"))), AGENT)
    return result.run_dir


def params_like(num_seeds: int = 2):
    spec = podrl.envs.env_spec(podrl.envs.make("CartPole-v1"))
    agent = AGENT.make_agent(spec, 1)
    return jax.vmap(lambda k: agent.init(k, spec).params)(jax.random.split(jax.random.key(0), num_seeds))


def corrupted_copy(run_dir: str, tmp_path, corrupt: Callable[[str], None]) -> str:
    """A copy of the run's checkpoints with `corrupt(path)` applied to every params data file of step 3."""
    copy = str(tmp_path / "checkpoints")
    shutil.copytree(os.path.join(run_dir, "checkpoints"), copy)
    data = glob.glob(os.path.join(copy, "3", "params", "ocdbt.process_0", "d", "*"))
    assert data, os.listdir(os.path.join(copy, "3", "params"))
    for path in data:
        corrupt(path)
    return copy


def truncate(path: str) -> None:
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def flip_bytes(path: str) -> None:
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        middle = len(data) // 2
        data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
        f.seek(0)
        f.write(data)


# ---------------------------------------------------------------- the fault matrix


def sebulba_env_raises(tmp_path, ctx):
    train_sebulba(tiny_sebulba(), AGENT, env_factory=lambda j, n: FaultyHostEnv("raise", n, k=12))


def sebulba_env_hangs(tmp_path, ctx):
    """The TimeoutError comes within the learner's wait (timeout_s) plus the shut-down's short
    join grace and a margin; checked before the hang is released."""
    release = threading.Event()
    env = FaultyHostEnv("hang", 4, k=12, release=release)  # tiny_sebulba: one thread of 4 envs
    try:
        train_sebulba(tiny_sebulba(timeout_s=2.0), AGENT, env_factory=lambda j, n: env)
    except TimeoutError:
        waited = time.monotonic() - env.hung_at
        assert waited <= 2.0 + JOIN_GRACE_S + 1.0, waited
        assert actor_threads() == ["sebulba-actor-0"], actor_threads()  # still stuck in env.step
        raise
    finally:
        release.set()


def host_env_check(mode: str) -> Callable:
    """The startup contract check, reached through train_sebulba before any thread starts."""
    def trigger(tmp_path, ctx):
        train_sebulba(tiny_sebulba(), AGENT, env_factory=lambda j, n: FaultyHostEnv(mode, n))
    return trigger


def anakin_nan_loss(tmp_path, ctx):
    config = AnakinConfig(env="MatchSign-v0", num_envs=8, rollout_length=16, total_steps=8 * 16 * 12,
                          num_devices=2, updates_per_call=2, eval_every=0, eval_episodes=8, logging=logged(tmp_path),
                          checkpoint=CheckpointConfig(every_updates=1))
    train_anakin(config, PPOConfig(), env=NaNAfter(41))


def sebulba_nan_loss(tmp_path, ctx):
    # NaN rewards from the 20th step after reset: rollout 2 (steps 17..24) -> update 2
    config = tiny_sebulba(logging=logged(tmp_path), checkpoint=CheckpointConfig(every_updates=1))
    train_sebulba(config, AGENT, env_factory=lambda j, n: FaultyHostEnv("nan", n, k=20))


def resume_with_other_config(tmp_path, ctx):
    run = tiny_anakin_run(None)
    config = dataclasses.replace(run, num_envs=16, logging=QUIET,
                                 checkpoint=CheckpointConfig(resume=ctx["checkpoint_run"]))
    train_anakin(config, dataclasses.replace(AGENT, learning_rate=1e-3))


def new_run_into_a_taken_checkpoint_folder(tmp_path, ctx):
    folder = os.path.join(ctx["checkpoint_run"], "checkpoints")  # holds update 3 of another run
    config = dataclasses.replace(tiny_anakin_run(None), logging=QUIET, checkpoint=CheckpointConfig(directory=folder))
    train_anakin(config, AGENT)


def truncated_checkpoint(tmp_path, ctx):
    copy = corrupted_copy(ctx["checkpoint_run"], tmp_path, truncate)
    checkpointer = Checkpointer(copy, read_only=True)
    try:
        checkpointer.restore_params(params_like())
    finally:
        checkpointer.close()
        gc.collect()  # orbax's abandoned read coroutines: collect them inside this (warning-filtered) test


def garbage_checkpoint_metadata(tmp_path, ctx):
    copy = corrupted_copy(ctx["checkpoint_run"], tmp_path, lambda path: None)
    with open(os.path.join(copy, "3", "params", "_METADATA"), "w") as f:
        f.write("not json {")
    checkpointer = Checkpointer(copy, read_only=True)
    try:
        checkpointer.restore_params(params_like())
    finally:
        checkpointer.close()
        gc.collect()  # orbax's abandoned read coroutines: collect them inside this (warning-filtered) test


def jax_env_missing_a_method(tmp_path, ctx):
    podrl.envs.make(f"{__name__}:NoStepEnv")


class Fault(NamedTuple):
    name: str
    trigger: Callable[[Any, dict], None]  # (tmp_path, ctx) -> raises
    error: type[BaseException]
    message: str  # regex searched in the message and its notes (re.DOTALL)
    needs_checkpoint: bool = False  # ctx["checkpoint_run"]: the run folder of the shared tiny Anakin run


FAULTS = [
    Fault("sebulba env raises", sebulba_env_raises, RuntimeError,
          r"env exploded at step 12.*raised in sebulba-actor-0"),
    Fault("sebulba env hangs", sebulba_env_hangs, TimeoutError,
          r"timed out after 2s waiting for rollout 1 from actor thread 0; "
          r"actor thread 0 has been in stage 'env\.step'"),
    Fault("reset returns the wrong observation shape", host_env_check("obs_shape"), EnvSpecMismatchError,
          r"FaultyHostEnv\.reset\(\): observation shape: expected \(4, 1\), got \(4, 3\)"),
    Fault("step returns the wrong observation dtype", host_env_check("obs_dtype"), EnvSpecMismatchError,
          r"FaultyHostEnv\.step\(\): observation dtype: expected float32, got float64"),
    Fault("env rejects an action its action_spec allows", host_env_check("narrow_actions"), EnvSpecMismatchError,
          r"FaultyHostEnv\.step\(\): action: expected every action within action_spec .*"
          r"ValueError: action 2 is not 0 or 1 for actions \[2, 2, 2, 2\]"),
    Fault("anakin NaN loss", anakin_nan_loss, NonFiniteError,
          r"train/\w+ became \[nan\] during updates 2\.\.3.*last good checkpoint: update 2 in \S+/r/checkpoints"),
    Fault("sebulba NaN loss", sebulba_nan_loss, NonFiniteError,
          r"train/\w+ became nan during updates 2\.\.2.*last good checkpoint: update 2 in \S+/r/checkpoints"),
    Fault("resume with a different learning_rate and num_envs", resume_with_other_config, ConfigError,
          r"^resume: .*agent\.learning_rate \(checkpoint: 0\.00025, now: 0\.001\).*"
          r"run\.num_envs \(checkpoint: 8, now: 16\)", needs_checkpoint=True),
    Fault("a new run into a checkpoint folder that holds another run's", new_run_into_a_taken_checkpoint_folder,
          ConfigError, r"^checkpoint\.directory: \S+/checkpoints already holds checkpoints of a run \(updates 3\); "
          r"continue that run with --resume", needs_checkpoint=True),
    Fault("truncated checkpoint data", truncated_checkpoint, CheckpointError,
          r"^cannot restore params of step 3 in .*checkpoints: .*not valid", needs_checkpoint=True),
    Fault("garbage checkpoint metadata", garbage_checkpoint_metadata, CheckpointError,
          r"^cannot restore params of step 3 in .*checkpoints: JSONDecodeError: Expecting value",
          needs_checkpoint=True),
    Fault("custom JAX env missing a method", jax_env_missing_a_method, podrl.envs.UnknownEnvError,
          re.escape(f"env '{__name__}:NoStepEnv' is not a JaxEnv: missing method(s) ['step']")),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_fault_raises_an_error_naming_its_cause(fault, tmp_path, cpu_devices, leaves_nothing_behind, request):
    ctx = {"checkpoint_run": request.getfixturevalue("checkpoint_run")} if fault.needs_checkpoint else {}
    with pytest.raises(fault.error) as info:
        fault.trigger(tmp_path, ctx)
    assert re.search(fault.message, full_message(info.value), re.DOTALL), full_message(info.value)[:2000]


def test_a_conforming_env_passes_the_contract_check():
    """The control row: the same wrapper without a fault passes, so the rows above test the faults."""
    check_host_env(FaultyHostEnv("none", 4))


def test_bit_flipped_checkpoint_never_restores_garbage(checkpoint_run, tmp_path):
    """tensorstore keeps no checksum: flipped bytes inside a zstd chunk would restore as
    garbage; the digest podrl saves with each checkpoint must catch them."""
    like = params_like()
    good = Checkpointer(os.path.join(checkpoint_run, "checkpoints"), read_only=True)
    bad = Checkpointer(corrupted_copy(checkpoint_run, tmp_path, flip_bytes), read_only=True)
    try:
        expected = good.restore_params(like)
        with pytest.raises(CheckpointError) as info:
            bad.restore_params(like)
    finally:
        good.close()
        bad.close()
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(expected))
    # the chunks still decompress: it is the digest check that fires, naming the array
    assert re.fullmatch(r"checkpoint step 3 in \S+/checkpoints is corrupted: params\['params'\]\['(actor|critic)'\]"
                        r"\['Dense_\d'\]\['(kernel|bias)'\] does not match the digest written with it",
                        str(info.value)), str(info.value)


# ---------------------------------------------------------------- invalid configs


INVALID_CONFIGS = [
    (lambda: AnakinConfig(num_envs=0), "num_envs"),
    (lambda: AnakinConfig(rollout_length=-1), "rollout_length"),
    (lambda: AnakinConfig(total_steps=10), "total_steps"),
    (lambda: AnakinConfig(env="NoSuchEnv-v9"), "env"),
    (lambda: AnakinConfig(seed=-1), "seed"),
    (lambda: AnakinConfig(num_seeds=True), "num_seeds"),
    (lambda: AnakinConfig(num_envs=4).check_layout(8, PPOConfig()), "num_envs"),
    (lambda: AnakinConfig(num_envs=8, rollout_length=3, num_devices=8).check_layout(8, PPOConfig()), "num_minibatches"),
    (lambda: SebulbaConfig(lag="fast"), "lag"),
    (lambda: SebulbaConfig(vectorization="fork"), "vectorization"),
    (lambda: SebulbaConfig(timeout_s=0.0), "timeout_s"),
    (lambda: SebulbaConfig(learner_devices=()), "learner_devices"),
    (lambda: SebulbaConfig(eval_episodes=-1), "eval_episodes"),
    (lambda: SebulbaConfig(actor_devices=(9,)).check_layout(8, PPOConfig()), "actor_devices"),
    (lambda: PPOConfig(learning_rate=0.0), "learning_rate"),
    (lambda: PPOConfig(gamma=1.5), "gamma"),
    (lambda: PPOConfig(num_minibatches=0), "num_minibatches"),
    (lambda: PPOConfig(activation="sigmoid"), "activation"),
    (lambda: PPOConfig(hidden_sizes=(64, 0)), "hidden_sizes"),
    (lambda: PPOConfig(anneal_lr="yes"), "anneal_lr"),
    (lambda: PPOConfig(clip_value_loss=1), "clip_value_loss"),
    (lambda: PPOConfig(torso="resnet50"), "torso"),
    (lambda: PPOConfig(core="rnn"), "core"),
    (lambda: ImpalaConfig(loss_reduction="max"), "loss_reduction"),
    (lambda: DQNConfig(double_dqn="true"), "double_dqn"),
    (lambda: DQNConfig(loss="l1"), "loss"),
    (lambda: PQNConfig(layer_norm=None), "layer_norm"),
    (lambda: ImpalaConfig(optimizer="sgd"), "optimizer"),
    (lambda: ImpalaConfig(clip_rho=0.0), "clip_rho"),
    (lambda: ImpalaConfig(vtrace_lambda=2.0), "vtrace_lambda"),
    (lambda: ImpalaConfig(num_minibatches=3).check_batch(16, 4), "num_minibatches"),
    (lambda: CheckpointConfig(keep=0), "keep"),
    (lambda: CheckpointConfig(every_updates=-1), "every_updates"),
    (lambda: CheckpointConfig(every_seconds=float("nan")), "every_seconds"),
    (lambda: CheckpointConfig(stop_after_updates=0), "stop_after_updates"),
    (lambda: DistributedConfig(coordinator="127.0.0.1:1234"), "num_processes"),
    (lambda: DistributedConfig(coordinator="127.0.0.1:1234", num_processes=2, process_id=2), "process_id"),
    (lambda: DistributedConfig(coordinator="nohost", num_processes=2, process_id=0), "coordinator"),
    (lambda: DistributedConfig(init_timeout_s=0), "init_timeout_s"),
]


@pytest.mark.parametrize("make, field", INVALID_CONFIGS, ids=[f"{i}-{f}" for i, (_, f) in enumerate(INVALID_CONFIGS)])
def test_invalid_config_names_its_field(make, field):
    with pytest.raises(ConfigError) as info:
        make()
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_choice_and_bool_errors_list_what_is_allowed():
    with pytest.raises(ConfigError, match=r"^loss: must be one of \('huber', 'mse'\), got 'l1'$"):
        DQNConfig(loss="l1")
    with pytest.raises(ConfigError, match=r"^vectorization: must be one of \('sync', 'async'\), got 'fork'$"):
        SebulbaConfig(vectorization="fork")
    with pytest.raises(ConfigError, match=r"^double_dqn: must be True or False, got 'true'$"):
        DQNConfig(double_dqn="true")


# ---------------------------------------------------------------- a failing run keeps the learner's work


def failing_sebulba_run(run_dir, k: int, threads: int = 1) -> Checkpointer:
    """A Sebulba run (lag 0) whose last actor thread's env raises at its `k`-th step; its checkpoints.

    Thread 0's env is the one the startup contract check steps 8 times, so a fault
    at k <= 8 goes to another thread."""
    factory = lambda j, n: FaultyHostEnv("raise", n, k=k if j == threads - 1 else 10**9)  # noqa: E731
    with pytest.raises(RuntimeError, match=f"env exploded at step {k}"):
        train_sebulba(tiny_sebulba(logging=logged(run_dir), threads_per_actor_device=threads), AGENT,
                      env_factory=factory)
    return Checkpointer(str(run_dir / "r" / "checkpoints"), read_only=True)


@pytest.mark.timeout(180)
def test_sebulba_env_exception_saves_a_loadable_checkpoint_first(tmp_path, cpu_devices, leaves_nothing_behind):
    """The checkpoint of a failed run holds the state after its last completed update:
    not the state the run started from, and bit for bit the state of a twin run stopped there."""
    # the twin: the same run without the fault, stopped after updates 0 and 1
    twin = train_sebulba(tiny_sebulba(checkpoint=CheckpointConfig(stop_after_updates=2)), AGENT,
                         env_factory=lambda j, n: FaultyHostEnv("none", n)).train_state
    # the env raises at its 20th step: during rollout 2, after updates 0 and 1 (lag 0)
    failed = failing_sebulba_run(tmp_path / "failed", k=20)
    # the state a run starts from: a run whose env fails before the first update saves it as step 0
    started = failing_sebulba_run(tmp_path / "started", k=1, threads=2)
    try:
        assert failed.latest_step() == 2 and started.latest_step() == 0
        assert failed.read_config()["layout"] == "sebulba"
        saved, start = failed.restore_state(twin), started.restore_state(twin)
    finally:
        failed.close()
        started.close()
    assert int(saved.update_step) == 2 and int(start.update_step) == 0
    for x, y in zip(leaves(saved), leaves(twin), strict=True):  # params, optimizer state, counter
        np.testing.assert_array_equal(x, y)
    assert all(np.isfinite(x).all() for x in leaves(saved.params))
    assert any(not np.array_equal(x, y)
               for x, y in zip(leaves(saved.params), leaves(start.params), strict=True))
    # ...and the start is the init of the documented key schedule (tests/untrained.py relies on it)
    _, init = sebulba_initial_params(AGENT, podrl.envs.env_spec(podrl.envs.make("MatchSign-v0")), seed=0)
    for x, y in zip(leaves(start.params), leaves(init), strict=True):
        np.testing.assert_array_equal(x, y)
