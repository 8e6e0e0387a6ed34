"""The Sebulba run: validate and build before the run (`podrl.sebulba.setup`), then let `podrl.run.driver`
run the host program (`podrl.sebulba.program`) in a `RunContext`; the program's envs are closed on every path."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from podrl.core.types import AgentConfig, TrainState
from podrl.run.context import RunContext
from podrl.run.driver import drive
from podrl.run.stages import publish, timed_run
from podrl.sebulba.config import SebulbaConfig
from podrl.sebulba.program import SebulbaProgram
from podrl.sebulba.setup import build

__all__ = ["SebulbaResult", "train_sebulba"]


class SebulbaResult(NamedTuple):
    train_state: TrainState  # on the learner devices (`podrl.core.learner_state`)
    history: list[dict[str, Any]]  # one record per log window
    policy_lags: np.ndarray  # int [updates done, num_threads]: learner version - actor version (0 before a resume)
    final_eval_return: float | None
    steps_per_second: float  # env steps consumed per second, after compilation
    compile_seconds: float
    env_steps: int  # env steps of this process's actors consumed by the learner
    global_env_steps: int  # the same over all processes
    run_dir: str | None
    checkpoint_dir: str | None = None
    stopped_by: str | None = None  # one of podrl.run.outcome.STOPPED_BY, or None (ran to its total)
    stages: dict[str, Any] | None = None  # where the seconds from process start went (`podrl.run.stages`)


def train_sebulba(config: SebulbaConfig, agent_config: AgentConfig, env_factory=None,
                  full_config: Any = None) -> SebulbaResult:
    """Trains `agent_config`'s agent with the Sebulba layout on `config.env`.

    Args:
      env_factory: optional `(thread_index, num_envs) -> HostVectorEnv` replacing
        `config.env` (tests and users with unusual envs).

    Its setup and run are timed, with every program JAX compiles (`SebulbaResult.stages`; printed with
    `logging.profile_startup`).
    """
    with timed_run() as clock:
        with clock.stage("setup (envs, agent, checks)"):
            program = SebulbaProgram(config, build(config, agent_config, env_factory))  # before the run: setup.py
        try:
            with RunContext(config, agent_config, full_config) as run:
                with clock.stage("run (env resets, compiles, training, evaluations)"):
                    driven = drive(program, run)
                stages = publish(clock, run.logger, config.logging.profile_startup)
        finally:
            program.close()
    return SebulbaResult(driven.state, driven.history, program.lags[:driven.updates], driven.eval_return,
                         driven.steps_per_second, driven.compile_seconds, program.env_steps, program.global_steps,
                         run.logger.run_dir, run.checkpoints.directory, driven.stopped_by, stages)
