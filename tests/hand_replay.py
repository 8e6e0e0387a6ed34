"""Hand-built replays and networks for the replay agents' update tests (test_targets.py,
test_importance_weights.py, test_gradient_paths.py): an R2D2 prioritised replay filled with known steps
and known priorities, Q heads set to constants (kernels 0), NumPy transcriptions of the n-step targets
and of the importance weights, and a gradient step run as a layout runs it on one device."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P

import podrl.envs
from podrl.agents import prioritised, sum_tree
from podrl.agents.r2d2 import R2D2Config
from podrl.agents.r2d2 import agent as r2d2_agent
from podrl.agents.r2d2.losses import Step
from podrl.core.mesh import data_mesh
from references import numpy_h, numpy_inverse_h

R2D2_SPEC = podrl.envs.env_spec(podrl.envs.make("RecallCue-v0"))  # observations [3], 2 actions
T, B, ROLLOUTS = 8, 3, 2
R2D2 = R2D2Config(core_size=8, hidden_sizes=(8,), burn_in=2, sequence_length=4, sequence_period=2, n_step=2,
                  gamma=0.8, priority_exponent=0.7, importance_exponent=0.35, priority_eta=0.6,
                  buffer_size=ROLLOUTS * T * B, min_fill=T * B, batch_size=64, replay_ratio=1 / (T * B),
                  target_update_period=1, target_tau=0.3, max_grad_norm=1e6)
"""Sequences of 2 + 4 steps every 2 steps, 2-step returns; every exponent, eta, gamma and the target update
set apart from their defaults (so a field read as its default changes the numbers)."""


def on_one_device(fn: Callable) -> Callable:
    """`fn` jitted inside `shard_map` over a one-device data mesh (its `pmean`s need the learner axis), the
    varying-value check off (one shard: what varies over the learners and what does not are the same values)."""
    return jax.jit(jax.shard_map(fn, mesh=data_mesh(jax.devices()[:1]), in_specs=P(), out_specs=P(), check_vma=False))


def with_sgd(parts: Any) -> Any:
    """`parts` whose optimizer is plain SGD with step 1: a gradient step moves the params by -gradient."""
    return parts._replace(optimizer=optax.sgd(1.0))


def constant_heads(params: Any, q: np.ndarray, dueling: bool = True) -> Any:
    """R2D2 params whose Q(o, a) = q[a] for every observation and state: the head streams' kernels 0, the
    advantage bias q and the value bias mean(q) (Q = V + A - mean A), or the advantage bias q alone."""
    heads = dict(params["params"])
    heads["advantage"] = {"Dense_0": {"kernel": jnp.zeros_like(heads["advantage"]["Dense_0"]["kernel"]),
                                      "bias": jnp.asarray(q, jnp.float32)}}
    if dueling:
        heads["value"] = {"Dense_0": {"kernel": jnp.zeros_like(heads["value"]["Dense_0"]["kernel"]),
                                      "bias": jnp.full((1,), np.mean(q), jnp.float32)}}
    return {"params": heads}


def r2d2_steps(seed: int, truncations: bool = True) -> Step:
    """`ROLLOUTS * T` steps of B envs, NumPy `[ROLLOUTS * T, B]`: random observations, actions and rewards,
    terminations and (unless not `truncations`) truncations sprinkled (about one step in six ends an
    episode). A batch with a truncation bootstraps every step from the target network's own pass over
    the next observations; one without takes Q(o'_t) from its unroll's step t + 1."""
    rng = np.random.default_rng(seed)
    shape = (ROLLOUTS * T, B)
    end = rng.uniform(size=shape)
    obs = rng.normal(size=shape + (3,)).astype(np.float32)
    return Step(obs, rng.integers(0, 2, size=shape).astype(np.int32), rng.normal(size=shape).astype(np.float32),
                np.where(end < 0.08, 0.0, 1.0).astype(np.float32), (end > 0.92) & truncations,
                rng.normal(size=shape + (3,)).astype(np.float32))


def r2d2_replay(config: R2D2Config, steps: Step, seed: int) -> tuple[prioritised.PrioritisedReplay, np.ndarray]:
    """The R2D2 replay holding `steps` (added a rollout at a time; no wrap) with random priorities in
    [0.2, 3] set on its drawable sequences (stored as p^alpha); returns it and those priorities by leaf
    (0: not drawable)."""
    parts = r2d2_agent.make_parts(config, R2D2_SPEC, 10)
    replay = r2d2_agent._init(parts, jax.random.key(0), R2D2_SPEC).shard_state
    add = r2d2_agent.replay_pieces(parts).add
    carry = replay.start_state
    for k in range(ROLLOUTS):
        rollout = jax.tree.map(lambda x: jnp.asarray(x[k * T:(k + 1) * T]), steps)
        starts = jax.tree.map(lambda s: jnp.zeros((T // config.sequence_period, B) + s.shape[1:], s.dtype), carry)
        replay = add(replay, prioritised.SequenceItems(rollout, starts))
    drawable = np.flatnonzero(np.asarray(sum_tree.leaves(replay.priorities.tree)))
    priority = np.zeros(len(sum_tree.leaves(replay.priorities.tree)), np.float32)
    priority[drawable] = np.random.default_rng(seed).uniform(0.2, 3.0, size=drawable.size)
    priorities = prioritised.set_priorities(replay.priorities, jnp.asarray(drawable), jnp.asarray(priority[drawable]),
                                            config.priority_exponent)
    return replay._replace(priorities=priorities._replace(max_priority=jnp.ones((), jnp.float32))), priority


def numpy_importance_weights(priority: np.ndarray, drawn: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """Schaul et al. 2016, sec. 3.3-3.4: P(i) = p_i^alpha / sum_k p_k^alpha, w_i = (N P(i))^-beta, normalised by
    the drawn batch's largest weight."""
    p = priority.astype(np.float64) ** alpha
    w = (len(priority) * p[drawn] / p.sum()) ** -beta
    return w / w.max()


def numpy_r2d2_targets(config: R2D2Config, steps: Step, start: int, column: int, bootstrap: float) -> np.ndarray:
    """y `[m]` of the learned steps of the sequence of env `column` starting at step `start` (Kapturowski et
    al. 2019, sec. 2): h(sum_{k<m} gamma^k r_{t+k} + gamma^m prod(discounts) h^-1(bootstrap)), m <= n steps, cut
    after an episode end and at the sequence's end; `bootstrap` is Q_target(o', a*), the same at every step
    (constant heads)."""
    end = start + config.window
    ys = []
    for t in range(start + config.burn_in, end):
        ret, weight, k = 0.0, 1.0, t
        while True:
            ret += weight * float(steps.reward[k, column])
            weight *= config.gamma * float(steps.discount[k, column])
            if steps.discount[k, column] == 0 or steps.truncated[k, column] or k + 1 - t == config.n_step \
                    or k + 1 == end:
                break
            k += 1
        value = ret + weight * numpy_inverse_h(bootstrap) if config.value_rescaling else ret + weight * bootstrap
        ys.append(numpy_h(value) if config.value_rescaling else value)
    return np.array(ys)


def drawn_windows(config: R2D2Config, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`(start step [N], env column [N])` of drawn sequences (leaf = (start / period) * B + column)."""
    return (index // B) * config.sequence_period, index % B


def replace(config: Any, **changes: Any) -> Any:
    return dataclasses.replace(config, **changes)
