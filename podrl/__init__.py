"""podrl: distributed reinforcement learning in JAX, Anakin and Sebulba layouts.

`podrl.Agent`, `podrl.AgentConfig`, `podrl.TrainState` and `podrl.Trajectory` are
`podrl.core.types`' own, imported when first asked for: importing podrl (the `podrl`
command's `--help`, `podrl launch`) starts no JAX.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from podrl.core.types import Agent, AgentConfig, TrainState, Trajectory

__all__ = ["Agent", "AgentConfig", "TrainState", "Trajectory"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from podrl.core import types

        return getattr(types, name)
    raise AttributeError(f"module 'podrl' has no attribute {name!r}")
