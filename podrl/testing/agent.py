"""`check_agent`: does an agent keep the `podrl.core.types.Agent` contract? gymnasium's `check_env` for agents.

    from podrl.testing import check_agent
    report = check_agent(A2CConfig(), "CartPole-v1")      # raises AgentCheckError at the first broken rule

It builds the agent for the env's spec and checks, on a tiny batch (`rollout_length` steps of the
fewest envs the config's `check_batch` accepts), each rule in `RULES`; a broken one raises
`AgentCheckError` whose message is one sentence naming the rule and the fix. The acting and
update programs are compiled once each and shared by the rules. The learner-shard rule needs two
devices (on a CPU: `jax.config.update("jax_num_cpu_devices", 2)` before JAX starts, or
`XLA_FLAGS=--xla_force_host_platform_device_count=2`); with one it is skipped and the report says so.
"""

from __future__ import annotations

import tempfile
import warnings
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from podrl.core.types import Agent, TrainState, env_columns, reset_finished_actor_state
from podrl.envs.registry import make
from podrl.envs.types import EnvSpec, JaxEnv
from podrl.testing.batches import TrajectoryMaker, sample_observations, tiny_envs
from podrl.testing.errors import AgentCheckError
from podrl.testing.shards import check_learner_shards, layout_update, of_shard, on_shards

RULES = {
    "init": "init(key, env_spec) returns a TrainState whose update_step is an int32 []",
    "actor state": "init_actor_state(B[, columns]) leaves lead with B; act and act_greedy return it unchanged in "
                   "structure, shape and dtype",
    "act": "act returns (action [B, *action_spec.shape] of the spec's kind, extras {name: [B, ...]}, actor state)",
    "act_greedy": "act_greedy returns (action like act's, actor state)",
    "actor-state reset": "a row the layout resets at its episode's end acts as a fresh actor, the other rows as "
                         "before (rows are independent)",
    "determinism": "the same params, inputs and key give the same actions and the same update, bit for bit",
    "update": "update keeps the train state's structure, shapes and dtypes and adds 1 to update_step",
    "metrics": "update's metrics are a dict of numbers, shape []",
    "checkpoint": "the train state survives a checkpoint round trip (arrays only)",
    "learner shards": "2 learner shards that each hold the same batch end where 1 shard holding it does "
                      "(gradients and statistics averaged, not summed)",
}
"""Each rule `check_agent` checks, by the name its error gives, and what it asks."""


class AgentReport(NamedTuple):
    """What `check_agent` checked: the rules that held, the rules it could not check (and why), and notes."""

    passed: tuple[str, ...]
    skipped: tuple[str, ...]
    notes: tuple[str, ...]


def check_agent(config: Any, env: str | JaxEnv | EnvSpec, *, rollout_length: int = 8, num_envs: int | None = None,
                seed: int = 0, updates: int = 2, devices: Sequence[jax.Device] | None = None) -> AgentReport:
    """Checks the agent `config.make_agent` builds against every rule of `RULES` (module doc).

    Args:
      config: an agent config (`podrl.core.types.AgentConfig`).
      env: a JAX env name (`podrl.envs.make`), a `JaxEnv` (observations come from its resets), or an
        `EnvSpec` (observations drawn from it; for a host env: `EnvSpec(env.observation_spec(), env.action_spec())`).
      rollout_length, num_envs: the batch, `[rollout_length, num_envs]` per shard (num_envs None: the fewest
        of 2, 4, ... that `config.check_batch` accepts).
      updates: updates the learner-shard rule runs.
      devices: the devices to run on (default `jax.devices()`; the learner-shard rule uses two).
    """
    spec, jax_env = _env(env)
    envs = num_envs or tiny_envs(config, rollout_length)
    config.check_batch(rollout_length, envs)
    agent = config.make_agent(spec, 10)
    devices = list(devices or jax.devices())
    key = jax.random.key(seed)
    passed: list[str] = []
    state, maker = _check_init(agent, spec, key), TrajectoryMaker(agent, spec, rollout_length, envs, jax_env)
    passed += ["init"] + _check_acting(agent, spec, state.params, envs, key, maker.act)
    trajectory, again = maker(state.params, key), maker(state.params, key)
    _check_same(trajectory, again, "acting twice with the same params, observations and key gave different "
                "trajectories at {path}: act must be a pure function of its inputs (no Python state, no "
                "randomness but its key)")
    one = layout_update(agent, devices[:1])
    after, metrics = one(on_shards(state, 1), trajectory, key)
    _check_update(state, of_shard(after), metrics)
    repeat = one(on_shards(state, 1), trajectory, key)
    _check_same((after, metrics), repeat, "updating twice from the same train state, trajectory and key gave "
                "different results at {path}: update must be a pure function of its inputs")
    passed += ["determinism", "update", "metrics"]
    _check_checkpoint(of_shard(after))
    passed.append("checkpoint")
    if len(devices) < 2:
        skipped = ("learner shards: needs 2 devices, this process has 1",)
        warnings.warn(f"check_agent: the learner-shard rule was skipped: {skipped[0][16:]}", stacklevel=2)
        return AgentReport(tuple(passed), skipped, ())
    moved = check_learner_shards(agent, state, trajectory, key, devices, updates, one=one)
    notes = () if moved else (f"the params did not change in {updates} updates, so the learner-shard rule "
                              "compared nothing learned (a replay still filling?): raise updates",)
    return AgentReport(tuple(passed + ["learner shards"]), (), notes)


def _env(env: Any) -> tuple[EnvSpec, JaxEnv | None]:
    if isinstance(env, EnvSpec):
        return env, None
    if isinstance(env, str):
        env = make(env)
    return EnvSpec(env.observation_spec(), env.action_spec()), env


def _check_init(agent: Agent, spec: EnvSpec, key: jax.Array) -> TrainState:
    state = jax.jit(lambda k: agent.init(k, spec))(key)  # as the layouts do (an eager init dispatches op by op)
    if not isinstance(state, TrainState):
        raise AgentCheckError("init", f"init returned {type(state).__name__}, not a podrl.core.types.TrainState: "
                                      "return TrainState(params, opt_state, update_step=jnp.zeros((), jnp.int32))")
    step = jax.typeof(state.update_step)
    if step.shape != () or step.dtype != jnp.int32:
        raise AgentCheckError("init", f"init's update_step is {step}, not int32[]: start it at "
                                      "jnp.zeros((), jnp.int32)")
    return state


def _check_acting(agent: Agent, spec: EnvSpec, params: Any, envs: int, key: jax.Array, act: Any) -> list[str]:
    """The rules "actor state", "act", "act_greedy" (shapes, by tracing) and "actor-state reset"."""
    obs = jax.ShapeDtypeStruct((envs,) + tuple(spec.observation.shape), spec.observation.dtype)
    initial = agent.init_actor_state(envs, env_columns(0, envs, envs))
    _check_rows(agent.init_actor_state(envs), envs, "init_actor_state without columns")
    _check_rows(initial, envs, f"init_actor_state({envs})")
    action, extras, state = jax.eval_shape(agent.act, params, initial, obs, key)
    _check_action(action, spec, envs, "act")
    for path, leaf in jax.tree_util.tree_flatten_with_path(extras)[0]:
        if leaf.shape[:1] != (envs,):
            raise AgentCheckError("act", f"act's extras{jax.tree_util.keystr(path)} has shape {leaf.shape}, not "
                                         f"[{envs}, ...]: the layouts store extras per step and env, [T, B, ...]")
    _check_like(initial, state, "act")
    greedy = jax.eval_shape(agent.act_greedy, params, initial, obs)
    if not isinstance(greedy, tuple) or len(greedy) != 2:
        raise AgentCheckError("act_greedy", "act_greedy must return (action, actor_state)")
    _check_action(greedy[0], spec, envs, "act_greedy")
    _check_like(initial, greedy[1], "act_greedy")
    _check_reset(agent, spec, params, initial, envs, key, act)
    return ["actor state", "act", "act_greedy", "actor-state reset"]


def _check_rows(actor_state: Any, envs: int, what: str) -> None:
    for path, leaf in jax.tree_util.tree_flatten_with_path(actor_state)[0]:
        if jnp.shape(leaf)[:1] != (envs,):
            raise AgentCheckError("actor state", f"{what} leaf{jax.tree_util.keystr(path)} has shape "
                                  f"{jnp.shape(leaf)}, not [{envs}, ...]: the layouts reset an actor's state row by "
                                  "row where its episode ends, so a leaf without the batch axis first is never reset; "
                                  "give every leaf the batch axis first (one value per env)")


def _check_action(action: Any, spec: EnvSpec, envs: int, who: str) -> None:
    expected = (envs,) + tuple(spec.action.shape)
    kind = np.integer if spec.discrete else np.floating
    if not hasattr(action, "shape") or tuple(action.shape) != expected or not np.issubdtype(action.dtype, kind):
        got = f"{getattr(action, 'dtype', type(action).__name__)}{list(getattr(action, 'shape', ()))}"
        want = "an integer" if spec.discrete else "a float"
        raise AgentCheckError(who, f"{who} returned an action of {got} for {envs} observations; the env's action "
                                   f"spec asks for {want} array of shape {list(expected)} ([B, *action_spec.shape])")


def _check_like(initial: Any, returned: Any, who: str) -> None:
    problem = _difference(initial, returned)
    if problem is not None:
        raise AgentCheckError("actor state", f"{who} returned an actor state that differs from init_actor_state's "
                                             f"({problem}): the layouts carry it through a compiled loop and reset "
                                             "rows to init_actor_state's, so return it with the same structure, "
                                             "shapes and dtypes")


def _difference(a: Any, b: Any, name: str = "") -> str | None:
    """Where trees `a` and `b` (called `name`) differ in structure, shape or dtype (a sentence part), or None."""
    if jax.tree.structure(a) != jax.tree.structure(b):
        return f"structure {jax.tree.structure(b)} where {jax.tree.structure(a)} was expected"
    for (path, x), y in zip(jax.tree_util.tree_flatten_with_path(a)[0], jax.tree.leaves(b)):
        x, y = jax.typeof(x), jax.typeof(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"{name}{jax.tree_util.keystr(path)} is {y.str_short()} where {x.str_short()} was expected"
    return None


def _check_reset(agent: Agent, spec: EnvSpec, params: Any, initial: Any, envs: int, key: jax.Array,
                 act: Any) -> None:
    """Row 0 reset after one step acts as a fresh actor; rows 1.. act as they would have (act_greedy)."""
    keys = jax.random.split(key, 3)
    first, second = (sample_observations(spec.observation, k, (envs,)) for k in keys[:2])
    greedy = jax.jit(agent.act_greedy)
    _, _, carried = act(params, initial, first, keys[2])
    ended = jnp.arange(envs) == 0
    reset = reset_finished_actor_state(carried, ended, initial)
    outputs = [greedy(params, state, second) for state in (reset, initial, carried)]
    rows = [jax.tree.map(lambda x, i=i: np.asarray(x[i]), out) for out, i in zip(outputs, (0, 0, slice(1, None)))]
    rest = jax.tree.map(lambda x: np.asarray(x[1:]), outputs[0])
    if not _equal(rows[0], rows[1]) or not _equal(rest, rows[2]):
        raise AgentCheckError("actor-state reset", "act_greedy on a batch where one row's actor state was reset to "
                              "init_actor_state's (its episode ended) did not give that row a fresh actor's output "
                              "and the other rows their own: an agent's rows must not mix (no reduction or "
                              "normalisation over the batch axis of the actor state), so that the layouts can reset "
                              "one row where its episode ends")


def _check_update(before: TrainState, after: TrainState, metrics: Any) -> None:
    if not isinstance(after, TrainState):
        raise AgentCheckError("update", f"update returned {type(after).__name__}, not a TrainState")
    problem = _difference(before._replace(update_step=()), after._replace(update_step=()), "train_state")
    if problem is not None:
        raise AgentCheckError("update", f"update returned a train state whose {problem}: the layouts carry the "
                                        "train state through a compiled loop, so update must keep its structure, "
                                        "shapes and dtypes")
    if int(after.update_step) != int(before.update_step) + 1:
        raise AgentCheckError("update", f"update_step went from {int(before.update_step)} to "
                                        f"{int(after.update_step)}: return train_state.update_step + 1 (it counts "
                                        "updates: schedules and resumes read it)")
    if not isinstance(metrics, dict) or not all(isinstance(k, str) for k in metrics):
        raise AgentCheckError("metrics", f"update returned metrics of type {type(metrics).__name__}: return a dict "
                                         "{name: number}")
    for name, value in metrics.items():
        shape, dtype = np.shape(value), np.asarray(value).dtype
        if shape != () or not (np.issubdtype(dtype, np.number) or dtype == np.bool_):
            raise AgentCheckError("metrics", f"metric {name!r} is {dtype}{list(shape)}, not one number: a metric is "
                                             "one value per update, shape [] (take its jnp.mean)")


def _check_checkpoint(state: TrainState) -> None:
    from podrl.run.checkpoint import Checkpointer

    with tempfile.TemporaryDirectory(prefix="podrl-check-agent-") as folder:
        checkpointer = Checkpointer(folder)
        try:
            checkpointer.save(0, state, state.params, {"check_agent": True})
            restored = checkpointer.restore_state(state, 0)
        except Exception as e:  # noqa: BLE001 - orbax and tensorstore raise many kinds
            raise AgentCheckError("checkpoint", f"the train state did not survive a checkpoint round trip "
                                                f"({type(e).__name__}: {str(e).splitlines()[0][:200]}): keep only "
                                                "arrays in the TrainState (no Python objects or functions)") from e
        finally:
            checkpointer.close()
    _check_same(state, restored, "the train state came back from a checkpoint changed at {path}: keep only arrays "
                "in the TrainState", rule="checkpoint")


def _check_same(a: Any, b: Any, sentence: str, rule: str = "determinism") -> None:
    flat, _ = jax.tree_util.tree_flatten_with_path(a)
    for (path, x), y in zip(flat, jax.tree.leaves(b), strict=True):
        if not _equal(x, y):
            raise AgentCheckError(rule, sentence.format(path=jax.tree_util.keystr(path) or "the top"))


def _equal(a: Any, b: Any) -> bool:
    def data(x):
        keys = jax.dtypes.issubdtype(jnp.asarray(x).dtype, jax.dtypes.prng_key)
        return np.asarray(jax.random.key_data(x) if keys else x)

    def same(x, y):
        x, y = data(x), data(y)
        return np.array_equal(x, y, equal_nan=np.issubdtype(x.dtype, np.inexact))

    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(leaves_a) == len(leaves_b) and all(same(x, y) for x, y in zip(leaves_a, leaves_b))
