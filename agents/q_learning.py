"""What the value-based agents (PQN, DQN) share: the Q network, epsilon-greedy acting with
its schedule, params carrying epsilon, the discrete-action check and the agent plumbing.

**Params.** `TrainState.params` is what actors need, so a value-based agent's params are

    {"network": <flax params of QNetwork>, "epsilon": float32 []}

`epsilon` is the exploration rate actors use with these params: `init` writes
`epsilon_fn(0)` and each `update` writes `epsilon_fn(update_step + 1)`, the value for the
next rollout. Both layouts publish params to their actors after each update, so the actors
always act with the epsilon of the params version they hold; no layout knows about it. The
optimizer state covers only `params["network"]` (gradients are taken w.r.t. the network
only, see `QParts.grad_fn`), and every update goes through `optax.apply_updates`
(`podrl.agents.actor_critic.sgd_step`). Evaluation uses `act_greedy` (no epsilon).

An agent module supplies its `make_optimizer`, `make_loss_fn(config, network)` and
`update(parts, train_state, trajectory [T, B], key)`; `q_agent` builds the
`podrl.core.types.Agent` around them (compare `podrl.agents.actor_critic.actor_critic_agent`).
The config inherits `QNetworkConfig` and `EpsilonConfig` (`podrl.agents.config_checks`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from podrl.agents.actor_critic import check_total_updates, count_params
from podrl.agents.config_checks import (
    EpsilonConfig,
    QNetworkConfig,
)
from podrl.agents.inputs import torso_input
from podrl.agents.masking import action_mask, epsilon_greedy, masked_argmax
from podrl.agents.torsos import make_torso
from podrl.core.errors import ConfigError
from podrl.core.types import Agent, Metrics, TrainState, Trajectory, no_actor_state
from podrl.envs import observations
from podrl.envs.types import EnvSpec

Array = jax.Array

__all__ = [
    "QNetworkConfig", "EpsilonConfig",
    "QNetwork", "make_q_network", "check_discrete_actions", "epsilon_schedule", "decay_updates",
    "epsilon_greedy", "discrete_torso_input", "QParts", "q_agent", "q_values", "next_params", "init_network_params",
    "init_train_state", "act", "act_greedy",
]


class QNetwork(nn.Module):
    """Observations `[..., *obs]` -> Q values `[..., num_actions]`: a torso, then a linear head."""

    obs_shape: tuple[int, ...]
    num_actions: int
    torso: str = "mlp"
    hidden_sizes: Sequence[int] = (128, 128)
    activation: str = "relu"
    layer_norm: bool = False

    @nn.compact
    def __call__(self, x: Array) -> Array:
        features = make_torso(self.torso, self.obs_shape, self.hidden_sizes, self.activation,
                              name="torso", layer_norm=self.layer_norm)(x)
        return nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(1.0), name="q_head")(features)


def check_discrete_actions(agent: str, env_spec: EnvSpec) -> None:
    """ConfigError("env") naming `agent` and the action spec unless actions are discrete."""
    if not env_spec.discrete:
        raise ConfigError(
            "env", f"agent {agent!r} picks argmax_a Q(o, a) and needs a discrete action space, but this "
            f"environment's action spec is {env_spec.action!r}; use a discrete-action env or a "
            f"policy-gradient agent (ppo, impala) for continuous actions")


def discrete_torso_input(agent: str, torso: str, env_spec: EnvSpec, torso_per_key: Sequence[str] = ()):
    """`(obs_shape, number of actions)` for a discrete-action agent named `agent` whose `torso` (and
    `torso_per_key`, for a nested observation) reads `env_spec`'s observations: `obs_shape` is
    `podrl.agents.inputs.torso_input`'s; ConfigError("env") for continuous actions, ConfigError("torso") /
    ("torso_per_key") for a torso that cannot read these observations (nothing is traced). PQN, DQN,
    MuZero and R2D2 build on it."""
    check_discrete_actions(agent, env_spec)
    return torso_input(env_spec, torso, torso_per_key), int(env_spec.action.num_values)


def make_q_network(agent: str, config: QNetworkConfig, env_spec: EnvSpec) -> QNetwork:
    """The `QNetwork` the config names for `env_spec` (`discrete_torso_input`'s refusals first)."""
    obs_shape, num_actions = discrete_torso_input(agent, config.torso, env_spec, config.torso_per_key)
    return QNetwork(obs_shape, num_actions, config.torso, tuple(config.hidden_sizes), config.activation,
                    config.layer_norm)


def decay_updates(config: EpsilonConfig, total_updates: int) -> int:
    """Updates over which epsilon decays: `epsilon_decay_fraction * total_updates`, at least 1."""
    return max(1, round(config.epsilon_decay_fraction * total_updates))


def epsilon_schedule(start: float, end: float, num_updates: int) -> Callable[[Array], Array]:
    """`update_step (int []) -> epsilon (float32 [])`: linear from `start` at step 0 to `end`
    at `num_updates`, then constant. Pure; the same on every learner and host."""
    schedule = optax.linear_schedule(start, end, num_updates)
    return lambda step: jnp.asarray(schedule(step), jnp.float32)


class QParts(NamedTuple):
    """What a value-based agent's pure functions close over (static Python objects); the field
    names `config`, `optimizer`, `learning_rate`, `grad_fn` are those `podrl.agents.actor_critic`'s
    `sgd_step` and `finish_update` read, so both apply here (on `params["network"]`)."""

    config: Any  # the agent's frozen config: QNetworkConfig + EpsilonConfig + num_optimizer_steps
    network: QNetwork
    optimizer: optax.GradientTransformation  # over params["network"] only
    learning_rate: Callable[[Array], Array]  # optimizer step count -> step size
    grad_fn: Callable[..., Any]  # jax.value_and_grad(loss_fn, has_aux=True), w.r.t. network params
    epsilon: Callable[[Array], Array]  # update step -> epsilon, `epsilon_schedule`
    hyperparams: Any = None  # none swept: `sgd_step` calls the loss with (params, batch, key)


def q_agent(
    agent: str,
    config: Any,
    env_spec: EnvSpec,
    total_updates: int,
    make_optimizer: Callable[..., tuple[optax.GradientTransformation, Callable[[Array], Array]]],
    make_loss_fn: Callable[[Any, QNetwork], Callable[..., Any]],
    update: Callable[[QParts, TrainState, Trajectory, Array], tuple[TrainState, Metrics]],
    init: Callable[[QParts, Array, EnvSpec], TrainState] | None = None,
    reshard_state: Callable[[Any, int], tuple[Any, dict[str, int]]] | None = None,
) -> Agent:
    """The `Agent` named `agent` whose `update` is `update(parts, ...)`; `total_updates` calls
    of it make the run (the epsilon and learning-rate schedules). `init(parts, key, env_spec)`
    defaults to `init_train_state` (an agent with more learner state, e.g. a target network or
    a replay buffer in `shard_state`, passes its own, keeping `params` as documented above, and
    how that state moves onto another learner-shard count, `reshard_state`: `Agent.reshard_state`).
    Raises ConfigError for a continuous action space or an unusable torso before anything
    compiles."""
    total_updates = check_total_updates(total_updates)
    network = make_q_network(agent, config, env_spec)
    optimizer, schedule = make_optimizer(config, total_updates, count_params(network, env_spec))
    epsilon = epsilon_schedule(config.epsilon_start, config.epsilon_end, decay_updates(config, total_updates))
    parts = QParts(config, network, optimizer, schedule,
                   jax.value_and_grad(make_loss_fn(config, network), has_aux=True), epsilon)
    return Agent(
        init=functools.partial(init or init_train_state, parts),
        init_actor_state=no_actor_state,
        act=functools.partial(act, parts),
        act_greedy=functools.partial(act_greedy, parts),
        update=functools.partial(update, parts),
        reshard_state=reshard_state,
    )


def init_network_params(parts: QParts, key: Array, env_spec: EnvSpec):
    """Fresh flax params of `parts.network` for `env_spec`'s observations."""
    return parts.network.init(key, observations.zeros(env_spec.observation, (1,)))


def init_train_state(parts: QParts, key: Array, env_spec: EnvSpec) -> TrainState:
    """params `{"network", "epsilon": epsilon_fn(0)}`, the optimizer state of the network, step 0."""
    network_params = init_network_params(parts, key, env_spec)
    params = {"network": network_params, "epsilon": parts.epsilon(jnp.zeros((), jnp.int32))}
    return TrainState(params, parts.optimizer.init(network_params), jnp.zeros((), jnp.int32))


def q_values(parts: QParts, network_params, observation: Array) -> Array:
    """Q values `[..., A]` of observations `[..., *obs]`."""
    return parts.network.apply(network_params, observation)


def act(parts: QParts, params, actor_state, observation: Array, key: Array):
    """`Agent.act`: epsilon-greedy actions `[B]` for observations `[B, *obs]` with
    `params["epsilon"]`, among the legal actions of an `action_mask` leaf; no extras; `actor_state` (())
    passes through."""
    q = q_values(parts, params["network"], observation)
    return epsilon_greedy(key, q, params["epsilon"], action_mask(observation)), {}, actor_state


def act_greedy(parts: QParts, params, actor_state, observation: Array):
    """`Agent.act_greedy`: argmax_a Q(o, a) `[B]` over the legal actions, the evaluation policy (no epsilon)."""
    q = q_values(parts, params["network"], observation)
    return masked_argmax(q, action_mask(observation)), actor_state


def next_params(parts: QParts, network_params, update_step: Array) -> dict[str, Any]:
    """The params an update hands on: the new network params and the epsilon for the next
    rollout, `epsilon_fn(update_step + 1)` (`update_step`: the step before this update)."""
    return {"network": network_params, "epsilon": parts.epsilon(update_step + 1)}
