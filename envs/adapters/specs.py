"""The host-env contract in code: spec conversion, timestep assembly, a startup check.

* `convert_observation_spec` / `convert_action_spec` turn a gymnasium space or a
  dm_env spec into the dm_env spec of ONE env (floating observations become
  float32; Discrete -> `DiscreteArray` int32, Box -> `BoundedArray`, MultiBinary ->
  `BoundedArray` int8 in [0, 1]). An observation may be nested: gymnasium `Dict` / `Tuple`
  spaces and dm_env specs nested in dicts, tuples or lists become the same tree of leaf specs
  (dicts, tuples: `podrl.envs.observations`). Anything else raises `UnsupportedSpaceError`
  naming the space.
* `EpisodeTracker` builds the batched numpy `TimeStep`s every adapter returns
  (see `podrl.envs.host`), keeping running episode returns/lengths exactly like
  `podrl.envs.wrappers.EpisodeStats` (float32 sum, int32 count, zeroed after LAST).
* `check_host_env` resets and steps a `HostVectorEnv` with actions sampled from
  its action spec and raises `EnvSpecMismatchError` at the first field that
  breaks the contract; `explain_single_env` replays one gymnasium env alone to name the observation that
  breaks its `observation_space` (a vector env reports it only as a failed copy into its batch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import jax
import numpy as np
from dm_env import specs
from gymnasium import spaces

from podrl.envs import observations
from podrl.envs.errors import UserInputError
from podrl.envs.host import EXTRAS_KEYS, HostVectorEnv
from podrl.envs.types import FIRST, LAST, MID, ActionSpec, ObservationSpec, TimeStep


class UnsupportedSpaceError(UserInputError, TypeError):
    """A gymnasium space or dm_env spec that podrl host envs cannot represent."""

    label = "unsupported space"


class EnvSpecMismatchError(UserInputError, ValueError):
    """A host env broke its contract: `method` returned `got` for `field`, not `expected`.

    `fix`, when given, ends the message with what to change.
    """

    label = "env does not match its spec"

    def __init__(self, env_name: str, method: str, field: str, expected: Any, got: Any, fix: str = ""):
        self.method, self.field, self.expected, self.got = method, field, expected, got
        super().__init__(f"{env_name}.{method}(): {field}: expected {expected}, got {got}"
                         + (f"; {fix}" if fix else ""))


# ---------------------------------------------------------------- spec conversion

_SUPPORTED = {"observation": "Discrete (start=0), Box, MultiBinary, and Dict / Tuple of those",
              "action": "Discrete (start=0) and Box"}


def _obs_dtype(dtype: Any) -> np.dtype:
    """float32 for any floating dtype, the dtype itself otherwise (e.g. uint8 frames)."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if np.issubdtype(dtype, np.floating) else dtype


def _unsupported(role: str, space: Any, hint: str = "") -> UnsupportedSpaceError:
    return UnsupportedSpaceError(
        f"{role} space {space!r} ({type(space).__name__}) is not supported: host envs support "
        f"{_SUPPORTED[role]} gymnasium spaces and {'nested' if role == 'observation' else 'flat'} dm_env specs{hint}"
    )


def _box_spec(space: spaces.Box, name: str) -> specs.BoundedArray:
    dtype = _obs_dtype(space.dtype)
    with np.errstate(over="ignore"):  # float64 extremes become +-inf in float32
        low, high = space.low.astype(dtype), space.high.astype(dtype)
    return specs.BoundedArray(space.shape, dtype, low, high, name=name)


def _discrete_spec(space: spaces.Discrete, role: str, name: str) -> specs.DiscreteArray:
    if int(space.start) != 0:
        raise _unsupported(role, space, " (Discrete must start at 0)")
    return specs.DiscreteArray(int(space.n), dtype=np.int32, name=name)


def convert_observation_spec(space: Any, name: str = "observation") -> ObservationSpec:
    """dm_env spec of one observation from a gymnasium space or a dm_env spec (nested or not).

    Box -> BoundedArray (floating dtypes become float32), Discrete -> DiscreteArray int32,
    MultiBinary -> BoundedArray int8 in [0, 1]; a `Dict` space -> a dict of their specs (by key),
    a `Tuple` space -> a tuple; a dm_env `Array` is passed through (floating -> float32), and dm_env
    specs nested in dicts, tuples or lists keep their structure (dicts, tuples).
    """
    if isinstance(space, spaces.Dict):
        return {key: convert_observation_spec(sub, str(key)) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(convert_observation_spec(sub, f"{name}_{i}") for i, sub in enumerate(space.spaces))
    if isinstance(space, spaces.Box):
        return _box_spec(space, name)
    if isinstance(space, spaces.Discrete):
        return _discrete_spec(space, "observation", name)
    if isinstance(space, spaces.MultiBinary):
        return specs.BoundedArray(tuple(np.atleast_1d(space.n)), np.int8, 0, 1, name=name)
    if isinstance(space, specs.Array):
        return space.replace(dtype=_obs_dtype(space.dtype))
    if isinstance(space, Mapping):
        return {key: convert_observation_spec(sub, str(key)) for key, sub in space.items()}
    if isinstance(space, (tuple, list)) and space:
        converted = [convert_observation_spec(sub, f"{name}_{i}") for i, sub in enumerate(space)]
        return type(space)(*converted) if hasattr(space, "_fields") else tuple(converted)
    hint = " (flatten it, e.g. gymnasium.wrappers.FlattenObservation)" if isinstance(space, spaces.Space) else ""
    raise _unsupported("observation", space, hint)


def convert_action_spec(space: Any, name: str = "action") -> ActionSpec:
    """dm_env spec of one action: Discrete -> DiscreteArray int32, Box -> BoundedArray.

    dm_env `DiscreteArray`/`BoundedArray` specs are passed through (floating -> float32);
    an unbounded dm_env `Array` cannot be sampled and is rejected.
    """
    if isinstance(space, spaces.Discrete):
        return _discrete_spec(space, "action", name)
    if isinstance(space, spaces.Box):
        return _box_spec(space, name)
    if isinstance(space, specs.DiscreteArray):
        return space
    if isinstance(space, specs.BoundedArray):
        return space.replace(dtype=_obs_dtype(space.dtype))
    raise _unsupported("action", space, " (actions need a DiscreteArray or BoundedArray spec)")


# ---------------------------------------------------------------- timestep assembly


class EpisodeTracker:
    """Running episode statistics of `num_envs` envs, and the `TimeStep`s built from them.

    Mirrors `podrl.envs.wrappers.EpisodeStats` + `AutoReset`: returns are float32 sums,
    lengths int32 counts including the current step; both restart at 0 after LAST.
    """

    def __init__(self, num_envs: int):
        self.num_envs = num_envs
        self.episode_return = np.zeros(num_envs, np.float32)
        self.episode_length = np.zeros(num_envs, np.int32)

    def first(self, observation: np.ndarray) -> TimeStep:
        """FIRST timesteps for a freshly reset batch `observation` `[B, ...]`."""
        self.episode_return[:] = 0
        self.episode_length[:] = 0
        b = self.num_envs
        return TimeStep(
            step_type=np.full(b, FIRST, np.int32),
            reward=np.zeros(b, np.float32),
            discount=np.ones(b, np.float32),
            observation=observation,
            extras=self._extras(observation, np.zeros(b, bool)),
        )

    def transition(
        self,
        observation: np.ndarray,
        next_obs: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        life_lost: np.ndarray | None = None,
    ) -> TimeStep:
        """MID/LAST timesteps of one batched step.

        Args:
          observation: `[B, ...]` the observation to act on next (already reset where an episode ended).
          next_obs: `[B, ...]` the observation the action led to, before any reset.
          reward: `[B]` rewards; terminated, truncated: `[B]` bool (terminated wins over truncated).
          life_lost: `[B]` bool or None: episodic life (Atari "dqn" protocol): a MID step with
            discount 0 (the learning episode ends) while the game, its return and length go on.
        """
        terminated = np.asarray(terminated, bool)
        truncated = np.asarray(truncated, bool) & ~terminated
        ended = terminated | truncated
        zero_discount = terminated if life_lost is None else terminated | np.asarray(life_lost, bool)
        self.episode_return = self.episode_return + np.asarray(reward).astype(np.float32)
        self.episode_length = self.episode_length + np.int32(1)
        step = TimeStep(
            step_type=np.where(ended, LAST, MID).astype(np.int32),
            reward=np.asarray(reward, np.float32),
            discount=np.where(zero_discount, 0.0, 1.0).astype(np.float32),
            observation=observation,
            extras=self._extras(next_obs, truncated),
        )
        self.episode_return[ended] = 0
        self.episode_length[ended] = 0
        return step

    def _extras(self, next_obs: np.ndarray, truncated: np.ndarray) -> dict[str, np.ndarray]:
        return {
            "next_obs": next_obs,
            "truncated": truncated,
            "episode_return": self.episode_return.copy(),
            "episode_length": self.episode_length.copy(),
        }


# ---------------------------------------------------------------- startup check


def sample_actions(spec: ActionSpec, num_envs: int, rng: np.random.Generator, step: int = 2) -> np.ndarray:
    """`[num_envs, *spec.shape]` valid actions: the spec's minimum at step 0, maximum at 1, uniform after."""
    shape = (num_envs, *spec.shape)
    low = np.broadcast_to(spec.minimum, spec.shape)
    high = np.broadcast_to(spec.maximum, spec.shape)
    if step == 0:
        return np.broadcast_to(low, shape).astype(spec.dtype)
    if step == 1:
        return np.broadcast_to(high, shape).astype(spec.dtype)
    if np.issubdtype(spec.dtype, np.integer):
        return rng.integers(low, high, size=shape, endpoint=True).astype(spec.dtype)
    return rng.uniform(low, high, size=shape).astype(spec.dtype)


class _Checker:
    """Field checks for one env; raises EnvSpecMismatchError on the first failure."""

    def __init__(self, env: HostVectorEnv):
        self.name = type(env).__name__
        self.b = int(env.num_envs)
        self.obs_spec = env.observation_spec()

    def fail(self, method: str, field: str, expected: Any, got: Any) -> None:
        raise EnvSpecMismatchError(self.name, method, field, expected, got)

    def array(self, method: str, field: str, x: Any, shape: tuple, dtype: Any) -> None:
        if not isinstance(x, np.ndarray):
            self.fail(method, f"{field} type", "numpy.ndarray", type(x).__name__)
        if x.shape != shape:
            self.fail(method, f"{field} shape", shape, x.shape)
        if x.dtype != np.dtype(dtype):
            self.fail(method, f"{field} dtype", np.dtype(dtype), x.dtype)

    def observation(self, method: str, field: str, x: Any) -> None:
        """`x` is a batch `[B]` of observations of the spec: leaf by leaf for a nested one."""
        expected = observations.structs(self.obs_spec, (self.b,))
        if not observations.is_nested(self.obs_spec):
            return self.array(method, field, x, expected.shape, expected.dtype)
        if jax.tree.structure(x) != jax.tree.structure(expected):
            self.fail(method, f"{field} structure", jax.tree.structure(expected), jax.tree.structure(x))
        got, want = observations.keyed_leaves(x), observations.keyed_leaves(expected)
        for key, like in want.items():
            name = f"{field}[{key!r}]" if key else field
            self.array(method, name, got[key], like.shape, like.dtype)

    def timestep(self, method: str, ts: Any, step_types: tuple[int, ...]) -> None:
        if not isinstance(ts, TimeStep):
            self.fail(method, "return type", "podrl.envs.types.TimeStep", type(ts).__name__)
        b = (self.b,)
        self.observation(method, "observation", ts.observation)
        self.array(method, "step_type", ts.step_type, b, np.int32)
        bad = sorted(set(np.unique(ts.step_type).tolist()) - set(step_types))
        if bad:
            self.fail(method, "step_type", f"values in {step_types} (FIRST=0, MID=1, LAST=2)", bad)
        self.array(method, "reward", ts.reward, b, np.float32)
        self.array(method, "discount", ts.discount, b, np.float32)
        self.extras(method, ts)

    def extras(self, method: str, ts: TimeStep) -> None:
        if not isinstance(ts.extras, dict):
            self.fail(method, "extras type", "dict", type(ts.extras).__name__)
        missing = [k for k in EXTRAS_KEYS if k not in ts.extras]
        if missing:
            self.fail(method, "extras keys", f"{list(EXTRAS_KEYS)} (missing {missing})", sorted(ts.extras))
        e, b = ts.extras, (self.b,)
        self.observation(method, "extras['next_obs']", e["next_obs"])
        self.array(method, "extras['truncated']", e["truncated"], b, np.bool_)
        self.array(method, "extras['episode_return']", e["episode_return"], b, np.float32)
        self.array(method, "extras['episode_length']", e["episode_length"], b, np.int32)
        last, truncated, discount = ts.step_type == LAST, e["truncated"], ts.discount
        if np.any(~np.isin(discount, (0.0, 1.0))) or np.any((discount == 0) & ~(last & ~truncated)):
            self.fail(method, "discount", "1, or 0 only where LAST and not truncated", discount)
        if np.any(truncated & ~last):
            self.fail(method, "extras['truncated']", "True only where step_type is LAST", truncated)


def _check_action_spec(checker: _Checker, spec: Any) -> None:
    if not isinstance(spec, (specs.DiscreteArray, specs.BoundedArray)):
        checker.fail("action_spec", "type", "dm_env DiscreteArray or BoundedArray", spec)
    if not (np.all(np.isfinite(spec.minimum)) and np.all(np.isfinite(spec.maximum))):
        checker.fail("action_spec", "minimum/maximum", "finite bounds to sample from", spec)


def check_host_env(env: HostVectorEnv, steps: int = 8, seed: int = 0) -> None:
    """Startup check of a HostVectorEnv against the `podrl.envs.host` contract.

    Resets with `seed`, then steps `steps` times with actions sampled from
    `env.action_spec()` (its minimum, its maximum, then uniform), checking
    observation shape/dtype, reward/discount shape and dtype, step types and the
    extras keys. Raises `EnvSpecMismatchError` naming the method (reset/step),
    the field, and expected vs got. An exception from `env.reset`/`env.step` is
    explained by the env's optional `explain_failure(method, seed)` (gymnasium
    envs replay one env alone and name an observation of the wrong shape or
    dtype); failing that, a step's exception is reported as an action-range
    mismatch. The env is left mid-run.
    """
    checker = _Checker(env)
    action_spec = env.action_spec()
    _check_action_spec(checker, action_spec)
    ts = _call(env, "reset", (seed,), seed, lambda e: EnvSpecMismatchError(
        checker.name, "reset", "call", "a FIRST TimeStep", f"{type(e).__name__}: {e}"))
    checker.timestep("reset", ts, (FIRST,))
    keys = set(ts.extras)
    rng = np.random.default_rng(seed)
    for i in range(steps):
        actions = sample_actions(action_spec, checker.b, rng, i)
        ts = _call(env, "step", (actions,), seed, lambda e: EnvSpecMismatchError(
            checker.name, "step", "action", f"every action within action_spec {action_spec} accepted",
            f"{type(e).__name__}: {e} for actions {actions.tolist()}"))
        checker.timestep("step", ts, (MID, LAST))
        if set(ts.extras) != keys:
            checker.fail("step", "extras keys", f"the reset's keys {sorted(keys)}", sorted(ts.extras))


def _call(env: HostVectorEnv, method: str, args: tuple, seed: int,
          otherwise: Callable[[Exception], EnvSpecMismatchError]) -> TimeStep:
    """`env.<method>(*args)`; if it raises, the env's own explanation (`explain_failure`,
    e.g. an observation of the wrong shape) or else `otherwise(exception)`, chained."""
    try:
        return getattr(env, method)(*args)
    except Exception as e:  # noqa: BLE001 - reported as a contract mismatch, cause chained
        explain = getattr(env, "explain_failure", None)
        explained = explain(method, seed) if callable(explain) else None
        raise (explained or otherwise(e)) from e


def explain_single_env(factory: Callable[[], Any], method: str, seed: int,
                       steps: int = 8) -> EnvSpecMismatchError | None:
    """Replays one env from `factory` (reset, then up to `steps` random steps if `method` is
    "step") and names the first observation whose shape or dtype kind breaks its
    `observation_space`; None if none does or the env cannot be replayed alone.

    A vector env reports such an observation only as a failed copy into its batch
    buffer ("Output array is the wrong shape"), which reads like a bad action.
    """
    try:
        env = factory()
    except Exception:  # noqa: BLE001 - nothing to explain with
        return None
    space, name = env.observation_space, type(env.unwrapped).__name__
    if isinstance(space, (spaces.Dict, spaces.Tuple)):  # nested: the batch copy names the leaf itself
        env.close()
        return None
    try:
        obs, _ = env.reset(seed=seed)
        for i in range(steps + 1 if method == "step" else 1):
            if i:
                obs = env.step(env.action_space.sample())[0]
            got = np.asarray(obs)
            where = "reset" if i == 0 else "step"
            fix = f"return observations that match observation_space ({space}), or declare the space they have"
            if got.shape != space.shape:
                return EnvSpecMismatchError(name, where, "observation shape",
                                            f"{space.shape} (observation_space.shape)", got.shape, fix)
            if space.dtype is not None and got.dtype.kind != np.dtype(space.dtype).kind:
                return EnvSpecMismatchError(name, where, "observation dtype",
                                            f"{space.dtype} (observation_space.dtype)", got.dtype, fix)
    except Exception:  # noqa: BLE001 - the env fails alone too: not an observation problem
        return None
    finally:
        env.close()
    return None
