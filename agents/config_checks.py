"""Config pieces shared by the agent configs; imports no JAX.

`NetworkConfig` is the mixin dataclass holding the actor-critic network fields
(`PPOConfig`, `ImpalaConfig`; declared and documented once, here), validated by
`check_network_fields`. The value-based agents (PQN, DQN) inherit `QNetworkConfig`
(torso and Q head, no recurrent core) and `EpsilonConfig` (the epsilon-greedy schedule),
validated by `check_q_network_fields` and `check_epsilon_fields`. Each part runs its check in its
own `__post_init__`, after its bases' (`podrl.agents.config_base.CheckedConfig`). The continuous-control
agents (SAC, TD3) inherit `ContinuousControlConfig` (a `ReplayConfig` plus warm-up, targets,
MLP widths and their optimizer block), validated by `check_continuous_control_fields`.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from podrl.agents.config_base import AdamEpsConfig, CheckedConfig
from podrl.core.errors import ConfigError, is_int, require_bool, require_choice, require_int, require_number

ACTIVATIONS = ("tanh", "relu", "gelu", "silu", "elu")
"""Names accepted by an agent config's `activation` (functions in `jax.nn`, see `podrl.agents.torsos`)."""

TORSOS = ("mlp", "nature_cnn", "impala_resnet", "minatar_cnn")
"""Names accepted by an agent config's `torso` (modules in `podrl.agents.torsos`)."""

PIXEL_TORSOS = ("nature_cnn", "impala_resnet", "minatar_cnn")
"""The image (CNN) torsos; they share one torso between policy and value by default."""

CORES = ("none", "lstm", "gru")
"""Names accepted by an agent config's `core` (the recurrent cores of `podrl.agents.cores`)."""

ENCODERS = TORSOS + ("embed", "embed_cnn", "none")
"""Encoders `torso_per_key` may name for a leaf of a nested observation (`podrl.agents.inputs`)."""


@dataclasses.dataclass(frozen=True)
class InputsConfig(CheckedConfig):
    """How a torso reads a nested (dict / tuple) observation, leaf by leaf (`podrl.agents.inputs`)."""

    torso_per_key: tuple[str, ...] = ()
    """Nested (dict / tuple) observations: a leaf's encoder by its key, as key=encoder with encoder one of mlp,
    nature_cnn, impala_resnet, minatar_cnn, embed (integer leaves with bounds), embed_cnn (an integer grid with
    bounds: each cell's ids embedded, then the MinAtar CNN) or none (not read), e.g. image=minatar_cnn
    action_mask=mlp; other leaves get one by shape and dtype (images a CNN, integer grids of few values embed_cnn,
    bounded integers an embedding, the rest an MLP of hidden_sizes; the action_mask leaf none)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_torso_per_key(self)


def check_torso_per_key(config) -> None:
    """Raises ConfigError("torso_per_key") unless each item is key=encoder with an encoder of ENCODERS and
    no key twice (stored back as a tuple)."""
    items = config.torso_per_key
    if isinstance(items, str) or not isinstance(items, (tuple, list)):
        raise ConfigError("torso_per_key", f"must be a tuple of key=encoder items, got {items!r}")
    keys = []
    for item in items:
        key, sep, encoder = str(item).partition("=")
        if not sep or not key or encoder not in ENCODERS:
            raise ConfigError("torso_per_key", f"{item!r} is not key=encoder with an encoder of {ENCODERS}")
        if key in keys:
            raise ConfigError("torso_per_key", f"names the key {key!r} twice")
        keys.append(key)
    object.__setattr__(config, "torso_per_key", tuple(items))


@dataclasses.dataclass(frozen=True)
class NetworkConfig(InputsConfig):
    """The actor-critic network: a torso (`podrl.agents.torsos`), an optional recurrent core
    (`podrl.agents.cores`) and policy / value heads (`podrl.agents.networks`)."""

    torso: str = "mlp"
    """Observation encoder: mlp, nature_cnn (Atari, Mnih et al. 2015), impala_resnet (Espeholt et al. 2018) or
    minatar_cnn (Young & Tian 2019); CNNs scale uint8 pixels to [0, 1] inside the network."""
    shared_torso: bool | None = None
    """One torso feeding both the policy and the value head (True) or one torso each (False); default: shared for the
    CNN torsos and with a core, separate for mlp."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the mlp torso (both the actor and the critic MLP when separate); the CNN torsos ignore
    it."""
    activation: str = "tanh"
    """Hidden activation of the mlp torso: one of tanh, relu, gelu, silu, elu (the CNN torsos use ReLU)."""
    core: str = "none"
    """Recurrent core between the (then shared) torso and the heads: none, lstm or gru; the actor carries its state and
    the learner re-unrolls it."""
    core_size: int = 128
    """Width of the lstm / gru core's state (ignored when core is none)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_network_fields(self)


def check_network_fields(config: NetworkConfig) -> None:
    """Raises ConfigError unless `config.hidden_sizes` is a tuple or list of positive ints
    (stored back on the frozen dataclass as a tuple), `config.activation` is in ACTIVATIONS,
    `config.torso` in TORSOS, `config.shared_torso` None, True or False, `config.core` in
    CORES and `config.core_size` a positive int. A core needs the shared torso (its state
    feeds both heads), so `shared_torso=False` with a core is refused."""
    check_torso_fields(config)
    if config.shared_torso is not None and not isinstance(config.shared_torso, bool):
        raise ConfigError("shared_torso", f"must be True, False or None, got {config.shared_torso!r}")
    require_choice(config, "core", CORES)
    require_int(config, "core_size")
    if config.core != "none" and config.shared_torso is False:
        raise ConfigError(
            "shared_torso", f"must be True or None with core={config.core!r}: one torso and one "
            f"recurrent core feed both the policy and the value head (separate towers would need two cores)")


def check_torso_fields(config) -> None:
    """Raises ConfigError unless `config.hidden_sizes` is a tuple or list of positive ints
    (stored back on the frozen dataclass as a tuple), `config.activation` is in ACTIVATIONS,
    and `config.torso` in TORSOS (checked in that order)."""
    check_mlp_fields(config)
    require_choice(config, "torso", TORSOS)


def check_mlp_fields(config) -> None:
    """Raises ConfigError unless `config.hidden_sizes` is a tuple or list of positive ints
    (stored back on the frozen dataclass as a tuple) and `config.activation` is in ACTIVATIONS."""
    sizes = config.hidden_sizes
    if not isinstance(sizes, (tuple, list)) or not all(is_int(s) and s > 0 for s in sizes):
        raise ConfigError("hidden_sizes", f"must be a tuple of positive ints, got {sizes!r}")
    object.__setattr__(config, "hidden_sizes", tuple(sizes))
    require_choice(config, "activation", ACTIVATIONS)


@dataclasses.dataclass(frozen=True)
class QNetworkConfig(InputsConfig):
    """The Q network of the value-based agents: a torso (`podrl.agents.torsos`) and a linear Q head
    `[..., num_actions]` (`podrl.agents.q_learning.QNetwork`); feed-forward, no recurrent core."""

    torso: str = "mlp"
    """Observation encoder: mlp, nature_cnn (Atari), impala_resnet or minatar_cnn (MinAtar); CNNs scale uint8 pixels to
    [0, 1] inside the network."""
    hidden_sizes: tuple[int, ...] = (128, 128)
    """Hidden layer widths of the mlp torso; the CNN torsos ignore it."""
    activation: str = "relu"
    """Hidden activation of the mlp torso: one of tanh, relu, gelu, silu, elu (the CNN torsos use ReLU)."""
    layer_norm: bool = False
    """LayerNorm after each hidden dense layer (before the activation) of the torso (mlp: every hidden layer; CNNs:
    their dense layer)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_q_network_fields(self)


def check_q_network_fields(config: QNetworkConfig) -> None:
    """`check_torso_fields`, then ConfigError("layer_norm") unless it is True or False."""
    check_torso_fields(config)
    require_bool(config, "layer_norm")


@dataclasses.dataclass(frozen=True)
class EpsilonConfig(CheckedConfig):
    """The epsilon-greedy exploration schedule of the value-based agents: epsilon decays
    linearly from `epsilon_start` to `epsilon_end` over the first `epsilon_decay_fraction`
    of the run's updates, then stays at `epsilon_end` (`podrl.agents.q_learning.epsilon_schedule`)."""

    epsilon_start: float = 1.0
    """Probability of a uniformly random action at the first update, in [0, 1]."""
    epsilon_end: float = 0.05
    """Probability of a uniformly random action after the decay, in [0, 1]."""
    epsilon_decay_fraction: float = 0.2
    """Share of the run's updates over which epsilon decays linearly, in (0, 1]."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_epsilon_fields(self)


def check_epsilon_fields(config: EpsilonConfig) -> None:
    """Raises ConfigError unless epsilon_start and epsilon_end are in [0, 1] and
    epsilon_decay_fraction in (0, 1]."""
    require_number(config, "epsilon_start", low=0.0, high=1.0)
    require_number(config, "epsilon_end", low=0.0, high=1.0)
    require_number(config, "epsilon_decay_fraction", low=0.0, high=1.0, low_open=True)


@dataclasses.dataclass(frozen=True)
class ReplayConfig(CheckedConfig):
    """A replay ring buffer per learner shard (`podrl.agents.replay`), filled with each update's rollout
    and sampled by `replay_ratio` gradient steps per env step (`podrl.agents.off_policy`)."""

    memory_field: ClassVar[str] = "buffer_size"
    """The field that sets the per-learner-shard state's size (named by the layouts' memory check)."""

    buffer_size: int = 1_000_000
    """Replay capacity in transitions, per learner shard (each learner device holds its own buffer)."""
    batch_size: int = 256
    """Transitions sampled per gradient step, per learner shard."""
    replay_ratio: float = 1.0
    """Gradient steps per env step of this shard: an update of T x B steps does round(replay_ratio * T * B) of them (at
    least 1)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_replay_fields(self)

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


def check_replay_fields(config: ReplayConfig) -> None:
    """Raises ConfigError unless buffer_size and batch_size are positive ints and replay_ratio > 0."""
    require_int(config, "buffer_size", "batch_size")
    require_number(config, "replay_ratio", low=0.0, low_open=True)


@dataclasses.dataclass(frozen=True)
class PrioritisedConfig(CheckedConfig):
    """Prioritised replay (`podrl.agents.prioritised`; Schaul et al. 2016, "Prioritized Experience Replay",
    ICLR): what is replayed is drawn with probability p^alpha / sum_k p_k^alpha, its loss weighted by
    (N P)^-beta normalised by the batch's largest weight."""

    priority_exponent: float = 0.6
    """alpha: replay what has priority p with probability proportional to p^alpha (0: uniform); Ape-X 0.6, R2D2 0.9."""
    importance_exponent: float = 0.4
    """beta in [0, 1]: each replayed loss is weighted by (N P)^-beta over the batch's largest (0: unweighted); Ape-X
    0.4, R2D2's table 0.6."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_prioritised_fields(self)


def check_prioritised_fields(config: PrioritisedConfig) -> None:
    """Raises ConfigError unless priority_exponent >= 0 and importance_exponent is in [0, 1]."""
    require_number(config, "priority_exponent", low=0.0)
    require_number(config, "importance_exponent", low=0.0, high=1.0)


def sequence_layout_problem(capacity: int, rollout_length: int, columns: int, window: int, period: int) -> str | None:
    """Why `[rollout_length, columns]` rollouts cannot feed a prioritised sequence replay
    (`podrl.agents.prioritised`) of `capacity` steps with sequences of `window` steps every `period`
    (a sentence naming the numbers), or None if they can."""
    if rollout_length % period:
        return f"the sequence period {period} does not divide the rollout length {rollout_length}"
    if capacity % (period * columns):
        return (f"{capacity} steps are not whole rows of period x envs per shard = {period} x {columns}; "
                f"sequences start every {period} steps of each env")
    if capacity // columns < rollout_length + window:
        return (f"{capacity} steps hold {capacity // columns} steps of each of the {columns} envs per shard, "
                f"fewer than one rollout ({rollout_length}) plus one sequence ({window})")
    return None


def check_fill_covers_windows(min_fill: int, window: int, envs_per_shard: int, what: str) -> None:
    """ConfigError("min_fill") unless `min_fill` env steps hold one `window`-step window (`what`, e.g.
    "sequence of burn_in + sequence_length") of each of the shard's envs: a sequence replay's first draw."""
    if min_fill < window * envs_per_shard:
        raise ConfigError("min_fill", f"{min_fill} env steps hold less than one {what} = {window} steps for each "
                                      f"of the {envs_per_shard} envs per shard; use min_fill >= "
                                      f"{window * envs_per_shard}")


def check_fill_field(config: ReplayConfig, name: str) -> None:
    """Raises ConfigError(name) unless the field `name` (the transitions each shard's buffer must
    hold before the first gradient step: DQN's min_fill, SAC / TD3's warmup_steps) is an int in
    [0, buffer_size]."""
    require_int(config, name, minimum=0)
    fill = getattr(config, name)
    if fill > config.buffer_size:
        raise ConfigError(name, f"{fill} exceeds buffer_size {config.buffer_size}: learning would never start")


@dataclasses.dataclass(frozen=True)
class ContinuousControlConfig(ReplayConfig, AdamEpsConfig):
    """The fields SAC and TD3 share (`podrl.agents.continuous`): replay, warm-up, targets, networks and
    the optimizer block. Defaults: CleanRL's `sac_continuous_action.py` / `td3_continuous_action.py`
    (Huang et al. 2022, JMLR 23(274)) for MuJoCo, but for the warm-up, which each agent sets.

    The optimizer block is not an `podrl.agents.config_base.OptimizerConfig`: the actor and the twin
    critics each have their own Adam step size (`actor_learning_rate`, `critic_learning_rate`;
    SAC's temperature a third), constant over the run (no `anneal_lr`: CleanRL's SAC / TD3 do not
    anneal), so one `learning_rate` would not fit. What is shared is Adam's epsilon
    (`AdamEpsConfig.adam_eps`, for every optimizer of the agent) and the global-norm clip."""

    warmup_steps: int = 5_000
    """Per learner shard: the first warmup_steps transitions come from uniform random actions, and no gradient step is
    taken before the buffer holds them."""
    gamma: float = 0.99
    """Discount factor, in [0, 1]."""
    tau: float = 0.005
    """Polyak step of the target networks after each gradient step: target <- tau * online + (1 - tau) * target, in (0,
    1]."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the actor MLP and of each critic MLP."""
    activation: str = "relu"
    """Hidden activation of the MLPs: one of tanh, relu, gelu, silu, elu."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before the targets."""
    # -- optimizer block (Adam on each network, see the class docstring; adam_eps from AdamEpsConfig)
    actor_learning_rate: float = 3e-4
    """Adam step size of the actor."""
    critic_learning_rate: float = 1e-3
    """Adam step size of the twin critics."""
    max_grad_norm: float = 1e6
    """Clip each network's gradients to this global norm before Adam (the default: no clipping in practice)."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the replay's fields and adam_eps
        check_continuous_control_fields(self)


def check_continuous_control_fields(config: ContinuousControlConfig) -> None:
    """Raises ConfigError naming the first invalid field of `ContinuousControlConfig`'s own (its bases,
    `ReplayConfig` and `AdamEpsConfig`, check theirs)."""
    check_fill_field(config, "warmup_steps")
    require_number(config, "gamma", low=0.0, high=1.0)
    require_number(config, "tau", low=0.0, high=1.0, low_open=True)
    check_mlp_fields(config)
    require_number(config, "reward_scale", low=0.0, low_open=True)
    for name in ("actor_learning_rate", "critic_learning_rate", "max_grad_norm"):
        require_number(config, name, low=0.0, low_open=True)
