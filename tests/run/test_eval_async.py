"""Evaluation off the critical path (`eval_async`, `podrl.run.eval_worker`): the background evaluation of update
k's params logs the same greedy returns at the same updates as the synchronous one, in both layouts; a NaN
in its episodes, an exception or a stall stops the run with the synchronous path's error, never a hang."""

from __future__ import annotations

import dataclasses
import json
import threading

import numpy as np
import pytest

from faulty_envs import NaNWhenRepeated
from podrl.anakin import train_anakin
from podrl.core.errors import ConfigError, NonFiniteError
from podrl.envs.adapters.jax_host import JaxHostVectorEnv
from podrl.run.config import CheckpointConfig, LoggingConfig
from podrl.run.eval_worker import EvalWorker
from podrl.run.watchdog import StageTimeout
from podrl.sebulba import train_sebulba
from tiny_runs import AGENT, anakin, sebulba


def evals(history) -> list[tuple[int, int, list[float]]]:
    """(updates, step, eval returns) of every record with an evaluation."""
    return [(r["updates"], r["step"], np.atleast_1d(r["eval_return"]).tolist()) for r in history if "eval_return" in r]


def check_same_evals(sync, background, at: list[int]) -> None:
    expected = evals(sync.history)
    assert [e[0] for e in expected] == at
    assert len({str(e[2]) for e in expected}) == len(at), expected  # they differ: a later update's params would show
    assert evals(background.history) == expected
    own = [r for r in background.history if "eval_return" in r]
    assert all(set(r) == {"step", "updates", "eval_return"} for r in own), own  # records of their own
    np.testing.assert_array_equal(background.final_eval_return, sync.final_eval_return)
    np.testing.assert_array_equal(np.atleast_1d(background.final_eval_return), expected[-1][2])


@pytest.mark.timeout(300)
def test_anakin_async_eval_logs_the_sync_returns_at_the_same_updates(cpu_devices):
    config = anakin(env="CartPole-v1", eval_every=4, total_steps=8 * 16 * 16, updates_per_call=2)
    sync = train_anakin(config, AGENT)
    background = train_anakin(dataclasses.replace(config, eval_async=True), AGENT)
    check_same_evals(sync, background, [4, 8, 12, 16])


@pytest.mark.timeout(300)
def test_sebulba_async_eval_logs_the_sync_returns_at_the_same_updates(cpu_devices):
    config = sebulba(env="jax:CartPole-v1", eval_every=2, total_steps=4 * 8 * 12, lag="0")
    sync = train_sebulba(config, AGENT)
    background = train_sebulba(dataclasses.replace(config, eval_async=True), AGENT)
    check_same_evals(sync, background, [2, 4, 6, 8, 10, 12])


@pytest.mark.timeout(240)
def test_async_eval_in_flight_at_a_stop_is_awaited_and_written(cpu_devices, tmp_path):
    """Stopped after update 8 (an evaluation point): its evaluation, still running, is awaited, written to
    metrics.jsonl at update 8's step as its own record, and is the result's final eval return."""
    logging = LoggingConfig(run_dir=str(tmp_path), run_name="r", console=False, tensorboard=False)
    config = anakin(env="CartPole-v1", eval_every=4, total_steps=8 * 16 * 16, updates_per_call=2, eval_async=True,
                    logging=logging, checkpoint=CheckpointConfig(stop_after_updates=8))
    result = train_anakin(config, AGENT)
    assert result.stopped_by == "stop_after_updates"
    records = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    written = [(r["updates"], r["step"], r["eval_return"]) for r in records if "eval_return" in r]
    assert [(u, s) for u, s, _ in written] == [(4, 4 * 8 * 16), (8, 8 * 8 * 16)]
    assert written[-1][2] == pytest.approx(float(result.final_eval_return[0]))
    assert "eval_wait_s" in next(r for r in records if r.get("updates") == 8 and "sps" in r)  # 4 collected there


@pytest.mark.timeout(240)
def test_anakin_async_nan_reward_in_evaluation_stops_the_run(cpu_devices):
    with pytest.raises(NonFiniteError, match=r"non-finite \(NaN/Inf\) reward in 8 of 8 greedy episode\(s\) "
                                             r"of the evaluation after update 4"):
        train_anakin(anakin(total_steps=8 * 16 * 8, eval_every=4, eval_async=True), AGENT, env=NaNWhenRepeated())


@pytest.mark.timeout(240)
def test_sebulba_async_nan_reward_in_evaluation_stops_the_run(cpu_devices):
    factory = lambda j, n: JaxHostVectorEnv(NaNWhenRepeated(), n)  # noqa: E731
    with pytest.raises(NonFiniteError, match=r"reward in 4 of 4 greedy episode\(s\) of the evaluation after update 2"):
        train_sebulba(sebulba(eval_every=2, eval_async=True), AGENT, env_factory=factory)


def test_eval_worker_reraises_and_times_out():
    def fail(params, seed, update):
        raise ValueError(f"broken eval {params} {seed} {update}")

    worker = EvalWorker(fail, timeout_s=5.0)
    assert worker.result() is None and not worker.submitted
    worker.submit("p", 7, 3)
    assert worker.submitted
    with pytest.raises(ValueError, match="broken eval p 7 3"):
        worker.result()
    release = threading.Event()
    stalled = EvalWorker(lambda params, seed, update: release.wait(30), timeout_s=0.2)
    stalled.submit(None, 0, 5)
    with pytest.raises(RuntimeError, match="an evaluation is still in flight"):
        stalled.submit(None, 0, 6)
    with pytest.raises(StageTimeout, match=r"evaluation after update 5 did not finish within 0.2s"):
        stalled.result()
    release.set()


def test_eval_async_must_be_a_bool():
    with pytest.raises(ConfigError, match="eval_async"):
        anakin(eval_async="yes")
