"""Configs to JSON and back: the resolved config saved with every run and checkpoint.

`resolved_config` is the document written to `config.json` and into every
checkpoint (and compared on resume; it names the agent's class and module); `config_from_json` rebuilds a frozen config
dataclass from its `run` or `agent` part, so a resume can start from the
checkpoint's own settings.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

import jax
import numpy as np

from podrl.core.errors import ConfigError


def jsonable(value: Any) -> Any:
    """`value` as plain JSON types (dataclasses as dicts, arrays as lists, non-finite floats as None)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (np.ndarray, jax.Array)):
        return jsonable(np.asarray(value).tolist())
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def resolved_config(layout: str, run: Any, agent: Any) -> dict[str, Any]:
    """The JSON document saved with every checkpoint and compared on resume. The agent is named by its
    config class and that class's module (`agent_type`, `agent_module`: `podrl.agents.saved_agent_class`
    imports it back), so a run folder rebuilds a user's own agent too; a folder from before
    `agent_module` was recorded names one of podrl's own agents."""
    cls = type(agent)
    return {"layout": layout, "run": jsonable(run), "agent_type": cls.__qualname__, "agent_module": cls.__module__,
            "agent": jsonable(agent)}


def config_from_json(cls: type, data: dict[str, Any], where: str = "") -> Any:
    """Rebuilds the frozen dataclass `cls` from `jsonable(instance)`.

    Nested config dataclasses are rebuilt recursively, lists become tuples (configs
    hold tuples); a key `cls` does not have is a `ConfigError` naming it (a
    checkpoint from another version of the code).
    """
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{where}{unknown[0]}", f"is not a field of {cls.__name__} (saved by another version?)")
    values = {}
    for name, value in data.items():
        nested = _dataclass_in(hints[name])
        if nested is not None and isinstance(value, dict):
            value = config_from_json(nested, value, f"{where}{name}.")
        elif isinstance(value, list):
            value = tuple(value)
        values[name] = value
    return cls(**values)


def _dataclass_in(annotation: Any) -> type | None:
    """The dataclass type in `annotation` (itself, or a member of an Optional/Union)."""
    if dataclasses.is_dataclass(annotation):
        return annotation
    for arg in typing.get_args(annotation):
        if dataclasses.is_dataclass(arg):
            return arg
    return None
