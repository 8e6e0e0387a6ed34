"""Anakin training: validate and build before the run (`podrl.anakin.setup`), then let `podrl.run.driver`
run the host program (`podrl.anakin.program`) in a `RunContext`.

Stops cleanly (checkpoint first) on SIGINT/SIGTERM or after
`checkpoint.stop_after_updates`; resumes exactly from `checkpoint.resume`
(every update is a pure function of the state and its index, so N updates, a
stop, a resume and M more equal N + M uninterrupted updates bit for bit).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from podrl.anakin.compiled import AnakinState
from podrl.anakin.config import AnakinConfig
from podrl.anakin.program import AnakinProgram
from podrl.anakin.setup import build
from podrl.core.types import AgentConfig
from podrl.envs.types import JaxEnv
from podrl.run.context import RunContext
from podrl.run.driver import drive
from podrl.run.stages import publish, timed_run


class AnakinResult(NamedTuple):
    state: AnakinState
    history: list[dict[str, Any]]  # one record per call
    final_eval_return: np.ndarray | None  # [S] mean greedy return after the last call
    compile_seconds: float
    steps_per_second: float  # env steps per second over all seeds, training calls only
    run_dir: str | None
    checkpoint_dir: str | None = None
    stopped_by: str | None = None  # one of podrl.run.outcome.STOPPED_BY, or None (ran to its total)
    stages: dict[str, Any] | None = None  # where the seconds from process start went (`podrl.run.stages`)


def train_anakin(config: AnakinConfig, agent_config: AgentConfig, env: JaxEnv | None = None,
                 devices: list[jax.Device] | None = None, full_config: Any = None) -> AnakinResult:
    """Trains `agent_config`'s agent on `config.env` (or `env`) with the Anakin layout.

    Validates everything and builds the env and the agent before the run (`podrl.anakin.setup`),
    compiles the train call once (AOT), then loops: one call = `updates_per_call` updates, one log record.
    Each stage's seconds are timed (`AnakinResult.stages`; printed with `logging.profile_startup`).
    """
    with timed_run() as clock:
        with clock.stage("setup (env, agent, checks)"):
            program = AnakinProgram(config, build(config, agent_config, env, devices), clock)  # before the run
        try:
            with RunContext(config, agent_config, full_config) as run:
                driven = drive(program, run)
                stages = publish(clock, run.logger, config.logging.profile_startup)
        finally:
            program.close()
    return AnakinResult(driven.state, driven.history, driven.eval_return, driven.compile_seconds,
                        driven.steps_per_second, run.logger.run_dir, run.checkpoints.directory, driven.stopped_by,
                        stages)
