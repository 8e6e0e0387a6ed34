"""What the training scripts share: the agent choice, device setup, and error reporting."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Callable, TypeVar, Union

import tyro

from agents.impala import ImpalaConfig
from agents.ppo import PPOConfig
from podrl.distributed import DistributedConfig, initialize
from podrl.errors import ConfigError
from podrl.watchdog import StageTimeout, exit_now

AgentChoice = Union[
    Annotated[PPOConfig, tyro.conf.subcommand("ppo", description="Proximal Policy Optimization with GAE.")],
    Annotated[ImpalaConfig, tyro.conf.subcommand("impala", description="IMPALA: actor-critic with V-trace.")],
]
"""`agent:ppo` (default) or `agent:impala` on the command line."""

Args = TypeVar("Args")

Distributed = Annotated[DistributedConfig, tyro.conf.arg(name="")]
"""Flattened multi-process flags: --coordinator, --num-processes, --process-id, --distributed-auto."""


def run_cli(args_type: type[Args], train: Callable[[Args], object], argv: list[str] | None = None) -> int:
    """Parses `args_type` with tyro and calls `train`; config errors exit 2 with the field named,
    a stalled stage (`StageTimeout`) exits 3 at once, naming the stage."""
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
    except StageTimeout as e:
        exit_now(e)  # a thread is still blocked in XLA: a normal exit could wait on it for ever
    return 0
