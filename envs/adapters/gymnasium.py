"""`GymnasiumVectorEnv`: gymnasium envs as a podrl `HostVectorEnv` (see `podrl.envs.host`).

Wraps (a) a gymnasium id, (b) a factory of single `gymnasium.Env`s, vectorised
"sync" (`SyncVectorEnv`) or "async" (`AsyncVectorEnv` in a *spawn* or
*forkserver* context: forking a process after JAX has started deadlocks), or
(c) a user's `gymnasium.vector.VectorEnv`, in any of gymnasium's autoreset modes
(read from `env.metadata["autoreset_mode"]`):

* SAME_STEP: the env resets inside `step`; the final observation is taken from
  `infos["final_obs"]` (an object array with `None` rows, or a stacked array).
* NEXT_STEP / DISABLED: after a step in which some envs ended, the adapter calls
  `env.reset(options={"reset_mask": ended})` right away, so the reset happens in
  the same adapter step. NEXT_STEP's junk "reset transition" (reward 0, action
  ignored) therefore never happens and never reaches the learner.

Shapes: `B = num_envs`; actions `[B, *action_shape]`; every returned array is
`[B]`-leading numpy (observation `[B, *obs_shape]`, floating obs as float32).
`terminated` wins over `truncated` when an env reports both.

Observations may be nested (gymnasium `Dict` / `Tuple` spaces: dicts / tuples of `[B]`-leading
arrays, `podrl.envs.observations`). An env that reports `info["action_mask"]` (Taxi-v4) has it
joined to its observations as their `action_mask` leaf (`podrl.envs.adapters.info_mask`).

With `episodic_life=True` (Atari's "dqn" protocol, `podrl.envs.adapters.atari`) a step
in which `infos["lives"]` drops while the game goes on is a MID step with
discount 0: the learning episode ends there, the game and its running
`episode_return` do not (`EpisodeTracker.transition(life_lost=...)`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import gymnasium
import jax
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

from podrl.envs import observations
from podrl.envs.adapters import info_mask
from podrl.envs.adapters.atari import life_lost
from podrl.envs.adapters.specs import (
    EnvSpecMismatchError,
    EpisodeTracker,
    convert_action_spec,
    convert_observation_spec,
    explain_single_env,
)
from podrl.envs.types import ActionSpec, ObservationSpec, TimeStep

SAFE_CONTEXTS = ("spawn", "forkserver")
"""multiprocessing start methods that are safe once JAX is running (fork is not)."""


class ResetMaskError(RuntimeError):
    """A NEXT_STEP/DISABLED VectorEnv cannot reset a subset of its envs via `reset_mask`."""


def _autoreset_mode(env: VectorEnv) -> AutoresetMode:
    mode = getattr(env, "metadata", {}).get("autoreset_mode")
    if mode is None:
        raise ValueError(
            f"{type(env).__name__}.metadata has no 'autoreset_mode': set it to a "
            "gymnasium.vector.AutoresetMode (SAME_STEP, NEXT_STEP or DISABLED) so podrl "
            "knows how its episodes restart"
        )
    return mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)


def _check_known_bugs(env: VectorEnv, mode: AutoresetMode) -> None:
    # gymnasium 1.x AsyncVectorEnv without shared memory does not clear a worker's
    # NEXT_STEP autoreset flag on reset(), so our masked reset would be followed by a
    # second (junk) reset on the next step.
    if isinstance(env, AsyncVectorEnv) and not env.shared_memory and mode == AutoresetMode.NEXT_STEP:
        raise ValueError(
            "AsyncVectorEnv(shared_memory=False) with autoreset_mode=NEXT_STEP repeats resets "
            "(the worker keeps its autoreset flag after reset(options={'reset_mask': ...})); "
            "use shared_memory=True or autoreset_mode=SAME_STEP"
        )


def _async_pair(env: VectorEnv) -> tuple[Callable | None, Callable | None]:
    """`(start, finish)` of `env`'s asynchronous step: `send`/`recv` (ale-py's AtariVectorEnv and
    envpool, whose `step` is `send` then `recv`), `step_async`/`step_wait` (gymnasium's
    AsyncVectorEnv), else `(None, None)`."""
    for start, finish in (("send", "recv"), ("step_async", "step_wait")):
        if callable(getattr(env, start, None)) and callable(getattr(env, finish, None)):
            return getattr(env, start), getattr(env, finish)
    return None, None


def single_env_factory(env: str | Callable[[], gymnasium.Env], **make_kwargs: Any) -> Callable[[], gymnasium.Env]:
    """A no-argument factory of one env from a gymnasium id (+ make kwargs) or a factory."""
    if isinstance(env, str):
        return functools.partial(gymnasium.make, env, **make_kwargs)
    if callable(env) and not make_kwargs:
        return env
    raise TypeError(
        f"expected a gymnasium id or a callable returning a gymnasium.Env (without make "
        f"kwargs), got {env!r} with kwargs {sorted(make_kwargs)}"
    )


def build_vector_env(
    env: str | Callable[[], gymnasium.Env],
    num_envs: int,
    vectorization: str = "sync",
    autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    context: str = "spawn",
    **make_kwargs: Any,
) -> VectorEnv:
    """A gymnasium VectorEnv of `num_envs` copies of a gymnasium id or single-env factory.

    `make_kwargs` go to `gymnasium.make` (ids only). "async" runs each env in a
    subprocess started with `context` ("spawn" or "forkserver"); the factory is
    sent with cloudpickle, so lambdas work, but classes must be importable.
    """
    factory = single_env_factory(env, **make_kwargs)
    if num_envs < 1:
        raise ValueError(f"num_envs must be positive, got {num_envs}")
    mode = AutoresetMode(autoreset_mode)
    fns = [factory] * num_envs
    if vectorization == "sync":
        return SyncVectorEnv(fns, autoreset_mode=mode)
    if vectorization == "async":
        if context not in SAFE_CONTEXTS:
            raise ValueError(f"async context must be one of {SAFE_CONTEXTS} (fork deadlocks under JAX), "
                             f"got {context!r}")
        return AsyncVectorEnv(fns, context=context, autoreset_mode=mode)
    raise ValueError(f"vectorization must be 'sync' or 'async', got {vectorization!r}")


class GymnasiumVectorEnv:
    """A gymnasium vector env behind the `HostVectorEnv` contract (module docstring).

    Args:
      env: a gymnasium id, a callable returning a `gymnasium.Env`, or a
        `gymnasium.vector.VectorEnv` (used as is; its autoreset mode is honoured).
      num_envs: number of envs to build (ignored-but-checked for a VectorEnv).
      vectorization: "sync" or "async" when building from an id or factory.
      autoreset_mode: the mode to build with (SAME_STEP is the cheapest here).
      context: multiprocessing start method for "async": "spawn" or "forkserver".
      episodic_life: a drop of `infos["lives"]` ends the learning episode (discount 0, see module doc).
      info_action_mask: join `info["action_mask"]` to the observations (module doc); None: if the envs
        report it on reset (`info_mask.reports_info_mask`; a VectorEnv other than SyncVectorEnv: False).
      **make_kwargs: passed to `gymnasium.make` for an id.

    Attributes:
      env: the wrapped VectorEnv; infos: the infos of its latest step/reset.
    """

    def __init__(
        self,
        env: str | Callable[[], gymnasium.Env] | VectorEnv,
        num_envs: int | None = None,
        *,
        vectorization: str = "sync",
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        context: str = "spawn",
        episodic_life: bool = False,
        info_action_mask: bool | None = None,
        **make_kwargs: Any,
    ):
        self.episodic_life = episodic_life
        self._lives: np.ndarray | None = None
        if isinstance(env, VectorEnv):
            if num_envs is not None and num_envs != env.num_envs:
                raise ValueError(f"num_envs={num_envs} but the VectorEnv has {env.num_envs} envs")
            self.env = env
            self._single: Callable[[], gymnasium.Env] | None = None
        else:
            if num_envs is None:
                raise ValueError("num_envs is required when building from an id or factory")
            self._single = single_env_factory(env, **make_kwargs)
            self.env = build_vector_env(env, num_envs, vectorization, autoreset_mode, context, **make_kwargs)
        self.num_envs = int(self.env.num_envs)
        self.autoreset_mode = _autoreset_mode(self.env)
        _check_known_bugs(self.env, self.autoreset_mode)
        self._raw_spec = convert_observation_spec(self.env.single_observation_space)
        self._action_spec = convert_action_spec(self.env.single_action_space)
        if info_action_mask is None:
            info_action_mask = info_mask.reports_info_mask(self.env, self._single)
        self._info_mask = bool(info_action_mask) and hasattr(self._action_spec, "num_values")
        self._observation_spec = (info_mask.with_mask_spec(self._raw_spec, self._action_spec.num_values)
                                  if self._info_mask else self._raw_spec)
        self._action_dtype = self.env.single_action_space.dtype
        self._tracker = EpisodeTracker(self.num_envs)
        self.infos: dict[str, Any] = {}
        self._pending: np.ndarray | None = None  # the actions of a step started by step_async

    def observation_spec(self) -> ObservationSpec:
        return self._observation_spec

    def action_spec(self) -> ActionSpec:
        return self._action_spec

    def reset(self, seed: int) -> TimeStep:
        """Resets every env (env i seeded with `seed + i` by gymnasium); FIRST timesteps."""
        obs, self.infos = self._reset_env(seed)
        self._lives = self._info_lives() if self.episodic_life else None
        mask = self._mask(self.infos, "reset")
        return self._tracker.first(self._join(self._tree_rows(self._obs(obs), self.infos), mask))

    def step(self, actions: np.ndarray) -> TimeStep:
        """Steps every env with `actions` `[B, ...]`; ended envs are already reset."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: np.ndarray) -> None:
        """Starts `step(actions)`: a wrapped env with `send`/`recv` (ale-py's AtariVectorEnv, envpool) or
        `step_async`/`step_wait` (gymnasium's AsyncVectorEnv) steps in its own threads or processes until
        `step_wait`; any other is stepped by `step_wait`."""
        if self._pending is not None:
            raise RuntimeError("step_async called twice without step_wait")
        actions = np.asarray(actions).astype(self._action_dtype, copy=False)
        start, _ = _async_pair(self.env)  # looked up per step: envpool's reset(seed) replaces self.env
        if start is not None:
            start(actions)
        self._pending = actions

    def step_wait(self) -> TimeStep:
        """The timestep of the step `step_async` started (what `step` returns)."""
        if self._pending is None:
            raise RuntimeError("step_wait called without step_async")
        actions, self._pending = self._pending, None
        _, finish = _async_pair(self.env)
        obs, reward, terminated, truncated, self.infos = finish() if finish is not None else self.env.step(actions)
        obs = self._tree_rows(self._obs(obs), self.infos)
        reward, terminated, truncated = (self._rows(np.asarray(x), self.infos) for x in (reward, terminated, truncated))
        terminated, truncated = terminated.astype(bool), truncated.astype(bool)
        ended = terminated | truncated
        mask = self._mask(self.infos, "step")
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            next_obs, next_mask = self._final_obs(obs, ended), self._final_mask(mask, ended)
        else:
            next_obs, next_mask = obs, mask
            obs, mask = self._reset_ended(obs, mask, ended) if ended.any() else (obs, mask)
        lost = None
        if self.episodic_life:
            lives = self._info_lives()
            lost, self._lives = life_lost(self._lives, lives, ended), lives
        return self._tracker.transition(self._join(obs, mask), self._join(next_obs, next_mask), reward, terminated,
                                        truncated, lost)

    def close(self) -> None:
        self.env.close()

    def explain_failure(self, method: str, seed: int) -> EnvSpecMismatchError | None:
        """Why `reset`/`step` raised, if one env replayed alone shows it (`explain_single_env`);
        None for a user's VectorEnv (no single-env factory to replay)."""
        return None if self._single is None else explain_single_env(self._single, method, seed)

    # ---- internals ----

    def _reset_env(self, seed: int | None) -> tuple[Any, dict]:
        """Full reset of the wrapped env; subclasses with other seeding override it."""
        return self.env.reset(seed=seed)

    def _info_lives(self) -> np.ndarray:
        """`[B]` int lives from the latest step's or reset's `infos["lives"]` (episodic life)."""
        lives = self.infos.get("lives") if isinstance(self.infos, dict) else None
        if lives is None:
            raise RuntimeError(f"{type(self.env).__name__} reports no infos['lives']: episodic life needs them")
        return self._rows(np.asarray(lives), self.infos).copy()

    def _obs(self, obs: Any) -> Any:
        """Fresh `[B, *obs_shape]` arrays of the spec dtypes (never the env's own buffer), leaf by leaf
        for a nested observation (without the info mask: `_join` adds it)."""
        if not observations.is_nested(self._raw_spec):
            return np.array(obs, dtype=self._raw_spec.dtype, copy=True)
        return observations.map_spec_with(lambda spec, x: np.array(x, dtype=spec.dtype, copy=True),
                                          self._raw_spec, observations.as_tree(obs))

    def _tree_rows(self, obs: Any, infos: dict) -> Any:
        """`_rows` of every leaf of an observation."""
        return jax.tree.map(lambda x: self._rows(x, infos), obs)

    def _mask(self, infos: Any, where: str) -> np.ndarray | None:
        """`[B, A]` bool legal actions of the observations `infos` came with (None without an info mask)."""
        if not self._info_mask:
            return None
        name = type(self.env).__name__
        mask, present = info_mask.batch_mask(infos, self.num_envs, self._action_spec.num_values, name)
        info_mask.require_all(present, name, where)
        return self._rows(mask, infos)

    def _final_mask(self, mask: np.ndarray | None, ended: np.ndarray) -> np.ndarray | None:
        """`mask` with the rows of `ended` envs replaced by their final step's (SAME_STEP `infos["final_info"]`)."""
        if mask is None or not ended.any():
            return mask
        final = self.infos.get("final_info", {})
        final_mask, present = info_mask.batch_mask(final, self.num_envs, self._action_spec.num_values,
                                                   type(self.env).__name__)
        info_mask.require_all(present | ~ended, type(self.env).__name__, "final step")
        return np.where(ended[:, None], self._rows(final_mask, self.infos), mask)

    def _join(self, obs: Any, mask: np.ndarray | None) -> Any:
        return obs if mask is None else info_mask.join(obs, mask)

    def _rows(self, x: np.ndarray, infos: dict) -> np.ndarray:
        """`x` ordered by env index (batched backends such as envpool report `infos['env_id']`)."""
        if x.shape[:1] != (self.num_envs,):
            raise ValueError(f"{type(self.env).__name__} returned a batch of {x.shape[:1]}, "
                             f"expected ({self.num_envs},)")
        ids = infos.get("env_id") if isinstance(infos, dict) else None
        if ids is None or np.array_equal(ids, np.arange(self.num_envs)):
            return x
        return x[np.argsort(ids)]

    def _final_obs(self, obs: np.ndarray, ended: np.ndarray) -> np.ndarray:
        if not ended.any():
            return obs
        final = self.infos.get("final_obs")
        if final is None:
            raise RuntimeError(f"{type(self.env).__name__} (SAME_STEP) ended envs without infos['final_obs']")
        if not observations.is_nested(self._raw_spec):
            final = self._rows(np.asarray(final), self.infos)  # object array with None rows, or stacked
            next_obs = obs.copy()
            for i in np.flatnonzero(ended):
                next_obs[i] = final[i]
            return next_obs
        next_obs = jax.tree.map(np.copy, obs)
        stacked = not (isinstance(final, np.ndarray) and final.dtype == object)
        final = self._tree_rows(self._obs(final), self.infos) if stacked else self._rows(final, self.infos)
        for i in np.flatnonzero(ended):
            row = jax.tree.map(lambda x: x[i], final) if stacked else observations.as_tree(final[i])
            for target, value in zip(jax.tree.leaves(next_obs), jax.tree.leaves(row), strict=True):
                target[i] = value
        return next_obs

    def _reset_ended(self, obs: Any, mask: np.ndarray | None, ended: np.ndarray) -> tuple[Any, np.ndarray | None]:
        """`obs` (and the info `mask`) with the rows of `ended` envs replaced by their reset observations."""
        name, mode = type(self.env).__name__, self.autoreset_mode.name
        try:
            reset_obs, infos = self.env.reset(options={"reset_mask": ended.copy()})
        except Exception as e:  # noqa: BLE001 - re-raised with what the adapter needs
            raise ResetMaskError(
                f"{name} runs in autoreset mode {mode}, so podrl resets ended envs with "
                f"env.reset(options={{'reset_mask': mask}}), which raised {type(e).__name__}: {e}. "
                "Support reset_mask (gymnasium >= 1.1 vector envs do) or use AutoresetMode.SAME_STEP"
            ) from e
        reset_obs = self._obs(reset_obs)
        count = observations.batch_size(reset_obs)
        ids = infos.get("env_id") if isinstance(infos, dict) else None
        if ids is not None and len(ids) == count:
            rows = np.asarray(ids)
        elif count == self.num_envs:
            rows = np.arange(self.num_envs)
        elif count == ended.sum():
            rows = np.flatnonzero(ended)
        else:
            raise ResetMaskError(f"{name}.reset(reset_mask) returned {count} rows for {ended.sum()} envs")
        selected = ended[rows]
        kept = rows[~selected]
        if not all(np.array_equal(new[~selected], old[kept], equal_nan=np.issubdtype(old.dtype, np.floating))
                   for new, old in zip(jax.tree.leaves(reset_obs), jax.tree.leaves(obs), strict=True)):
            raise ResetMaskError(f"{name}.reset(options={{'reset_mask': ...}}) changed envs outside the mask: "
                                 "it ignores reset_mask")
        obs = jax.tree.map(np.copy, obs)
        for target, value in zip(jax.tree.leaves(obs), jax.tree.leaves(reset_obs), strict=True):
            target[rows[selected]] = value[selected]
        if mask is not None:
            reset_mask, present = info_mask.batch_mask(infos, count, mask.shape[1], name)
            info_mask.require_all(present[selected], name, "reset")
            mask = mask.copy()
            mask[rows[selected]] = reset_mask[selected]
        return obs, mask
