"""What the continuous-control agents (SAC, TD3) share: the twin critic, the action scaling to
the env's bounds, warm-up acting, the learner state, the optimizer step and the replay update.

**Actions.** The actor and the critics work in the normalized box `u in [-1, 1]^A` (A: the
flattened action size); `act` returns `ActionBounds.to_env(u)`, the env's own `[low, high]`,
and the learner maps the stored env actions back with `from_env` (as Stable-Baselines3 and sbx
do; the SAC log-density and its target entropy -A are those of `u`).

**Params.** `TrainState.params` is what actors need:

    {"actor": <flax params of the actor Tower>, "warmup": float32 []}

`warmup` is 1 while the rollout these params act for is one of the first `warmup_steps`
transitions of each learner shard (uniform random actions in the box, no gradient steps
yet), else 0; `init` writes the first value and each `update` the next one, as the
value-based agents' epsilon travels (`podrl.agents.q_learning`). The critics, the target networks,
the optimizer states and SAC's temperature stay on the learners (`ContinuousLearnerState`).

**Update.** `update` is the replay frame `podrl.agents.off_policy.replay_update` with the pieces of
`replay_pieces`: it adds the shard's `[T, B]` rollout to its replay buffer as 1-step transitions,
then (once it holds `warmup_steps`) scans `round(replay_ratio * T * B)` gradient steps of the
agent's own `sgd_step(buffer, (actor params, learner state), key)`. Every gradient goes through
`podrl.core.parallel.learner_value_and_grad` and `optax.apply_updates` (`optimizer_step`).
Nothing here mentions devices, threads or layouts.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any, Callable, NamedTuple, Sequence

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from podrl.agents import replay
from podrl.agents.inputs import torso_input
from podrl.agents.networks import Tower
from podrl.agents.off_policy import ReplayPieces, replay_update, same_step
from podrl.agents.optimizers import constant_optimizer
from podrl.agents.torsos import flatten_obs
from podrl.core.errors import ConfigError
from podrl.core.parallel import learner_value_and_grad
from podrl.core.types import Agent, Metrics, TrainState, Trajectory, no_actor_state
from podrl.envs import observations
from podrl.envs.observations import is_nested
from podrl.envs.types import EnvSpec

Array = jax.Array


class TwinCritic(nn.Module):
    """`(observation [..., *obs], u [..., A]) -> Q [..., num_critics]`: `num_critics` independent
    `podrl.agents.networks.Tower`s (an MLP torso and a linear head, params `q0`, `q1`, ...) over the
    concatenated flattened observation and normalized action (Fujimoto et al. 2018's twin critics)."""

    obs_shape: tuple[int, ...]
    action_size: int
    hidden_sizes: Sequence[int] = (256, 256)
    activation: str = "relu"
    num_critics: int = 2

    @nn.compact
    def __call__(self, observation: Array, u: Array) -> Array:
        x = jnp.concatenate([flatten_obs(observation, self.obs_shape), u.astype(jnp.float32)], axis=-1)
        towers = [Tower((x.shape[-1],), 1, 1.0, "mlp", tuple(self.hidden_sizes), self.activation, name=f"q{i}")
                  for i in range(self.num_critics)]
        return jnp.concatenate([tower(x) for tower in towers], axis=-1)


class ActionBounds(NamedTuple):
    """The env's action box: `low`, `high` float32 `[A]` (flattened, finite, low < high) and its
    `shape` `[*action_shape]`."""

    low: np.ndarray
    high: np.ndarray
    shape: tuple[int, ...]

    def to_env(self, u: Array) -> Array:
        """`u [..., A]` in [-1, 1] -> env actions `[..., *shape]` in [low, high]."""
        a = self.low + 0.5 * (u + 1.0) * (self.high - self.low)
        return a.reshape(u.shape[:-1] + self.shape).astype(jnp.float32)

    def from_env(self, a: Array) -> Array:
        """Env actions `[..., *shape]` -> `u [..., A]`, clipped to [-1, 1]."""
        flat = a.reshape(a.shape[: a.ndim - len(self.shape)] + (-1,)).astype(jnp.float32)
        return jnp.clip(2.0 * (flat - self.low) / (self.high - self.low) - 1.0, -1.0, 1.0)


def action_bounds(agent: str, env_spec: EnvSpec) -> ActionBounds:
    """The `ActionBounds` of `env_spec`; ConfigError("env") naming `agent` for a discrete action space
    or an action spec without finite bounds (nothing is traced)."""
    spec = env_spec.action
    if env_spec.discrete:
        raise ConfigError("env", f"agent {agent!r} needs a continuous (Box) action space, but this environment's "
                          f"action spec is {spec!r}; use dqn, pqn, ppo or impala for discrete actions")
    shape = tuple(int(d) for d in spec.shape)
    low, high = (np.broadcast_to(np.asarray(getattr(spec, name, np.nan), np.float64), shape).reshape(-1)
                 for name in ("minimum", "maximum"))
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(low < high)):
        raise ConfigError("env", f"agent {agent!r} scales its tanh-squashed actions to the env's bounds, but this "
                          f"environment's action spec {spec!r} has no finite bounds low < high")
    return ActionBounds(low.astype(np.float32), high.astype(np.float32), shape)


class ContinuousParts(NamedTuple):
    """What the continuous agents' pure functions close over (static Python objects)."""

    config: Any  # the agent's frozen config, a `ContinuousControlConfig`
    actor: Tower  # observation [..., *obs] -> actor output [..., K] (the agent reads it)
    critic: TwinCritic
    bounds: ActionBounds
    explore: Callable[[Array, Array], Array]  # (actor output [B, K], key) -> u [B, A], the behaviour policy
    greedy: Callable[[Array], Array]  # actor output [B, K] -> u [B, A], the evaluation policy
    actor_optimizer: optax.GradientTransformation
    critic_optimizer: optax.GradientTransformation


class ContinuousLearnerState(NamedTuple):
    """`TrainState.opt_state` of SAC and TD3: the learner-only state besides the buffer (the same on every shard).

    Attributes:
      critic: the `TwinCritic` params.
      critic_target: their Polyak-averaged copy.
      actor_target: TD3's Polyak-averaged actor params; () for SAC (its targets use the online actor).
      critic_optimizer: Adam state over `critic`.
      actor_optimizer: Adam state over `params["actor"]`.
      temperature: SAC's `(log_alpha [], its Adam state)`; () for TD3.
      sgd_steps: int32 `[]`, gradient steps taken (drives TD3's policy delay).
    """

    critic: Any
    critic_target: Any
    actor_target: Any
    critic_optimizer: Any
    actor_optimizer: Any
    temperature: Any
    sgd_steps: Array


def continuous_parts(agent: str, config: Any, env_spec: EnvSpec, outputs_per_action: int,
                     explore: Callable[..., Array], greedy: Callable[[Array], Array]) -> ContinuousParts:
    """The `ContinuousParts` for `env_spec` (ConfigError("env") unless its actions are a bounded box):
    an actor `Tower` with `outputs_per_action * A` outputs and the twin critic, both MLPs of the
    config's `hidden_sizes` and `activation`; `explore(config, actor_output, key)`."""
    bounds = action_bounds(agent, env_spec)
    spec = env_spec.observation  # a nested one: the actor an encoder per leaf, the critics the leaves concatenated
    obs_shape = torso_input(env_spec, "mlp") if is_nested(spec) else tuple(int(d) for d in spec.shape)
    size = int(bounds.low.size)
    actor = Tower(obs_shape, outputs_per_action * size, 0.01, "mlp", tuple(config.hidden_sizes), config.activation)
    critic = TwinCritic(obs_shape, size, tuple(config.hidden_sizes), config.activation)
    return ContinuousParts(config, actor, critic, bounds, functools.partial(explore, config), greedy,
                           constant_optimizer(config, config.actor_learning_rate),
                           constant_optimizer(config, config.critic_learning_rate))


def init_learner(parts: ContinuousParts, key: Array, env_spec: EnvSpec, actor_target: bool,
                 temperature: Any = ()) -> TrainState:
    """The initial `TrainState`: params `{"actor", "warmup"}`, a `ContinuousLearnerState` whose
    targets copy the online networks (`actor_target`: keep one for the actor), an empty buffer."""
    actor_key, critic_key = jax.random.split(key)
    obs = observations.zeros(env_spec.observation, (1,))
    actor = parts.actor.init(actor_key, obs)
    critic = parts.critic.init(critic_key, obs, jnp.zeros((1, parts.bounds.low.size), jnp.float32))
    learner = ContinuousLearnerState(critic, critic, actor if actor_target else (),
                                     parts.critic_optimizer.init(critic), parts.actor_optimizer.init(actor),
                                     temperature, jnp.zeros((), jnp.int32))
    buffer = replay.init(parts.config.buffer_size, replay.example_transition(env_spec))
    params = {"actor": actor, "warmup": _warmup(parts.config, jnp.zeros((), jnp.int32), 1)}
    return TrainState(params, learner, jnp.zeros((), jnp.int32), buffer)


def _warmup(config: Any, update_step: Array, items_per_update: int) -> Array:
    """float32 `[]`: 1 if the rollout after `update_step` updates of `items_per_update` transitions is still
    in the warm-up (uniform random actions); at step 0 it is 1 whenever warmup_steps > 0."""
    return (update_step * items_per_update < config.warmup_steps).astype(jnp.float32)


def act(parts: ContinuousParts, params, actor_state, observation: Array, key: Array):
    """`Agent.act`: env actions `[B, *action_shape]`, from the behaviour policy, or uniform in the box
    while `params["warmup"]` is 1; no extras; `actor_state` (()) passes through."""
    policy_key, uniform_key = jax.random.split(key)
    u = parts.explore(parts.actor.apply(params["actor"], observation), policy_key)
    uniform = jax.random.uniform(uniform_key, u.shape, u.dtype, -1.0, 1.0)
    u = jnp.where(params["warmup"] > 0, uniform, u)
    return parts.bounds.to_env(u), {}, actor_state


def act_greedy(parts: ContinuousParts, params, actor_state, observation: Array):
    """`Agent.act_greedy`: the evaluation policy's env actions `[B, *action_shape]` (no noise, no warm-up)."""
    return parts.bounds.to_env(parts.greedy(parts.actor.apply(params["actor"], observation))), actor_state


def twin_q_loss(q_tm1: Array, target_tm1: Array) -> Array:
    """0.5 * sum_i (Q_i(s, a) - y)^2 for one transition: `q_tm1` `[K]` the K critics, `target_tm1` `[]` y."""
    chex.assert_rank([q_tm1, target_tm1], [1, 0])
    return 0.5 * jnp.sum(jnp.square(q_tm1 - target_tm1))


def _critic_loss(critic: TwinCritic, critic_params, observation: Array, u: Array, target: Array):
    """Mean `twin_q_loss` over `[N]` sampled transitions; metrics "critic_loss", "q_mean"."""
    q = critic.apply(critic_params, observation, u)  # [N, K]
    loss = jnp.mean(jax.vmap(twin_q_loss)(q, target))
    return loss, {"critic_loss": loss, "q_mean": jnp.mean(q), "target_mean": jnp.mean(target)}


def optimizer_step(optimizer: optax.GradientTransformation, loss_fn: Callable[..., Any], params, opt_state,
                   *args: Any):
    """One step of `optimizer` on `loss_fn(params, *args) -> (loss, aux)`, gradients averaged across
    learners; returns `(params, opt_state, aux)`."""
    (_, aux), grads = learner_value_and_grad(jax.value_and_grad(loss_fn, has_aux=True), params, *args)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, aux


def critic_step(parts: ContinuousParts, learner: ContinuousLearnerState, sample: replay.Transition,
                target: Array) -> tuple[ContinuousLearnerState, Metrics]:
    """One Adam step of the twin critics toward the fixed targets `[N]` on `sample`'s `(s, a)`."""
    loss = functools.partial(_critic_loss, parts.critic)
    critic, optimizer, metrics = optimizer_step(parts.critic_optimizer, loss, learner.critic, learner.critic_optimizer,
                                                sample.observation, parts.bounds.from_env(sample.action), target)
    return learner._replace(critic=critic, critic_optimizer=optimizer), metrics


def polyak(online, target, tau: float):
    """target <- tau * online + (1 - tau) * target, leaf by leaf."""
    return optax.incremental_update(online, target, tau)


def _items(config: Any, traj: Trajectory) -> replay.Transition:
    """The `T * B` 1-step transitions of a `[T, B]` rollout, rewards scaled by `reward_scale`."""
    return replay.transitions(traj, 1, config.gamma, traj.reward.astype(jnp.float32) * config.reward_scale)


def _hand_on(config: Any, train_state: TrainState, actor, traj: Trajectory):
    """The next params (the actor, the warm-up flag of the next rollout) and metric "warmup" (1 if this
    rollout's actions were uniform)."""
    step = train_state.update_step + 1
    params = {"actor": actor, "warmup": _warmup(config, step, traj.reward.size)}
    return params, {"warmup": train_state.params["warmup"]}


def replay_pieces(parts: ContinuousParts, sgd_step: Callable[..., Any]) -> ReplayPieces:
    """The pieces of `podrl.agents.off_policy.replay_update` around the agent's `sgd_step`. Metrics:
    the agent's (zeros before learning starts), "learning", "replay_fill", "warmup"."""
    cfg = parts.config
    return ReplayPieces(cfg, cfg.warmup_steps, functools.partial(_items, cfg), same_step(sgd_step),
                        operator.itemgetter("actor"), functools.partial(_hand_on, cfg))


def continuous_agent(parts: ContinuousParts, init: Callable[[Array, EnvSpec], TrainState],
                     sgd_step: Callable[..., Any]) -> Agent:
    """The `Agent` around `parts`, the agent's `init(key, env_spec)` and its
    `sgd_step(buffer, (actor params, ContinuousLearnerState), key) -> (carry, metrics)`."""
    return Agent(init=init, init_actor_state=no_actor_state, act=functools.partial(act, parts),
                 act_greedy=functools.partial(act_greedy, parts),
                 update=functools.partial(replay_update, replay_pieces(parts, sgd_step)),
                 reshard_state=replay.redistribute)


def target_entropy(parts: ContinuousParts) -> float:
    """-A, the SAC target entropy of Haarnoja et al. 2018b (arXiv:1812.05905, sec. 5) for A action dims."""
    return -float(math.prod(parts.bounds.low.shape))
