"""SAC hyperparameters: a frozen dataclass, validated on construction.

Each field carries a one-line docstring that `tyro` shows as CLI help. The defaults are
CleanRL's `sac_continuous_action.py` for MuJoCo (buffer 1M, batch 256, gamma 0.99, tau 0.005,
policy lr 3e-4, Q lr 1e-3, 256x256 ReLU MLPs, learning starts at 5k steps, automatic
temperature), with one gradient step per env step and the actor updated on every step.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from podrl.agents.config_base import AgentConfigBase
from podrl.agents.config_checks import ContinuousControlConfig
from podrl.core.errors import require_bool, require_number


@dataclasses.dataclass(frozen=True)
class SACConfig(AgentConfigBase, ContinuousControlConfig):
    """Soft Actor-Critic (Haarnoja et al. 2018, arXiv:1801.01290; automatic temperature:
    arXiv:1812.05905): twin Q critics with Polyak targets, a tanh-squashed Gaussian actor,
    log alpha learned toward the target entropy -A, a replay ring buffer per learner shard.

    Each `update` adds this shard's `[T, B]` rollout to its buffer, then takes
    `round(replay_ratio * T * B)` gradient steps (critics, actor, temperature, targets) on
    uniform samples of it, once it holds `warmup_steps` transitions. `make_agent` needs a
    bounded continuous (Box) action space (ConfigError("env") otherwise)."""

    warmup_steps: int = 5_000
    """Per learner shard: the first warmup_steps transitions come from uniform random actions, and no gradient step is
    taken before the buffer holds them (CleanRL's learning_starts)."""
    learn_temperature: bool = True
    """Learn log alpha toward the target entropy -A (arXiv:1812.05905, eq. 18); False keeps alpha at
    initial_temperature."""
    initial_temperature: float = 1.0
    """The entropy temperature alpha at the start (> 0)."""
    temperature_learning_rate: float = 1e-3
    """Adam step size of log alpha."""
    log_std_min: float = -5.0
    """The actor's log standard deviation is squashed into [log_std_min, log_std_max] (CleanRL's bounds)."""
    log_std_max: float = 2.0
    """Upper bound of the actor's log standard deviation."""

    AGENT_MODULE: ClassVar[str] = "podrl.agents.sac.agent"

    def __post_init__(self) -> None:
        super().__post_init__()  # the parts' fields: replay, warm-up, targets, networks, optimizers, SWEEPABLE
        require_bool(self, "learn_temperature")
        require_number(self, "initial_temperature", low=0.0, low_open=True)
        require_number(self, "temperature_learning_rate", low=0.0, low_open=True)
        require_number(self, "log_std_min", low=-20.0)
        require_number(self, "log_std_max", low=self.log_std_min, high=10.0, low_open=True)
