"""The training CLIs' flags, grouped for `--help`, built from the layout configs' own fields.

The run configs stay flat (`AnakinConfig`, `SebulbaConfig`: one field, one flag, one
saved JSON key); this module only arranges their fields into `--help` boxes (run,
env, evaluation, population, logging, checkpoint, hosts). Each box is a frozen
dataclass generated from the config's fields with the same names, types, defaults and
one-line docstrings, so no flag is declared twice and the flag names are the fields'
names. Which box a field is in and a layout's own wording of its help are declared with
the field (`podrl.run.options.option`).

`flags_type(layout, own)` is what tyro parses; `to_flags` / `from_flags` convert between
its instances and a `podrl.cli.experiment.Experiment`. Its agents are tyro subcommands: podrl's own and
the installed ones (`podrl.agents.registered_agents`), and the user's own config classes `own` that the
command line names (`agent:<module>:<Class>`) or that a resumed checkpoint holds (`own_agents`, which
imports them before tyro builds its parser): each class's fields are its `--agent.<field>` flags.
`resolve(layout, argv)` is the training commands' whole reading of their command line: defaults <-
preset <- checkpoint <- flags (the layers: `podrl.cli.experiment`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
import typing
from typing import Annotated, Any, Literal, Sequence, Union

import tyro

from podrl.cli import presets
from podrl.cli.experiment import (
    Experiment,
    agent_name,
    default_experiment,
    layout_config,
    preset_experiment,
    resume_experiment,
)
from podrl.core.distributed import DistributedConfig
from podrl.core.errors import ConfigError
from podrl.run.options import help_of, option_of

BOXES = ("run", "env", "evaluation", "population")
"""The `--help` boxes of run fields (flags unprefixed), in order; a field's box is its option's
(`podrl.run.options`). A field holding a nested config (logging, checkpoint) is a box of its
own, after these, whose flags keep the prefix (`--logging.run-dir`)."""


def nested_configs(config_type: type) -> dict[str, type]:
    """The fields of `config_type` that hold a nested config, with its class (`{"logging": LoggingConfig, ...}`)."""
    hints = typing.get_type_hints(config_type)
    return {f.name: hints[f.name] for f in dataclasses.fields(config_type) if dataclasses.is_dataclass(hints[f.name])}


def run_boxes(config_type: type) -> dict[str, tuple[str, ...]]:
    """The fields of each of `BOXES`, in field order (nested configs left out)."""
    nested, boxes = nested_configs(config_type), {box: [] for box in BOXES}
    for field in dataclasses.fields(config_type):
        box = option_of(config_type, field.name).box
        if box not in boxes:
            raise ValueError(f"{config_type.__name__}.{field.name}: box {box!r} is not one of {BOXES}")
        if field.name not in nested:
            boxes[box].append(field.name)
    return {box: tuple(fields) for box, fields in boxes.items()}


def field_docs(cls: type) -> dict[str, str]:
    """The one-line docstrings of `cls`'s fields (the string under each field), a subclass's winning."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        for field, doc in zip(body, body[1:]):
            if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name) \
                    and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                docs[field.target.id] = " ".join(str(doc.value.value).split())
    return docs


def _with_help(hint: Any, text: str | None, empty_default: bool) -> Any:
    """`hint` annotated with `text` as its help (keeping its other tyro markers, e.g. aliases)."""
    extra = {"help_behavior_hint": "(default: none)"} if empty_default else {}
    base, markers = hint, ()
    if typing.get_origin(hint) is Annotated:
        base, markers = hint.__origin__, hint.__metadata__
    args = [m for m in markers if isinstance(m, type(tyro.conf.arg()))]
    others = tuple(m for m in markers if m not in args)
    arg = dataclasses.replace(args[0], help=text, **extra) if args else tyro.conf.arg(help=text, **extra)
    return Annotated[(base, *others, arg)]  # type: ignore[valid-type]


def _group(name: str, source: type, fields: tuple[str, ...], layout: str) -> type:
    """A frozen dataclass called `name` with `source`'s `fields` (same types and defaults, `layout`'s help)."""
    hints = typing.get_type_hints(source, include_extras=True)
    docs = field_docs(source)
    spec = []
    for field in fields:
        default = getattr(source(), field)
        text = help_of(source, field, layout, docs.get(field))
        empty = isinstance(default, tuple) and not default
        spec.append((field, _with_help(hints[field], text, empty), dataclasses.field(default=default)))
    return dataclasses.make_dataclass(name, spec, frozen=True)


@functools.cache
def flags_type(layout: str, own: tuple[type, ...] = ()) -> type:
    """The dataclass tyro parses for `layout`'s training command, with subcommands for the user's `own`
    agent config classes too (see the module doc)."""
    from podrl.agents import AGENTS, agent_path, registered_agents, summary

    config_type = layout_config(layout)
    spec: list[tuple[str, Any, Any]] = []
    for group, fields in run_boxes(config_type).items():
        if fields:
            kind = _group(f"{layout}_{group}", config_type, fields, layout)
            spec.append((group, Annotated[kind, tyro.conf.OmitArgPrefixes], dataclasses.field(default=kind())))
    for group, source in nested_configs(config_type).items():
        kind = _group(group, source, tuple(f.name for f in dataclasses.fields(source)), layout)
        spec.append((group, kind, dataclasses.field(default=kind())))
    hosts = _group("hosts", DistributedConfig, tuple(f.name for f in dataclasses.fields(DistributedConfig)), layout)
    spec.append(("hosts", Annotated[hosts, tyro.conf.OmitArgPrefixes], dataclasses.field(default=hosts())))
    entries = [(n, e.config, e.description) for n, e in registered_agents().items()]
    entries += [(agent_path(cls), cls, summary(cls)) for cls in own]
    agents = Union[tuple(Annotated[c, tyro.conf.subcommand(n, description=d)] for n, c, d in entries)]  # type: ignore
    names = tuple(p.name for p in presets.PRESETS.values() if p.layout == layout)
    spec += [
        ("agent", Annotated[agents, tyro.conf.arg(help="The agent and its hyperparameters.")],
         dataclasses.field(default=next(iter(AGENTS.values())).config())),
        ("preset", Annotated[Literal[names] | None, tyro.conf.arg(  # type: ignore[valid-type]
            help="Start from a named config with known-good hyperparameters (listed above); other flags "
                 "override its fields.")], dataclasses.field(default=None)),
        ("cpu_devices", Annotated[int | None, tyro.conf.arg(help=help_of(Experiment, "cpu_devices", layout, None))],
         dataclasses.field(default=None)),
    ]
    return dataclasses.make_dataclass(f"Train{layout.capitalize()}Flags", spec, frozen=True)


def to_flags(experiment: Any, own: tuple[type, ...] = ()) -> Any:
    """The flags instance whose values are `experiment`'s (the defaults tyro shows and starts from)."""
    flags, nested = flags_type(experiment.run.layout, own), nested_configs(type(experiment.run))
    values: dict[str, Any] = {}
    for box in dataclasses.fields(flags):
        kind = typing.get_type_hints(flags)[box.name]
        if box.name in nested:
            values[box.name] = kind(**dataclasses.asdict(getattr(experiment.run, box.name)))
        elif box.name == "hosts":
            values[box.name] = kind(**dataclasses.asdict(experiment.distributed))
        elif box.name in ("agent", "preset", "cpu_devices"):
            values[box.name] = getattr(experiment, box.name)
        else:
            values[box.name] = kind(**{f.name: getattr(experiment.run, f.name) for f in dataclasses.fields(kind)})
    return flags(**values)


def from_flags(layout: str, flags: Any) -> Any:
    """The `Experiment` the parsed `flags` describe (its configs validate themselves here)."""
    run: dict[str, Any] = {}
    nested = nested_configs(layout_config(layout))
    for box in dataclasses.fields(flags):
        if box.name in nested:
            run[box.name] = nested[box.name](**_values(getattr(flags, box.name)))
        elif box.name not in ("hosts", "agent", "preset", "cpu_devices"):
            run.update(_values(getattr(flags, box.name)))
    return Experiment(run=layout_config(layout)(**run), agent=flags.agent,
                      distributed=DistributedConfig(**_values(flags.hosts)), preset=flags.preset,
                      cpu_devices=flags.cpu_devices)


def _values(instance: Any) -> dict[str, Any]:
    return {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}


def preset_flag(argv: Sequence[str]) -> str | None:
    """The NAME of `--preset NAME` / `--preset=NAME` in `argv` (the last one wins), else None."""
    name = None
    for i, arg in enumerate(argv):
        if arg == "--preset" and i + 1 < len(argv):
            name = argv[i + 1]
        elif arg.startswith("--preset="):
            name = arg.partition("=")[2]
    return None if name in (None, "None") else name


def order_argv(argv: Sequence[str], agent: str) -> list[str]:
    """`argv` as tyro reads it: run flags first, then `agent:<name>`, then the `--agent.*` flags.

    tyro takes the agent's flags only after the subcommand that picks the agent, and
    the run's flags only before it; this lets a user write them in any order (each
    flag moves with its values). With `--agent.*` flags but no `agent:` subcommand,
    `agent:<agent>` (the preset's or the checkpoint's agent) is selected.
    """
    run, agent_args, chosen, in_agent = [], [], None, False
    for arg in argv:
        if arg.startswith("agent:"):
            chosen, in_agent = arg, False
            continue
        if arg.startswith("-"):  # `agent:<name> --help` stays the agent's help
            in_agent = arg.startswith("--agent.") or (chosen is not None and arg in ("-h", "--help"))
        (agent_args if in_agent else run).append(arg)
    if chosen is None and not agent_args:
        return run
    return run + [chosen or f"agent:{agent}"] + agent_args


def own_agents(argv: Sequence[str], default_agent: Any) -> tuple[list[str], tuple[type, ...]]:
    """`(argv, classes)`: the user's own agent config classes the command names (`agent:<module>:<Class>`,
    imported now, from the current folder as `--env module:Class` is) or `default_agent` is (a resumed
    checkpoint's), for `flags_type`; `argv` with a path to a registered class replaced by its name.
    UnknownAgentError for an `agent:<name>` no agent has, or a path that names no agent config."""
    from podrl.agents import agent_name, registered_agents

    registered = registered_agents()
    classes = {entry.config for entry in registered.values()}
    own = [] if type(default_agent) in classes else [type(default_agent)]
    out = []
    for arg in argv:
        cls = _named_class(arg, registered)
        if cls is not None:
            own += [] if cls in classes or cls in own else [cls]
            arg = f"agent:{agent_name(cls())}" if cls in classes else arg
        out.append(arg)
    return out, tuple(own)


def _named_class(arg: str, registered: dict[str, Any]) -> type | None:
    """The config class `arg` names when it is `agent:<module>:<Class>` (imported now); None for any other word,
    a registered agent's `agent:<name>` included. UnknownAgentError for an `agent:<name>` no agent has."""
    from podrl.agents import UnknownAgentError, import_agent

    name = arg.removeprefix("agent:")
    if name == arg or name in registered or name.replace("-", "_") in registered:
        return None
    name = name.replace("-", "_")  # tyro's --help writes a module's underscores as hyphens
    if ":" not in name:
        raise UnknownAgentError(f"{arg!r}: no agent is named {name!r} (podrl's and installed ones: "
                                f"{', '.join(registered)}); your own: agent:<module>:<Class>")
    return import_agent(name)


def parse_flags(layout: str, argv: Sequence[str], defaults: Any) -> Any:
    """The `Experiment` of `argv` with `defaults` (an `Experiment`) under the flags given."""
    description = f"{DESCRIPTIONS[layout]}\n\n{presets.help_text(layout)}\n\n{OWN_AGENT_HELP}\n\n{DEBUG_HELP}"
    argv, own = own_agents(argv, defaults.agent)
    flags = tyro.cli(flags_type(layout, own), args=order_argv(argv, agent_name(defaults.agent)),
                     default=to_flags(defaults, own), description=description)
    return from_flags(layout, flags)


def resolve(layout: str, argv: Sequence[str]) -> Experiment:
    """The experiment `argv` describes for `layout`'s training command: defaults <- preset <- checkpoint
    (on `--resume`) <- flags (see `podrl.cli.experiment`)."""
    name = preset_flag(argv)
    defaults = preset_experiment(layout, name) if name is not None else default_experiment(layout)
    experiment = parse_flags(layout, argv, defaults)
    if experiment.run.checkpoint.resume is None:
        return experiment
    if experiment.preset is not None:
        raise ConfigError("preset", "a resumed run keeps its checkpoint's config; drop --preset "
                                    "(flags given with --resume still override single fields)")
    return parse_flags(layout, argv, resume_experiment(layout, experiment.run.checkpoint.resume))


DESCRIPTIONS = {"anakin": "Train an agent with the Anakin layout on a JAX environment.",
                "sebulba": "Train an agent with the Sebulba layout on host environments."}
"""The first line of each training command's --help."""

OWN_AGENT_HELP = ("Your own agent: agent:<module>:<Class> names its config class (imported from the current "
                  "folder, as --env module:Class is), whose fields become --agent.<field> flags; installed packages "
                  "publish agents through the 'podrl.agents' entry-point group (docs/own-agent.md).")

DEBUG_HELP = ("Errors you can fix (a flag, a config value, your env, a missing extra) print one message and "
              "exit with status 2; add --debug (or set PODRL_DEBUG=1) to see the full traceback too.")

