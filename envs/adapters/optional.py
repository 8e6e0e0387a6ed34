"""Importing an optional backend with an error that names the pip extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def import_optional(module: str, backend: str, extra: str, package: str) -> ModuleType:
    """`module`, or an ImportError saying `pip install 'podrl[<extra>]'` (or `package`)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{backend} environments need {package}: pip install 'podrl[{extra}]' "
                          f"(or pip install {package}) ({e})") from e
