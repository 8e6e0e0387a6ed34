"""Train an agent with the Anakin layout (JAX env + agent in one program per device).

Examples:
  python scripts/train_anakin.py                                  # PPO, CartPole-v1, all local devices
  python scripts/train_anakin.py --env Pendulum-v1 --total-steps 1000000
  python scripts/train_anakin.py --num-seeds 8 --cpu-devices 2    # 8 seeds on a 2-device CPU mesh
  python scripts/train_anakin.py --cpu-devices 8 --num-envs 8 --population 8 --population-shards 2 \
      --sweep agent.learning_rate=loguniform:1e-4:3e-3 agent.entropy_coef=0.0,0.01   # a sweep, 2 x 4 mesh
  python scripts/train_anakin.py --cpu-devices 8 --population 8 --population-shards 8 \
      --sweep agent.learning_rate=0,1e-4,3e-4,1e-3 --pbt-every 32        # population-based training
  python scripts/train_anakin.py --env my_pkg.my_env:MyEnv        # your own JaxEnv class
  python scripts/train_anakin.py agent:impala --agent.learning-rate 1e-3
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Annotated

import tyro

from cli_common import AgentChoice, Distributed, PresetName, default_agent, run_cli
from podrl.distributed import DistributedConfig
from podrl.anakin.config import AnakinConfig


@dataclasses.dataclass(frozen=True)
class TrainAnakinArgs:
    """Train an agent with the Anakin layout on a JAX environment."""

    run: Annotated[AnakinConfig, tyro.conf.arg(name="")] = dataclasses.field(default_factory=AnakinConfig)
    agent: AgentChoice = dataclasses.field(default_factory=default_agent)
    """The agent and its hyperparameters."""
    distributed: Distributed = dataclasses.field(default_factory=DistributedConfig)
    """Multi-process (multi-host) settings; defaults run one process."""
    preset: PresetName | None = None
    """Start from a named config with known-good hyperparameters (listed above); other flags override its fields."""
    cpu_devices: int | None = None
    """On CPU, split the host into this many JAX devices (a fake mesh; same as XLA_FLAGS=--xla_force_host_platform_device_count=N)."""


def train(args: TrainAnakinArgs) -> None:
    from podrl.anakin import train_anakin

    train_anakin(args.run, args.agent, full_config=args)


def main(argv: list[str] | None = None) -> int:
    return run_cli(TrainAnakinArgs, train, argv)


if __name__ == "__main__":
    sys.exit(main())
