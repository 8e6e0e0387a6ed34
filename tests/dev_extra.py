"""The dev extra's optional packages in the tests: import one, or skip only where the dev extra leaves it out.

`require("dm_control.suite", "dm_control")` imports the module when pyproject.toml's `dev` extra installs
the distribution on this interpreter and platform (its environment marker holds): a missing or broken
install is then an error, never a skip. Where the marker excludes it (dm_control on Python 3.13: its
labmaze has no wheel there), the calling test module, or the test, is skipped with the marker as reason.
"""

from __future__ import annotations

import functools
import importlib
import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def dev_requirements() -> dict[str, Requirement]:
    """pyproject.toml's `dev` extra: canonical distribution name -> its requirement (marker included)."""
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    return {_canonical(Requirement(line).name): Requirement(line) for line in extras["dev"]}


def left_out(distribution: str) -> str | None:
    """Why the dev extra does not install `distribution` here (its marker), or None where it does.
    A distribution that is not in the dev extra at all is an error: the tests may only rely on it."""
    requirement = dev_requirements().get(_canonical(distribution))
    if requirement is None:
        raise KeyError(f"{distribution} is not in pyproject.toml's dev extra")
    if requirement.marker is None or requirement.marker.evaluate():
        return None
    return f"the dev extra installs {distribution} only where {requirement.marker} (pyproject.toml)"


def require(module: str, distribution: str) -> ModuleType:
    """`module` imported; a test-module-level skip where the dev extra leaves `distribution` out."""
    reason = left_out(distribution)
    if reason is not None:
        pytest.skip(f"{module}: {reason}", allow_module_level=True)
    return importlib.import_module(module)
