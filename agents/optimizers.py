"""Every agent's optimizer, built here and nowhere else: a global-norm clip, then the config's optax
optimizer (Adam or RMSProp, `podrl.agents.config_base.OptimizerConfig.optimizer_args`), and the
schedule of its step size. Three kinds, by how the step size moves over a run:

- `make_optimizer` (PPO, IMPALA, PQN): annealed over the run's optimizer steps
  (`config.num_optimizer_steps`); the schedule is inside optax, whose state counts the steps.
- `per_update_optimizer` (DQN, MuZero): annealed over the run's updates; each update sets
  `schedule(update_step)` into the state (`set_learning_rate`) before its gradient steps, whose
  number per update depends on the rollout shape.
- `constant_optimizer` (SAC and TD3: actor, critics): a fixed step size; SAC's temperature takes
  `base_optimizer` alone (no clip).

Small models get the clip and the optimizer on one flattened vector (`clipped_flat_optimizer`).
Every function returns optax transformations: pure, nothing here knows devices or layouts.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import optax

Array = jax.Array

OPTAX_OPTIMIZERS = {"adam": optax.adam, "rmsprop": optax.rmsprop}
"""The optax factory of each name `OptimizerConfig.optimizer_args` may return."""

FLATTEN_MAX_PARAMS = 100_000
"""Models up to this many parameters get their optimizer state flattened into one vector."""


def lr_schedule(learning_rate: float, anneal: bool, num_steps: int) -> optax.Schedule:
    """`learning_rate` decayed linearly to 0 over `num_steps` optimizer steps if `anneal`, else constant.

    The constant is a linear schedule with equal ends, not `optax.constant_schedule`: the same
    float32 step size bit for bit, but PPO on CartPole (4 envs x 128 steps, one CPU device)
    ran 162-167k steps/s with it against 124k with `constant_schedule`'s Python float
    (measured in one process, alternating; the cause inside XLA:CPU was not traced).
    """
    return optax.linear_schedule(learning_rate, 0.0 if anneal else learning_rate, max(int(num_steps), 1))


def base_optimizer(config: Any, learning_rate: Any, inject: bool = False) -> optax.GradientTransformation:
    """The config's optax optimizer (`config.optimizer_args()`) with `learning_rate` (a float,
    a schedule); with `inject`, wrapped in `optax.inject_hyperparams` (its hyperparameters live
    in the state, where an update may set them)."""
    name, kwargs = config.optimizer_args()
    factory = OPTAX_OPTIMIZERS[name]
    return (optax.inject_hyperparams(factory) if inject else factory)(learning_rate=learning_rate, **kwargs)


def clipped_flat_optimizer(max_grad_norm: float, base: optax.GradientTransformation,
                           num_params: int | None = None) -> optax.GradientTransformation:
    """Global-norm clip then `base`, on one flattened vector for small models.

    `optax.flatten` turns the per-leaf elementwise clip/optimizer ops into one op
    each; on the op-overhead-bound CPU learner of small MLPs that is ~20% faster
    (CartPole, 9k params: 0.106 vs 0.181 ms per step). For big models the
    ravel/unravel copies dominate instead (a 3.6M-param MLP on Atari frames:
    25.6 vs 5.6 ms), so above `FLATTEN_MAX_PARAMS` the update stays per leaf
    (`num_params` None: flattened).
    """
    chained = optax.chain(optax.clip_by_global_norm(max_grad_norm), base)
    small = num_params is None or num_params <= FLATTEN_MAX_PARAMS
    return optax.flatten(chained) if small else chained


def make_optimizer(config: Any, total_updates: int, num_params: int | None = None,
                   learning_rate: Array | float | None = None,
                   max_grad_norm: Array | float | None = None) -> tuple[optax.GradientTransformation, Any]:
    """`(optimizer, schedule)` of an `podrl.agents.config_base.OptimizerConfig`: global-norm clip then
    its optimizer, flattened for small models (`num_params`), the step size annealed over
    `config.num_optimizer_steps(total_updates)` (`lr_schedule`; `schedule(optimizer step count)`).
    `learning_rate` and `max_grad_norm` replace the config's (a population member's arrays) when given."""
    learning_rate = config.learning_rate if learning_rate is None else learning_rate
    max_grad_norm = config.max_grad_norm if max_grad_norm is None else max_grad_norm
    schedule = lr_schedule(learning_rate, config.anneal_lr, config.num_optimizer_steps(total_updates))
    return clipped_flat_optimizer(max_grad_norm, base_optimizer(config, schedule), num_params), schedule


def per_update_optimizer(config: Any, total_updates: int,
                         num_params: int | None = None) -> tuple[optax.GradientTransformation, Any]:
    """`(optimizer, schedule)`: global-norm clip then the config's optimizer, whose step size the
    update sets to `schedule(update_step)` (an injected hyperparameter, `set_learning_rate`) before
    its gradient steps: their number per update depends on the rollout shape, so the anneal is per update."""
    schedule = lr_schedule(config.learning_rate, config.anneal_lr, total_updates)
    base = base_optimizer(config, config.learning_rate, inject=True)
    return clipped_flat_optimizer(config.max_grad_norm, base, num_params), schedule


def set_learning_rate(opt_state: Any, learning_rate: Array) -> Any:
    """`opt_state` of a `per_update_optimizer` with its step size set to `learning_rate` (float32 `[]`)."""
    return optax.tree_utils.tree_set(opt_state, learning_rate=learning_rate)


def constant_optimizer(config: Any, learning_rate: float,
                       num_params: int | None = None) -> optax.GradientTransformation:
    """Global-norm clip (`config.max_grad_norm`) then the config's optimizer at the fixed `learning_rate`."""
    return clipped_flat_optimizer(config.max_grad_norm, base_optimizer(config, learning_rate), num_params)


def moved_here(package: str, moved: dict[str, str]) -> Callable[[str], Any]:
    """An agent package's module `__getattr__` for the optimizer names it once re-exported (`moved`: its
    name -> the name here): their import fails with a sentence saying where each is now (an ImportError:
    Python would swap an AttributeError for its own message in `from package import name`)."""
    def __getattr__(name: str) -> Any:
        if name in moved:
            raise ImportError(f"{package}.{name} is no longer re-exported: import it from its one home, "
                                 f"`from podrl.agents.optimizers import {moved[name]}`")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return __getattr__
