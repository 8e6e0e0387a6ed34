"""PPO hyperparameters: a frozen dataclass, validated on construction.

Each field carries a one-line docstring that `tyro` shows as CLI help.
Defaults are the classic CartPole PPO (CleanRL `ppo.py`, PureJaxRL), tuned for
4 envs x 128 steps per update.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, ClassVar

from agents.config_checks import NetworkConfig, check_network_fields
from agents.reward_clip import RewardClipConfig, check_reward_clip
from podrl.errors import ConfigError, require_bool, require_int, require_number

if TYPE_CHECKING:
    from envs.types import EnvSpec
    from podrl.types import Agent


@dataclasses.dataclass(frozen=True)
class PPOConfig(RewardClipConfig, NetworkConfig):
    """Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347) with GAE.

    `clip_value_loss` defaults to True to match the reference implementations
    (CleanRL, PureJaxRL) the benchmarks compare against; Andrychowicz et al.
    2021 ("What Matters in On-Policy RL") find it rarely helps, so set it False
    for new work.
    """

    learning_rate: float = 2.5e-4
    """Adam step size (the start value when `anneal_lr`)."""
    anneal_lr: bool = True
    """Decay the step size linearly to 0 over the run's optimizer steps."""
    gamma: float = 0.99
    """Discount factor, in [0, 1]."""
    gae_lambda: float = 0.95
    """GAE lambda, in [0, 1] (0: one-step TD advantages, 1: Monte Carlo)."""
    num_epochs: int = 4
    """Passes over each rollout per update."""
    num_minibatches: int = 4
    """Minibatches per epoch, per learner shard; must divide rollout_length * envs_per_shard (with a core: envs_per_shard, minibatches are whole env sequences)."""
    clip_eps: float = 0.2
    """PPO ratio clip range epsilon (also the value clip range when clip_value_loss)."""
    clip_value_loss: bool = True
    """Clip the value loss around the acting-time value, as CleanRL and PureJaxRL do."""
    value_coef: float = 0.5
    """Weight of the value loss."""
    entropy_coef: float = 0.01
    """Weight of the entropy bonus."""
    max_grad_norm: float = 0.5
    """Clip gradients to this global norm before Adam."""
    normalize_advantages: bool = True
    """Standardize advantages within each minibatch (per learner shard)."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before GAE (e.g. 0.1 for Pendulum)."""
    adam_eps: float = 1e-5
    """Adam epsilon."""

    SWEEPABLE: ClassVar[dict[str, tuple[float, float]]] = {
        "learning_rate": (0.0, math.inf), "entropy_coef": (0.0, math.inf), "value_coef": (0.0, math.inf),
        "max_grad_norm": (0.0, math.inf), "gamma": (0.0, 1.0), "gae_lambda": (0.0, 1.0), "clip_eps": (0.0, math.inf),
    }
    """Fields a population may sweep (`podrl.population`): {field: (low, high)}; update reads them as arrays."""
    SHAPE_FIELDS: ClassVar[tuple[str, ...]] = (
        "hidden_sizes", "torso", "shared_torso", "activation", "core", "core_size", "num_minibatches", "num_epochs",
    )
    """Fields that change the compiled program's shapes or structure: a sweep refuses them."""

    def __post_init__(self) -> None:
        require_number(self, "learning_rate", low=0.0, low_open=True)
        require_number(self, "gamma", low=0.0, high=1.0)
        require_number(self, "gae_lambda", low=0.0, high=1.0)
        require_number(self, "clip_eps", low=0.0, low_open=True)
        require_number(self, "value_coef", low=0.0)
        require_number(self, "entropy_coef", low=0.0)
        require_number(self, "max_grad_norm", low=0.0, low_open=True)
        require_number(self, "reward_scale", low=0.0, low_open=True)
        require_number(self, "adam_eps", low=0.0, low_open=True)
        require_int(self, "num_epochs", "num_minibatches")
        require_bool(self, "anneal_lr", "clip_value_loss", "normalize_advantages")
        check_network_fields(self)
        check_reward_clip(self)

    def check_batch(self, rollout_length: int, envs_per_shard: int) -> None:
        """Raises ConfigError("num_minibatches") unless the shard batch splits evenly: into
        transitions (feed-forward), or into whole env sequences `[T, B / m]` with a core (the
        learner re-unrolls the core along time, so minibatches never cut or shuffle time)."""
        if self.core != "none":
            if envs_per_shard % self.num_minibatches != 0:
                raise ConfigError(
                    "num_minibatches",
                    f"{self.num_minibatches} minibatches do not divide the {envs_per_shard} envs per shard; "
                    f"with core={self.core!r} PPO minibatches whole {rollout_length}-step env sequences "
                    f"(never shuffling time), so num_minibatches must divide envs_per_shard",
                )
            return
        batch = rollout_length * envs_per_shard
        if batch % self.num_minibatches != 0:
            raise ConfigError(
                "num_minibatches",
                f"{self.num_minibatches} minibatches do not divide the per-shard batch of "
                f"rollout_length * envs_per_shard = {rollout_length} * {envs_per_shard} = {batch}",
            )

    def num_optimizer_steps(self, total_updates: int) -> int:
        """Adam steps in a run of `total_updates` calls to `update` (drives the lr anneal)."""
        return total_updates * self.num_epochs * self.num_minibatches

    def make_agent(self, env_spec: EnvSpec, total_updates: int) -> Agent:
        """The PPO `Agent` for `env_spec`; `total_updates` sets the lr anneal horizon."""
        from agents.ppo.agent import make_agent

        return make_agent(self, env_spec, total_updates)
