"""What a checkpoint folder holds, read with the standard library alone (no JAX, no orbax), so that
`podrl launch` can read it too: orbax names a complete step's folder by its step alone; one still
being written has a suffix."""

from __future__ import annotations

import os


def complete_steps(directory: str | None) -> list[int]:
    """The updates of the complete checkpoints in `directory`, in order ([] when there is no folder)."""
    if not directory or not os.path.isdir(directory):
        return []
    return sorted(int(name) for name in os.listdir(directory) if name.isdigit())
