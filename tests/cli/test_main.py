"""The `podrl` command (podrl/cli/main.py): its subcommands, their help, an unknown one, the launchers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from podrl.cli.main import SUBCOMMANDS, main

ROOT = Path(__file__).resolve().parents[2]


def test_help_lists_every_subcommand_with_one_line(capsys):
    assert main(["--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = [line.split()[0] for line in lines if line.startswith("  ")]
    assert listed == list(SUBCOMMANDS)
    for name, sub in SUBCOMMANDS.items():
        assert f"  {name.ljust(len(max(SUBCOMMANDS, key=len)))}  {sub.summary}" in lines
    assert main([]) == 2 and "usage: podrl <subcommand>" in capsys.readouterr().out  # nothing asked: usage


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_each_subcommand_has_its_own_help_named_after_it(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith(f"usage: podrl {name} "), out[:300]
    assert sys.argv[0] != f"podrl {name}"  # the program name is put back after the subcommand


def test_an_unknown_subcommand_is_a_one_line_error(capsys):
    assert main(["trian", "--env", "CartPole-v1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "unknown subcommand 'trian'" in captured.err and "anakin, sebulba" in captured.err


@pytest.mark.timeout(200)
@pytest.mark.parametrize("command", [
    [sys.executable, "-m", "podrl", "plot", "--help"],
    [sys.executable, str(ROOT / "scripts" / "plot.py"), "--help"],
    [sys.executable, str(ROOT / "scripts" / "train_sebulba.py"), "--help"],
])
def test_python_m_podrl_and_the_launchers_run_the_subcommands(command, tmp_path):
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    said = " ".join(done.stdout.split())
    assert said.startswith(f"usage: podrl {'sebulba' if 'train_sebulba' in command[1] else 'plot'} "), said[:300]


def test_the_launchers_are_three_lines_of_code():
    for path in sorted((ROOT / "scripts").glob("*.py")):
        if path.name.startswith("bench_"):
            continue
        code = [line for line in path.read_text().splitlines()[1:] if line.strip()]  # after the docstring line
        assert len(code) == 3 and code[0] == "from podrl.cli.main import launch", (path.name, code)
        name = code[2].split('launch("')[1].split('")')[0]
        assert name in SUBCOMMANDS, path.name
