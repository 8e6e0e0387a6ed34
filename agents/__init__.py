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

`AGENTS` is the one table of agents: the training CLIs build their `agent:<name>`
subcommands from it, and checkpoints name their agent by config class
(`agent_type`), which `config_from_saved` turns back into a config. Adding an
agent is one new package and one line here (see CONTRIBUTING.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from podrl.agents.dqn.config import DQNConfig
from podrl.agents.impala.config import ImpalaConfig
from podrl.agents.muzero.config import MuZeroConfig
from podrl.agents.pqn.config import PQNConfig
from podrl.agents.ppo.config import PPOConfig
from podrl.agents.r2d2.config import R2D2Config
from podrl.agents.sac.config import SACConfig
from podrl.agents.td3.config import TD3Config


class AgentEntry(NamedTuple):
    """One registered agent."""

    config: type  # a frozen dataclass implementing `podrl.core.types.AgentConfig`
    description: str  # one line, shown by the CLI's --help


AGENTS: dict[str, AgentEntry] = {
    "ppo": AgentEntry(PPOConfig, "Proximal Policy Optimization with GAE."),
    "impala": AgentEntry(ImpalaConfig, "IMPALA: actor-critic with V-trace."),
    "pqn": AgentEntry(PQNConfig, "PQN: Q(lambda) on parallel rollouts, LayerNorm, epsilon-greedy; no replay, no target net."),
    "dqn": AgentEntry(DQNConfig, "DQN: replay buffer per learner shard, target network, Double DQN, n-step."),
    "sac": AgentEntry(SACConfig, "SAC (continuous actions): tanh-Gaussian actor, twin soft Q critics, learned temperature."),
    "td3": AgentEntry(TD3Config, "TD3 (continuous actions): twin critics, target policy smoothing, delayed actor updates."),
    "muzero": AgentEntry(MuZeroConfig, "MuZero / Gumbel MuZero: search (mctx) over a learned model, sequence replay per learner shard."),
    "r2d2": AgentEntry(R2D2Config, "R2D2: recurrent Q network, prioritised sequence replay per learner shard, burn-in, Ape-X epsilons."),
}
"""CLI name -> agent; the first entry is the default."""


class UnknownAgentError(ValueError):
    """A saved `agent_type` that no registered agent has."""


def config_type(type_name: str) -> type:
    """The registered config class named `type_name` (a checkpoint's `agent_type`)."""
    by_type = {entry.config.__name__: entry.config for entry in AGENTS.values()}
    if type_name not in by_type:
        raise UnknownAgentError(f"unknown agent_type {type_name!r}; expected one of {sorted(by_type)}")
    return by_type[type_name]


def config_from_saved(type_name: str, values: dict[str, Any]) -> tuple[Any, list[str]]:
    """`(config, ignored)`: the agent config saved as JSON (lists back to tuples), and the
    saved fields this version does not know (left out). Invalid values raise `ConfigError`."""
    cls = config_type(type_name)
    names = {f.name for f in dataclasses.fields(cls)}
    known = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in names}
    return cls(**known), sorted(set(values) - names)


__all__ = ["AGENTS", "AgentEntry", "UnknownAgentError", "config_type", "config_from_saved"]
