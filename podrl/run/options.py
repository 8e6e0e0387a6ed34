"""A run option's facts, declared once with its field: its `--help` box, whether it may change on
`--resume`, and its `--help` wording where a layout words it its own way.

    eval_every: int = option(128, box="evaluation", on_resume=MAY_CHANGE)   # its docstring below it

`podrl.cli.flags` reads the boxes and the wording (`option_of`, `help_of`), `podrl.run.context` the
resume policy (`may_change_on_resume`, which `podrl.run.checkpoint` applies). A field declared
without `option` is in the `run` box, must match on resume, and its help is its docstring. A layout
config that redeclares a shared field (another default, its own docstring) keeps the shared
field's option unless it gives one.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Mapping, NamedTuple

MUST_MATCH = "must match"
"""The field must be equal in a checkpoint and the run resuming it (the default)."""
MAY_CHANGE = "may change"
"""The field may differ between a checkpoint and the run resuming it (a budget, logging, evaluation, ...)."""

_KEY = "podrl.option"


class Option(NamedTuple):
    """What `option` declares about a field."""

    box: str = "run"  # the --help box of its flag (`podrl.cli.flags.BOXES`)
    on_resume: str = MUST_MATCH  # MUST_MATCH or MAY_CHANGE
    help: Mapping[str, str] = types.MappingProxyType({})  # --help wording by layout, where not the docstring


def option(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING, box: str = "run",
           on_resume: str = MUST_MATCH, help: Mapping[str, str] | None = None) -> Any:  # noqa: A002 - tyro's word
    """A dataclass field (`default` or `default_factory`) with its `Option` in its metadata (module doc)."""
    if on_resume not in (MUST_MATCH, MAY_CHANGE):
        raise ValueError(f"on_resume must be {MUST_MATCH!r} or {MAY_CHANGE!r}, got {on_resume!r}")
    declared = Option(box, on_resume, types.MappingProxyType(dict(help or {})))
    return dataclasses.field(default=default, default_factory=default_factory, metadata={_KEY: declared})


def option_of(config_type: type, name: str) -> Option:
    """The `Option` of field `name` of `config_type`: the first one declared along its MRO, else the defaults."""
    for klass in config_type.__mro__:
        field = getattr(klass, "__dataclass_fields__", {}).get(name)
        if field is not None and _KEY in field.metadata:
            return field.metadata[_KEY]
    return Option()


def help_of(config_type: type, name: str, layout: str, docstring: str | None) -> str | None:
    """The --help text of field `name` in `layout`: its option's wording for `layout`, else `docstring`."""
    return option_of(config_type, name).help.get(layout, docstring)


def may_change_on_resume(config_type: type) -> frozenset[str]:
    """The fields of `config_type` declared `on_resume=MAY_CHANGE`."""
    return frozenset(f.name for f in dataclasses.fields(config_type)
                     if option_of(config_type, f.name).on_resume == MAY_CHANGE)
