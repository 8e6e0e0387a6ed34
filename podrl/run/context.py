"""One run, whatever the layout: its directory, logger, checkpoints, update range and stops.

Both layouts' training runs open a `RunContext` (checking a resume first) and hand it to the one run
loop, `podrl.run.driver.drive` (its module doc shows the loop): `restore` (the checkpoint's state on
this mesh, or the fresh one), `after_update` after every call (periodic saves; True: a stop agreed),
`finish` (the final save and the closing line; what stopped the run: `podrl.run.outcome.STOPPED_BY`).

Saves run in the background (`podrl.run.checkpoint`); leaving the context waits for the last.
With several processes a stop signal to any of them stops all after the same call
(`stop_requests`, `podrl.run.preemption`).

Resuming (`config.checkpoint.resume`) continues the same run: the checkpoint's
config is checked before anything is written or compiled (the env and the agent are
built before the run, by the layout's `setup.py`), only the fields declared
`MAY_CHANGE` (`podrl.run.options`) may differ, its update count is the first
update, logging continues in the run directory the checkpoint was written from
(`metrics.jsonl` appended, TensorBoard purged past the checkpoint, steps and
wall time continuing), and a total that does not go past the checkpoint is a
`ConfigError` on `total_steps`. A checkpoint of another process or learner-shard count is
restored onto this run's mesh (`podrl.core.learner_state.Placement`); its env-step count (saved
with it) goes on exactly, and what moved or was dropped is said (`resume_note`).
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from podrl.core.errors import ConfigError, UserInputError
from podrl.core.keys import eval_seed
from podrl.core.learner_state import Placement
from podrl.core.types import AgentConfig
from podrl.run.checkpoint import ResumePoint, RunCheckpoints, saved_topology
from podrl.run.checkpoint_folder import complete_steps
from podrl.run.config import RunConfig
from podrl.run.config_json import jsonable, resolved_config
from podrl.run.control import SaveSchedule, StopRequests
from podrl.run.logging import RunLogger
from podrl.run.options import may_change_on_resume
from podrl.run.outcome import STOP_AFTER_UPDATES, STOP_AT_RETURN
from podrl.run.preemption import PodStopRequests
from podrl.run.resume import find_resume_point


def stop_requests() -> StopRequests:
    """This run's stop requests: `StopRequests` in a single-process run, else a `PodStopRequests` (a signal to
    any process stops every one after the same call: `podrl.run.control`)."""
    return StopRequests() if jax.process_count() == 1 else PodStopRequests()


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
        try:
            self._open(config, agent_config, full_config)
            failure = None
        except Exception as e:  # noqa: BLE001 - every process must hear of it before any raises
            failure = e
        try:
            _agree_on_start(failure)
        except PeerStartError:
            self.checkpoints.close()  # nothing opened yet: no save has started
            self.logger.close()
            raise

    def _open(self, config: RunConfig, agent_config: AgentConfig, full_config: Any) -> None:
        """What `__init__` does; raises what stops the run from starting (on this process)."""
        self.config = config
        layout = config.layout
        resolved = resolved_config(layout, config, agent_config)
        resume = None
        if config.checkpoint.resume is not None:  # fields newer than the checkpoint count as their defaults
            defaults = resolved_config(layout, type(config)(), _with_defaults(agent_config))
            resume = find_resume_point(config.checkpoint, resolved, defaults, may_change_on_resume(type(config)))
        self.start = resume.update if resume is not None else 0
        saved_steps = saved_topology(resume.config).get("env_steps") if resume is not None else None
        self._steps_at_start = config.logged_steps(self.start, jax.process_count()) if saved_steps is None \
            else int(saved_steps)  # a checkpoint of another process count: its own count goes on
        _check_total(config, self.start)
        _check_folder_not_taken(config.checkpoint.directory, resume)
        stop_after = config.checkpoint.stop_after_updates
        self.limit = min(config.num_updates, self.start + stop_after) if stop_after else config.num_updates
        self.logger = RunLogger(
            config.logging, default_name=f"{config.env.replace(':', '.')}__{layout}__seed{config.seed}",
            config=resolved if full_config is None else {**resolved, **jsonable(full_config)}, tag=layout,
            run_dir=continued_run_dir(resume), resume_step=self.logged_steps(self.start) if resume else None)
        try:
            self.checkpoints = RunCheckpoints(config.checkpoint, self.logger.run_dir, resolved, resume)
        except BaseException:
            self.logger.close()
            raise
        self._stop = stop_requests()
        self._calls = 0  # training calls done by this job: the stop agreement's counter
        self._schedule = SaveSchedule(config.checkpoint.every_updates, config.checkpoint.every_seconds, self.start)
        self._learner_shards: int | None = None  # the placement's, once restored (recorded with each save)
        self.resume_note: str | None = None  # what a resume on another learner-shard count moved or dropped

    def __enter__(self) -> "RunContext":
        self._stop.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.__exit__(*exc)
        self.checkpoints.close()
        self.logger.close()

    def restore(self, fresh: Any, placement: Placement | None = None) -> Any:
        """The state to start from: the checkpoint's on `placement`'s mesh (`RunCheckpoints.restore`; a
        checkpoint of another learner-shard count moved by the layout's rule, which this says in a
        line now, in the closing line and as a `resume/...` record), or `fresh`."""
        self._learner_shards = placement.learner_shards if placement is not None else None
        state = self.checkpoints.restore(fresh, placement)
        moved = self.checkpoints.resharded
        if moved is not None:
            saved = saved_topology(self.checkpoints.resume.config)
            self.resume_note = _reshard_note(saved, jax.process_count(), placement.learner_shards, moved)
            self.logger.info_everywhere(self.resume_note)
            if moved:
                record = {f"resume/{name}": count for name, count in moved.items()}
                self.logger.log(self._steps_at_start, {"updates": self.start, **record})
        return state

    def save(self, update: int, state: Any, params: Any) -> None:
        """Starts saving checkpoint `update` (in the background, `podrl.run.checkpoint`) with where the run stands."""
        topology = {"processes": jax.process_count(), "env_steps": self.logged_steps(update)}
        if self._learner_shards is not None:
            topology["learner_shards"] = self._learner_shards
        self.checkpoints.save(update, state, params, topology)

    def logged_steps(self, updates: int) -> int:
        """The env-step count logged after `updates` updates (over all processes): the checkpoint's count
        plus what this job's processes added since (exact across a change of process count)."""
        return self._steps_at_start + self.config.logged_steps(updates - self.start, jax.process_count())

    def eval_seed(self, update: int) -> int:
        """The seed of the greedy evaluation after `update` updates (`podrl.core.keys.eval_seed`)."""
        return eval_seed(self.config.seed, update)

    @property
    def stop_requested(self) -> str | None:
        """"SIGINT"/"SIGTERM" once such a signal stopped the run (in a multi-process run: once every
        process agreed to stop, whichever process got it), else None."""
        return self._stop.reason()

    def after_update(self, update: int, state: Any, params: Any) -> bool:
        """Call after each training call (every process, every call): saves a periodic checkpoint when
        due; True when a stop signal asked the run to stop (with several processes: when they all
        agreed to stop after this call, `podrl.run.preemption`)."""
        stop = self._stop.agreed(self._calls)
        self._calls += 1
        if stop:
            return True
        if self._schedule.due(update):
            self.save(update, state, params)
            self._schedule.saved(update)
        return False

    def finish(self, update: int, state: Any, params: Any, sps: float, eval_return: Any,
               reached_target: bool = False) -> str | None:
        """Saves the final checkpoint and prints the closing line.

        Returns what stopped the run early (one of `podrl.run.outcome.STOPPED_BY`: the signal, STOP_AT_RETURN when
        `reached_target`, else STOP_AFTER_UPDATES), or None when it ran to its total.
        """
        self.save(update, state, params)
        early = update < self.config.num_updates
        stopped_by = self.stop_requested or (STOP_AT_RETURN if reached_target and early else None) or (
            STOP_AFTER_UPDATES if early else None)
        by = self._stop.describe() if self.stop_requested else stopped_by  # a pod's says which process(es) asked
        greedy = format_return(eval_return)
        where = f"; checkpoint in {self.checkpoints.directory}" if self.checkpoints.directory else ""
        moved = f"; {self.resume_note}" if self.resume_note else ""
        self.logger.info_everywhere(f"{'stopped by ' + by if stopped_by else 'done'} at update {update}: "
                                    f"{sps:,.0f} SPS, greedy return {greedy}{where}{moved}")
        return stopped_by

    def note_failure(self, error: BaseException) -> None:
        """Adds the last good checkpoint to `error`'s message, once a save still in flight is on disk
        (the updates before the failure are kept, not only the ones before the last finished save)."""
        try:
            self.checkpoints.wait()
        except Exception as failed:  # noqa: BLE001 - the run's own error is the one to raise
            error.add_note(f"the save in flight failed too: {failed!r}")
        error.add_note(self.checkpoints.describe_last())


def _with_defaults(agent_config: AgentConfig) -> AgentConfig:
    """`agent_config`'s class built with its defaults (what a field newer than a checkpoint counts as), or
    `agent_config` itself when the class has a field without a default (a user's own may)."""
    try:
        return type(agent_config)()
    except TypeError:
        return agent_config


def _check_folder_not_taken(directory: str | None, resume: ResumePoint | None) -> None:
    """ConfigError("checkpoint.directory") when this run would write its checkpoints into a folder that
    holds another run's steps without resuming from it: said before anything is written or compiled,
    rather than at the run's first save (orbax refuses a step that exists)."""
    if directory is None or (resume is not None and os.path.abspath(resume.directory) == os.path.abspath(directory)):
        return
    steps = complete_steps(directory)
    if steps:
        raise ConfigError("checkpoint.directory", f"{directory} already holds checkpoints of a run (updates "
                          f"{', '.join(map(str, steps))}); continue that run with --resume {directory}, or give an "
                          "empty or new folder")


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


def _reshard_note(saved: dict[str, int], processes: int, shards: int, moved: dict[str, int]) -> str:
    """One line on a resume onto another learner-shard count: what moved, what was dropped."""
    def where(p: Any, d: Any) -> str:
        return f"{p} process{'es' if p != 1 else ''} with {d} learner shard{'s' if d != 1 else ''} in all"

    head = f"resumed on another topology: {where(saved.get('processes', '?'), saved['learner_shards'])} -> " \
           f"{where(processes, shards)}"
    if not moved:
        return head
    if "restarted" in moved:
        return f"{head}; the per-shard state (the agent gives no rule to move it) restarted empty"
    return f"{head}; per-shard state (replay) kept {moved['kept']:,} items, dropped {moved['dropped']:,}" + \
        (" (the oldest of each shard; the buffers refill as training goes on)" if moved["dropped"] else "")


class PeerStartError(UserInputError):
    """Another process of this run could not start it (a check only it makes failed): this one stops too,
    with status 2 like the process that said why."""

    label = "stopped"


def _agree_on_start(failure: Exception | None) -> None:
    """Raises `failure` where this process could not start the run, and on every other process of a
    multi-process run a `PeerStartError` naming the processes that could not: a check that only process 0
    makes (its run folder is taken, W&B is missing) must not leave the others to train alone until JAX's
    heartbeat ends them. One small all-gather, before anything is compiled."""
    if jax.process_count() > 1:
        failed = np.asarray(multihost_utils.process_allgather(np.int32(failure is not None)))
        others = [int(i) for i in np.flatnonzero(failed) if i != jax.process_index()]
        if failure is None and others:
            names = ", ".join(str(i) for i in others)
            raise PeerStartError(f"process{'es' if len(others) > 1 else ''} {names} of this run could not start it "
                                 f"(the error is in {'their' if len(others) > 1 else 'its'} output), so process "
                                 f"{jax.process_index()} stops too")
    if failure is not None:
        raise failure
