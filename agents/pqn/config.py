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
from typing import TYPE_CHECKING

from agents.config_checks import EpsilonConfig, QNetworkConfig, check_epsilon_fields, check_q_network_fields
from agents.reward_clip import RewardClipConfig, check_reward_clip
from podrl.errors import ConfigError, require_bool, require_int, require_number

if TYPE_CHECKING:
    from envs.types import EnvSpec
    from podrl.types import Agent


@dataclasses.dataclass(frozen=True)
class PQNConfig(RewardClipConfig, EpsilonConfig, QNetworkConfig):
    """PQN: Parallelised Q-Network (Gallici et al. 2024, "Simplifying Deep Temporal
    Difference Learning", arXiv:2407.04811): Q(lambda) targets over each on-policy rollout,
    LayerNorm in the network, epsilon-greedy acting, no target network, no replay buffer;
    several epochs of minibatch SGD per rollout, like PPO."""

    layer_norm: bool = True
    """LayerNorm after each hidden dense layer (before the activation) of the torso; PQN's stabiliser (paper section 4)."""
    learning_rate: float = 5e-4
    """Adam step size (the start value when `anneal_lr`)."""
    anneal_lr: bool = True
    """Decay the step size linearly to 0 over the run's optimizer steps."""
    gamma: float = 0.99
    """Discount factor, in [0, 1]."""
    q_lambda: float = 0.65
    """Q(lambda) mixing parameter, in [0, 1] (0: one-step Q-learning targets, 1: Monte Carlo returns)."""
    num_epochs: int = 4
    """Passes over each rollout per update."""
    num_minibatches: int = 4
    """Minibatches per epoch, per learner shard; must divide rollout_length * envs_per_shard."""
    max_grad_norm: float = 10.0
    """Clip gradients to this global norm before Adam."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before the Q(lambda) targets (purejaxql uses 0.1 on CartPole)."""
    adam_eps: float = 1e-8
    """Adam epsilon."""

    def __post_init__(self) -> None:
        require_number(self, "learning_rate", low=0.0, low_open=True)
        require_number(self, "gamma", low=0.0, high=1.0)
        require_number(self, "q_lambda", low=0.0, high=1.0)
        require_number(self, "max_grad_norm", low=0.0, low_open=True)
        require_number(self, "reward_scale", low=0.0, low_open=True)
        require_number(self, "adam_eps", low=0.0, low_open=True)
        require_int(self, "num_epochs", "num_minibatches")
        require_bool(self, "anneal_lr")
        check_q_network_fields(self)
        check_epsilon_fields(self)
        check_reward_clip(self)

    def check_batch(self, rollout_length: int, envs_per_shard: int) -> None:
        """Raises ConfigError("num_minibatches") unless it divides the shard's
        `rollout_length * envs_per_shard` transitions."""
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
        """The PQN `Agent` for `env_spec` (ConfigError("env") unless its actions are discrete);
        `total_updates` sets the epsilon and lr schedules."""
        from agents.pqn.agent import make_agent

        return make_agent(self, env_spec, total_updates)
