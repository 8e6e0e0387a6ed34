"""The Anakin host program the driver runs (`podrl.run.driver.Program`): one training call is
`updates_per_call` updates of the compiled `AnakinCompiled` that `podrl.anakin.setup.build` built
before the run, each stage under the `timeout_s` watchdog; PBT's exploit/explore after the calls
that cross `pbt_every`.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any

import jax
import numpy as np

from podrl.anakin.compiled import STATE_SPECS, AnakinCompiled, AnakinState, summarize_call
from podrl.anakin.config import AnakinConfig
from podrl.anakin.setup import AnakinSetup
from podrl.core.finite import InputCounts, check_evaluation, check_training, rows_with_nonfinite
from podrl.core.learner_state import NOT_PER_SHARD, Placement, reshard_train_state, train_state_shard_axes
from podrl.core.population import lineage_record, pbt_decide
from podrl.run.profiling import write_program_text
from podrl.run.stages import StageClock
from podrl.run.watchdog import within


class AnakinProgram:
    """The Anakin host program the driver runs (`podrl.run.driver.Program`): one training call is
    `updates_per_call` updates of the compiled `AnakinCompiled`, each stage under the `timeout_s` watchdog.

    Args:
      config: the run config.
      built: what `podrl.anakin.setup.build` built for it: the compiled pieces (init, train call,
        evaluation) and the swept hyperparameters' bounds, for PBT's explore step.
      clock: where its stages' seconds go (`podrl.run.stages`), or None.

    The train call and the evaluation compile in background threads while the init program compiles
    and runs (`AnakinCompiled.compile_ahead`); `compile` waits for both, so no compile runs beside a
    training call.
    """

    save_on_failure = False  # the failed call donated the state's buffers
    profile_calls = 1

    def __init__(self, config: AnakinConfig, built: AnakinSetup, clock: StageClock | None = None):
        self.compiled, self.config, self.bounds, self.clock = built.compiled, config, built.bounds, clock
        self.limit = config.num_updates
        self.call_start = 0  # the first update of the last training call

    def stage(self, name: str) -> contextlib.AbstractContextManager:
        """Times the block as stage `name` on the clock (nothing without one)."""
        return self.clock.stage(name) if self.clock is not None else contextlib.nullcontext()

    def init(self) -> AnakinState:
        with self.stage("init (the train call and evaluation compile beside it)"):
            self.compiled.compile_ahead(self.config.timeout_s)
            return within("init", self.config.timeout_s, self.compiled.init)

    def placement(self) -> Placement:
        """The state on the `(population, data)` mesh: the train state's `shard_state` `[S, D, ...]` and the
        shards' base keys `[S, D]` are per learner shard; env states `[S, E, ...]` are per env (`num_envs`
        is per seed, whatever the devices), so they are restored as saved on any mesh."""
        axes = AnakinState(train_state_shard_axes(seed_axis=True), acting=NOT_PER_SHARD, key=1)
        return Placement(self.compiled.mesh, STATE_SPECS, axes, self._reshard)

    def _reshard(self, fresh: AnakinState, restored: AnakinState, saved_shards: int) -> tuple[AnakinState, dict]:
        """A checkpoint of `saved_shards` learner shards onto this mesh's: the agent's rule moves each
        seed's `shard_state`; each shard's base key is the key tree's for its new index (`fresh`'s)."""
        del saved_shards
        train_state, counts = reshard_train_state(self.compiled.agent.reshard_state, restored.train_state,
                                                  fresh.train_state, shard_axis=1)
        return AnakinState(train_state, restored.acting, fresh.key), counts

    def compile(self, state: AnakinState) -> float:
        with self.stage("compile (waiting for the train call and evaluation)"):
            return within("compile", self.config.timeout_s, functools.partial(self.compiled.compile, state))

    def start(self, state: AnakinState, start: int, limit: int, compile_seconds: float) -> list[str]:
        config, compiled = self.config, self.compiled
        self.limit = limit
        if config.logging.profile and jax.process_index() == 0:  # names the trace's loops (podrl profile-summary)
            write_program_text(config.logging.profile, compiled.program_text())
        what = f"a population of {config.population}" if config.population else f"{config.num_seeds} seed(s)"
        return [f"{config.env}: {what} x {config.num_envs} envs on {compiled.rows} x {compiled.num_shards} "
                f"device(s), updates {start}..{limit} of {config.num_updates}; compiled in {compile_seconds:.1f}s"]

    def call_end(self, first: int, limit: int) -> int:
        return min(first + self.config.updates_per_call, limit)

    def train(self, state: AnakinState, first: int, last: int) -> tuple[AnakinState, dict[str, Any]]:
        t0 = time.perf_counter()
        with self.stage(f"train call (updates {first}..{last - 1})"):
            state, metrics = within(f"train call (updates {first}..{last - 1})", self.config.timeout_s,
                                    functools.partial(self.compiled.train_call, state, first, self.limit))
            summary = summarize_call(metrics)  # device_get blocks until done
            inputs = jax.device_get(metrics.inputs)
        check_training(summary, inputs, first, last, self._members(inputs), env=self.config.env)
        self.call_start = first
        summary["sps"] = self.env_steps_of(last - first) / (time.perf_counter() - t0)
        return state, summary

    def failure_state(self, done: int, state: Any) -> tuple[int, Any]:
        """Not asked (`save_on_failure` is False: a failed call donated the whole state)."""
        return done, state

    def evaluate(self, params: Any, seed: int, update: int) -> np.ndarray | None:
        if not self.config.eval_episodes:  # no evaluation: its program is never compiled
            return None
        with self.stage(f"evaluation after update {update}"):
            returns, bad_reward, bad_observation, no_legal = within(
                f"evaluation after update {update}", self.config.timeout_s,
                functools.partial(self.compiled.evaluate_params, params, seed))
        check_evaluation(bad_reward, bad_observation, self.compiled.eval_per_shard * self.compiled.num_shards, update,
                         no_legal, self.config.env)
        return returns

    def after_record(self, state: AnakinState, record: dict[str, Any], update: int) -> AnakinState:
        config = self.config
        first = self.call_start
        if config.pbt_every and update // config.pbt_every > first // config.pbt_every and update < config.num_updates:
            state = _pbt_step(self.compiled, state, record, update, config, self.bounds)
        return state

    def progress(self, record: dict[str, Any]) -> dict[str, float | None]:
        return _progress(record, bool(self.config.population))

    def params(self, state: AnakinState) -> Any:
        return state.train_state.params

    def env_steps_of(self, updates: int) -> int:
        return updates * self.config.steps_per_update * self.config.members

    def close(self) -> None:
        """Nothing to release: the JAX env holds no thread or process (`podrl.anakin.setup`)."""

    def _members(self, inputs: InputCounts) -> str:
        """Which seeds met a non-finite input, e.g. " (seed 3)" (empty for a single-seed run)."""
        bad = rows_with_nonfinite(inputs)
        if self.config.members == 1 or not bad:
            return ""
        return f" (seed {', '.join(str(self.config.seed + i) for i in bad)})"


def _pbt_step(compiled: AnakinCompiled, state, summary: dict[str, Any], update: int, config: AnakinConfig,
              bounds: dict[str, tuple[float, float]]):
    """Exploit/explore after update `update` (`podrl.core.population`), decided from this call's returns;
    adds the lineage (`pbt/parent`, `pbt/replaced`, `pbt/hp/<field>` after) to `summary`."""
    current = {name[3:]: np.asarray(v) for name, v in summary.items() if name.startswith("hp/")}
    decision = pbt_decide(np.asarray(summary["episode_return"]), current, config.pbt_fraction,
                          tuple(config.pbt_perturb), bounds, config.seed, update)
    if decision.replaced.size:
        state = compiled.exploit(state, decision.source, decision.hyperparams)
    summary.update(lineage_record(decision))
    summary.update({f"pbt/hp/{name}": [float(v) for v in values] for name, values in decision.hyperparams.items()})
    return state


def _progress(summary: dict[str, Any], population: bool) -> dict[str, float | None]:
    returns = np.asarray(summary["episode_return"])
    finite = np.isfinite(returns).any()
    evals = summary.get("eval_return")
    if population:  # a population: its best and median member
        return {"return best": float(np.nanmax(returns)) if finite else None,
                "median": float(np.nanmedian(returns)) if finite else None,
                "eval best": float(np.max(evals)) if evals is not None else None,
                "eval median": float(np.median(evals)) if evals is not None else None}
    return {"return": float(np.nanmean(returns)) if finite else None,
            "eval": float(np.mean(evals)) if evals is not None else None}
