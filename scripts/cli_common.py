"""What the training scripts share: the agent choice, device setup, and error reporting."""

from __future__ import annotations

import inspect
import os
import sys
import traceback
from typing import Annotated, Callable, Sequence, TypeVar, Union

import tyro

from agents.impala import ImpalaConfig
from agents.ppo import PPOConfig
from podrl.distributed import DistributedConfig, initialize
from podrl.errors import UserInputError

AgentChoice = Union[
    Annotated[PPOConfig, tyro.conf.subcommand("ppo", description="Proximal Policy Optimization with GAE.")],
    Annotated[ImpalaConfig, tyro.conf.subcommand("impala", description="IMPALA: actor-critic with V-trace.")],
]
"""`agent:ppo` (default) or `agent:impala` on the command line."""

Args = TypeVar("Args")

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
    print(f"error: {error.label}: {error}{hint}", file=sys.stderr)
    return 2


def run_cli(args_type: type[Args], train: Callable[[Args], object], argv: list[str] | None = None) -> int:
    """Parses `args_type` with tyro and calls `train`.

    A `UserInputError` (invalid config, unknown env, unsupported space, an env that
    breaks its spec, a missing extra) exits 2 with its one-paragraph message; the
    traceback only with `--debug` / `PODRL_DEBUG=1`.
    """
    sys.path.insert(0, os.getcwd())  # `--env my_pkg.my_env:MyEnv` resolves from the working directory
    debug, argv = debug_requested(sys.argv[1:] if argv is None else argv)
    try:
        args = tyro.cli(args_type, args=argv, description=f"{inspect.getdoc(args_type)}\n\n{DEBUG_HELP}")
        import jax

        if args.cpu_devices is not None:
            jax.config.update("jax_num_cpu_devices", args.cpu_devices)
        initialize(args.distributed)
        train(args)
    except UserInputError as e:
        return report_user_error(e, debug)
    return 0
