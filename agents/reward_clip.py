"""`RewardClipConfig`: the learner-side reward clip both actor-critic configs inherit; imports no JAX.

Atari agents clip rewards to [-1, 1] (Mnih et al. 2015) in the learner: the env
reports raw game rewards, and the logged `episode_return` stays the game score.
The clip is applied where rewards enter GAE / V-trace (`podrl.agents.returns.learner_rewards`),
before the agent's `reward_scale`.
"""

from __future__ import annotations

import dataclasses

from podrl.agents.config_base import CheckedConfig
from podrl.core.errors import require_number


@dataclasses.dataclass(frozen=True)
class RewardClipConfig(CheckedConfig):
    """Mixin: the `reward_clip` field (declared and documented once, here), checked by its `__post_init__`."""

    reward_clip: float | None = None
    """Clip rewards to [-c, c] in the learner (Atari: 1.0); logged episode returns stay the unclipped game score."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_reward_clip(self)


def check_reward_clip(config: RewardClipConfig) -> None:
    """Raises ConfigError("reward_clip") unless it is None (off) or a finite number > 0."""
    if config.reward_clip is not None:
        require_number(config, "reward_clip", low=0.0, low_open=True)
