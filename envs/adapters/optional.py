"""Importing an optional backend with an error that names the pip extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from podrl.envs.errors import UserInputError


class MissingExtraError(UserInputError, ImportError):
    """An optional dependency (a pip extra, a ROM, opencv) that the chosen env needs is not installed."""

    label = "missing optional dependency"


def import_optional(module: str, backend: str, extra: str, package: str) -> ModuleType:
    """`module`, or a MissingExtraError saying `pip install 'podrl[<extra>]'` (or `package`)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(f"{backend} environments need {package}: pip install 'podrl[{extra}]' "
                          f"(or pip install {package}) ({e})") from e
