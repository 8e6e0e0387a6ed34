"""What the training scripts share: the agent choice, device setup, and error reporting."""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
import traceback
import typing
from typing import Annotated, Callable, Literal, Sequence, TypeVar, Union

import tyro

from agents import AGENTS, UnknownAgentError, config_from_saved
from podrl import presets
from podrl.config_json import config_from_json
from podrl.distributed import DistributedConfig, initialize
from podrl.errors import ConfigError, UserInputError
from podrl.watchdog import StageTimeout, exit_now

AgentChoice = Union[tuple(  # type: ignore[valid-type]
    Annotated[entry.config, tyro.conf.subcommand(name, description=entry.description)]
    for name, entry in AGENTS.items()
)]
"""`agent:<name>` on the command line, one subcommand per entry of `agents.AGENTS`."""


def default_agent():
    """The default agent config: the first registered agent with its defaults."""
    return next(iter(AGENTS.values())).config()


Args = TypeVar("Args")

PresetName = Literal[tuple(presets.PRESETS)]  # type: ignore[valid-type]
"""`--preset NAME`: one of `podrl.presets.PRESETS`."""

Distributed = Annotated[DistributedConfig, tyro.conf.arg(name="")]
"""Flattened multi-process flags: --coordinator, --num-processes, --process-id, --distributed-auto."""


DEBUG_HELP = ("Errors you can fix (a flag, a config value, your env, a missing extra) print one message and "
              "exit with status 2; add --debug (or set PODRL_DEBUG=1) to see the full traceback too.")


def debug_requested(argv: Sequence[str]) -> tuple[bool, list[str]]:
    """(whether --debug or PODRL_DEBUG=1 asks for tracebacks, argv without --debug)."""
    rest = [a for a in argv if a != "--debug"]
    return len(rest) < len(argv) or os.environ.get("PODRL_DEBUG", "") not in ("", "0"), rest


def report_user_error(error: UserInputError, debug: bool) -> int:
    """Prints `error: <label>: <message>` (after the traceback when `debug`); returns exit status 2."""
    if debug:
        traceback.print_exception(error)
    hint = "" if debug else "\n(add --debug or set PODRL_DEBUG=1 for the traceback)"
    notes = "".join(f"\n{note}" for note in getattr(error, "__notes__", ()))  # e.g. the last good checkpoint
    print(f"error: {error.label}: {error}{notes}{hint}", file=sys.stderr)
    return 2


def preset_flag(argv: Sequence[str]) -> str | None:
    """The NAME of `--preset NAME` / `--preset=NAME` in `argv` (the last one wins), else None."""
    name = None
    for i, arg in enumerate(argv):
        if arg == "--preset" and i + 1 < len(argv):
            name = argv[i + 1]
        elif arg.startswith("--preset="):
            name = arg.partition("=")[2]
    return name


def with_agent_subcommand(argv: list[str], agent: str) -> list[str]:
    """`argv` with `agent:<agent>` selected when it has `--agent.*` flags but no `agent:` subcommand.

    tyro reads agent flags only after the subcommand that picks the agent; this puts the
    `--agent.*` flags (each with its values) after `agent:<agent>` at the end, so
    `--preset minatar-impala --agent.learning-rate 1e-3` needs no `agent:impala`.
    """
    if any(a.startswith("agent:") for a in argv) or not any(a.startswith("--agent.") for a in argv):
        return argv
    rest, agent_args, in_agent = [], [], False
    for arg in argv:
        if arg.startswith("--"):
            in_agent = arg.startswith("--agent.")
        (agent_args if in_agent else rest).append(arg)
    return rest + [f"agent:{agent}"] + agent_args


def _layout(args_type: type) -> str:
    run_type = typing.get_type_hints(args_type, include_extras=False)["run"]
    return run_type.layout


def run_cli(args_type: type[Args], train: Callable[[Args], object], argv: list[str] | None = None) -> int:
    """Parses `args_type` with tyro and calls `train`.

    With `--preset NAME`, the preset's run and agent fields (`podrl.presets`) are the
    defaults that the other flags override.

    A `UserInputError` (invalid config, unknown env, unsupported space, an env that
    breaks its spec, a missing extra, an unreadable checkpoint) exits 2 with its
    one-paragraph message; the traceback only with `--debug` / `PODRL_DEBUG=1`. A
    stalled stage (`StageTimeout`) exits 3 at once, naming the stage.

    With `--resume PATH`, every run and agent field defaults to the checkpoint's
    own value (so a bare `--resume` continues the run to its own total); flags
    given explicitly override them.
    """
    sys.path.insert(0, os.getcwd())  # `--env my_pkg.my_env:MyEnv` resolves from the working directory
    debug, argv = debug_requested(sys.argv[1:] if argv is None else argv)
    description = f"{inspect.getdoc(args_type)}\n\n{presets.help_text(_layout(args_type))}\n\n{DEBUG_HELP}"
    try:
        name = preset_flag(argv)
        default = presets.preset_args(args_type, presets.get(name)) if name in presets.PRESETS else None
        given = argv
        argv = with_agent_subcommand(given, presets.get(name).agent if default is not None else next(iter(AGENTS)))
        args = tyro.cli(args_type, args=argv, default=default, description=description)
        import jax

        if args.cpu_devices is not None:
            jax.config.update("jax_num_cpu_devices", args.cpu_devices)
        initialize(args.distributed)
        if args.run.checkpoint.resume is not None:  # again, now with the checkpoint's values as defaults
            if args.preset is not None:
                raise ConfigError("preset", "a resumed run keeps its checkpoint's config; drop --preset "
                                            "(flags given with --resume still override single fields)")
            default = resume_defaults(args_type, args.run.checkpoint.resume)
            agent = next(n for n, entry in AGENTS.items() if isinstance(default.agent, entry.config))
            args = tyro.cli(args_type, args=with_agent_subcommand(given, agent), default=default,
                            description=description)
        train(args)
    except UserInputError as e:
        return report_user_error(e, debug)
    except StageTimeout as e:
        exit_now(e)  # a thread is still blocked in XLA: a normal exit could wait on it for ever
    return 0


def resume_defaults(args_type: type[Args], path: str) -> Args:
    """`args_type` filled from the config of the checkpoint at `path` (a run or checkpoint folder)."""
    from podrl.checkpoint import Checkpointer, resume_dir

    source = Checkpointer(resume_dir(path), read_only=True)
    try:
        saved = source.read_config()
    finally:
        source.close()
    hints = typing.get_type_hints(args_type)
    run_type = hints["run"]
    if saved.get("layout") != run_type.layout:
        raise ConfigError("resume", f"{path} holds a {saved.get('layout')!r} checkpoint; this script trains "
                                    f"with the {run_type.layout!r} layout")
    try:  # the registry's own reader; a saved field this version lacks is then named by the resume check
        agent, _ = config_from_saved(saved.get("agent_type"), saved["agent"])
    except UnknownAgentError as e:
        raise ConfigError("resume", f"{path}: {e}") from None
    run = config_from_json(run_type, saved["run"], "run.")
    run = dataclasses.replace(run, checkpoint=dataclasses.replace(run.checkpoint, resume=path))
    return args_type(run=run, agent=agent)
