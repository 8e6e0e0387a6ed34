"""One run, whatever the layout: its directory, logger, checkpoints, update range and stops.

Both training loops (`podrl.anakin.train`, `podrl.sebulba.train`) open a
`RunContext` and differ only in how they produce and consume trajectories:

    with RunContext(config, agent_config) as run:   # checks a resume first
        state = run.restore(fresh_state)                        # the checkpoint's, or fresh
        for update in ...range(run.start, run.limit)...:
            ...
            if run.after_update(update, state, params):         # periodic saves; True = stop asked
                break
        stopped_by = run.finish(update, state, params)           # final save

Resuming (`config.checkpoint.resume`) continues the same run: the checkpoint's
config is checked before anything is written or compiled (the env and the agent are
built before the run, by the layout's `setup.py`), only the fields declared
`MAY_CHANGE` (`podrl.run.options`) may differ, its update count is the first
update, logging continues in the run directory the checkpoint was written from
(`metrics.jsonl` appended, TensorBoard purged past the checkpoint, steps and
wall time continuing), and a total that does not go past the checkpoint is a
`ConfigError` on `total_steps`.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np

from podrl.run.checkpoint import ResumePoint, RunCheckpoints, find_resume_point
from podrl.run.config import RunConfig
from podrl.run.config_json import resolved_config
from podrl.core.errors import ConfigError
from podrl.core.keys import eval_seed
from podrl.run.logging import RunLogger
from podrl.run.options import may_change_on_resume
from podrl.run.control import SaveSchedule, StopRequests
from podrl.core.types import AgentConfig

class RunContext:
    """What a training run needs besides its layout (see the module docstring).

    Attributes:
      logger: the run's `RunLogger` (process 0 writes, others are silent).
      checkpoints: the run's `RunCheckpoints`.
      start: the first update of this run (> 0 when resuming).
      limit: updates end before this index (`num_updates`, or `start +
        checkpoint.stop_after_updates` for a fixed-length job).
    """

    def __init__(self, config: RunConfig, agent_config: AgentConfig, full_config: Any = None):
        self.config = config
        layout = config.layout
        resolved = resolved_config(layout, config, agent_config)
        resume = None
        if config.checkpoint.resume is not None:  # fields newer than the checkpoint count as their defaults
            defaults = resolved_config(layout, type(config)(), type(agent_config)())
            resume = find_resume_point(config.checkpoint, resolved, defaults, may_change_on_resume(type(config)))
        self.start = resume.update if resume is not None else 0
        _check_total(config, self.start)
        stop_after = config.checkpoint.stop_after_updates
        self.limit = min(config.num_updates, self.start + stop_after) if stop_after else config.num_updates
        self.logger = RunLogger(
            config.logging, default_name=f"{config.env.replace(':', '.')}__{layout}__seed{config.seed}",
            config=full_config if full_config is not None else resolved, tag=layout,
            run_dir=continued_run_dir(resume), resume_step=self.logged_steps(self.start) if resume else None)
        try:
            self.checkpoints = RunCheckpoints(config.checkpoint, self.logger.run_dir, resolved, resume)
        except BaseException:
            self.logger.close()
            raise
        self._stop = StopRequests()
        self._schedule = SaveSchedule(config.checkpoint.every_updates, config.checkpoint.every_seconds, self.start)

    def __enter__(self) -> "RunContext":
        self._stop.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.__exit__(*exc)
        self.checkpoints.close()
        self.logger.close()

    def restore(self, fresh: Any) -> Any:
        """The state to start from: the checkpoint's (laid out like `fresh`), or `fresh`."""
        return self.checkpoints.restore(fresh)

    def logged_steps(self, updates: int) -> int:
        """The env-step count logged after `updates` updates (over all processes)."""
        return self.config.logged_steps(updates, jax.process_count())

    def eval_seed(self, update: int) -> int:
        """The seed of the greedy evaluation after `update` updates (`podrl.core.keys.eval_seed`)."""
        return eval_seed(self.config.seed, update)

    @property
    def stop_requested(self) -> str | None:
        """"SIGINT"/"SIGTERM" once such a signal asked the run to stop, else None."""
        return self._stop.received

    def after_update(self, update: int, state: Any, params: Any) -> bool:
        """Call after each logged update: saves a periodic checkpoint when due; True when asked to stop."""
        if self.stop_requested:
            return True
        if self._schedule.due(update):
            self.checkpoints.save(update, state, params)
            self._schedule.saved(update)
        return False

    def finish(self, update: int, state: Any, params: Any, sps: float, eval_return: Any) -> str | None:
        """Saves the final checkpoint and prints the closing line.

        Returns what stopped the run early ("SIGINT", "SIGTERM",
        "stop_after_updates"), or None when it ran to its total.
        """
        self.checkpoints.save(update, state, params)
        stopped_by = self.stop_requested or ("stop_after_updates" if update < self.config.num_updates else None)
        greedy = format_return(eval_return)
        where = f"; checkpoint in {self.checkpoints.directory}" if self.checkpoints.directory else ""
        self.logger.info(f"{'stopped by ' + stopped_by if stopped_by else 'done'} at update {update}: "
                         f"{sps:,.0f} SPS, greedy return {greedy}{where}")
        return stopped_by

    def note_failure(self, error: BaseException) -> None:
        """Adds the last good checkpoint to `error`'s message."""
        error.add_note(self.checkpoints.describe_last())


def format_return(value: Any) -> str:
    """A greedy return for the closing line: `-83.3` for one seed, `[12.0, 15.5]` for several, `n/a` for none."""
    if value is None:
        return "n/a"
    rounded = np.round(np.asarray(value, np.float64), 1)
    return str(rounded.item()) if rounded.size == 1 else str(rounded.tolist())


def continued_run_dir(resume: ResumePoint | None) -> str | None:
    """The run directory a resumed run continues, or None for a new one.

    That is the folder holding the checkpoint folder when it is a run's
    `checkpoints/`, else the run directory recorded in the checkpoint, if it
    still exists.
    """
    if resume is None:
        return None
    parent = os.path.dirname(resume.directory)
    if os.path.basename(resume.directory) == "checkpoints" and os.path.exists(os.path.join(parent, "config.json")):
        return parent
    recorded = resume.config.get("run_dir")
    return recorded if recorded and os.path.isdir(recorded) else None


def _check_total(config: RunConfig, start: int) -> None:
    if start and start >= config.num_updates:
        raise ConfigError("total_steps", f"{config.total_steps:,} steps ({config.num_updates} updates) do not go past "
                          f"the checkpoint, which is at update {start} ({start * config.steps_per_update:,} steps); "
                          f"give a larger --total-steps to continue training")
