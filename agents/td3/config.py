"""TD3 hyperparameters: a frozen dataclass, validated on construction.

Each field carries a one-line docstring that `tyro` shows as CLI help. The defaults are
CleanRL's `td3_continuous_action.py` for MuJoCo (buffer 1M, batch 256, gamma 0.99, tau 0.005,
lr 3e-4 for both networks, 256x256 ReLU MLPs, learning starts at 25k steps, exploration noise
0.1, policy noise 0.2 clipped at 0.5, policy delay 2), noises in the normalized box [-1, 1].
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from podrl.agents.config_base import AgentConfigBase
from podrl.agents.config_checks import ContinuousControlConfig
from podrl.core.errors import require_int, require_number


@dataclasses.dataclass(frozen=True)
class TD3Config(AgentConfigBase, ContinuousControlConfig):
    """Twin Delayed DDPG (Fujimoto et al. 2018, arXiv:1802.09477): twin critics and the clipped
    double-Q target, target policy smoothing, actor and target updates every `policy_delay`
    critic steps, Gaussian exploration noise; a replay ring buffer per learner shard.

    Each `update` adds this shard's `[T, B]` rollout to its buffer, then takes
    `round(replay_ratio * T * B)` critic steps on uniform samples of it, once it holds
    `warmup_steps` transitions. `make_agent` needs a bounded continuous (Box) action space
    (ConfigError("env") otherwise)."""

    warmup_steps: int = 25_000
    """Per learner shard: the first warmup_steps transitions come from uniform random actions, and no gradient step is
    taken before the buffer holds them (CleanRL's learning_starts)."""
    critic_learning_rate: float = 3e-4
    """Adam step size of the twin critics."""
    exploration_noise: float = 0.1
    """Std of the Gaussian noise added to the actor's action while acting (in the normalized box [-1, 1])."""
    policy_noise: float = 0.2
    """Std sigma of the target policy smoothing noise (normalized box)."""
    noise_clip: float = 0.5
    """The smoothing noise is clipped to [-noise_clip, noise_clip]."""
    policy_delay: int = 2
    """Critic steps per actor step; the target networks move with the actor."""

    AGENT_MODULE: ClassVar[str] = "podrl.agents.td3.agent"

    def __post_init__(self) -> None:
        super().__post_init__()  # the parts' fields: replay, warm-up, targets, networks, optimizers, SWEEPABLE
        require_number(self, "exploration_noise", low=0.0)
        require_number(self, "policy_noise", low=0.0)
        require_number(self, "noise_clip", low=0.0)
        require_int(self, "policy_delay")
