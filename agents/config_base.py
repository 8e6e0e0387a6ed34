"""Fields and methods every agent config shares, declared and documented once; imports no JAX.

Every part checks its own fields in its own `__post_init__`, after its bases' (each calls
`super().__post_init__()` first, down to `CheckedConfig`, the root): a config built from parts, a
user's own included, gets every part's checks (raising `ConfigError` naming the field), and an
agent's `__post_init__` checks only its own fields:

    @dataclasses.dataclass(frozen=True)
    class A2CConfig(AgentConfigBase, AdamConfig):
        value_coef: float = 0.5  # and its one-line docstring under it

        def __post_init__(self):
            super().__post_init__()  # learning_rate, anneal_lr, max_grad_norm, adam_eps, SWEEPABLE
            require_number(self, "value_coef", low=0.0)

- `OptimizerConfig`: step size, its linear anneal and the global-norm clip; `AdamConfig` adds
  Adam's epsilon (`--agent.adam-eps`, from `AdamEpsConfig`, which SAC / TD3 share), `OptimizerChoiceConfig` the choice
of Adam or RMSProp
  (`--agent.optimizer`, `--agent.optimizer-eps`, `--agent.rmsprop-eps-in-sqrt`).
  `podrl.agents.optimizers` builds the optax optimizer of either (every agent's optimizer is built there).
  Without `EpochsConfig` a config takes one optimizer step per update (`num_optimizer_steps`).
- `EpochsConfig`: `num_epochs` passes of `num_minibatches` shuffled minibatches per update.
- `ObsNormConfig`: `--agent.normalize-observations` and its clip (`podrl.agents.obs_norm`).
- `AgentConfigBase`: the lazy `make_agent` trampoline (`AGENT_MODULE`), a `check_batch` that accepts
  any batch its parts accept, and the population
  declarations: `SWEEPABLE` ({field: (low, high)}), `HYPERPARAMS` (the NamedTuple of the swept
  values `update` receives, see `podrl.agents.actor_critic.hyperparams_for`) and `SHAPE_FIELDS`.
  `check_sweepable` refuses, at construction, a sweepable field that cannot be an array.

An agent config inherits these and states only its own defaults: a subclass redeclares a
shared field with a new default and no docstring (tyro reads the docstring from here).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import TYPE_CHECKING, Any, ClassVar

from podrl.agents.obs_norm import with_observation_norm
from podrl.core.errors import ConfigError, require_bool, require_choice, require_int, require_number

if TYPE_CHECKING:
    from podrl.core.types import Agent
    from podrl.envs.types import EnvSpec

OPTIMIZERS = ("adam", "rmsprop")
"""Names accepted by `OptimizerChoiceConfig.optimizer`."""

RMSPROP_DECAY = 0.99
"""RMSProp's second-moment decay (the IMPALA paper's; no momentum)."""


@dataclasses.dataclass(frozen=True)
class CheckedConfig:
    """The root of the config parts: its `__post_init__` checks nothing, so every part's can call
    `super().__post_init__()` (its bases' checks first, then its own fields')."""

    def __post_init__(self) -> None:
        """Nothing to check here: the end of the cooperative chain."""


@dataclasses.dataclass(frozen=True)
class OptimizerConfig(CheckedConfig):
    """Gradient clip, step size and schedule; a subclass names the optimizer (`optimizer_args`)."""

    learning_rate: float = 1e-3
    """Optimizer step size (the start value when `anneal_lr`)."""
    anneal_lr: bool = True
    """Decay the step size linearly to 0 over the run (its optimizer steps; DQN: its updates)."""
    max_grad_norm: float = 0.5
    """Clip gradients to this global norm before the optimizer."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_optimizer_fields()

    def check_optimizer_fields(self) -> None:
        """ConfigError naming the field unless learning_rate and max_grad_norm are > 0 and anneal_lr a bool."""
        require_number(self, "learning_rate", low=0.0, low_open=True)
        require_bool(self, "anneal_lr")
        require_number(self, "max_grad_norm", low=0.0, low_open=True)

    def optimizer_args(self) -> tuple[str, dict[str, Any]]:
        """`(name, keyword arguments)` of the optax optimizer besides its learning rate."""
        raise NotImplementedError

    def num_optimizer_steps(self, total_updates: int) -> int:
        """Optimizer steps in a run of `total_updates` calls to `update` (the lr anneal's length): one per
        update here; `EpochsConfig` (and a config taking several steps per update) says its own."""
        return total_updates


@dataclasses.dataclass(frozen=True)
class AdamEpsConfig(CheckedConfig):
    """Adam's epsilon, for a config with one Adam step size (`AdamConfig`) or several (SAC, TD3)."""

    adam_eps: float = 1e-8
    """Adam epsilon."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_adam_eps()

    def check_adam_eps(self) -> None:
        """ConfigError("adam_eps") unless it is > 0."""
        require_number(self, "adam_eps", low=0.0, low_open=True)

    def optimizer_args(self) -> tuple[str, dict[str, Any]]:
        """`("adam", {"eps": adam_eps})`: the optax optimizer besides its learning rate."""
        return "adam", {"eps": self.adam_eps}


@dataclasses.dataclass(frozen=True)
class AdamConfig(AdamEpsConfig, OptimizerConfig):
    """Adam (Kingma & Ba 2015) after the global-norm clip: `OptimizerConfig`'s fields and `adam_eps`."""


@dataclasses.dataclass(frozen=True)
class OptimizerChoiceConfig(OptimizerConfig):
    """Adam, or RMSProp as in the IMPALA paper, after the global-norm clip."""

    optimizer: str = "adam"
    """Optimizer: adam, or rmsprop (decay 0.99, no momentum, as in the IMPALA paper)."""
    optimizer_eps: float = 1e-5
    """Epsilon of Adam / RMSProp (the IMPALA paper's RMSProp uses 0.01)."""
    rmsprop_eps_in_sqrt: bool = True
    """RMSProp only: True divides by sqrt(nu + eps) (TensorFlow, optax, the IMPALA paper's code);
    False by sqrt(nu) + eps (PyTorch, TorchBeast, Cleanba). With eps 0.01 they differ a lot: a
    gradient of 0.01 moves a parameter ~0.1 lr inside the sqrt and ~0.5 lr outside it."""

    def __post_init__(self) -> None:
        super().__post_init__()
        require_bool(self, "rmsprop_eps_in_sqrt")
        require_choice(self, "optimizer", OPTIMIZERS)
        if self.optimizer != "rmsprop" and not self.rmsprop_eps_in_sqrt:
            raise ConfigError("rmsprop_eps_in_sqrt", f"False applies to optimizer='rmsprop' only, got "
                              f"optimizer={self.optimizer!r} (Adam's eps is always outside the sqrt)")
        require_number(self, "optimizer_eps", low=0.0, low_open=True)

    def optimizer_args(self) -> tuple[str, dict[str, Any]]:
        if self.optimizer == "adam":
            return "adam", {"eps": self.optimizer_eps}
        return "rmsprop", {"decay": RMSPROP_DECAY, "eps": self.optimizer_eps, "eps_in_sqrt": self.rmsprop_eps_in_sqrt}


def check_transition_minibatches(num_minibatches: int, rollout_length: int, envs_per_shard: int) -> None:
    """ConfigError("num_minibatches") unless it divides the shard's `rollout_length * envs_per_shard` transitions."""
    batch = rollout_length * envs_per_shard
    if batch % num_minibatches != 0:
        raise ConfigError(
            "num_minibatches",
            f"{num_minibatches} minibatches do not divide the per-shard batch of "
            f"rollout_length * envs_per_shard = {rollout_length} * {envs_per_shard} = {batch}",
        )


def check_sequence_minibatches(num_minibatches: int, envs_per_shard: int, why: str) -> None:
    """ConfigError("num_minibatches") unless it divides the shard's envs; `why` says why sequences stay whole."""
    if envs_per_shard % num_minibatches != 0:
        raise ConfigError("num_minibatches",
                          f"{num_minibatches} minibatches do not divide the {envs_per_shard} envs per shard ({why})")


@dataclasses.dataclass(frozen=True)
class EpochsConfig(CheckedConfig):
    """Minibatch SGD over each rollout: `num_epochs` passes of `num_minibatches` minibatches."""

    num_epochs: int = 4
    """Passes over each rollout per update."""
    num_minibatches: int = 4
    """Minibatches per epoch, per learner shard; must divide rollout_length * envs_per_shard (with a core:
    envs_per_shard, minibatches are whole env sequences)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_epoch_fields()

    def check_epoch_fields(self) -> None:
        """ConfigError naming the field unless num_epochs and num_minibatches are positive ints."""
        require_int(self, "num_epochs", "num_minibatches")

    def check_batch(self, rollout_length: int, envs_per_shard: int) -> None:
        """Raises ConfigError("num_minibatches") unless it divides the shard's transitions."""
        check_transition_minibatches(self.num_minibatches, rollout_length, envs_per_shard)

    def num_optimizer_steps(self, total_updates: int) -> int:
        """Optimizer steps in a run of `total_updates` calls to `update` (drives the lr anneal)."""
        return total_updates * self.num_epochs * self.num_minibatches


@dataclasses.dataclass(frozen=True)
class ObsNormConfig(CheckedConfig):
    """Observation normalisation by running statistics (`podrl.agents.obs_norm`), for any agent."""

    normalize_observations: bool = False
    """Standardise observations by their running mean / variance (kept with the params, averaged over learners) in act
    and in the loss."""
    obs_norm_clip: float = 10.0
    """Normalised observations are clipped to [-obs_norm_clip, obs_norm_clip]."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_obs_norm_fields()

    def check_obs_norm_fields(self) -> None:
        """ConfigError naming the field unless normalize_observations is a bool and obs_norm_clip > 0."""
        require_bool(self, "normalize_observations")
        require_number(self, "obs_norm_clip", low=0.0, low_open=True)

    def with_obs_norm(self, agent: Agent) -> Agent:
        """`agent` wrapped by `podrl.agents.obs_norm.with_observation_norm` when normalize_observations, else itself."""
        if not self.normalize_observations:
            return agent
        return with_observation_norm(agent, self.obs_norm_clip)


@dataclasses.dataclass(frozen=True)
class AgentConfigBase(CheckedConfig):
    """`make_agent` (the lazily imported `AGENT_MODULE.make_agent`) and what a population may sweep;
    its `__post_init__` checks the population declarations (`check_sweepable`) after the other parts'."""

    AGENT_MODULE: ClassVar[str] = ""
    """The module whose `make_agent(config, env_spec, total_updates)` builds the agent (imported on use)."""
    SWEEPABLE: ClassVar[dict[str, tuple[float, float]]] = {}
    """Fields a population may sweep (`podrl.core.population`): {field: (low, high)}; update reads them as arrays."""
    HYPERPARAMS: ClassVar[type | None] = None
    """The NamedTuple whose fields are SWEEPABLE's: what the loss and optimizer read per member."""
    SHAPE_FIELDS: ClassVar[tuple[str, ...]] = ()
    """Fields that change the compiled program's shapes or structure: a sweep refuses them."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sweepable(self)

    def check_batch(self, rollout_length: int, envs_per_shard: int) -> None:
        """Accepts any `[rollout_length, envs_per_shard]` shard batch the config's other parts accept
        (`EpochsConfig`'s minibatches, a replay's buffer); override it to refuse, with `ConfigError`
        naming the field, a batch your update cannot split."""
        parent = getattr(super(), "check_batch", None)
        if parent is not None:
            parent(rollout_length, envs_per_shard)

    def make_agent(self, env_spec: EnvSpec, total_updates: int) -> Agent:
        """The `Agent` for `env_spec`; `total_updates` calls of `update` make the run (its schedules)."""
        if not self.AGENT_MODULE:
            raise NotImplementedError(f"{type(self).__name__} sets no AGENT_MODULE (e.g. 'agents.<name>.agent')")
        return importlib.import_module(self.AGENT_MODULE).make_agent(self, env_spec, total_updates)


def check_sweepable(config: AgentConfigBase) -> None:
    """ConfigError naming the field unless every SWEEPABLE field can be a float32 array: a float
    field of the config, not in SHAPE_FIELDS, and a field of HYPERPARAMS (and HYPERPARAMS has no other)."""
    cls = type(config)
    types = {f.name: f.type for f in dataclasses.fields(config)}
    fields = getattr(cls.HYPERPARAMS, "_fields", ())
    for name in cls.SWEEPABLE:
        if types.get(name) not in (float, "float"):
            raise ConfigError(name, f"is in {cls.__name__}.SWEEPABLE but is not a float field (type "
                                    f"{types.get(name, 'none: no such field')}); a swept value is a float32 array")
        if name in cls.SHAPE_FIELDS:
            raise ConfigError(name, f"is in both {cls.__name__}.SWEEPABLE and SHAPE_FIELDS")
        if name not in fields:
            raise ConfigError(name, f"is in {cls.__name__}.SWEEPABLE but not a field of its HYPERPARAMS "
                                    f"({getattr(cls.HYPERPARAMS, '__name__', None)}), so update would never read it")
    for name in fields:
        if name not in cls.SWEEPABLE:
            raise ConfigError(name, f"is a field of {cls.HYPERPARAMS.__name__} but not in {cls.__name__}.SWEEPABLE")
