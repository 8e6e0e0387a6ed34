"""Plumbing shared by the actor-critic agents (PPO, IMPALA).

An agent module supplies only what is its own: `make_loss_fn(config, network)` and
`update(parts, train_state, trajectory [T, B], key)`; `actor_critic_agent` builds the
`podrl.core.types.Agent` around them, with `podrl.agents.optimizers.make_optimizer`'s optimizer
and the `ActorCritic` network of `podrl.agents.networks` (the config's `torso`,
`shared_torso`, `hidden_sizes`, `activation`), or with the config's `core` ("lstm",
"gru") the `podrl.agents.cores.RecurrentActorCritic`, whose core state is the actor state
(`[B, core_size]`, a `(c, h)` pair for lstm; `()` without a core), and `act` extras
"log_prob" `[B]` and "value" `[B]`. `sgd_step` and `finish_update` are the first and
last pieces of an `update`; they read only `config`, `optimizer`, `learning_rate`,
`grad_fn` and `hyperparams` of their parts, so the value-based agents
(`podrl.agents.q_learning.QParts`) use them too.

Swept hyperparameters are an explicit input: an update starts with `for_member(parts,
train_state)`, whose `parts.hyperparams` (the config's `HYPERPARAMS` NamedTuple, from
`hyperparams_for`) the update passes to GAE / V-trace and `sgd_step` passes to the loss.
"""

from __future__ import annotations

import functools
import numbers
from typing import Any, Callable, NamedTuple, Protocol, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from podrl.agents.cores import initial_actor_state
from podrl.agents.networks import ActionDistribution, ActorCritic, action_distribution, make_network
from podrl.agents.optimizers import make_optimizer
from podrl.agents.unroll import act_step
from podrl.core.parallel import learner_value_and_grad
from podrl.core.types import Agent, Metrics, TrainState, Trajectory
from podrl.envs import observations
from podrl.envs.types import EnvSpec

Array = jax.Array


class ActorCriticConfig(Protocol):
    """The fields and methods of an agent config (`PPOConfig`, `ImpalaConfig`) used here."""

    hidden_sizes: Sequence[int]
    activation: str
    torso: str
    shared_torso: bool | None
    core: str
    core_size: int
    torso_per_key: tuple[str, ...]

    def num_optimizer_steps(self, total_updates: int) -> int: ...


class Parts(NamedTuple):
    """What the agent's pure functions close over (static Python objects), and the `hyperparams`
    one update uses (`for_member`)."""

    config: Any  # the agent's frozen config, an `ActorCriticConfig`
    network: ActorCritic  # or podrl.agents.cores.RecurrentActorCritic (config.core)
    dist: ActionDistribution
    optimizer: optax.GradientTransformation
    learning_rate: Callable[[Array], Array]  # optimizer step count -> step size
    grad_fn: Callable[..., Any]  # jax.value_and_grad(loss_fn, has_aux=True); loss_fn(params, batch, key, hyperparams)
    hyperparams: Any = None  # config.HYPERPARAMS: the swept values the loss reads (the config's own at build)
    optimizer_for: Callable[[Any], tuple[optax.GradientTransformation, Callable[[Array], Array]]] | None = None
    # hyperparams -> (optimizer, schedule) with its learning_rate and max_grad_norm


def hyperparams_for(config: Any, swept: Any = ()) -> Any:
    """`config.HYPERPARAMS` with each field a population member's float32 `[]` array from
    `swept` ({field: array}, `TrainState.hyperparams`) when there, else the config's own value
    (a Python float, so an unswept program is traced exactly as before). ValueError for a
    swept name that is not a field of it (`check_sweepable` keeps SWEEPABLE and it equal)."""
    swept = dict(swept or {})
    cls = type(config).HYPERPARAMS
    unknown = sorted(set(swept) - set(cls._fields))
    if unknown:
        raise ValueError(f"TrainState.hyperparams has {unknown}, not fields of {cls.__name__} {cls._fields}")
    return cls(*(swept.get(name, getattr(config, name)) for name in cls._fields))


def for_member(parts: Parts, train_state: TrainState) -> Parts:
    """`parts` for the update of `train_state`: a population member's swept values
    (`TrainState.hyperparams`) as `parts.hyperparams`, the optimizer and schedule rebuilt with
    its learning_rate and max_grad_norm; `parts` itself when nothing is swept. The optimizer
    state's structure does not depend on the values, so states carry over."""
    if not train_state.hyperparams:
        return parts
    hyperparams = hyperparams_for(parts.config, train_state.hyperparams)
    optimizer, schedule = parts.optimizer_for(hyperparams)
    return parts._replace(hyperparams=hyperparams, optimizer=optimizer, learning_rate=schedule)


def count_params(network: ActorCritic, env_spec: EnvSpec) -> int:
    """Parameter count of `network` on `env_spec`'s observations (shape-only, nothing is computed)."""
    shapes = jax.eval_shape(network.init, jax.random.key(0), observations.structs(env_spec.observation, (1,)))
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(shapes)))


def check_total_updates(total_updates: int) -> int:
    """`total_updates` as an int; ValueError unless it is a positive int (not a bool)."""
    if not isinstance(total_updates, numbers.Integral) or isinstance(total_updates, bool) or total_updates < 1:
        raise ValueError(f"total_updates: expected a positive int, got {total_updates!r}")
    return int(total_updates)


def actor_critic_agent(
    config: ActorCriticConfig,
    env_spec: EnvSpec,
    total_updates: int,
    make_loss_fn: Callable[[Any, ActorCritic], Callable[..., Any]],
    update: Callable[[Parts, TrainState, Trajectory, Array], tuple[TrainState, Metrics]],
) -> Agent:
    """The `Agent` whose `update` is `update(parts, ...)`; `total_updates` calls of it make the run.
    The optimizer is `podrl.agents.optimizers.make_optimizer`'s; `config.HYPERPARAMS` has
    learning_rate and max_grad_norm fields, and `make_loss_fn(config, network)` returns
    `loss_fn(params, batch, key, hyperparams)`."""
    total_updates = check_total_updates(total_updates)
    # The env spec first meets the config here: ConfigError("torso") for a torso that cannot
    # read these observations, before anything is traced or compiled.
    network = make_network(env_spec, config.hidden_sizes, config.activation, config.torso, config.shared_torso,
                           config.core, config.core_size, config.torso_per_key)
    num_params = count_params(network, env_spec)
    dist = action_distribution(env_spec.discrete)

    def optimizer_for(hyperparams):
        return make_optimizer(config, total_updates, num_params, hyperparams.learning_rate, hyperparams.max_grad_norm)

    optimizer, schedule = make_optimizer(config, total_updates, num_params)
    grad_fn = jax.value_and_grad(make_loss_fn(config, network), has_aux=True)
    parts = Parts(config, network, dist, optimizer, schedule, grad_fn, hyperparams_for(config), optimizer_for)
    return Agent(
        init=functools.partial(_init, parts),
        init_actor_state=functools.partial(initial_actor_state, network),
        act=functools.partial(_act, parts),
        act_greedy=functools.partial(_act_greedy, parts),
        update=functools.partial(update, parts),
    )


def _init(parts: Parts, key: Array, env_spec: EnvSpec) -> TrainState:
    params = parts.network.init(key, observations.zeros(env_spec.observation, (1,)))
    return TrainState(params, parts.optimizer.init(params), jnp.zeros((), jnp.int32))


def _act(parts: Parts, params, actor_state, observation: Array, key: Array):
    """Samples from pi; extras: "log_prob" `[B]` (log mu, the behaviour policy) and "value" `[B]`."""
    dist_params, value, actor_state = act_step(parts.network, params, actor_state, observation)
    action = parts.dist.sample(key, dist_params)
    extras = {"log_prob": parts.dist.log_prob(dist_params, action), "value": value}
    return action, extras, actor_state


def _act_greedy(parts: Parts, params, actor_state, observation: Array):
    dist_params, _, actor_state = act_step(parts.network, params, actor_state, observation)
    return parts.dist.mode(dist_params), actor_state


def sgd_step(parts: Parts, key: Array, carry, minibatch):
    """One optimizer step on `minibatch`, gradients averaged across learner shards.

    `carry` is `(params, opt_state)`; returns `(carry, metrics {name: []})`, a `lax.scan` body.
    The loss gets `parts.hyperparams` as its fourth argument when there are any (actor-critic).
    """
    params, opt_state = carry
    hyperparams = () if parts.hyperparams is None else (parts.hyperparams,)
    (_, metrics), grads = learner_value_and_grad(parts.grad_fn, params, minibatch, key, *hyperparams)
    updates, opt_state = parts.optimizer.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), metrics


def shuffled_epoch(parts: Parts, batch: Any, carry, key: Array):
    """One pass over an `N`-transition batch (every leaf `[N, ...]`) in `parts.config.num_minibatches`
    shuffled minibatches `[N / m, ...]`, `sgd_step` on each; a `lax.scan` body over epochs' keys."""
    m = parts.config.num_minibatches
    perm = jax.random.permutation(key, jax.tree.leaves(batch)[0].shape[0])
    minibatches = jax.tree.map(lambda x: x[perm].reshape((m, -1) + x.shape[1:]), batch)
    return jax.lax.scan(functools.partial(sgd_step, parts, key), carry, minibatches)


def finish_update(
    parts: Parts, train_state: TrainState, params, opt_state, metrics: Metrics
) -> tuple[TrainState, Metrics]:
    """The next `TrainState`, and `metrics` (stacked per step, `[...]`) meaned to `[]` across
    steps (this shard's: the layout averages them over the learner shards), plus the
    "learning_rate" at this update's first optimizer step."""
    metrics = jax.tree.map(jnp.mean, metrics)
    steps_before = train_state.update_step * parts.config.num_optimizer_steps(1)
    metrics["learning_rate"] = jnp.asarray(parts.learning_rate(steps_before), jnp.float32)
    return train_state._replace(params=params, opt_state=opt_state, update_step=train_state.update_step + 1), metrics
