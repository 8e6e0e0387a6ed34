"""Checkpoints with orbax: the whole training state plus the resolved config.

A checkpoint is one orbax step directory holding four items:
  "state"   the layout's full state pytree (Anakin: train state, env states,
            keys; Sebulba: the learner's train state and keys), PRNG keys stored
            as their raw key data;
  "params"  the params alone, so `podrl evaluate` can load them without
            rebuilding the training state;
  "config"  the resolved run config as JSON (layout, run, agent type, agent);
  "digest"  a sha256 of every array this process can read in full, checked on
            restore: tensorstore keeps no checksum, and flipped bytes would
            otherwise load as garbage.
Any restore failure is a `CheckpointError` naming the step folder and the cause.
orbax writes a step into a temporary directory and renames it when complete, so
a process killed while saving leaves the previous checkpoint intact and loadable.
Saves are synchronous: the next compiled call donates the buffers being saved.
No pickle anywhere: arrays go through tensorstore, the config through JSON.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
from typing import Any, Collection, NamedTuple

import jax
import numpy as np
import orbax.checkpoint as ocp

from podrl.run.config import CheckpointConfig
from podrl.core.errors import ConfigError, UserInputError
from podrl.envs.registry import renamed_env

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


def resume_dir(path: str) -> str:
    """Accepts a checkpoint folder or a run folder holding `checkpoints/`."""
    nested = os.path.join(path, "checkpoints")
    return os.path.abspath(nested if os.path.isdir(nested) else path)


def _keys_to_data(tree: Any) -> Any:
    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _data_to_keys(tree: Any, like: Any) -> Any:
    return jax.tree.map(lambda x, ref: jax.random.wrap_key_data(x, impl=jax.random.key_impl(ref))
                        if _is_key(ref) else x, tree, like)


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


def _digest(tree: Any) -> dict[str, str]:
    """sha256 of each fully addressable leaf (key data for keys), by tree path."""
    import hashlib

    out = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(_keys_to_data(tree)):
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            continue  # another process holds part of it; that process checks its own shards
        data = np.ascontiguousarray(np.asarray(leaf))
        out[jax.tree_util.keystr(path)] = hashlib.sha256(data.tobytes() + str(data.dtype).encode()).hexdigest()
    return out


def _abstract(tree: Any) -> Any:
    """Shape/dtype/sharding targets for restoring `tree` (keys as key data)."""
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
                        if isinstance(x, jax.Array) else x, _keys_to_data(tree))


class Checkpointer:
    """Saves and restores (state, params, config) steps in one folder."""

    def __init__(self, directory: str, keep: int = 3, read_only: bool = False):
        self.directory = directory
        with _quiet_absl(read_only):  # orbax warns about every option a read-only manager ignores
            options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=not read_only, read_only=read_only,
                                                   enable_async_checkpointing=False)
            self.manager = ocp.CheckpointManager(directory, options=options,
                                                 item_names=("state", "params", "config", "digest"))

    def save(self, step: int, state: Any, params: Any, config: dict[str, Any]) -> None:
        """Writes checkpoint `step` (atomically) and waits until it is on disk."""
        self.manager.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(_keys_to_data(state)),
            params=ocp.args.StandardSave(_keys_to_data(params)),
            config=ocp.args.JsonSave(config),
            digest=ocp.args.JsonSave({"state": _digest(state), "params": _digest(params)}),
        ), force=True)
        self.manager.wait_until_finished()

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def read_config(self, step: int | None = None) -> dict[str, Any]:
        """The config saved with `step` (default: the latest), as this version reads it (`upgraded_config`)."""
        return upgraded_config(self._restore("config", ocp.args.JsonRestore(), step))

    def restore_state(self, like: Any, step: int | None = None) -> Any:
        """The saved state, laid out (shapes, dtypes, shardings) like `like`; digest-checked."""
        return self._restore_checked("state", like, step)

    def restore_params(self, like: Any, step: int | None = None) -> Any:
        return self._restore_checked("params", like, step)

    def _restore_checked(self, item: str, like: Any, step: int | None) -> Any:
        step = self.step_or_latest(step)
        restored = _data_to_keys(self._restore(item, ocp.args.StandardRestore(_abstract(like)), step), like)
        expected = self._restore("digest", ocp.args.JsonRestore(), step)[item]
        for path, digest in _digest(restored).items():
            if expected.get(path) != digest:
                raise CheckpointError(f"checkpoint step {step} in {self.directory} is corrupted: {item}{path} "
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


def config_differences(saved: dict[str, Any], current: dict[str, Any], defaults: dict[str, Any] | None = None,
                       may_change: Collection[str] = ()) -> list[str]:
    """Dotted names (with both values) of the fields that differ, the run fields in `may_change` aside
    (those its run config declares `on_resume=MAY_CHANGE`: `podrl.run.options.may_change_on_resume`).

    A field the checkpoint does not have (added to the code after it was written)
    counts as saved with its value in `defaults` (a resolved config of default
    configs), which is how the older code behaved.
    """
    if defaults is not None:
        saved = _with_missing(saved, defaults)

    def strip(config: dict[str, Any]) -> dict[str, Any]:
        run = {k: v for k, v in config.get("run", {}).items() if k not in may_change}
        return {**{k: v for k, v in config.items() if k != "run_dir"}, "run": run}

    return _differences(strip(saved), strip(current), "")


def _differences(saved: dict[str, Any], current: dict[str, Any], prefix: str) -> list[str]:
    diffs = []
    for key in sorted(set(saved) | set(current)):
        a, b, name = saved.get(key), current.get(key), f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            diffs.extend(_differences(a, b, name + "."))
        elif _normalise(a) != _normalise(b):
            diffs.append(f"{name} (checkpoint: {a!r}, now: {b!r})")
    return diffs


def _with_missing(saved: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """`saved` with the keys only `defaults` has added (recursively)."""
    out = dict(saved)
    for key, value in defaults.items():
        if key not in out:
            out[key] = value
        elif isinstance(out[key], dict) and isinstance(value, dict):
            out[key] = _with_missing(out[key], value)
    return out


def _normalise(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def check_resumable(saved: dict[str, Any], current: dict[str, Any], defaults: dict[str, Any] | None = None,
                    may_change: Collection[str] = ()) -> None:
    """Refuses a resume whose config differs from the checkpoint's but for `may_change`, naming every field."""
    diffs = config_differences(saved, current, defaults, may_change)
    if diffs:
        raise ConfigError("resume", "the checkpoint was written by a different config; differing fields: "
                          + "; ".join(diffs) + f". Only {sorted(may_change)} may change on resume.")


class ResumePoint(NamedTuple):
    """The checkpoint a run resumes from."""

    directory: str  # the checkpoint folder
    update: int  # updates done when it was saved (its orbax step)
    config: dict[str, Any]  # the resolved config saved with it


def find_resume_point(settings: CheckpointConfig, config: dict[str, Any], defaults: dict[str, Any] | None = None,
                      may_change: Collection[str] = ()) -> ResumePoint | None:
    """Opens `settings.resume` (None when not resuming) and refuses a differing config, naming the fields
    (`defaults`, `may_change`: see `config_differences`)."""
    if settings.resume is None:
        return None
    directory = resume_dir(settings.resume)
    source = Checkpointer(directory, read_only=True)
    try:
        step = source.step_or_latest(None)
        saved = source.read_config(step)
    finally:
        source.close()
    check_resumable(saved, config, defaults, may_change)
    return ResumePoint(directory, step, saved)


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
        self.last_saved: int | None = None

    @property
    def directory(self) -> str | None:
        return self._directory

    def restore(self, like: Any) -> Any:
        """The state to resume from, laid out like `like`, or `like` itself when not resuming."""
        if self.resume is None:
            return like
        source = Checkpointer(self.resume.directory, read_only=True)
        try:
            return source.restore_state(like, self.resume.update)
        finally:
            source.close()

    def save(self, update: int, state: Any, params: Any) -> None:
        if self._directory is not None and update != self.last_saved:
            if self.checkpointer is None:
                self.checkpointer = Checkpointer(self._directory, self._keep)
            self.checkpointer.save(update, state, params, self.config)
            self.last_saved = update

    def describe_last(self) -> str:
        if self.last_saved is None:
            return "no checkpoint was saved in this run"
        return f"last good checkpoint: update {self.last_saved} in {self.directory}"

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.close()
