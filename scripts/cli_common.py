"""What the training scripts share: the agent choice, device setup, and error reporting."""

from __future__ import annotations

import dataclasses
import os
import sys
import typing
from typing import Annotated, Callable, TypeVar, Union

import tyro

from agents import AGENTS, UnknownAgentError, config_type
from podrl.checkpoint import CheckpointError
from podrl.config_json import config_from_json
from podrl.distributed import DistributedConfig, initialize
from podrl.errors import ConfigError

AgentChoice = Union[tuple(  # type: ignore[valid-type]
    Annotated[entry.config, tyro.conf.subcommand(name, description=entry.description)]
    for name, entry in AGENTS.items()
)]
"""`agent:<name>` on the command line, one subcommand per entry of `agents.AGENTS`."""


def default_agent():
    """The default agent config: the first registered agent with its defaults."""
    return next(iter(AGENTS.values())).config()


Args = TypeVar("Args")

Distributed = Annotated[DistributedConfig, tyro.conf.arg(name="")]
"""Flattened multi-process flags: --coordinator, --num-processes, --process-id, --distributed-auto."""


def run_cli(args_type: type[Args], train: Callable[[Args], object], argv: list[str] | None = None) -> int:
    """Parses `args_type` with tyro and calls `train`; config errors exit 2 with the field named.

    With `--resume PATH`, every run and agent field defaults to the checkpoint's
    own value (so a bare `--resume` continues the run to its own total); flags
    given explicitly override them.
    """
    sys.path.insert(0, os.getcwd())  # `--env my_pkg.my_env:MyEnv` resolves from the working directory
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = tyro.cli(args_type, args=argv)
        import jax

        if args.cpu_devices is not None:
            jax.config.update("jax_num_cpu_devices", args.cpu_devices)
        initialize(args.distributed)
        if args.run.checkpoint.resume is not None:  # again, now with the checkpoint's values as defaults
            args = tyro.cli(args_type, args=argv, default=resume_defaults(args_type, args.run.checkpoint.resume))
        train(args)
    except ConfigError as e:
        print(f"error: invalid config: {e}", file=sys.stderr)
        return 2
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
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
    try:
        agent_type = config_type(saved.get("agent_type"))
    except UnknownAgentError as e:
        raise ConfigError("resume", f"{path}: {e}") from None
    run = config_from_json(run_type, saved["run"], "run.")
    run = dataclasses.replace(run, checkpoint=dataclasses.replace(run.checkpoint, resume=path))
    return args_type(run=run, agent=config_from_json(agent_type, saved["agent"], "agent."))
