"""The Anakin training loop: validate, compile once, run calls, log, evaluate, checkpoint.

Stops cleanly (checkpoint first) on SIGINT/SIGTERM or after
`checkpoint.stop_after_updates`; resumes exactly from `checkpoint.resume`
(every update is a pure function of the state and its index, so N updates, a
stop, a resume and M more equal N + M uninterrupted updates bit for bit).
"""

from __future__ import annotations

import functools
import time
from typing import Any, NamedTuple

import jax
import numpy as np

from envs.types import JaxEnv
from podrl.anakin.program import AnakinProgram, AnakinState, summarize_call
from podrl.anakin.config import AnakinConfig
from podrl.errors import NonFiniteError, check_finite
from podrl.learner_state import check_shard_state_fits
from podrl.population import lineage_record, member_values, parse_sweep, pbt_decide, sweepable
from podrl.profiling import CallProfiler, write_program_text
from podrl.run import RunContext
from podrl.types import AgentConfig
from podrl.watchdog import within


class AnakinResult(NamedTuple):
    state: AnakinState
    history: list[dict[str, Any]]  # one record per call
    final_eval_return: np.ndarray | None  # [S] mean greedy return after the last call
    compile_seconds: float
    steps_per_second: float  # env steps per second over all seeds, training calls only
    run_dir: str | None
    checkpoint_dir: str | None = None
    stopped_by: str | None = None  # "SIGTERM", "SIGINT", "stop_after_updates", or None (ran to the end)


def train_anakin(config: AnakinConfig, agent_config: AgentConfig, env: JaxEnv | None = None,
                 devices: list[jax.Device] | None = None, full_config: Any = None) -> AnakinResult:
    """Trains `agent_config`'s agent on `config.env` (or `env`) with the Anakin layout.

    Validates everything before compiling, compiles the train call once (AOT),
    then loops: one call = `updates_per_call` updates, one log record.
    """
    from envs.registry import make
    from envs.types import env_spec as spec_of
    from podrl.mesh import mesh_devices, population_mesh

    devices = devices if devices is not None else mesh_devices(config.num_devices)
    config.check_layout(len(devices), agent_config)
    env = env if env is not None else make(config.env)
    spec = spec_of(env)
    agent = agent_config.make_agent(spec, config.num_updates)
    copies = config.members // config.population_shards  # members per device row
    check_shard_state_fits(agent, spec, agent_config, devices, copies=copies)  # before any allocation
    hyperparams = member_values(parse_sweep(config.sweep), config.members, config.seed)
    program = AnakinProgram(agent, env, config, population_mesh(devices, config.population_shards), spec,
                            hyperparams)
    with RunContext(config, agent_config, full_config) as run:
        return _train_loop(program, config, run, sweepable(agent_config))


def _train_loop(program: AnakinProgram, config: AnakinConfig, run: RunContext,
                bounds: dict[str, tuple[float, float]]) -> AnakinResult:
    state = run.restore(within("init", config.timeout_s, program.init))
    compile_seconds = within("compile", config.timeout_s, functools.partial(program.compile, state))
    start, limit = run.start, run.limit
    what = f"a population of {config.population}" if config.population else f"{config.num_seeds} seed(s)"
    run.logger.info(f"{config.env}: {what} x {config.num_envs} envs on {program.rows} x {program.num_shards} "
                    f"device(s), updates {start}..{limit} of {config.num_updates}; compiled in {compile_seconds:.1f}s")
    history: list[dict[str, Any]] = []
    train_seconds, eval_return, first, calls = 0.0, None, start, 0
    profiler = CallProfiler(config.logging.profile, -(-(limit - start) // config.updates_per_call))
    if config.logging.profile and jax.process_index() == 0:  # names the trace's loops (scripts/profile_summary.py)
        write_program_text(config.logging.profile, program.program_text())
    while first < limit:
        last = min(first + config.updates_per_call, limit)
        profiler.before(calls)
        t0 = time.perf_counter()
        state, metrics = within(f"train call (updates {first}..{last - 1})", config.timeout_s,
                                functools.partial(program.train_call, state, first, limit))
        summary = summarize_call(metrics)  # device_get blocks until done
        train_seconds += time.perf_counter() - t0
        profiler.after(calls)
        try:
            check_finite(summary, first, last)
        except NonFiniteError as e:
            run.note_failure(e)
            raise
        calls += 1
        summary["sps"] = (last - first) * config.steps_per_update * config.members / (time.perf_counter() - t0)
        summary["updates"] = last
        if (config.eval_every and calls % config.eval_every == 0) or last in (limit, config.num_updates):
            eval_return = within(f"evaluation after update {last}", config.timeout_s,
                                 functools.partial(program.evaluate, state, run.eval_seed(last)))
            summary["eval_return"] = eval_return
        if config.pbt_every and last // config.pbt_every > first // config.pbt_every and last < config.num_updates:
            state = _pbt_step(program, state, summary, last, config, bounds)
        _report(run, history, summary, last, config)
        first = last
        if run.after_update(last, state, state.train_state.params):
            break
    profiler.stop()
    done = (first - start) * config.steps_per_update * config.members
    sps = done / max(train_seconds, 1e-9)
    stopped_by = run.finish(first, state, state.train_state.params, sps, eval_return)
    return AnakinResult(state, history, eval_return, compile_seconds, sps, run.logger.run_dir,
                        run.checkpoints.directory, stopped_by)


def _pbt_step(program: AnakinProgram, state, summary: dict[str, Any], update: int, config: AnakinConfig,
              bounds: dict[str, tuple[float, float]]):
    """Exploit/explore after update `update` (`podrl.population`), decided from this call's returns;
    adds the lineage (`pbt/parent`, `pbt/replaced`, `pbt/hp/<field>` after) to `summary`."""
    current = {name[3:]: np.asarray(v) for name, v in summary.items() if name.startswith("hp/")}
    decision = pbt_decide(np.asarray(summary["episode_return"]), current, config.pbt_fraction,
                          tuple(config.pbt_perturb), bounds, config.seed, update)
    if decision.replaced.size:
        state = program.exploit(state, decision.source, decision.hyperparams)
    summary.update(lineage_record(decision))
    summary.update({f"pbt/hp/{name}": [float(v) for v in values] for name, values in decision.hyperparams.items()})
    return state


def _report(run: RunContext, history: list, summary: dict[str, Any], updates: int, config: AnakinConfig) -> None:
    step = run.logged_steps(updates)
    run.logger.log(step, summary)
    history.append({"step": step, **summary})
    returns = np.asarray(summary["episode_return"])
    finite = np.isfinite(returns).any()
    values = {"return": float(np.nanmean(returns)) if finite else None,
              "eval": float(np.mean(summary["eval_return"])) if "eval_return" in summary else None}
    if config.population:  # a population: its best and median member
        evals = summary.get("eval_return")
        values = {"return best": float(np.nanmax(returns)) if finite else None,
                  "median": float(np.nanmedian(returns)) if finite else None,
                  "eval best": float(np.max(evals)) if evals is not None else None,
                  "eval median": float(np.median(evals)) if evals is not None else None}
    run.logger.progress(step, run.logged_steps(config.num_updates), summary["sps"], values)
