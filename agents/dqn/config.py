"""DQN hyperparameters: a frozen dataclass, validated on construction.

Each field carries a one-line docstring that `tyro` shows as CLI help. The defaults
are a fast CartPole-v1 setting (a small buffer, a high replay ratio, Double DQN,
3-step returns, Polyak-averaged target); the Atari values of Mnih et al. 2015 are
buffer_size 1M (per shard here), batch_size 32, learning_rate 2.5e-4 (RMSProp there, Adam here), gamma 0.99,
replay_ratio 0.25, target_update_period 10_000 with target_tau 1, min_fill 50k.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from podrl.agents.config_base import AdamConfig, AgentConfigBase
from podrl.agents.config_checks import (
    EpsilonConfig,
    PrioritisedConfig,
    QNetworkConfig,
    ReplayConfig,
    check_fill_field,
    sequence_layout_problem,
)
from podrl.agents.reward_clip import RewardClipConfig
from podrl.core.errors import ConfigError, require_bool, require_choice, require_int, require_number

LOSSES = ("huber", "mse")


@dataclasses.dataclass(frozen=True)
class DQNConfig(AgentConfigBase, RewardClipConfig, EpsilonConfig, QNetworkConfig, PrioritisedConfig, ReplayConfig,
                AdamConfig):
    """DQN (Mnih et al. 2015, "Human-level control through deep reinforcement learning",
    Nature 518) with a replay ring buffer per learner shard, a target network (periodic
    hard copy, or Polyak averaging with `target_tau` < 1), optional Double DQN (van Hasselt
    et al. 2016, arXiv:1509.06461) and n-step returns.

    Each `update` adds this shard's `[T, B]` rollout to its buffer, then takes
    `round(replay_ratio * T * B)` minibatch Adam steps on uniform samples of it (none until
    the buffer holds `min_fill` transitions). With `prioritised` the buffer is a prioritised replay
    (`podrl.agents.prioritised`, as Ape-X: Horgan et al. 2018): transitions drawn with probability
    |delta|^alpha / sum, new ones at the largest priority so far, losses weighted by importance weights."""

    min_fill: int = 1_000
    """No gradient steps until this shard's buffer holds at least this many transitions."""
    gamma: float = 0.99
    """Discount factor, in [0, 1]."""
    n_step: int = 3
    """Steps of reward before bootstrapping (1: the original one-step target); cut at episode ends and rollout ends."""
    double_dqn: bool = True
    """Double DQN: the online network picks the next action, the target network values it."""
    target_update_period: int = 1
    """Gradient steps between target network updates."""
    target_tau: float = 0.01
    """Each target update sets target <- tau * online + (1 - tau) * target (1: a hard copy, as in Mnih et al.)."""
    loss: str = "huber"
    """TD error loss: huber (delta 1, as Mnih et al.'s error clipping) or mse."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before the targets."""
    prioritised: bool = False
    """Prioritised replay (Ape-X): sample by |TD error|^priority_exponent, weight losses by importance_exponent;
    buffer_size then whole rows of the envs per shard."""
    max_grad_norm: float = 10.0
    buffer_size: int = 50_000
    batch_size: int = 128
    replay_ratio: float = 0.25

    AGENT_MODULE: ClassVar[str] = "podrl.agents.dqn.agent"

    def __post_init__(self) -> None:
        super().__post_init__()  # the parts' fields: optimizer, replay, priorities, Q network, epsilon, SWEEPABLE
        require_int(self, "n_step", "target_update_period")
        check_fill_field(self, "min_fill")
        require_number(self, "gamma", low=0.0, high=1.0)
        require_number(self, "target_tau", low=0.0, high=1.0, low_open=True)
        require_number(self, "reward_scale", low=0.0, low_open=True)
        require_bool(self, "double_dqn", "prioritised")
        require_choice(self, "loss", LOSSES)

    def check_batch(self, rollout_length: int, envs_per_shard: int) -> None:
        """ConfigError("buffer_size") unless one rollout's transitions fit the buffer and, when prioritised,
        the buffer is whole rows of `envs_per_shard` (one transition of every env)."""
        super().check_batch(rollout_length, envs_per_shard)
        problem = self.prioritised and sequence_layout_problem(self.buffer_size, rollout_length, envs_per_shard, 1, 1)
        if problem:
            raise ConfigError("buffer_size", problem)
