"""MuZero hyperparameters: a frozen dataclass, validated on construction.

The defaults are a small setting that learns the tiny JAX tasks in seconds (Gumbel search with 8
simulations, a 64-wide latent state); the paper's Atari values (Schrittwieser et al. 2020,
Appendix C / F) are num_simulations 50, unroll_steps 5, td_steps 10, gamma 0.997, batch 1024,
support_size 300, value_loss_weight 0.25. The `minatar-muzero` preset (`podrl.cli.presets`) cites its own.
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

SEARCHES = ("muzero", "gumbel")
"""Names accepted by `MuZeroConfig.search`: `mctx.muzero_policy` or `mctx.gumbel_muzero_policy`."""
REANALYSE_NETWORKS = ("online", "target")
"""Names accepted by `MuZeroConfig.reanalyse_network`."""
VALUE_BOOTSTRAPS = ("network", "search")
"""Names accepted by `MuZeroConfig.value_bootstrap`."""
DYNAMICS = ("mlp", "gru")
"""Names accepted by `MuZeroConfig.dynamics` (`podrl.agents.muzero.networks`)."""


@dataclasses.dataclass(frozen=True)
class MuZeroConfig(AgentConfigBase, RewardClipConfig, QNetworkConfig, ReplayConfig, PrioritisedConfig, AdamConfig):
    """MuZero (Schrittwieser et al. 2020, "Mastering Atari, Go, chess and shogi by planning with a
    learned model", Nature 588) and Gumbel MuZero (Danihelka et al. 2022, "Policy improvement by
    planning with Gumbel", ICLR), the search from mctx, a sequence replay per learner shard.

    The representation is the config's torso (`torso`, `hidden_sizes`, ...) then a dense layer to
    `latent_size`; the learner replays windows of `unroll_steps + td_steps` steps of one env,
    `round(replay_ratio * T * B)` Adam steps of `batch_size` windows per update (none until the
    shard's buffer holds `min_fill` env steps). `buffer_size` counts env steps per shard. With
    `prioritised` the windows are drawn from the house prioritised sequence replay
    (`podrl.agents.prioritised`, a window starting at every step) by their priority |v - z|, the
    root value prediction's error against its n-step target (MuZero, Appendix G: alpha = beta = 1)."""

    search: str = "gumbel"
    """Search at the root: muzero (PUCT with Dirichlet noise, visit-count policy) or gumbel (Gumbel MuZero: Sequential
    Halving, improved-policy targets)."""
    num_simulations: int = 8
    """Simulations of the search per acting step."""
    max_num_considered_actions: int = 16
    """gumbel: actions sampled without replacement at the root (Sequential Halving over them)."""
    gumbel_scale: float = 1.0
    """gumbel: scale of the Gumbel noise when acting (evaluation uses 0)."""
    dirichlet_alpha: float = 0.3
    """muzero: Dirichlet noise concentration at the root when acting."""
    dirichlet_fraction: float = 0.25
    """muzero: share of Dirichlet noise in the root prior when acting (evaluation uses 0)."""
    temperature: float = 1.0
    """muzero: act in proportion to visit_count^(1 / temperature) (evaluation: the most visited action)."""
    unroll_steps: int = 5
    """K: steps the learned model is unrolled from each replayed state."""
    td_steps: int = 5
    """n: rewards summed before bootstrapping the value target from the target network."""
    gamma: float = 0.99
    """Discount factor, in [0, 1]; also the search's discount."""
    support_size: int = 10
    """S: value and reward are categorical over the h-transformed atoms -S, ..., S (2S + 1 logits)."""
    latent_size: int = 64
    """Width of the model's hidden state (mlp dynamics: min-max scaled to [0, 1]; gru: the sum of dynamics_sizes)."""
    dynamics: str = "mlp"
    """The learned model's dynamics: mlp (an MLP on the [0, 1]-scaled state and the one-hot action gives the next state
    and the reward) or gru (a stack of GRU cells whose carries are the state: the state scaled to [-1, 1], the action
    embedded as their input, the carries added to the scaled state, the reward from an MLP of prediction_sizes over the
    top cell's output; Stoix's ff_mz world model)."""
    dynamics_sizes: tuple[int, ...] = (64,)
    """mlp: hidden widths of the dynamics MLP; gru: the widths of the stacked GRU cells (summing to latent_size)."""
    prediction_sizes: tuple[int, ...] = (64,)
    """Hidden widths of the prediction MLP (state -> policy, value)."""
    value_loss_weight: float = 0.25
    """Weight of the value cross-entropy (the paper's 0.25 for replayed targets)."""
    value_bootstrap: str = "network"
    """Where the n-step value target's bootstrap v(o_{t+n}) comes from: network (the target network's value prediction
    of the observation) or search (the root value of the search the actor ran there, stored with the step, as in
    MuZero's Appendix G; the target network's prediction where that search is not in the window: after its last step,
    and after an episode end)."""
    reanalyse_fraction: float = 0.0
    """Share of each batch's windows whose policy and value targets are recomputed by a fresh search (MuZero Reanalyse,
    `podrl.agents.muzero.reanalyse`); 0: the actors' stored targets."""
    reanalyse_network: str = "online"
    """reanalyse: params of the policy target's search: online (this gradient step's) or target; the value bootstraps
    always search with the target network."""
    prioritised: bool = False
    """Prioritised replay of the windows (`podrl.agents.prioritised`): drawn by |root value - value
    target|^priority_exponent, losses weighted by importance_exponent; buffer_size then whole rows of the envs per
    shard."""
    priority_exponent: float = 1.0
    """prioritised: alpha, replay a window of priority p with probability proportional to p^alpha (MuZero Appendix G:
    1)."""
    importance_exponent: float = 1.0
    """prioritised: beta in [0, 1], each window's loss weighted by (N P)^-beta over the batch's largest (MuZero Appendix
    G: 1)."""
    target_update_period: int = 1
    """Gradient steps between target network updates."""
    target_tau: float = 0.01
    """Each target update sets target <- tau * online + (1 - tau) * target (1: a hard copy)."""
    min_fill: int = 512
    """No gradient steps until this shard's buffer holds at least this many env steps."""
    buffer_size: int = 16_384
    batch_size: int = 64
    replay_ratio: float = 0.0625
    hidden_sizes: tuple[int, ...] = (64,)
    learning_rate: float = 1e-3
    max_grad_norm: float = 5.0
    anneal_lr: bool = False

    AGENT_MODULE: ClassVar[str] = "podrl.agents.muzero.agent"
    SHAPE_FIELDS: ClassVar[tuple[str, ...]] = ("num_simulations", "unroll_steps", "td_steps", "support_size")

    def __post_init__(self) -> None:
        super().__post_init__()  # the parts' fields: optimizer, replay, priorities, Q network, reward clip, SWEEPABLE
        check_fill_field(self, "min_fill")
        require_choice(self, "search", SEARCHES)
        require_choice(self, "reanalyse_network", REANALYSE_NETWORKS)
        require_choice(self, "value_bootstrap", VALUE_BOOTSTRAPS)
        require_choice(self, "dynamics", DYNAMICS)
        require_bool(self, "prioritised")
        require_number(self, "reanalyse_fraction", low=0.0, high=1.0)
        require_int(self, "num_simulations", "max_num_considered_actions", "unroll_steps", "td_steps",
                    "support_size", "latent_size", "target_update_period")
        for name in ("dynamics_sizes", "prediction_sizes"):
            _require_widths(self, name)
        if self.dynamics == "gru" and (not self.dynamics_sizes or sum(self.dynamics_sizes) != self.latent_size):
            raise ConfigError("dynamics_sizes", f"gru dynamics: the GRU widths {self.dynamics_sizes} must sum to "
                              f"latent_size {self.latent_size} (the state is their carries)")
        require_number(self, "gumbel_scale", low=0.0)
        require_number(self, "dirichlet_alpha", low=0.0, low_open=True)
        require_number(self, "dirichlet_fraction", low=0.0, high=1.0)
        require_number(self, "temperature", low=0.0)
        require_number(self, "gamma", low=0.0, high=1.0)
        require_number(self, "value_loss_weight", low=0.0, low_open=True)
        require_number(self, "target_tau", low=0.0, high=1.0, low_open=True)


    @property
    def window_length(self) -> int:
        """Env steps per replayed window: unroll_steps + td_steps."""
        return self.unroll_steps + self.td_steps

    def check_batch(self, rollout_length: int, envs_per_shard: int) -> None:
        """ConfigError("buffer_size") unless one rollout fits and the buffer is whole rows of
        `envs_per_shard` (prioritised: holding a rollout and a window of each env); ConfigError("min_fill")
        unless it covers one window of every env."""
        super().check_batch(rollout_length, envs_per_shard)
        if self.buffer_size % envs_per_shard:
            raise ConfigError("buffer_size", f"{self.buffer_size} is not a multiple of the {envs_per_shard} envs per "
                              f"shard; the sequence replay keeps whole time steps of every env")
        problem = self.prioritised and sequence_layout_problem(self.buffer_size, rollout_length, envs_per_shard,
                                                               self.window_length, 1)
        if problem:
            raise ConfigError("buffer_size", problem)
        check_fill_covers_windows(self.min_fill, self.window_length, envs_per_shard,
                                  "window of unroll_steps + td_steps")


def _require_widths(config: MuZeroConfig, name: str) -> None:
    """ConfigError(name) unless the field is a tuple or list of positive ints (stored back as a tuple)."""
    sizes = getattr(config, name)
    if not isinstance(sizes, (tuple, list)) or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0
                                                       for s in sizes):
        raise ConfigError(name, f"must be a tuple of positive ints, got {sizes!r}")
    object.__setattr__(config, name, tuple(sizes))
