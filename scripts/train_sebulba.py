"""Train an agent with the Sebulba layout (host envs, actor threads, learner devices).

Examples:
  python scripts/train_sebulba.py --cpu-devices 3                          # PPO, gymnasium CartPole-v1
  python scripts/train_sebulba.py --env ale:Pong --envs-per-thread 16 --lag 1 agent:impala --agent.torso nature_cnn \
      --agent.reward-clip 1.0                                              # Machado et al. 2018 protocol (default)
  python scripts/train_sebulba.py --env ale:Breakout --env-kwargs protocol=dqn full_action_space=True \
      agent:ppo --agent.torso nature_cnn --agent.reward-clip 1.0           # DQN-era protocol, 18 actions
  python scripts/train_sebulba.py --env jax:Acrobot-v1 --threads-per-actor-device 2
  python scripts/train_sebulba.py --env dm_env:my_pkg.envs:make_env       # a dm_env.Environment factory
  python scripts/train_sebulba.py --env my_pkg.envs:make_env              # gymnasium / dm_env / vector env factory
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Annotated

import tyro

from cli_common import AgentChoice, Distributed, PresetName, default_agent, run_cli
from podrl.distributed import DistributedConfig
from podrl.sebulba.config import SebulbaConfig


@dataclasses.dataclass(frozen=True)
class TrainSebulbaArgs:
    """Train an agent with the Sebulba layout on host environments."""

    run: Annotated[SebulbaConfig, tyro.conf.arg(name="")] = dataclasses.field(default_factory=SebulbaConfig)
    agent: AgentChoice = dataclasses.field(default_factory=default_agent)
    """The agent and its hyperparameters."""
    distributed: Distributed = dataclasses.field(default_factory=DistributedConfig)
    """Multi-process (multi-host) settings; defaults run one process."""
    preset: PresetName | None = None
    """Start from a named config with known-good hyperparameters (listed above); other flags override its fields."""
    cpu_devices: int | None = None
    """On CPU, split the host into this many JAX devices (actors on --actor-devices, learners on the rest)."""


def train(args: TrainSebulbaArgs) -> None:
    from podrl.sebulba import train_sebulba
    from podrl.compile_cache import enable

    enable(args.run.compile_cache)  # before anything compiles
    train_sebulba(args.run, args.agent, full_config=args)


def main(argv: list[str] | None = None) -> int:
    return run_cli(TrainSebulbaArgs, train, argv)


if __name__ == "__main__":
    sys.exit(main())
