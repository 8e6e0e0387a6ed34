"""Plumbing shared by the feed-forward actor-critic agents (PPO, IMPALA).

An agent module supplies only what is its own: `make_optimizer(config,
total_updates)`, `make_loss_fn(config, network)` and `update(parts, train_state,
trajectory [T, B], key)`; `actor_critic_agent` builds the `podrl.types.Agent`
around them, with the `ActorCritic` network of `agents.networks` (the config's `torso`,
`shared_torso`, `hidden_sizes`, `activation`), or with the config's `core` ("lstm",
"gru") the `agents.cores.RecurrentActorCritic`, whose core state is the actor state
(`[B, core_size]`, a `(c, h)` pair for lstm; `()` without a core), and `act` extras
"log_prob" `[B]` and "value" `[B]`. `sgd_step` and `finish_update` are the first and
last pieces of an `update`; they read only `config`, `optimizer`, `learning_rate` and
`grad_fn` of their parts, so the value-based agents (`agents.q_learning.QParts`) use them too.
"""

from __future__ import annotations

import functools
import numbers
from typing import Any, Callable, NamedTuple, Protocol, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from agents.cores import initial_actor_state
from agents.networks import ActionDistribution, ActorCritic, action_distribution, make_network
from agents.unroll import act_step
from envs.types import EnvSpec
from podrl.parallel import learner_value_and_grad, mean_across_learners
from podrl.types import Agent, Metrics, TrainState, Trajectory

Array = jax.Array


class ActorCriticConfig(Protocol):
    """The fields and methods of an agent config (`PPOConfig`, `ImpalaConfig`) used here."""

    hidden_sizes: Sequence[int]
    activation: str
    torso: str
    shared_torso: bool | None
    core: str
    core_size: int

    def num_optimizer_steps(self, total_updates: int) -> int: ...


class Parts(NamedTuple):
    """What the agent's pure functions close over (static Python objects)."""

    config: Any  # the agent's frozen config, an `ActorCriticConfig`
    network: ActorCritic  # or agents.cores.RecurrentActorCritic (config.core)
    dist: ActionDistribution
    optimizer: optax.GradientTransformation
    learning_rate: Callable[[Array], Array]  # optimizer step count -> step size
    grad_fn: Callable[..., Any]  # jax.value_and_grad(loss_fn, has_aux=True)
    rebuild: Callable[[Any], "Parts"] | None = None  # config (or HyperparamView) -> Parts with its values


class HyperparamView:
    """An agent config whose swept fields read the member's arrays (`TrainState.hyperparams`,
    float32 `[]` each, see `podrl.population`); every other attribute is the config's own."""

    def __init__(self, config: Any, hyperparams: dict[str, Array]):
        self._config, self._hyperparams = config, dict(hyperparams)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._hyperparams:
            return self._hyperparams[name]
        return getattr(self._config, name)


def with_hyperparams(parts: Parts, hyperparams: Any) -> Parts:
    """`parts` whose optimizer, loss and schedule read `hyperparams` ({field: array}) instead of the
    config's constants; `parts` itself when there are none (the unswept program is unchanged).
    The optimizer state's structure does not depend on the values, so states carry over."""
    if not hyperparams or parts.rebuild is None:
        return parts
    return parts.rebuild(HyperparamView(parts.config, hyperparams))


def lr_schedule(learning_rate: float, anneal: bool, num_steps: int) -> optax.Schedule:
    """`learning_rate` decayed linearly to 0 over `num_steps` optimizer steps if `anneal`, else constant.

    The constant is a linear schedule with equal ends, not `optax.constant_schedule`: the same
    float32 step size bit for bit, but PPO on CartPole (4 envs x 128 steps, one CPU device)
    ran 162-167k steps/s with it against 124k with `constant_schedule`'s Python float
    (measured in one process, alternating; the cause inside XLA:CPU was not traced).
    """
    return optax.linear_schedule(learning_rate, 0.0 if anneal else learning_rate, max(int(num_steps), 1))


FLATTEN_MAX_PARAMS = 100_000
"""Models up to this many parameters get their optimizer state flattened into one vector."""


def clipped_flat_optimizer(max_grad_norm: float, base: optax.GradientTransformation,
                           num_params: int | None = None) -> optax.GradientTransformation:
    """Global-norm clip then `base`, on one flattened vector for small models.

    `optax.flatten` turns the per-leaf elementwise clip/optimizer ops into one op
    each; on the op-overhead-bound CPU learner of small MLPs that is ~20% faster
    (CartPole, 9k params: 0.106 vs 0.181 ms per step). For big models the
    ravel/unravel copies dominate instead (a 3.6M-param MLP on Atari frames:
    25.6 vs 5.6 ms), so above `FLATTEN_MAX_PARAMS` the update stays per leaf.
    """
    chained = optax.chain(optax.clip_by_global_norm(max_grad_norm), base)
    small = num_params is None or num_params <= FLATTEN_MAX_PARAMS
    return optax.flatten(chained) if small else chained


def count_params(network: ActorCritic, env_spec: EnvSpec) -> int:
    """Parameter count of `network` on `env_spec`'s observations (shape-only, nothing is computed)."""
    obs = jax.ShapeDtypeStruct((1,) + tuple(env_spec.observation.shape), env_spec.observation.dtype)
    shapes = jax.eval_shape(network.init, jax.random.key(0), obs)
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
    make_optimizer: Callable[..., tuple[optax.GradientTransformation, Callable[[Array], Array]]],
    make_loss_fn: Callable[[Any, ActorCritic], Callable[..., Any]],
    update: Callable[[Parts, TrainState, Trajectory, Array], tuple[TrainState, Metrics]],
) -> Agent:
    """The `Agent` whose `update` is `update(parts, ...)`; `total_updates` calls of it make the run."""
    total_updates = check_total_updates(total_updates)
    # The env spec first meets the config here: ConfigError("torso") for a torso that cannot
    # read these observations, before anything is traced or compiled.
    network = make_network(env_spec, config.hidden_sizes, config.activation, config.torso, config.shared_torso,
                           config.core, config.core_size)
    num_params = count_params(network, env_spec)
    dist = action_distribution(env_spec.discrete)

    def build(cfg) -> Parts:  # also called inside `update` with a HyperparamView (a population)
        optimizer, schedule = make_optimizer(cfg, total_updates, num_params)
        grad_fn = jax.value_and_grad(make_loss_fn(cfg, network), has_aux=True)
        return Parts(cfg, network, dist, optimizer, schedule, grad_fn, build)

    parts = build(config)
    return Agent(
        init=functools.partial(_init, parts),
        init_actor_state=functools.partial(initial_actor_state, network),
        act=functools.partial(_act, parts),
        act_greedy=functools.partial(_act_greedy, parts),
        update=functools.partial(update, parts),
    )


def _init(parts: Parts, key: Array, env_spec: EnvSpec) -> TrainState:
    obs = jnp.zeros((1,) + tuple(env_spec.observation.shape), env_spec.observation.dtype)
    params = parts.network.init(key, obs)
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
    """
    params, opt_state = carry
    (_, metrics), grads = learner_value_and_grad(parts.grad_fn, params, minibatch, key)
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
    steps and learner shards, plus the "learning_rate" at this update's first optimizer step."""
    metrics = mean_across_learners(jax.tree.map(jnp.mean, metrics))
    steps_before = train_state.update_step * parts.config.num_optimizer_steps(1)
    metrics["learning_rate"] = jnp.asarray(parts.learning_rate(steps_before), jnp.float32)
    return train_state._replace(params=params, opt_state=opt_state, update_step=train_state.update_step + 1), metrics
