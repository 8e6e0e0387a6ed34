"""Errors podrl raises for bad input, and the field checks that raise them.

`UserInputError` and `ConfigError` are defined in `podrl.envs.errors` (envs import nothing of
podrl) and re-exported here: the same classes, so `except podrl.core.errors.ConfigError` also
catches the ones an env adapter raises.
"""

from __future__ import annotations

import math
from typing import Any

from podrl.envs.errors import ConfigError, UserInputError

__all__ = [
    "UserInputError", "ConfigError", "NonFiniteError", "NoLegalActionError", "is_int", "require_int", "require_number",
    "require_choice", "require_bool",
]


def is_int(value: object) -> bool:
    """True for ints, False for bools (which Python counts as ints)."""
    return isinstance(value, int) and not isinstance(value, bool)


def require_int(config: object, *fields: str, minimum: int = 1) -> None:
    """Raises ConfigError for the first of `fields` that is not an int >= `minimum`."""
    for name in fields:
        value = getattr(config, name)
        if not is_int(value) or value < minimum:
            kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise ConfigError(name, f"must be {kind}, got {value!r}")


def require_number(config: object, name: str, low: float, high: float = math.inf, low_open: bool = False) -> None:
    """Raises ConfigError unless `config.<name>` is a finite number in the given range."""
    value = getattr(config, name)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low) and value <= high
    if not ok:
        lower = "(" if low_open else "["
        upper = "]" if math.isfinite(high) else ")"
        raise ConfigError(name, f"must be a finite number in {lower}{low}, {high}{upper}, got {value!r}")


def require_choice(config: object, name: str, choices: Any) -> None:
    """Raises ConfigError unless `config.<name>` is one of `choices` (a tuple, set or mapping)."""
    value = getattr(config, name)
    if value not in choices:
        listed = tuple(choices) if isinstance(choices, (tuple, list)) else tuple(sorted(choices))
        raise ConfigError(name, f"must be one of {listed}, got {value!r}")


def require_bool(config: object, *fields: str) -> None:
    """Raises ConfigError for the first of `fields` that is not True or False."""
    for name in fields:
        value = getattr(config, name)
        if not isinstance(value, bool):
            raise ConfigError(name, f"must be True or False, got {value!r}")


class NonFiniteError(UserInputError, FloatingPointError):
    """A loss, a metric or an input from the env became NaN/Inf; training stopped (`podrl.core.finite`)."""

    label = "non-finite value"


class NoLegalActionError(UserInputError, ValueError):
    """The env gave an observation to act on whose `action_mask` allows no action; training stopped as for a
    `NonFiniteError` (`podrl.core.finite.check_legal_actions`)."""

    label = "no legal action"
