"""The resume comparison: a run resumes only a checkpoint written by the same config.

    point = find_resume_point(config.checkpoint, resolved, defaults, may_change)   # None: not resuming
    point.directory, point.update, point.config

`config_differences` names every field (dotted, with both values) where the checkpoint's saved
config and the run's resolved config differ, the run fields its config declares `MAY_CHANGE`
(`podrl.run.options`) aside; a field the checkpoint lacks (added to the code later) counts as its
default. `check_resumable` refuses such a resume with a `ConfigError` naming them all, before anything
is written or compiled.
"""

from __future__ import annotations

from typing import Any, Collection

import numpy as np

from podrl.core.errors import ConfigError
from podrl.run.checkpoint import Checkpointer, ResumePoint
from podrl.run.checkpoint_folder import resume_dir
from podrl.run.config import CheckpointConfig


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
        return {**{k: v for k, v in config.items() if k not in ("run_dir", "topology")}, "run": run}

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
