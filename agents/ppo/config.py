"""PPO hyperparameters: a frozen dataclass, validated on construction.

Each field carries a one-line docstring that `tyro` shows as CLI help.
Defaults are the classic CartPole PPO (CleanRL `ppo.py`, PureJaxRL), tuned for
4 envs x 128 steps per update.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from podrl.agents.config_base import (
    AdamConfig,
    AgentConfigBase,
    EpochsConfig,
    ObsNormConfig,
    check_sequence_minibatches,
)
from podrl.agents.config_checks import NetworkConfig
from podrl.agents.reward_clip import RewardClipConfig
from podrl.core.errors import require_bool, require_number

if TYPE_CHECKING:
    import jax


class PPOHyperparams(NamedTuple):
    """The values PPO's loss, GAE and optimizer read that a population may sweep: each a float32
    `[]` array (a member's, from `TrainState.hyperparams`) or the config's Python float."""

    learning_rate: jax.Array | float
    entropy_coef: jax.Array | float
    value_coef: jax.Array | float
    max_grad_norm: jax.Array | float
    gamma: jax.Array | float
    gae_lambda: jax.Array | float
    clip_eps: jax.Array | float


@dataclasses.dataclass(frozen=True)
class PPOConfig(AgentConfigBase, ObsNormConfig, RewardClipConfig, NetworkConfig, EpochsConfig, AdamConfig):
    """Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347) with GAE.

    `clip_value_loss` defaults to True to match the reference implementations
    (CleanRL, PureJaxRL) the benchmarks compare against; Andrychowicz et al.
    2021 ("What Matters in On-Policy RL") find it rarely helps, so set it False
    for new work.
    """

    gamma: float = 0.99
    """Discount factor, in [0, 1]."""
    gae_lambda: float = 0.95
    """GAE lambda, in [0, 1] (0: one-step TD advantages, 1: Monte Carlo)."""
    clip_eps: float = 0.2
    """PPO ratio clip range epsilon (also the value clip range when clip_value_loss)."""
    clip_value_loss: bool = True
    """Clip the value loss around the acting-time value, as CleanRL and PureJaxRL do."""
    value_coef: float = 0.5
    """Weight of the value loss."""
    entropy_coef: float = 0.01
    """Weight of the entropy bonus."""
    normalize_advantages: bool = True
    """Standardize advantages within each minibatch (per learner shard)."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before GAE (e.g. 0.1 for Pendulum)."""
    learning_rate: float = 2.5e-4
    max_grad_norm: float = 0.5
    adam_eps: float = 1e-5

    AGENT_MODULE: ClassVar[str] = "podrl.agents.ppo.agent"

    SWEEPABLE: ClassVar[dict[str, tuple[float, float]]] = {
        "learning_rate": (0.0, math.inf), "entropy_coef": (0.0, math.inf), "value_coef": (0.0, math.inf),
        "max_grad_norm": (0.0, math.inf), "gamma": (0.0, 1.0), "gae_lambda": (0.0, 1.0), "clip_eps": (0.0, math.inf),
    }
    HYPERPARAMS: ClassVar[type] = PPOHyperparams
    SHAPE_FIELDS: ClassVar[tuple[str, ...]] = (
        "hidden_sizes", "torso", "shared_torso", "activation", "core", "core_size", "num_minibatches", "num_epochs",
    )

    def __post_init__(self) -> None:
        super().__post_init__()  # the parts' fields: optimizer, epochs, network, reward clip, obs norm, SWEEPABLE
        require_number(self, "gamma", low=0.0, high=1.0)
        require_number(self, "gae_lambda", low=0.0, high=1.0)
        require_number(self, "clip_eps", low=0.0, low_open=True)
        require_number(self, "value_coef", low=0.0)
        require_number(self, "entropy_coef", low=0.0)
        require_number(self, "reward_scale", low=0.0, low_open=True)
        require_bool(self, "clip_value_loss", "normalize_advantages")

    def check_batch(self, rollout_length: int, envs_per_shard: int) -> None:
        """Raises ConfigError("num_minibatches") unless the shard batch splits evenly: into
        transitions (feed-forward), or into whole env sequences `[T, B / m]` with a core (the
        learner re-unrolls the core along time, so minibatches never cut or shuffle time)."""
        if self.core == "none":
            return super().check_batch(rollout_length, envs_per_shard)
        check_sequence_minibatches(self.num_minibatches, envs_per_shard,
                                   f"with core={self.core!r} PPO minibatches whole {rollout_length}-step env "
                                   f"sequences, never shuffling time, so num_minibatches must divide envs_per_shard")
