"""R2D2 hyperparameters: a frozen dataclass, validated on construction.

The defaults are a small setting that learns the tiny memory task (`RecallCue-v0`) in seconds: a
64-wide LSTM, 4-step burn-in, 8-step learning sequences every 4 steps. The paper's Atari values
(Kapturowski et al. 2019, appendix table of hyper-parameters; the `atari-r2d2` preset of
`podrl.cli.presets` cites them) are: LSTM 512 and a dueling head after the Nature CNN, sequences of 80
steps (+ a 40-step burn-in) every 40 steps, replay 4M observations, priority exponent 0.9,
importance sampling exponent 0.6, eta 0.9, gamma 0.997, n = 5, minibatch 64, Adam lr 1e-4 eps 1e-3,
target network copied every 2500 updates, value rescaling eps 1e-3, 256 actors with Ape-X epsilons
(eps 0.4, alpha 7).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from podrl.agents.config_base import AdamConfig, AgentConfigBase
from podrl.agents.config_checks import (
    PrioritisedConfig,
    QNetworkConfig,
    ReplayConfig,
    check_fill_covers_windows,
    check_fill_field,
    sequence_layout_problem,
)
from podrl.agents.reward_clip import RewardClipConfig
from podrl.core.errors import ConfigError, require_bool, require_choice, require_int, require_number

CORES = ("lstm", "gru")
"""Names accepted by `R2D2Config.core` (the cells of `podrl.agents.cores`)."""


@dataclasses.dataclass(frozen=True)
class R2D2Config(AgentConfigBase, RewardClipConfig, QNetworkConfig, PrioritisedConfig, ReplayConfig, AdamConfig):
    """R2D2 (Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed Reinforcement Learning",
    ICLR): a recurrent Q network (torso, LSTM / GRU core, dueling head) learned by n-step double
    Q-learning with the value rescaling h from replayed sequences, each started from the recurrent
    state the actor stored and warmed up over a burn-in; a prioritised sequence replay per learner
    shard (`podrl.agents.prioritised`); each actor row explores with its own fixed Ape-X epsilon.

    Each `update` adds this shard's `[T, B]` rollout to its replay, then takes
    `round(replay_ratio * T * B)` Adam steps, each on `batch_size` sequences of `burn_in +
    sequence_length` steps drawn by priority (none until the shard's replay holds `min_fill` steps).
    `buffer_size` counts env steps per shard."""

    core: str = "lstm"
    """Recurrent core between the torso and the Q head: lstm or gru (R2D2: an LSTM of 512)."""
    core_size: int = 64
    """Width of the core's state."""
    dueling: bool = True
    """Dueling head (Wang et al. 2016): Q = V + A - mean_a A from two streams of the core's output."""
    head_hidden: int = 0
    """Width of a hidden ReLU layer in each head stream (0: linear streams; R2D2's Atari network 512)."""
    burn_in: int = 4
    """Steps at the start of each replayed sequence that only warm up the core from the stored state (no loss, no
    gradient)."""
    sequence_length: int = 8
    """Steps of each replayed sequence the loss covers, after its burn-in (R2D2: 80)."""
    sequence_period: int = 4
    """Steps between the starts of one env's sequences (they overlap by burn_in + sequence_length - sequence_period);
    divides rollout_length (R2D2: 40)."""
    n_step: int = 5
    """Steps of reward before bootstrapping; cut at episode ends and at the sequence's end."""
    gamma: float = 0.99
    """Discount factor, in [0, 1]."""
    value_rescaling: bool = True
    """Targets y = h(R + gamma^n h^-1(Q_target)) with h(x) = sign(x)(sqrt(|x| + 1) - 1) + 1e-3 x (False: y = R + gamma^n
    Q_target)."""
    double_q: bool = True
    """Double Q-learning: the online network picks the bootstrap action, the target network values it."""
    priority_eta: float = 0.9
    """A sequence's priority: eta max_t |delta_t| + (1 - eta) mean_t |delta_t| over its learned steps, in [0, 1]."""
    epsilon: float = 0.4
    """Ape-X exploration: the actor of env column i of N acts with epsilon^(1 + epsilon_alpha * i / (N - 1)), fixed for
    the run."""
    epsilon_alpha: float = 7.0
    """Ape-X's alpha: how far the columns' epsilons spread below `epsilon` (>= 0; 0: every column uses `epsilon`)."""
    target_update_period: int = 100
    """Gradient steps between target network updates (R2D2: 2500, a hard copy)."""
    target_tau: float = 1.0
    """Each target update sets target <- tau * online + (1 - tau) * target (1: a hard copy)."""
    min_fill: int = 256
    """No gradient steps until this shard's replay holds at least this many env steps."""
    priority_exponent: float = 0.9
    importance_exponent: float = 0.6
    buffer_size: int = 16_384
    batch_size: int = 32
    replay_ratio: float = 1 / 32
    hidden_sizes: tuple[int, ...] = (64,)
    learning_rate: float = 1e-3
    anneal_lr: bool = False
    max_grad_norm: float = 40.0
    adam_eps: float = 1e-3

    AGENT_MODULE: ClassVar[str] = "podrl.agents.r2d2.agent"
    SHAPE_FIELDS: ClassVar[tuple[str, ...]] = ("burn_in", "sequence_length", "sequence_period", "n_step", "core_size")

    def __post_init__(self) -> None:
        super().__post_init__()  # the parts' fields: optimizer, replay, priorities, Q network, reward clip, SWEEPABLE
        check_fill_field(self, "min_fill")
        require_choice(self, "core", CORES)
        require_int(self, "core_size", "sequence_length", "sequence_period", "n_step", "target_update_period")
        require_int(self, "burn_in", "head_hidden", minimum=0)
        require_bool(self, "dueling", "value_rescaling", "double_q")
        require_number(self, "gamma", low=0.0, high=1.0)
        require_number(self, "priority_eta", low=0.0, high=1.0)
        require_number(self, "epsilon", low=0.0, high=1.0)
        require_number(self, "epsilon_alpha", low=0.0)
        require_number(self, "target_tau", low=0.0, high=1.0, low_open=True)

    @property
    def window(self) -> int:
        """Env steps per replayed sequence: burn_in + sequence_length."""
        return self.burn_in + self.sequence_length

    def check_batch(self, rollout_length: int, envs_per_shard: int) -> None:
        """ConfigError("buffer_size") unless one rollout fits; ConfigError("sequence_period") unless it divides
        the rollout length, ConfigError("buffer_size") unless the replay is whole rows of sequence_period x
        envs and holds a rollout plus a sequence of each env; ConfigError("min_fill") unless it covers one
        sequence of every env."""
        super().check_batch(rollout_length, envs_per_shard)
        problem = sequence_layout_problem(self.buffer_size, rollout_length, envs_per_shard, self.window,
                                          self.sequence_period)
        if problem:
            raise ConfigError("sequence_period" if rollout_length % self.sequence_period else "buffer_size", problem)
        check_fill_covers_windows(self.min_fill, self.window, envs_per_shard, "sequence of burn_in + sequence_length")
