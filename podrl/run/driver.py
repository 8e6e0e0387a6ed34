"""The one run loop, for either layout: it drives a host program through a `RunContext`.

A layout gives a `Program` (`podrl.anakin.program.AnakinProgram`, `podrl.sebulba.program.SebulbaProgram`):
how to init, compile and start it, how far one training call goes, the call itself, evaluation.
Everything else happens here, the same way in both layouts:

    state = run.restore(program.init(), program.placement())   # the checkpoint's (on this mesh), or fresh
    compile, info lines, profiler
    while updates remain:
        call: updates first..last-1 -> (state, record or None)   # NaN/Inf check inside
        record?  evaluate when due, the program's after-record hook (PBT), log / history / progress
        greedy return >= stop_at_return?  stop     # process 0's evaluation decides, for every process
        run.after_update(last, ...)                 # periodic checkpoint; True = a stop signal
    run.finish(...)                                 # final checkpoint, closing line

The schedule is counted in updates in both layouts. A record is written after each call that
produces one (Anakin: every call of `updates_per_call` updates; Sebulba: every `log_every`
updates). The greedy policy is evaluated after the record whose call reached or passed a
multiple of `eval_every` updates, and after the last update. With `eval_async`, that evaluation runs
in a background thread (`podrl.run.eval_worker`) on a copy of the params while training goes on; the
driver waits for it at the next evaluation point (never two in flight, none skipped; the seconds
waited are logged as `eval_wait_s` in that point's record) and after the loop, and logs it as its own record
`{"updates": k, "eval_return": ...}` at update k's step.

Failures: a `NonFiniteError` (a NaN loss, or a NaN/Inf reward or observation from the env) or a
`NoLegalActionError` (an observation to act on whose action mask allows nothing) gets
the last good checkpoint as a note and stops the run; any other failure (an actor, the user's
env, a timeout) first checkpoints the learner's work when the program can (`save_on_failure`:
the state its `failure_state` names, never one whose buffers a call took), and its message says
which checkpoint that is. With several processes a save is collective, so
a failure is never checkpointed; a failure that is another process's loss (a collective fails
when a peer dies) is told from the others by `podrl.run.preemption.lost_processes` and raised as
`ProcessLost`, naming the lost process(es) and the last good checkpoint.

Stops: `run.after_update` is asked after every call on every process; with several processes a
stop signal to any of them is agreed there (`podrl.run.preemption`), so all stop after one call.
With `stop_at_return`, the run also stops after the first evaluation whose greedy return reaches it
(every seed's and member's): the evaluations fall after the same calls on every process, and process 0's
decision is broadcast to the others (a Sebulba pod evaluates on process 0 only).
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple, Protocol

import jax
import numpy as np

from podrl.core.errors import NoLegalActionError, NonFiniteError
from podrl.core.learner_state import Placement
from podrl.run.context import RunContext, format_return
from podrl.run.control import process_0s
from podrl.run.eval_worker import EvalWorker, snapshot
from podrl.run.preemption import ProcessLost, answer_timeout_s, lost_processes
from podrl.run.profiling import CallProfiler


class Program(Protocol):
    """A layout's host program, as the driver sees it."""

    save_on_failure: bool
    """True when the learner's work survives a failed call (`failure_state` is checkpointed before the error is
    raised)."""
    profile_calls: int
    """How many training calls `--profile` traces."""

    def init(self) -> Any:
        """A fresh training state (the driver restores a checkpoint over it when resuming)."""

    def placement(self) -> Placement:
        """How the state lies on the mesh: what a checkpoint is restored onto (`podrl.core.learner_state`)."""

    def compile(self, state: Any) -> float:
        """Compiles what training runs; returns the seconds it took."""

    def start(self, state: Any, start: int, limit: int, compile_seconds: float) -> list[str]:
        """Gets ready to run updates `start..limit-1` (actors started, ...); returns the info lines to print."""

    def call_end(self, first: int, limit: int) -> int:
        """Where the training call that starts at update `first` ends (exclusive, at most `limit`)."""

    def train(self, state: Any, first: int, last: int) -> tuple[Any, dict[str, Any] | None]:
        """Runs updates `first..last-1`; the new state and a log record (None: nothing to log yet).
        Raises NonFiniteError (`podrl.core.finite.check_training`) on a non-finite input or metric."""

    def failure_state(self, done: int, state: Any) -> tuple[int, Any]:
        """After a failed call (with `save_on_failure`): `(updates, state)` to checkpoint, `(done, state)` unless
        the failed call's step already returned a newer state (its input's donated buffers are gone)."""

    def evaluate(self, params: Any, seed: int, update: int) -> Any:
        """The greedy return of `params` (those of update `update`), as host data; None when this program
        does not evaluate. Raises NonFiniteError (`podrl.core.finite.check_evaluation`). May run in another thread."""

    def after_record(self, state: Any, record: dict[str, Any], update: int) -> Any:
        """A hook after each record (PBT's exploit/explore); returns the state to continue from."""

    def progress(self, record: dict[str, Any]) -> dict[str, float | None]:
        """The values of the console's progress line."""

    def params(self, state: Any) -> Any:
        """The params in `state` (saved beside it in checkpoints)."""

    def env_steps_of(self, updates: int) -> int:
        """Env steps done by `updates` updates, over every seed and process (for the closing SPS)."""

    def close(self) -> None:
        """Releases what the program holds (Sebulba: its actor threads and envs); the layout's train.py
        calls it once, after the run or whatever failure, the driver never does."""


class PerSeed(np.ndarray):
    """A `[S]` numpy array of one value per seed or population member (an Anakin result's history values
    and `final_eval_return`) that formats as numbers: `f"{x:.1f}"` is `"500.0"` for one seed and
    `"[500.0, 487.2]"` for several. Everything else is numpy's (`x[0]`, `x.mean()`, comparisons)."""

    def __format__(self, spec: str) -> str:
        if not spec:
            return super().__format__(spec)
        text = [format(v.item(), spec) for v in self.ravel()]
        return text[0] if len(text) == 1 else "[" + ", ".join(text) + "]"


def per_seed(value: Any) -> Any:
    """`value` as a `PerSeed` when it is a 1-D numeric numpy array, else itself."""
    if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "biuf":
        return value.view(PerSeed)
    return value


def _history(step: int, record: dict[str, Any]) -> dict[str, Any]:
    """A history record: `record` at env step `step`, per-seed arrays as `PerSeed`s."""
    return {"step": step, **{key: per_seed(value) for key, value in record.items()}}


class Driven(NamedTuple):
    """What a driven run returns (the layouts wrap it in their result types)."""

    state: Any
    history: list[dict[str, Any]]  # one record per logged call, with its "step"
    eval_return: Any  # the last evaluation's greedy return, or None
    compile_seconds: float
    steps_per_second: float  # env steps per second of training calls (evaluation and compile excluded)
    stopped_by: str | None  # one of podrl.run.outcome.STOPPED_BY, or None (ran to its total)
    updates: int  # the updates done when it ended (the run's total, or fewer when stopped early)


class _Loop:
    """The driver's bookkeeping between calls."""

    def __init__(self, state: Any, start: int, evals: EvalWorker | None):
        self.state, self.done, self.logged_at = state, start, start
        self.history: list[dict[str, Any]] = []
        self.eval_return: Any = None
        self.reached = False  # an evaluation reached `stop_at_return`
        self.evals = evals  # the background evaluation (eval_async), or None: evaluate in the loop
        self.train_seconds = 0.0
        self.calls = 0


def drive(program: Program, run: RunContext) -> Driven:
    """Runs `program` from `run.start` to `run.limit` (see the module docstring)."""
    state = run.restore(program.init(), program.placement())
    compile_seconds = program.compile(state)
    for line in program.start(state, run.start, run.limit, compile_seconds):
        run.logger.info(line)
    config = run.config
    loop = _Loop(state, run.start, EvalWorker(program.evaluate, config.timeout_s) if config.eval_async else None)
    calls = _count_calls(program, run.start, run.limit)
    profiler = CallProfiler(run.config.logging.profile, calls, count=program.profile_calls)
    try:
        while loop.done < run.limit:
            if _one_call(program, run, loop, profiler):
                break
        if loop.evals is not None:  # the last evaluation, before the closing line
            _log_eval(run, loop, loop.evals.result())
    except (NonFiniteError, NoLegalActionError) as error:
        run.note_failure(error)
        raise
    except BaseException as error:  # an actor, env or timeout failure, or a lost process
        _after_failure(program, run, loop, error)
        raise
    finally:
        profiler.stop()
    sps = program.env_steps_of(loop.done - run.start) / max(loop.train_seconds, 1e-9)
    stopped_by = run.finish(loop.done, loop.state, program.params(loop.state), sps, loop.eval_return,
                            reached_target=loop.reached)
    return Driven(loop.state, loop.history, per_seed(loop.eval_return), compile_seconds, sps, stopped_by, loop.done)


def _after_failure(program: Program, run: RunContext, loop: _Loop, error: BaseException) -> None:
    """Keeps the learner's work after a failed call when the program can (one process); with several
    processes, raises `ProcessLost` when the failure is a lost process (module docstring)."""
    if jax.process_count() > 1:
        lost = lost_processes(answer_timeout_s()) if isinstance(error, Exception) else []
        if lost:
            raise ProcessLost(lost, f"after update {loop.done}", run.checkpoints.describe_last()) from error
        return
    if program.save_on_failure:
        _save_after_failure(program, run, loop, error)


def _save_after_failure(program: Program, run: RunContext, loop: _Loop, error: BaseException) -> None:
    """Checkpoints the learner's work after a failed call (`program.failure_state`) and says which
    checkpoint holds it in a note on `error`, the error the user sees. Never a donated state (a call's
    input whose buffers the call took: "Array has been deleted"): then nothing is saved and the note
    names the last good checkpoint; a save that fails too is a note, not the error raised."""
    try:
        update, state = program.failure_state(loop.done, loop.state)
        if donated(state):
            error.add_note(f"the learner's state after update {update} was handed to the training call that "
                           f"failed, so it was not checkpointed; {run.checkpoints.describe_last()}")
            return
        run.save(update, state, program.params(state))
        run.checkpoints.wait()
    except Exception as failed:  # noqa: BLE001 - the run's own error is the one to raise
        error.add_note(f"checkpointing the learner's work failed too ({failed!r}); {run.checkpoints.describe_last()}")
        return
    error.add_note(f"the learner's work before the failure was checkpointed: {run.checkpoints.describe_last()}")


def donated(state: Any) -> bool:
    """Whether any array of `state` was donated to a call (deleted): such a state cannot be saved."""
    return any(isinstance(x, jax.Array) and x.is_deleted() for x in jax.tree.leaves(state))


def _count_calls(program: Program, start: int, limit: int) -> int:
    calls, first = 0, start
    while first < limit:
        first, calls = program.call_end(first, limit), calls + 1
    return calls


def _one_call(program: Program, run: RunContext, loop: _Loop, profiler: CallProfiler) -> bool:
    """Runs one training call and what follows it; True when a stop was asked."""
    first = loop.done
    last = program.call_end(first, run.limit)
    profiler.before(loop.calls)
    t0 = time.perf_counter()
    loop.state, record = program.train(loop.state, first, last)
    loop.train_seconds += time.perf_counter() - t0
    profiler.after(loop.calls)
    loop.calls, loop.done = loop.calls + 1, last
    if record is not None:
        _record(program, run, loop, record, last)
    if loop.reached:  # every process decided the same (`reached_target`): none waits in after_update
        return True
    return run.after_update(last, loop.state, program.params(loop.state))


def eval_due(eval_every: int, previous: int, update: int, limit: int, num_updates: int) -> bool:
    """Whether the record at update `update` (the one before at `previous`) is followed by an evaluation:
    updates `previous+1..update` hold a multiple of `eval_every`, or `update` ends the run."""
    crossed = bool(eval_every) and update // eval_every > previous // eval_every
    return crossed or update in (limit, num_updates)


def _record(program: Program, run: RunContext, loop: _Loop, record: dict[str, Any], update: int) -> None:
    record["updates"] = update
    config = run.config
    if eval_due(config.eval_every, loop.logged_at, update, run.limit, config.num_updates):
        _evaluate(program, run, loop, record, update)
        if config.stop_at_return is not None:
            loop.reached = reached_target(record.get("eval_return"), config.stop_at_return)
    loop.logged_at = update
    loop.state = program.after_record(loop.state, record, update)
    step = run.logged_steps(update)
    run.logger.log(step, record)
    loop.history.append(_history(step, record))
    run.logger.progress(step, run.logged_steps(config.num_updates), record["sps"], program.progress(record))


def reached_target(eval_return: Any, target: float) -> bool:
    """Whether the greedy return `eval_return` (a float, `[S]` per seed or member, or None where this
    process did not evaluate) is at least `target` for every seed; process 0's answer, on every process
    (call it on all of them at the same point)."""
    return process_0s(eval_return is not None and bool(np.all(np.asarray(eval_return) >= target)))


def _evaluate(program: Program, run: RunContext, loop: _Loop, record: dict[str, Any], update: int) -> None:
    """The evaluation after update `update`: into `record` now, or handed to the background worker
    (after logging the previous one, waited for if still running: the seconds waited, maybe 0, in
    `record["eval_wait_s"]`)."""
    params, seed = program.params(loop.state), run.eval_seed(update)
    if loop.evals is None:
        value = program.evaluate(params, seed, update)
        if value is not None:
            record["eval_return"] = loop.eval_return = value
        return
    waited, t0 = loop.evals.submitted, time.perf_counter()
    _log_eval(run, loop, loop.evals.result())
    if waited:
        record["eval_wait_s"] = time.perf_counter() - t0
    loop.evals.submit(snapshot(params), seed, update)  # copied: the next call may donate `params`


def _log_eval(run: RunContext, loop: _Loop, done: tuple[int, Any] | None) -> None:
    """Logs a background evaluation's result `(update, value)` as its own record at that update's step."""
    if done is None or done[1] is None:
        return
    update, loop.eval_return = done
    record = {"updates": update, "eval_return": loop.eval_return}
    step = run.logged_steps(update)
    run.logger.log(step, record)
    loop.history.append(_history(step, record))
    run.logger.info(f"evaluation after update {update}: greedy return {format_return(loop.eval_return)}")
