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

from agents.config_base import AdamConfig, AgentConfigBase, check_sweepable
from agents.config_checks import EpsilonConfig, QNetworkConfig, check_epsilon_fields, check_q_network_fields
from agents.reward_clip import RewardClipConfig, check_reward_clip
from podrl.errors import ConfigError, require_bool, require_choice, require_int, require_number

LOSSES = ("huber", "mse")


@dataclasses.dataclass(frozen=True)
class DQNConfig(AgentConfigBase, RewardClipConfig, EpsilonConfig, QNetworkConfig, AdamConfig):
    """DQN (Mnih et al. 2015, "Human-level control through deep reinforcement learning",
    Nature 518) with a replay ring buffer per learner shard, a target network (periodic
    hard copy, or Polyak averaging with `target_tau` < 1), optional Double DQN (van Hasselt
    et al. 2016, arXiv:1509.06461) and n-step returns.

    Each `update` adds this shard's `[T, B]` rollout to its buffer, then takes
    `round(replay_ratio * T * B)` minibatch Adam steps on uniform samples of it (none until
    the buffer holds `min_fill` transitions)."""

    memory_field: ClassVar[str] = "buffer_size"
    """The field that sets the per-learner-shard state's size (named by the layouts' memory check)."""

    buffer_size: int = 50_000
    """Replay capacity in transitions, per learner shard (each learner device holds its own buffer)."""
    min_fill: int = 1_000
    """No gradient steps until this shard's buffer holds at least this many transitions."""
    batch_size: int = 128
    """Transitions sampled per gradient step, per learner shard."""
    replay_ratio: float = 0.25
    """Gradient steps per env step of this shard: an update of T x B steps does round(replay_ratio * T * B) of them (at least 1)."""
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
    max_grad_norm: float = 10.0

    AGENT_MODULE: ClassVar[str] = "agents.dqn.agent"

    def __post_init__(self) -> None:
        self.check_optimizer_fields()
        require_int(self, "buffer_size", "batch_size", "n_step", "target_update_period")
        require_int(self, "min_fill", minimum=0)
        require_number(self, "replay_ratio", low=0.0, low_open=True)
        require_number(self, "gamma", low=0.0, high=1.0)
        require_number(self, "target_tau", low=0.0, high=1.0, low_open=True)
        require_number(self, "reward_scale", low=0.0, low_open=True)
        require_bool(self, "double_dqn")
        require_choice(self, "loss", LOSSES)
        if self.min_fill > self.buffer_size:
            raise ConfigError("min_fill", f"{self.min_fill} exceeds buffer_size {self.buffer_size}: "
                              "learning would never start")
        check_q_network_fields(self)
        check_epsilon_fields(self)
        check_reward_clip(self)
        check_sweepable(self)

    def sgd_steps(self, rollout_length: int, envs_per_shard: int) -> int:
        """Gradient steps per update: round(replay_ratio * T * B), at least 1."""
        return max(1, round(self.replay_ratio * rollout_length * envs_per_shard))

    def check_batch(self, rollout_length: int, envs_per_shard: int) -> None:
        """Raises ConfigError("buffer_size") unless one update's `T * B` transitions fit the buffer."""
        added = rollout_length * envs_per_shard
        if added > self.buffer_size:
            raise ConfigError("buffer_size", f"one update adds rollout_length * envs_per_shard = {rollout_length} * "
                              f"{envs_per_shard} = {added} transitions to each shard's buffer, more than its "
                              f"{self.buffer_size}; use a larger buffer_size")
