"""Loaded by the sitecustomize of a child of `tools/check_mutations.py --fields` (never imported by podrl):
makes config fields that "the code" reads return their defaults (a mutation), or counts those reads (a census).

`PODRL_FIELD_GUARD` (JSON) says what: `{"mode": "mutate" | "census", "root": <the copy>, "classes":
{module: {class: [field, ...]}}, "out": <folder for the census>}`. When a named module has been imported,
each named field of its class becomes a data descriptor: the dataclass's `__init__` stores the value
(`object.__setattr__` reaches `__set__`), and a read returns the stored value, except a read *by the code*:

  the reading frame and the frames that called it, up to the first frame outside the copy's packages
  (`podrl/`, `agents/`, `envs/`: a test, pytest, JAX's tracing machinery) or in the command line
  (`podrl/cli/`, a caller like a test), are package code, and none of them validates or reports the
  config (`__post_init__`, `check_*`, `require_*`, the error helpers, the config's JSON, the reports).
  A read made in the command line's own code is an observer's (its flags, its printing).

A mutation returns the field's default to such reads: the code behaves as if it ignored the field, while
the config object, what tests read from it to compute their expectations, its validation, equality, hash,
repr and saved JSON keep the value. A census counts such reads per field, split by whether the value read
equals the default (a field read only at its default cannot be caught by the mutation), and writes the
counts to `out/census-<pid>.json` at exit, and at the first read of each kind of each field (a process that
ends by `os._exit`, as a stalled command-line run does, runs no exit handler).
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import sys

SPEC = json.loads(os.environ["PODRL_FIELD_GUARD"])
ROOT = os.path.realpath(SPEC["root"]) + os.sep
PACKAGES = ("podrl" + os.sep, "agents" + os.sep, "envs" + os.sep)
ENTRY = "podrl/cli/"
"""The command line: its own reads are an observer's; the code it calls computes (it is a caller, as a test)."""
OBSERVERS = (ENTRY, "podrl/reports/", "podrl/run/config_json.py", "podrl/run/options.py",
             "podrl/core/errors.py", "envs/errors.py", "agents/__init__.py")
"""Package code that validates, serialises or reports configs: its reads are not the code computing."""
VALIDATION = ("check_", "require_", "_check")
CENSUS: dict[str, list[int]] = {}


def package_path(filename: str) -> str | None:
    """The path of a file of the copy's packages relative to the copy ("agents/dqn/agent.py"), else None."""
    if not filename.startswith(ROOT):
        return None
    rel = filename[len(ROOT):]
    return rel.replace(os.sep, "/") if rel.startswith(PACKAGES) else None


def computing(frame) -> bool:
    """Whether the read in `frame` is the code computing (module docstring)."""
    seen = False
    while frame is not None:
        rel = package_path(frame.f_code.co_filename)
        if rel is None:
            return seen
        name = frame.f_code.co_name
        if seen and rel.startswith(ENTRY):
            return True
        if rel.startswith(OBSERVERS) or name == "__post_init__" or name.startswith(VALIDATION):
            return False
        seen, frame = True, frame.f_back
    return seen


def same(value, default) -> bool:
    return type(value) is type(default) and value == default


class Guarded:
    """A config field as the module docstring says: `mutate` returns the default to the code's reads."""

    def __init__(self, key: str, name: str, default, mutate: bool):
        self.key, self.name, self.default, self.mutate = key, name, default, mutate
        self.slot = f"_guarded_{name}"
        CENSUS.setdefault(key, [0, 0])

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.slot] = value

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self.default
        value = obj.__dict__.get(self.slot, obj.__dict__.get(self.name, self.default))
        if not computing(sys._getframe(1)):
            return value
        if self.mutate:
            return self.default
        counts, kind = CENSUS[self.key], 0 if same(value, self.default) else 1
        counts[kind] += 1
        if counts[kind] == 1:  # written at once too: a process may end by os._exit (a stalled run's exit_now)
            write_census()
        return value


def field_default(cls, name: str):
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return field.default_factory() if field.default is dataclasses.MISSING else field.default


def guard(module) -> None:
    """Puts a `Guarded` on each named field of the named classes of `module`."""
    for class_name, fields in SPEC["classes"][module.__name__].items():
        cls = getattr(module, class_name)
        for name in fields:
            key = f"{module.__name__}:{class_name}.{name}"
            setattr(cls, name, Guarded(key, name, field_default(cls, name), SPEC["mode"] == "mutate"))


class GuardFinder:
    """A meta path finder that lets the other finders find a named module, then guards it once executed."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in SPEC["classes"]:
            return None
        for finder in sys.meta_path:
            if finder is cls or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            guard(module)

        spec.loader.exec_module = exec_module
        return spec


def write_census() -> None:
    if SPEC["mode"] == "census" and any(sum(counts) for counts in CENSUS.values()):
        with open(os.path.join(SPEC["out"], f"census-{os.getpid()}.json"), "w") as f:
            json.dump(CENSUS, f)


sys.meta_path.insert(0, GuardFinder)
atexit.register(write_census)
