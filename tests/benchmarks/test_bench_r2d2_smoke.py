"""Smoke test of benchmarks/r2d2_sebulba.py, in process: one small point measured, and the replay's bytes of
`minatar-r2d2` from its shapes. No timing is asserted."""

from benchmarks import r2d2_sebulba as bench
from podrl.agents.r2d2 import R2D2Config
from podrl.cli.presets import PRESETS
from podrl.envs.registry import make
from podrl.envs.types import env_spec


def test_r2d2_benchmark_measures_a_point_and_the_replay_bytes(cpu_devices):
    row = bench.measure("jax:RecallCue-v0", 1, 4, 2, R2D2Config(core_size=16, buffer_size=1024, min_fill=48))
    assert row["threads"] == 1 and row["steps_per_second"] > 0 and row["learner_sequences_per_second"] > 0, row
    assert row["time/learner_step_s"] > 0 and row["time/env_step_s"] > 0 and row["policy_lag_mean"] >= 0, row
    # gymnax MinAtar Breakout: float32 [10, 10, 4] observation and next observation, int32 action, float32
    # reward and discount, bool truncated; an LSTM-128 (c, h) per stored sequence of 8 steps
    replay = bench.replay_bytes(R2D2Config(**PRESETS["minatar-r2d2"].agent_fields),
                                env_spec(make("gymnax:Breakout-MinAtar")))
    assert replay["step"] == 2 * 1600 + 4 + 4 + 4 + 1 and replay["start_state"] == 2 * 128 * 4, replay
    assert replay["replayed_window"] == 24 * replay["step"], replay
    assert 8 * replay["step"] + replay["start_state"] < replay["stored_sequence"] < 8 * replay["step"] + 1100, replay
    text = bench.report("jax:RecallCue-v0", 4, [{**row, "load_1m": 1.5}], replay)
    assert "| actor threads | env steps/s |" in text and f"| 1 | {row['steps_per_second']:,.0f} |" in text, text
    assert "3213 bytes per step" in text and "load (1-min average) after each run: 1.5-1.5" in text, text
