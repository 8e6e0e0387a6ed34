"""benchmarks.peer_sac's bookkeeping, without running either side: steps to the
threshold, medians, ratios, and the "not measured" cells when the peer could not run."""

from benchmarks import peer_sac


def run(sps: float, wall: float, returns: list[float]) -> dict:
    steps = [2048 * (i + 1) for i in range(len(returns))]
    return {"steps_per_second": sps, "compile_seconds": 10.0, "wall_seconds": wall, "eval_steps": steps,
            "eval_returns": returns, "final_return": returns[-1], "load_1m": 3.0}


def test_steps_to_threshold_is_the_first_evaluation_at_or_above_it():
    assert peer_sac.steps_to_threshold(run(1.0, 1.0, [-1200.0, -400.0, -300.0, -150.0])) == 6144.0
    assert peer_sac.steps_to_threshold(run(1.0, 1.0, [-1200.0, -301.0])) is None


def test_summary_takes_medians_and_counts_runs_that_reached_the_threshold():
    runs = [run(100.0, 50.0, [-1000.0, -200.0]), run(300.0, 70.0, [-900.0, -800.0]), {"error": "boom"}]
    s = peer_sac.summarize(runs)
    assert s["steps_per_second"] == 200.0 and s["time_to_budget_seconds"] == 60.0
    assert s["steps_to_threshold"] == 4096.0 and s["reached"] == "1/2" and s["measured"]


def test_a_missing_peer_reads_not_measured_and_has_no_ratio(monkeypatch):
    results = iter([{"error": "peer interpreter /x not found (run --setup-peer)"},
                    run(400.0, 40.0, [-1100.0, -250.0])])
    monkeypatch.setattr(peer_sac, "run_driver", lambda *a, **k: next(results))
    monkeypatch.setattr(peer_sac, "run_child", lambda *a, **k: next(results))
    entry = peer_sac.measure_all(peer_sac.Shared(), 1, "/x", 1.0)
    assert not entry["rejax"]["measured"] and entry["podrl"]["measured"] and entry["steps_ratio"] is None
    assert "error" not in entry  # podrl ran: exit code 0
    text = peer_sac.markdown(entry, {"error": "peer interpreter /x not found"})
    assert "| rejax | not measured |" in text and "| podrl | 400 |" in text and "not checked" in text


def test_a_podrl_failure_is_an_error(monkeypatch):
    results = iter([run(100.0, 50.0, [-1000.0]), {"error": "exit code 1: boom"}])
    monkeypatch.setattr(peer_sac, "run_driver", lambda *a, **k: next(results))
    monkeypatch.setattr(peer_sac, "run_child", lambda *a, **k: next(results))
    entry = peer_sac.measure_all(peer_sac.Shared(), 1, "/x", 1.0)
    assert entry["error"] and entry["rejax"]["measured"] and entry["steps_ratio"] is None
