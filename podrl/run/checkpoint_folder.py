"""What a checkpoint folder holds, read with the standard library alone (no JAX, no orbax), so that
`podrl launch`, `podrl checkpoints` and the deploy scripts can read it too: orbax names a complete
step's folder by its step alone; one still being written has a suffix
(`<step>.orbax-checkpoint-tmp-<n>`) and is renamed to `<step>` once every file is written."""

from __future__ import annotations

import os
import re

STEP = re.compile(r"[0-9]+")
"""The name of a complete step's folder."""


def resume_dir(path: str) -> str:
    """The checkpoint folder of `path`: a checkpoint folder, or a run folder holding `checkpoints/`."""
    nested = os.path.join(path, "checkpoints")
    return os.path.abspath(nested if os.path.isdir(nested) else path)


def complete_steps(directory: str | None) -> list[int]:
    """The updates of the complete checkpoints in `directory`, in order ([] when there is no folder)."""
    if not directory or not os.path.isdir(directory):
        return []
    return sorted(int(name) for name in os.listdir(directory)
                  if STEP.fullmatch(name) and os.path.isdir(os.path.join(directory, name)))
