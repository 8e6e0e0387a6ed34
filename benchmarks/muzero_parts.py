"""The child side of benchmarks.muzero's `parts` measurement: MuZero's acting and learning
split into search, model inference, replay and SGD, each piece jitted and timed alone on one device.

Acting (one `Agent.act` call on the `[B]` observations of `B = envs_per_thread` host envs):
  act_s          the whole call: mctx's search with `num_simulations` simulations.
  inference_s    the model work of that search in one compiled call: the representation and
                 prediction networks on the `[B]` observations (the root), then `num_simulations`
                 dynamics + prediction steps on `[B]` hidden states (mctx calls its recurrent_fn
                 once per simulation for the whole batch), in a `lax.scan`.
  tree_s         act_s - inference_s (floored at 0): mctx's tree work (selection, expansion
                 bookkeeping, backups, the root's action choice).
Learning (one `Agent.update` on a real `[T, B]` rollout of the same envs, through Sebulba's learner
step on one device, the buffer past `min_fill` so it takes its gradient steps):
  update_s       the whole update.
  replay_s       the update's replay work alone: adding the rollout, then for each of its
                 `sgd_steps(T, B)` gradient steps sampling `batch_size` windows and computing their
                 targets (n-step returns with the target network's bootstrap values, policy targets);
  sgd_s          update_s - replay_s (floored at 0): the unrolled loss, its gradient, Adam, the target update.
Each figure is the median of `repeats` calls after one compiling call. The pieces run alone, so
their sum need not equal what a Sebulba update measures while the actor threads share the cores.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

REPEATS, QUICK_REPEATS = 20, 2


def median_seconds(call: Callable[[], Any], repeats: int) -> float:
    """Median wall seconds of `call()` (its outputs blocked on) over `repeats` calls after a first, untimed one."""
    import jax

    jax.block_until_ready(call())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def real_rollout(env, act, params, observation, key, length: int):
    """`length` steps of the host vector `env` acted on by the jitted `act`: a numpy `[T, B]` Trajectory."""
    import jax
    import numpy as np

    from podrl.sebulba.transport import stack_rollout, step_record

    steps = []
    for t in range(length):
        action, extras, _ = jax.device_get(act(params, (), observation, jax.random.fold_in(key, t)))
        ts = env.step(action)
        steps.append(step_record(observation, action, ts.reward, ts.discount, ts.extras["truncated"],
                                 ts.extras["next_obs"], extras))
        observation = np.asarray(ts.observation)
    return stack_rollout(steps, ()), observation


def time_acting(parts, act, params, observation, key, repeats: int) -> dict[str, float]:
    """act_s, inference_s, tree_s (see the module docstring) on `[B]` observations; `act`: the jitted `Agent.act`."""
    import jax
    import jax.numpy as jnp

    from podrl.agents.muzero import search

    cfg, network = parts.config, parts.network
    recurrent_fn = search.make_recurrent_fn(network, cfg.support_size, cfg.gamma)
    actions = jax.random.randint(key, (cfg.num_simulations, observation.shape[0]), 0, parts.env_spec.action.num_values)

    def model_only(p, o):
        root = search.root(network, cfg.support_size, p, o)

        def simulation(state, action):
            output, state = recurrent_fn(p, key, action, state)
            return state, output.value + output.reward + jnp.sum(output.prior_logits, axis=-1)

        state, values = jax.lax.scan(simulation, root.embedding, actions)
        return jnp.sum(values) + jnp.sum(root.value) + jnp.sum(state)

    model = jax.jit(model_only)
    out = {"act_s": median_seconds(lambda: act(params, (), observation, key), repeats),
           "inference_s": median_seconds(lambda: model(params, observation), repeats)}
    out["tree_s"] = max(out["act_s"] - out["inference_s"], 0.0)
    return out


def replay_work(parts, stride: int, num_steps: int) -> Callable:
    """`(buffer, items, target_params, key) -> checksum`: the update's replay work alone (add, then per
    gradient step: sample windows and compute their targets); the checksum keeps XLA from dropping it."""
    import jax
    import jax.numpy as jnp

    from podrl.agents import replay
    from podrl.agents.muzero.agent import batch_from_windows

    cfg = parts.config

    def work(buffer, items, target_params, key):
        buffer = replay.add(buffer, items)

        def one(total, step_key):
            windows = replay.sample_windows(buffer, step_key, cfg.batch_size, cfg.window_length, stride)
            batch = batch_from_windows(parts, target_params, windows)
            return total + sum(jnp.sum(x.astype(jnp.float32)) for x in jax.tree.leaves(batch)), None

        return jax.lax.scan(one, jnp.zeros(()), jax.random.split(key, num_steps))[0]

    return jax.jit(work)


def time_learning(parts, agent, spec, trajectory, key, repeats: int) -> dict[str, float]:
    """update_s, replay_s, sgd_s (see the module docstring) for the numpy `[T, B]` `trajectory`."""
    import jax
    import numpy as np

    from podrl.agents.muzero.agent import rollout_steps
    from podrl.agents.returns import learner_rewards
    from podrl.core.learner_state import init_on_mesh
    from podrl.core.mesh import data_mesh
    from podrl.sebulba.learner import make_learner_step
    from podrl.sebulba.transport import learner_shardings, place_on_learners

    cfg = parts.config
    t, b = trajectory.reward.shape
    mesh = data_mesh(jax.devices()[:1])
    step = make_learner_step(agent, mesh, 1)
    piece = place_on_learners(trajectory, learner_shardings(mesh, trajectory))
    shard_keys = jax.random.split(key, 1)
    state = init_on_mesh(agent, key, spec, mesh)
    index = 0
    while index * t * b < cfg.min_fill:  # fill the buffer: the timed updates take their gradient steps
        state, _ = step(state, shard_keys, np.int32(index), piece)
        index += 1

    learned = []

    def update():
        nonlocal state, index
        state, metrics = step(state, shard_keys, np.int32(index), piece)
        index += 1
        learned.append(metrics["learning"])
        return metrics

    out = {"update_s": median_seconds(update, repeats)}
    if not all(float(x) == 1.0 for x in learned):
        raise RuntimeError("a timed update took no gradient steps (the buffer is below min_fill)")
    buffer = jax.tree.map(lambda x: x[0], jax.device_get(state.shard_state))  # this one shard's buffer
    items = rollout_steps(jax.device_get(trajectory), learner_rewards(trajectory.reward, cfg.reward_clip, 1.0))
    work = replay_work(parts, b, cfg.sgd_steps(t, b))
    target = jax.device_get(state.opt_state.target)
    out["replay_s"] = median_seconds(lambda: work(buffer, items, target, key), repeats)
    out["sgd_s"] = max(out["update_s"] - out["replay_s"], 0.0)
    out["sgd_steps_per_update"] = cfg.sgd_steps(t, b)
    return out


def measure_parts(m, quick: bool) -> dict[str, Any]:
    """Acting and learning pieces of MuZero for Measurement `m` (`m.agent_fields`: the config's fields)."""
    import jax

    from benchmarks.sebulba_measure import agent_config_for
    from podrl.agents.muzero.agent import agent_from_parts, make_parts
    from podrl.envs.adapters.make import make_host_env
    from podrl.envs.types import EnvSpec

    repeats = QUICK_REPEATS if quick else REPEATS
    env = make_host_env(m.env, m.envs_per_thread, seed=m.seed)
    try:
        spec = EnvSpec(env.observation_spec(), env.action_spec())
        config = agent_config_for(m)
        parts = make_parts(config, spec, total_updates=1000)
        agent = agent_from_parts(parts)
        act = jax.jit(agent.act)  # compiled once: the rollout's acting and the timed calls
        key = jax.random.key(m.seed)
        params = agent.init(key, spec).params
        observation = env.reset(m.seed).observation
        trajectory, observation = real_rollout(env, act, params, observation, key, m.rollout_length)
        return {**time_acting(parts, act, params, observation, key, repeats),
                **time_learning(parts, agent, spec, trajectory, key, repeats), "repeats": repeats}
    finally:
        env.close()
