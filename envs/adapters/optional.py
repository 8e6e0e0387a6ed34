"""Importing an optional backend with an error that names the pip extra to install."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from podrl.envs.errors import UserInputError

NO_WHEELS = {"dmc": ((3, 13), "dm_control's labmaze has no wheel for Python 3.13 or later (the dev extra leaves "
                              "dm_control out there): use Python 3.11 or 3.12 for dmc: envs")}
"""Extras whose packages have no wheels from some Python on: extra -> (first such version, what to tell the user)."""


class MissingExtraError(UserInputError, ImportError):
    """An optional dependency (a pip extra, a ROM, opencv) that the chosen env needs is not installed."""

    label = "missing optional dependency"


def wheel_note(extra: str, version: tuple[int, ...] = tuple(sys.version_info)) -> str:
    """"; <why>" where `extra`'s packages have no wheels for Python `version`, else ""."""
    first, why = NO_WHEELS.get(extra, ((sys.maxsize,), ""))
    return f"; {why}" if tuple(version[:2]) >= first else ""


def import_optional(module: str, backend: str, extra: str, package: str) -> ModuleType:
    """`module`, or a MissingExtraError saying `pip install 'podrl[<extra>]'` (or `package`)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(f"{backend} environments need {package}: pip install 'podrl[{extra}]' "
                                f"(or pip install {package}){wheel_note(extra)} ({e})") from e
