"""benchmarks.harness, what every benchmark shares: interleaved repeats, medians, tables, child processes
(a failing or silent child is an error, never a number) and the JSON document; and that the harness and
the peers' driver module import neither jax nor podrl (a peer's venv imports them)."""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import harness
from benchmarks.peers import registry

ROOT = Path(__file__).resolve().parents[2]


def test_interleave_runs_items_inner_and_rounds_outer(capsys):
    calls = []

    def run(item, repeat):
        calls.append((item, repeat))
        return {"steps_per_second": 10.0 * len(calls), "load_1m": 1.5}

    runs = harness.interleave(["A", "B"], 3, run, lambda item: f"item {item}")
    assert calls == [("A", 0), ("B", 0), ("A", 1), ("B", 1), ("A", 2), ("B", 2)]
    assert [r["steps_per_second"] for r in runs[0]] == [10.0, 30.0, 50.0]
    assert [r["steps_per_second"] for r in runs[1]] == [20.0, 40.0, 60.0]
    log = capsys.readouterr().err.splitlines()
    assert log[0] == "[1/3] item A: 10 steps/s, load 1.5" and log[-1].startswith("[3/3] item B: 60 steps/s")


def test_interleave_sides_groups_each_rows_runs_by_side():
    order = []

    def run(row, side, round_):
        order.append((row, side, round_))
        return {"side": side}

    by_row = harness.interleave_sides(["r1", "r2"], lambda row: ("peer", "podrl") if row == "r1" else ("podrl",), 2,
                                      run, lambda row, side: f"{row} {side}")
    assert order == [("r1", "peer", 0), ("r1", "podrl", 0), ("r2", "podrl", 0),
                     ("r1", "peer", 1), ("r1", "podrl", 1), ("r2", "podrl", 1)]
    assert by_row == [{"peer": [{"side": "peer"}] * 2, "podrl": [{"side": "podrl"}] * 2},
                      {"podrl": [{"side": "podrl"}] * 2}]


def test_medians_spread_and_side_summary_leave_out_failed_runs():
    runs = [{"steps_per_second": 3.0, "wall_seconds": 9.0}, {"error": "exit code 1: boom"},
            {"steps_per_second": 1.0, "wall_seconds": 5.0}, {"steps_per_second": 8.0, "wall_seconds": None}]
    assert harness.median_of(runs, "steps_per_second") == 3.0
    assert harness.median_of(runs, "wall_seconds") == 7.0 and harness.median_of(runs, "missing") is None
    assert harness.spread_of(runs, "steps_per_second") == {"median": 3.0, "min": 1.0, "max": 8.0}
    side = harness.side_summary(runs, {"sps": "steps_per_second", "time": "wall_seconds"})
    assert side == {"sps": 3.0, "time": 7.0, "measured": True, "runs": runs}
    assert harness.side_summary([{"error": "x"}], {"sps": "steps_per_second"})["measured"] is False
    assert harness.ratio(6.0, 3.0) == 2.0 and harness.ratio(None, 3.0) is None and harness.ratio(1.0, 0.0) is None


def test_table_aligns_number_columns_and_fmt_says_na():
    text = harness.table(["row", ">steps/s"], [["a", harness.fmt(1234.5, ",.0f")], ["b", harness.fmt(None, ".1f")]])
    assert text.splitlines() == ["| row | steps/s |", "|---|---:|", "| a | 1,234 |", "| b | n/a |"]
    assert harness.fmt(float("nan"), ".1f") == "n/a" and harness.fmt(float("inf"), ".1f") == "n/a"
    assert harness.load_note([2.0, 0.5], with_cpus=False) == " Host load (1-min average) after each run: 0.5-2.0."
    assert harness.load_note([]) == ""


def test_a_child_result_line_is_read_back_with_wall_seconds_and_load():
    code = f"print('noise'); print({harness.RESULT_PREFIX!r} + '{{\"steps_per_second\": 5.0}}')"
    result = harness.run_process([sys.executable, "-c", code], timeout=60)
    assert result["steps_per_second"] == 5.0 and result["wall_seconds"] > 0 and "load_1m" in result


def test_a_failing_child_is_an_error_with_its_exit_code_and_output_tail():
    code = "import sys; print('partial output'); print('it broke here', file=sys.stderr); sys.exit(3)"
    result = harness.run_process([sys.executable, "-c", code], timeout=60)
    assert result["error"].startswith("exit code 3: ") and "it broke here" in result["error"]
    assert "steps_per_second" not in result
    silent = harness.run_process([sys.executable, "-c", "print('no result line')"], timeout=60)
    assert silent["error"] == "exit code 0: no result line"


def test_a_child_past_its_timeout_is_an_error():
    result = harness.run_process([sys.executable, "-c", "import time; time.sleep(30)"], timeout=1,
                                 load_on_timeout=False)
    assert result["error"] == "timed out after 1s" and "load_1m" not in result and result["wall_seconds"] < 20


def test_run_child_runs_a_benchmark_module_from_the_repository_root():
    """`--child` of a real benchmark: benchmarks.anakin's child refuses a spec that is no Measurement."""
    result = harness.run_child("benchmarks.anakin", {"no_such_field": 1}, timeout=120)
    assert result["error"].startswith("exit code 1: ") and "no_such_field" in result["error"]


def test_finish_writes_the_document_and_exits_1_on_an_error_row(tmp_path, capsys):
    parser = harness.new_parser("doc", quick="tiny", repeats=2, timeout=5.0, child=True)
    args = parser.parse_args(["--out", str(tmp_path / "d.json"), "--note", "quiet machine"])
    assert (args.repeats, args.timeout, args.quick, args.child) == (2, 5.0, False, None)
    rows = [{"name": "a"}, {"name": "b", "error": "exit code 1: boom"}]
    assert harness.finish("demo", args, rows, "| the table |", time.perf_counter(), extra=7) == 1
    assert capsys.readouterr().out == "| the table |\n"
    doc = json.loads((tmp_path / "d.json").read_text())
    assert list(doc)[:5] == ["benchmark", "jax_version", "cpu_count", "python", "timestamp"]
    assert doc["benchmark"] == "demo" and doc["jax_version"] and doc["repeats"] == 2 and doc["quick"] is False
    assert doc["note"] == "quiet machine" and doc["extra"] == 7 and doc["rows"] == rows
    assert len(doc["load_average_at_end"]) == 3 and doc["wall_seconds"] >= 0
    assert harness.finish("demo", args, rows[:1], "", time.perf_counter()) == 0


def test_dispatch_sends_a_child_spec_to_the_child_and_the_rest_to_run():
    parser = harness.new_parser(None, quick="tiny", child=True)
    child = lambda spec: 10 + len(spec)  # noqa: E731
    run = lambda args, start: 20  # noqa: E731
    assert harness.dispatch(["--child", "abc"], parser.parse_args, child, run) == 13
    assert harness.dispatch([], parser.parse_args, child, run) == 20


def test_peer_flags_and_the_rejax_venv_pins_podrls_jax(tmp_path):
    parser = argparse.ArgumentParser()
    registry.add_peer_flags(parser, (registry.REJAX,))
    args = parser.parse_args(["--setup-peer", "--venv-root", str(tmp_path)])
    assert args.setup_peer == registry.REJAX and args.peer_python is None
    assert registry.peer_python(registry.REJAX, args) == tmp_path / registry.REJAX / "bin" / "python"
    pins = registry.PEERS[registry.REJAX].all_pins()
    assert pins[:2] == ("rejax==0.1.3", "gymnax==0.0.9") and f"jax=={harness.jax_version()}" in pins
    assert registry.source_status(registry.PEERS[registry.REJAX], tmp_path) is None  # a package: no source tree
    missing = registry.run_driver(tmp_path / "no-python", "rejax_ppo", {}, timeout=5)
    assert missing == {"error": f"peer interpreter {tmp_path / 'no-python'} not found (run --setup-peer)"}


@pytest.mark.parametrize("module", ["benchmarks.harness", "benchmarks.peers.driver", "benchmarks.peers.registry"])
def test_the_harness_and_the_drivers_module_import_neither_jax_nor_podrl(module):
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'podrl')))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


def test_a_drivers_compiled_call_is_timed_apart_from_its_compile():
    import jax.numpy as jnp

    from benchmarks.peers import driver

    out, compile_seconds, run_seconds = driver.compile_and_run(lambda x: x * 2.0, jnp.arange(3.0))
    assert out.tolist() == [0.0, 2.0, 4.0] and compile_seconds > 0 and run_seconds > 0
