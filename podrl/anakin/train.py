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
from podrl.config import AnakinConfig
from podrl.errors import NonFiniteError, check_finite
from podrl.run_control import SaveSchedule, StopRequests
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


def train_anakin(config: AnakinConfig, agent_config, env: JaxEnv | None = None,
                 devices: list[jax.Device] | None = None, full_config: Any = None) -> AnakinResult:
    """Trains `agent_config`'s agent on `config.env` (or `env`) with the Anakin layout.

    Validates everything before compiling, compiles the train call once (AOT),
    then loops: one call = `updates_per_call` updates, one log record.
    """
    from envs.registry import make
    from envs.types import env_spec as spec_of
    from podrl.checkpoint import RunCheckpoints, resolved_config
    from podrl.logging import RunLogger
    from podrl.mesh import data_mesh, mesh_devices

    devices = devices if devices is not None else mesh_devices(config.num_devices)
    config.check_layout(len(devices), agent_config)
    env = env if env is not None else make(config.env)
    spec = spec_of(env)
    agent = agent_config.make_agent(spec, config.num_updates)
    program = AnakinProgram(agent, env, config, data_mesh(devices), spec)
    resolved = resolved_config("anakin", config, agent_config)
    logger = RunLogger(config.logging, default_name=f"{config.env.replace(':', '.')}__anakin__seed{config.seed}",
                       config=full_config if full_config is not None else resolved, tag="anakin")
    checkpoints = RunCheckpoints(config.checkpoint, logger.run_dir, resolved)
    try:
        return _train_loop(program, config, logger, checkpoints)
    finally:
        checkpoints.close()
        logger.close()


def _train_loop(program: AnakinProgram, config: AnakinConfig, logger, checkpoints) -> AnakinResult:
    state = checkpoints.restore(within("init", config.timeout_s, program.init))
    start = int(np.asarray(state.train_state.update_step).reshape(-1)[0])
    compile_seconds = within("compile", config.timeout_s, functools.partial(program.compile, state))
    limit = min(config.num_updates, config.checkpoint.stop_after_updates or config.num_updates)
    logger.info(f"{config.env}: {config.num_seeds} seed(s) x {config.num_envs} envs on {program.num_shards} "
                f"device(s), updates {start}..{limit} of {config.num_updates}; compiled in {compile_seconds:.1f}s")
    schedule = SaveSchedule(config.checkpoint.every_updates, config.checkpoint.every_seconds, start)
    history: list[dict[str, Any]] = []
    train_seconds, eval_return, first, calls = 0.0, None, start, 0
    with StopRequests() as stop:
        while first < limit:
            last = min(first + config.updates_per_call, limit)
            t0 = time.perf_counter()
            state, metrics = within(f"train call (updates {first}..{last - 1})", config.timeout_s,
                                    functools.partial(program.train_call, state, first, limit))
            summary = summarize_call(metrics)  # device_get blocks until done
            train_seconds += time.perf_counter() - t0
            try:
                check_finite(summary, first, last)
            except NonFiniteError as e:
                e.add_note(checkpoints.describe_last())
                raise
            calls += 1
            summary["sps"] = (last - first) * config.steps_per_update * config.num_seeds / (time.perf_counter() - t0)
            summary["updates"] = last
            if (config.eval_every and calls % config.eval_every == 0) or last in (limit, config.num_updates):
                eval_return = within(f"evaluation after update {last}", config.timeout_s,
                                     functools.partial(program.evaluate, state, config.seed + 1_000_003 + last))
                summary["eval_return"] = eval_return
            _report(logger, history, summary, last * config.steps_per_update, config)
            first = last
            if stop.received:
                break
            if schedule.due(last):
                checkpoints.save(last, state, state.train_state.params)
                schedule.saved(last)
    checkpoints.save(first, state, state.train_state.params)
    stopped_by = stop.received or ("stop_after_updates" if first < config.num_updates else None)
    done = (first - start) * config.steps_per_update * config.num_seeds
    sps = done / max(train_seconds, 1e-9)
    logger.info(f"{'stopped by ' + stopped_by if stopped_by else 'done'} at update {first}: {sps:,.0f} SPS, "
                f"greedy return {np.round(eval_return, 1).tolist() if eval_return is not None else 'n/a'}"
                + (f"; checkpoint in {checkpoints.directory}" if checkpoints.directory else ""))
    return AnakinResult(state, history, eval_return, compile_seconds, sps, logger.run_dir,
                        checkpoints.directory, stopped_by)


def _report(logger, history: list, summary: dict[str, Any], step: int, config: AnakinConfig) -> None:
    logger.log(step, summary)
    history.append({"step": step, **summary})
    returns = summary["episode_return"]
    logger.progress(step, config.num_updates * config.steps_per_update, summary["sps"], {
        "return": float(np.nanmean(returns)) if np.isfinite(returns).any() else None,
        "eval": float(np.mean(summary["eval_return"])) if "eval_return" in summary else None,
    })
