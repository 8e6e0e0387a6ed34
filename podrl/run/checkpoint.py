"""Checkpoints with orbax: the whole training state plus the resolved config.

A checkpoint is one orbax step directory holding four items:
  "state"   the layout's full state pytree (Anakin: train state, env states,
            keys; Sebulba: the learner's train state), PRNG keys stored as their
            raw key data;
  "params"  the params alone, so `podrl evaluate` can load them without
            rebuilding the training state;
  "config"  the resolved run config as JSON (layout, run, agent type, agent), and
            where the run stood: its process count, learner-shard count and logged
            env steps (`"topology"`), which a resume on another topology needs;
  "digest"  a sha256 of every array this process can read in full, checked on
            restore (`podrl.run.digest`).
Any restore failure is a `CheckpointError` naming the step folder and the cause.
orbax writes a step into a temporary directory and renames it when complete, so
a process killed while saving leaves the previous checkpoint intact and loadable.

Saves are asynchronous (orbax's async checkpointing): `save` copies what it writes to the host
(orbax's arrays and the digest's; on CPU a view, which keeps the runtime from donating those
buffers) and returns; tensorstore writes, the digest's hashing and the step's finalizing go on
in orbax's background thread while training continues. So the next compiled call may donate the
state (Anakin donates all of it, Sebulba its `shard_state`): the save holds its own copy. At most
one save is in flight: the next `save` first waits for the one before, and `wait` / `close` wait
for the last. No pickle anywhere: arrays go through tensorstore, the config through JSON.

Restoring (`Checkpointer.restore_onto`) builds the targets by hand on the run's mesh:
`NamedSharding(mesh, spec)` from the layout's specs (`podrl.core.learner_state.Placement`), never
the shardings saved with the checkpoint, so a run restores onto whatever mesh it has; where the
fresh state's own sharding is equivalent, that one (so the train program's cache key matches a fresh
run's and the resumed run finds its compiled programs). When the
checkpoint's learner-shard count differs, the leaves whose shape depends on it (per learner
shard) come back on the host and the layout's rule moves them (`Placement.reshard`).

Whether a checkpoint may be resumed at all (its config against the run's) is `podrl.run.resume`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import time
from typing import Any, NamedTuple

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding

from podrl.core.errors import ConfigError, UserInputError
from podrl.core.learner_state import Placement, broadcast_prefix
from podrl.envs.registry import renamed_env
from podrl.run.config import CheckpointConfig
from podrl.run.digest import DigestRestore, DigestSave, is_key, keys_to_data, mismatches


def upgraded_config(config: dict[str, Any]) -> dict[str, Any]:
    """A saved config as this version reads it: a `run.env` naming podrl's own module by its old path
    (`podrl.envs.registry.renamed_env`) renamed, with one line on stderr that says so."""
    run = config.get("run")
    renamed = renamed_env(run["env"]) if isinstance(run, dict) and isinstance(run.get("env"), str) else None
    if renamed is None:
        return config
    _say_renamed(run["env"], renamed)
    return {**config, "run": {**run, "env": renamed}}


@functools.cache
def _say_renamed(old: str, new: str) -> None:
    """Once per process and name (a resume reads the config more than once)."""
    print(f"note: the checkpoint's env {old!r} is podrl's own module by its old path; read as {new!r}",
          file=sys.stderr)


def checkpoint_dir(config: CheckpointConfig, run_dir: str | None) -> str | None:
    """The folder checkpoints go to, or None when this run writes no checkpoints."""
    if config.directory is not None:
        return os.path.abspath(config.directory)
    return os.path.join(os.path.abspath(run_dir), "checkpoints") if run_dir else None


def _data_to_keys(tree: Any, like: Any) -> Any:
    """Key data back to typed keys where `like` has keys (host arrays, a moved per-shard part, stay data)."""
    return jax.tree.map(lambda x, ref: jax.random.wrap_key_data(x, impl=jax.random.key_impl(ref))
                        if is_key(ref) and isinstance(x, jax.Array) else x, tree, like)


@contextlib.contextmanager
def _quiet_absl(quiet: bool):
    """Hides absl WARNING lines (orbax's) while active, when `quiet`."""
    logger = logging.getLogger("absl")
    level = logger.level
    if quiet:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


class CheckpointError(UserInputError, RuntimeError):
    """A checkpoint is missing, incomplete or corrupted (the message names its folder)."""

    label = "checkpoint"


def _targets(like: Any, placement: Placement | None, saved_shards: int | None) -> Any:
    """What to restore `like`'s leaves as (keys as key data): `ShapeDtypeStruct`s laid out on the
    placement's mesh, built by hand from its specs (or `like`'s own shardings without a placement);
    with `saved_shards` learner shards saved (other than the placement's), a per-shard leaf comes
    back as a host array with that many shards on its shard axis."""
    data = keys_to_data(like)
    if placement is None:
        return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
                            if isinstance(x, jax.Array) else x, data)
    moved = saved_shards is not None and saved_shards != placement.learner_shards

    def target(x, spec, axis):
        if moved and axis >= 0:  # calloc'd: no memory is touched until orbax writes into it
            return np.zeros(x.shape[:axis] + (saved_shards,) + x.shape[axis + 1:], x.dtype)
        sharding = NamedSharding(placement.mesh, spec)
        if isinstance(x, jax.Array) and x.sharding.is_equivalent_to(sharding, x.ndim):
            # The fresh leaf's own sharding object when it lays the leaf out the same way: `P("population")`
            # over a population axis of size 1 and the `P()` that jit gives its output are the same layout,
            # but not the same input sharding to the compiled program, whose cache key would then differ
            # (a resumed run would compile its program again instead of finding it in the cache).
            sharding = x.sharding
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)

    specs, axes = broadcast_prefix(placement.specs, data), broadcast_prefix(placement.shard_axes, data)
    return jax.tree.map(target, data, specs, axes)


class _Manager(ocp.CheckpointManager):
    """orbax's manager without its own preemption check.

    `CheckpointManager.save` asks JAX's preemption sync point with the checkpoint step (orbax's
    `reached_preemption`), which would move the sync manager's call counter between the driver's
    consecutive calls (`podrl.run.preemption`: the service tests equality) and put off an agreed
    stop by as many calls as the step is ahead (seen: a SIGTERM never stopped a run that saved
    every 8 updates). The driver asks once per call; orbax must not ask at all.
    """

    def reached_preemption(self, step: int) -> bool:
        del step
        return False


class Checkpointer:
    """Saves and restores (state, params, config) steps in one folder (module docstring)."""

    def __init__(self, directory: str, keep: int = 3, read_only: bool = False):
        self.directory = directory
        with _quiet_absl(read_only):  # orbax warns about every option a read-only manager ignores
            options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=not read_only, read_only=read_only,
                                                   enable_async_checkpointing=True)
            self.manager = _Manager(directory, options=options, item_names=("state", "params", "config", "digest"))

    def save(self, step: int, state: Any, params: Any, config: dict[str, Any], wait: bool = True) -> float:
        """Starts writing checkpoint `step` (atomically) once the save before it is on disk; with `wait`,
        returns when it is on disk too. Returns the seconds spent waiting for the save before."""
        waited = self.wait()
        self.manager.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(keys_to_data(state)),
            params=ocp.args.StandardSave(keys_to_data(params)),
            config=ocp.args.JsonSave(config),
            digest=DigestSave({"state": state, "params": params}),
        ), force=True)
        if wait:
            self.wait()
        return waited

    def wait(self) -> float:
        """Waits until the save in flight (if any) is on disk; returns the seconds waited."""
        start = time.perf_counter()
        self.manager.wait_until_finished()
        return time.perf_counter() - start

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def read_config(self, step: int | None = None) -> dict[str, Any]:
        """The config saved with `step` (default: the latest), as this version reads it (`upgraded_config`)."""
        return upgraded_config(self._restore("config", ocp.args.JsonRestore(), step))

    def restore_state(self, like: Any, step: int | None = None) -> Any:
        """The saved state, laid out (shapes, dtypes, shardings) like `like`; digest-checked."""
        return self._restore_checked("state", like, step)

    def restore_onto(self, like: Any, placement: Placement, saved_shards: int | None, step: int) -> Any:
        """The saved state on `placement`'s mesh (module docstring), digest-checked: leaves laid out
        like `like` (a fresh state on that mesh); with `saved_shards` other than the placement's
        learner-shard count, the per-shard leaves come back as host arrays of the saved shape, for
        `placement.reshard`."""
        return self._restore_checked("state", like, step, _targets(like, placement, saved_shards))

    def restore_params(self, like: Any, step: int | None = None) -> Any:
        return self._restore_checked("params", like, step)

    def _restore_checked(self, item: str, like: Any, step: int | None, targets: Any = None) -> Any:
        step = self.step_or_latest(step)
        targets = _targets(like, None, None) if targets is None else targets
        restored = _data_to_keys(self._restore(item, ocp.args.StandardRestore(targets), step), like)
        expected = self._restore("digest", DigestRestore(), step)[item]
        bad = mismatches(restored, expected)
        if bad:
            raise CheckpointError(f"checkpoint step {step} in {self.directory} is corrupted: {item}{bad[0]} "
                                  "does not match the digest written with it")
        return restored

    def _restore(self, item: str, args: Any, step: int | None) -> Any:
        step = self.step_or_latest(step)
        try:
            return getattr(self.manager.restore(step, args=ocp.args.Composite(**{item: args})), item)
        except Exception as e:  # orbax/tensorstore raise many kinds, with long messages
            cause = e
            while cause.__cause__ is not None:
                cause = cause.__cause__
            first_line = str(cause).strip().splitlines()[0][:300] if str(cause).strip() else type(cause).__name__
            raise CheckpointError(f"cannot restore {item} of step {step} in {self.directory}: "
                                  f"{type(cause).__name__}: {first_line}") from e

    def step_or_latest(self, step: int | None) -> int:
        """`step`, or the latest complete one; CheckpointError when there is none."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise CheckpointError(f"no complete checkpoint in {self.directory}")
        return step

    def close(self) -> None:
        self.manager.close()


class ResumePoint(NamedTuple):
    """The checkpoint a run resumes from."""

    directory: str  # the checkpoint folder
    update: int  # updates done when it was saved (its orbax step)
    config: dict[str, Any]  # the resolved config saved with it


class RunCheckpoints:
    """A run's checkpointing: where, when, and the config saved with each step.

    Args:
      resume: from `find_resume_point`; the run restores it and keeps writing
        into its folder unless `settings.directory` says otherwise.
    """

    def __init__(self, settings: CheckpointConfig, run_dir: str | None, config: dict[str, Any],
                 resume: ResumePoint | None = None):
        self.config, self.resume = config, resume
        if resume is not None and settings.directory is None:
            directory = resume.directory  # one lineage: keep writing where the run left off
        elif jax.process_count() > 1 and settings.directory is None:
            directory = None  # only process 0 has a run dir; every process must save to the same folder
            if settings.every_updates or settings.every_seconds or settings.stop_after_updates:
                raise ConfigError("checkpoint.directory", "a multi-process run checkpoints only into a folder "
                                  "every process can reach: give --checkpoint.directory (e.g. a shared disk or GCS)")
        else:
            directory = checkpoint_dir(settings, run_dir)
        if run_dir is not None:  # saved with every step, so a resume continues this run directory
            self.config = {**config, "run_dir": os.path.abspath(run_dir)}
        self._directory, self._keep = directory, settings.keep
        self.checkpointer: Checkpointer | None = None  # opened (its folder created) at the first save
        self.last_saved: int | None = None  # the last step known to be on disk
        self.in_flight: int | None = None  # the step being written in the background
        self.resharded: dict[str, int] | None = None  # what `restore` moved between learner-shard counts

    @property
    def directory(self) -> str | None:
        return self._directory

    def restore(self, like: Any, placement: Placement | None = None) -> Any:
        """The state to resume from on `placement`'s mesh (`Checkpointer.restore_onto`; without a
        placement, laid out like `like`), or `like` itself when not resuming. A checkpoint of another
        learner-shard count goes through `placement.reshard`, whose counts `self.resharded` keeps."""
        if self.resume is None:
            return like
        source = Checkpointer(self.resume.directory, read_only=True)
        try:
            if placement is None:
                return source.restore_state(like, self.resume.update)
            saved = saved_topology(self.resume.config).get("learner_shards")
            restored = source.restore_onto(like, placement, saved, self.resume.update)
        finally:
            source.close()
        if saved is None or saved == placement.learner_shards:
            return restored
        state, self.resharded = placement.reshard(like, restored, saved)
        return state

    def save(self, update: int, state: Any, params: Any, topology: dict[str, int] | None = None) -> None:
        """Starts saving `update` in the background (module docstring), with `topology` (`saved_topology`)
        in its config; the save before it is waited for first."""
        if self._directory is None or update in (self.last_saved, self.in_flight):
            return
        if self.checkpointer is None:
            self.checkpointer = Checkpointer(self._directory, self._keep)
        config = {**self.config, "topology": topology} if topology else self.config
        self.checkpointer.save(update, state, params, config, wait=False)
        self.last_saved = self.in_flight if self.in_flight is not None else self.last_saved  # waited for above
        self.in_flight = update

    def wait(self) -> None:
        """Waits until the save in flight is on disk."""
        if self.checkpointer is not None and self.in_flight is not None:
            self.checkpointer.wait()
            self.last_saved, self.in_flight = self.in_flight, None

    def describe_last(self) -> str:
        """The last good checkpoint (on disk: a save still in flight is not), for error messages."""
        if self.last_saved is not None:
            return f"last good checkpoint: update {self.last_saved} in {self.directory}"
        if self.resume is not None:
            return f"last good checkpoint: update {self.resume.update} in {self.resume.directory} (resumed from)"
        return "no checkpoint was saved in this run"

    def close(self) -> None:
        """Waits for the save in flight, then closes the folder."""
        if self.checkpointer is not None:
            self.wait()
            self.checkpointer.close()


def saved_topology(config: dict[str, Any]) -> dict[str, int]:
    """Where a run stood at a checkpoint, from its saved config: `{"processes": P, "learner_shards": D,
    "env_steps": N}` (N: the logged env-step count); {} for a checkpoint written before it was recorded."""
    return dict(config.get("topology") or {})
