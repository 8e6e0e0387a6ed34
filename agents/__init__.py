"""Reinforcement-learning algorithms for podrl, and the registry that names them.

Each algorithm lives in its own package (`podrl.agents.ppo`, `podrl.agents.impala`, ...) with
`config.py`, `losses.py` and `agent.py`, and talks to the runtime only through
`podrl.core.types.Agent`. Shared pieces: the actor-critic networks and action
distributions in `podrl.agents.networks`, the recurrent cores (LSTM, GRU) in `podrl.agents.cores`
and their learner re-unroll in `podrl.agents.unroll`, return estimators (GAE, V-trace) in
`podrl.agents.returns`, every agent's optimizer in `podrl.agents.optimizers`, the actor-critic
agent plumbing (init, acting, SGD step) in `podrl.agents.actor_critic`, the value-based one
(Q network, epsilon-greedy acting, params carrying epsilon) in `podrl.agents.q_learning`, the
continuous-control one (SAC, TD3: twin critic, action bounds, warm-up) in
`podrl.agents.continuous`, the replay buffer in `podrl.agents.replay`, the prioritised sequence replay
(R2D2; DQN as Ape-X) in `podrl.agents.prioritised` on the sum tree of `podrl.agents.sum_tree`, the
replay update frame (DQN, MuZero, SAC, TD3, R2D2) in `podrl.agents.off_policy`, the value rescaling h
(MuZero, R2D2) in `podrl.agents.value_rescaling`, config field checks in `podrl.agents.config_checks`.

`AGENTS` is the one table of podrl's own agents: the training CLIs build their `agent:<name>`
subcommands from it, beside the agents installed packages publish through the `podrl.agents`
entry-point group (`installed_agents`) and a user's own config class named by its import path
(`agent:<module>:<Class>`, `import_agent`). Run folders name their agent by its config class and
module (`agent_type`, `agent_module`), which `config_from_saved` turns back into a config. Adding an
agent to podrl is one new package and one line here (see CONTRIBUTING.md); using your own needs
no edit to podrl (docs/own-agent.md).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import sys
from typing import Any, NamedTuple

from podrl.agents.dqn.config import DQNConfig
from podrl.agents.impala.config import ImpalaConfig
from podrl.agents.muzero.config import MuZeroConfig
from podrl.agents.ppo.config import PPOConfig
from podrl.agents.pqn.config import PQNConfig
from podrl.agents.r2d2.config import R2D2Config
from podrl.agents.sac.config import SACConfig
from podrl.agents.td3.config import TD3Config
from podrl.core.errors import ConfigError
from podrl.envs.registry import ImportPathError, import_path


class AgentEntry(NamedTuple):
    """One registered agent."""

    config: type  # a frozen dataclass implementing `podrl.core.types.AgentConfig`
    description: str  # one line, shown by the CLI's --help


AGENTS: dict[str, AgentEntry] = {
    "ppo": AgentEntry(PPOConfig, "Proximal Policy Optimization with GAE."),
    "impala": AgentEntry(ImpalaConfig, "IMPALA: actor-critic with V-trace."),
    "pqn": AgentEntry(PQNConfig, "PQN: Q(lambda) on parallel rollouts, LayerNorm, epsilon-greedy; no replay, "
                                 "no target net."),
    "dqn": AgentEntry(DQNConfig, "DQN: replay buffer per learner shard, target network, Double DQN, n-step."),
    "sac": AgentEntry(SACConfig, "SAC (continuous actions): tanh-Gaussian actor, twin soft Q critics, "
                                 "learned temperature."),
    "td3": AgentEntry(TD3Config, "TD3 (continuous actions): twin critics, target policy smoothing, "
                                 "delayed actor updates."),
    "muzero": AgentEntry(MuZeroConfig, "MuZero / Gumbel MuZero: search (mctx) over a learned model, "
                                       "sequence replay per learner shard."),
    "r2d2": AgentEntry(R2D2Config, "R2D2: recurrent Q network, prioritised sequence replay per learner shard, "
                                   "burn-in, Ape-X epsilons."),
}
"""CLI name -> agent; the first entry is the default."""


ENTRY_POINT_GROUP = "podrl.agents"
"""The entry-point group through which an installed package publishes agents: `name = "module:ConfigClass"`
(pyproject.toml: `[project.entry-points."podrl.agents"]`), then `agent:<name>` on the command line."""

BUILTIN_MODULES = "podrl.agents."
"""Where podrl's own agent configs live (their saved fields may change between podrl versions)."""


class UnknownAgentError(ConfigError):
    """An agent that names nothing: an `agent:` name no agent has, a `module:Class` that does not import
    or is no agent config, a saved `agent_type` this podrl cannot rebuild. A `ConfigError` on `agent`;
    `reason`: the clause that says why, without the agent's name."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__("agent", message)
        self.reason = reason or message


def config_type(type_name: str) -> type:
    """The built-in config class named `type_name` (the `agent_type` of a run folder that names no module)."""
    by_type = {entry.config.__name__: entry.config for entry in AGENTS.values()}
    if type_name not in by_type:
        raise UnknownAgentError(f"unknown agent_type {type_name!r}; a run folder that names no agent_module was "
                                f"written by one of podrl's own agents: {sorted(by_type)}")
    return by_type[type_name]


def not_an_agent_config(cls: Any) -> str | None:
    """Why `cls` is not an agent config class (a dataclass with `make_agent` and `check_batch`), or None."""
    if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
        return f"is {cls!r}, not a dataclass: an agent config is a frozen dataclass (docs/own-agent.md)"
    missing = [m for m in ("make_agent", "check_batch") if not callable(getattr(cls, m, None))]
    if missing:
        return (f"({cls.__name__}) has no {' or '.join(missing)}: an agent config implements "
                f"podrl.core.types.AgentConfig (inherit podrl.agents.config_base.AgentConfigBase)")
    return None


def import_agent(path: str) -> type:
    """The agent config class `path` ("module:Class", `agent:<module>:<Class>` on the command line) names,
    its module imported from the current folder as `--env module:Class` is. UnknownAgentError naming the
    module or the class when it names nothing, or no agent config."""
    try:
        cls = import_path(path)
    except ImportPathError as e:
        raise UnknownAgentError(f"agent {path!r}: {e}", str(e)) from e.__cause__
    problem = not_an_agent_config(cls)
    if problem is not None:
        raise UnknownAgentError(f"agent {path!r} {problem}", f"it {problem}")
    return cls


def agent_path(config: Any) -> str:
    """`"module:Class"` of an agent config (or its class): what a run folder records, what `import_agent` takes."""
    cls = config if isinstance(config, type) else type(config)
    return f"{cls.__module__}:{cls.__qualname__}"


@functools.cache
def installed_agents() -> dict[str, AgentEntry]:
    """The agents installed packages publish (`ENTRY_POINT_GROUP`), by entry-point name: each loaded once.
    One that does not load, is no agent config or takes a built-in's name is left out, with a line on
    stderr naming it."""
    found: dict[str, AgentEntry] = {}
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = point.load()
            problem = not_an_agent_config(cls)
        except Exception as e:  # noqa: BLE001 - a broken package must not break podrl's other agents
            problem = f"does not load ({type(e).__name__}: {e})"
        if problem is None and (point.name in AGENTS or point.name in found):
            problem = "takes the name of another agent"
        if problem is not None:
            print(f"podrl: leaving out agent {point.name!r} ({point.value}, entry point {ENTRY_POINT_GROUP!r}): "
                  f"it {problem}", file=sys.stderr)
            continue
        found[point.name] = AgentEntry(cls, summary(cls))
    return found


def registered_agents() -> dict[str, AgentEntry]:
    """Every agent the command line names: podrl's own (`AGENTS`), then the installed ones."""
    return {**AGENTS, **installed_agents()}


def agent_name(config: Any) -> str:
    """The name of `config`'s agent on the command line (`agent:<name>`): its registered name when its class
    is exactly a registered one, else its import path (`agent_path`)."""
    for name, entry in registered_agents().items():
        if type(config) is entry.config:
            return name
    return agent_path(config)


def summary(cls: type) -> str:
    """The first line of an agent config class's docstring (its `--help` line), else its import path."""
    doc = (cls.__doc__ or "").strip()
    return doc.splitlines()[0] if doc and not doc.startswith(cls.__name__ + "(") else agent_path(cls)


def saved_agent_class(type_name: str, module: str | None = None, where: str = "the run") -> type:
    """The config class a run's saved config names: `module:type_name` when it records the module
    (`agent_module`), else (a folder from before podrl recorded it) podrl's own agent of that name.
    UnknownAgentError naming `where`, the module and what to do when it cannot be imported."""
    if module is None:
        return config_type(type_name)
    if module == "__main__":
        raise UnknownAgentError(f"the agent of {where}, {type_name}, was defined in the script that started it "
                                "(module __main__), which cannot be imported again: define the agent config in a "
                                "module of its own and import it from the script")
    try:
        return import_agent(f"{module}:{type_name}")
    except UnknownAgentError as e:
        hint = ("run podrl from the folder that holds the module, or put that folder on PYTHONPATH"
                if isinstance(e.__cause__, ImportError) else
                f"the module no longer defines {type_name} as an agent config")
        raise UnknownAgentError(f"the agent of {where}, {module}:{type_name}, cannot be rebuilt: "
                                f"{e.reason}; {hint}") from e.__cause__


def config_from_saved(type_name: str, values: dict[str, Any], module: str | None = None,
                      where: str = "the run") -> tuple[Any, list[str]]:
    """`(config, ignored)`: the agent config saved as JSON (lists back to tuples; `module`: its saved
    `agent_module`; `where`: the run, for errors), and the saved fields this version of podrl's own
    agent does not know (left out).
    A user's agent (not under `BUILTIN_MODULES`) is rebuilt as saved: a saved field its class no longer
    has, or a field it now requires that was not saved, is a ConfigError naming the field and module.
    Invalid values raise the class's own `ConfigError`."""
    cls = saved_agent_class(type_name, module, where)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = {f.name for f in fields}
    ignored = sorted(set(values) - names)
    builtin = cls.__module__.startswith(BUILTIN_MODULES)
    if ignored and not builtin:
        raise ConfigError(f"agent.{ignored[0]}", f"is saved with {where}, but {agent_path(cls)} has no such field "
                          f"(module {cls.__module__!r} changed since the run); give the class its field back, "
                          "or start a new run")
    required = [f.name for f in fields if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING and f.name not in values]
    if required:
        raise ConfigError(f"agent.{required[0]}", f"{agent_path(cls)} requires it, but {where} saved no value "
                          f"(module {cls.__module__!r} changed since the run); give the field a default")
    known = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in names}
    return cls(**known), ignored


__all__ = ["AGENTS", "AgentEntry", "ENTRY_POINT_GROUP", "UnknownAgentError", "agent_name", "agent_path",
           "config_from_saved", "config_type", "import_agent", "installed_agents", "registered_agents",
           "saved_agent_class", "summary"]
