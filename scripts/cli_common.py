"""What the training scripts share: the agent choice, device setup, and error reporting."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Callable, TypeVar, Union

import tyro

from agents import AGENTS
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
    """Parses `args_type` with tyro and calls `train`; config errors exit 2 with the field named."""
    sys.path.insert(0, os.getcwd())  # `--env my_pkg.my_env:MyEnv` resolves from the working directory
    try:
        args = tyro.cli(args_type, args=argv)
        import jax

        if args.cpu_devices is not None:
            jax.config.update("jax_num_cpu_devices", args.cpu_devices)
        initialize(args.distributed)
        train(args)
    except ConfigError as e:
        print(f"error: invalid config: {e}", file=sys.stderr)
        return 2
    return 0
