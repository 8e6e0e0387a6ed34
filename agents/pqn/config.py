"""PQN hyperparameters: a frozen dataclass, validated on construction.

Each field carries a one-line docstring that `tyro` shows as CLI help. Defaults follow
purejaxql's `pqn_cartpole.yaml` / `pqn_minatar.yaml` (Gallici et al. 2024, the paper's own
code: LayerNorm MLP, lr 1e-4..5e-4 linearly annealed, global-norm clip 10, gamma 0.99,
4 epochs of minibatches of 128 transitions at 16 envs x 32 steps (theirs: 32 x 64 in 16),
epsilon 1 -> 0.05 over the first 20% of updates), with lambda 0.65 (their MinAtar / Atari
value) and lr 5e-4 (their MinAtar value), which solves CartPole-v1 in 200k steps with
16 envs x 32 steps per update. purejaxql's optimizer is RAdam; podrl's PQN uses Adam (as PPO
does); it learns CartPole-v1 with these values.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from podrl.agents.config_base import AdamConfig, AgentConfigBase, EpochsConfig
from podrl.agents.config_checks import EpsilonConfig, QNetworkConfig
from podrl.agents.reward_clip import RewardClipConfig
from podrl.core.errors import require_number


@dataclasses.dataclass(frozen=True)
class PQNConfig(AgentConfigBase, RewardClipConfig, EpsilonConfig, QNetworkConfig, EpochsConfig, AdamConfig):
    """PQN: Parallelised Q-Network (Gallici et al. 2024, "Simplifying Deep Temporal
    Difference Learning", arXiv:2407.04811): Q(lambda) targets over each on-policy rollout,
    LayerNorm in the network, epsilon-greedy acting, no target network, no replay buffer;
    several epochs of minibatch SGD per rollout, like PPO."""

    layer_norm: bool = True
    """LayerNorm after each hidden dense layer (before the activation) of the torso; PQN's stabiliser (paper section
    4)."""
    gamma: float = 0.99
    """Discount factor, in [0, 1]."""
    q_lambda: float = 0.65
    """Q(lambda) mixing parameter, in [0, 1] (0: one-step Q-learning targets, 1: Monte Carlo returns)."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before the Q(lambda) targets (purejaxql uses 0.1 on CartPole)."""
    learning_rate: float = 5e-4
    max_grad_norm: float = 10.0

    AGENT_MODULE: ClassVar[str] = "podrl.agents.pqn.agent"

    def __post_init__(self) -> None:
        super().__post_init__()  # the parts' fields: optimizer, epochs, Q network, epsilon, reward clip, SWEEPABLE
        require_number(self, "gamma", low=0.0, high=1.0)
        require_number(self, "q_lambda", low=0.0, high=1.0)
        require_number(self, "reward_scale", low=0.0, low_open=True)
