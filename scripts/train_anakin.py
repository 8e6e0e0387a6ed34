"""Train an agent with the Anakin layout (JAX env + agent in one program per device).

Examples:
  python scripts/train_anakin.py                                  # PPO, CartPole-v1, all local devices
  python scripts/train_anakin.py --env Pendulum-v1 --total-steps 1000000
  python scripts/train_anakin.py --num-seeds 8 --cpu-devices 2    # 8 seeds on a 2-device CPU mesh
  python scripts/train_anakin.py --env my_pkg.my_env:MyEnv        # your own JaxEnv class
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Annotated

import tyro

from agents.ppo import PPOConfig
from podrl.config import AnakinConfig
from podrl.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class TrainAnakinArgs:
    """Train PPO with the Anakin layout on a JAX environment."""

    run: Annotated[AnakinConfig, tyro.conf.arg(name="")] = dataclasses.field(default_factory=AnakinConfig)
    agent: PPOConfig = dataclasses.field(default_factory=PPOConfig)
    """PPO hyperparameters."""
    cpu_devices: int | None = None
    """On CPU, split the host into this many JAX devices (a fake mesh; same as XLA_FLAGS=--xla_force_host_platform_device_count=N)."""


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, os.getcwd())  # `--env my_pkg.my_env:MyEnv` resolves from the working directory
    try:
        args = tyro.cli(TrainAnakinArgs, args=argv)
    except ConfigError as e:
        print(f"error: invalid config: {e}", file=sys.stderr)
        return 2
    import jax

    if args.cpu_devices is not None:
        jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    from podrl.anakin import train_anakin

    try:
        train_anakin(args.run, args.agent, full_config=args)
    except ConfigError as e:
        print(f"error: invalid config: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
