"""podrl.reports.population (`podrl population-summary`): the population report's figures come from its records."""

import subprocess
import sys
from pathlib import Path

import pytest

from podrl.reports import population as ps

ROOT = Path(__file__).resolve().parents[2]

REPORT = ROOT / "docs" / "results" / "pbt-acrobot"


def records(pbt: bool) -> list[dict]:
    """3 members over 3 records; with `pbt`, member 2 copies member 0 at the second record."""
    lr = [[1e-3, 2e-5, 3.14159e-4], [1e-3, 2e-5, 1.2e-3], [1.1e-3, 2e-5, 1.2e-3]] if pbt else [[1e-3, 2e-5, 3e-4]] * 3
    rows = []
    for i in range(3):
        row = {"step": 100 * (i + 1), "wall_time": 1.0 + i, "sps": 50.0 + i, "hp/learning_rate_per_seed": lr[i],
               "episode_return_per_seed": [-10.0 + i, -50.0, -20.0]}
        if i == 2:
            row["eval_return_per_seed"] = [-30.0, -12.0, -11.0]  # the slowest member is not the worst here
        if pbt and i == 1:
            row["pbt/parent"] = [0, 1, 0]
        rows.append(row)
    return rows


def test_sentences_say_the_final_values_and_the_worst_members_by_each_score():
    text = ps.summary({"PBT": records(True), "no PBT": records(False)}, "learning_rate")
    assert "| 300 | -12.0 / -30.0 / -11.0 | -12.0 / -30.0 / -11.0 |" in text
    assert "PBT: 3 s from the logger's start" in text and "1 exploit steps, 1 copies" in text
    assert "first 1.0e-3, 2.0e-5, 3.1e-4; final 1.100e-3, 2.000e-5, 1.200e-3." in text
    assert "Worst by training return at 300 steps: member 1 (-50.0; started at learning_rate 2.0e-5)" in text
    assert "Worst by greedy eval at 300 steps: member 0 (-30.0; started at learning_rate 1.0e-3)" in text


def test_the_readme_block_is_replaced_and_a_missing_block_is_an_error():
    text = f"head\n{ps.BEGIN}\nold figures\n{ps.END}\ntail\n"
    assert ps.replace_block(text, "new") == f"head\n{ps.BEGIN}\nnew\n{ps.END}\ntail\n"
    with pytest.raises(ValueError, match="population_summary"):
        ps.replace_block("no block", "new")


def test_the_committed_pbt_report_says_what_its_records_say():
    """No figure in the generated block of docs/results/pbt-acrobot/README.md is typed by hand
    (it said 3.2e-3 / 6.2e-3 for final learning rates of 3.147e-3 / 6.146e-3)."""
    block = ps.summary({"PBT": ps.load(REPORT / "metrics-pbt.jsonl"),
                        "no PBT": ps.load(REPORT / "metrics-no-pbt.jsonl")}, "learning_rate")
    readme = (REPORT / "README.md").read_text()
    assert ps.replace_block(readme, block) == readme
    assert "3.147e-3" in readme and "6.146e-3" in readme


@pytest.mark.timeout(120)
def test_the_command_rewrites_a_readme(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# r\n{ps.BEGIN}\n{ps.END}\n")
    done = subprocess.run([sys.executable, "-m", "podrl", "population-summary",
                           str(REPORT / "metrics-pbt.jsonl"), "--labels", "PBT", "--readme", str(readme)],
                          capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    assert "final 3.147e-3" in readme.read_text()
