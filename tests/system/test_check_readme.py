"""tools/check_readme.py: it finds every command and example file of README.md and docs/*.md, shortens
only step counts, runs commands as written (here: the README's Python example and a custom-JAX-env command
of docs/training.md, which needs the file docs/environments.md shows) and finds broken relative links."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
from tools import check_readme  # noqa: E402

INSTALL_AND_TRAIN = ("python3 -m venv .venv && . .venv/bin/activate && pip install -e . "
                     "&& python scripts/train_anakin.py")
INSTALL_AND_TEST = 'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[dev]" && python -m pytest -q'


def test_extracts_every_command_and_example_file():
    pages = check_readme.doc_paths()
    assert pages[0] == ROOT / "README.md" and len(pages) > 5  # the README, then docs/*.md
    files, commands, skipped = check_readme.extract_pages(pages)
    assert {"quickstart.py", "my_pkg/walk.py", "my_envs.py", "my_dm_envs.py"} <= set(files)
    assert "train_anakin(" in files["quickstart.py"]
    # every page with a bash block contributes its commands, each named by page and line
    with_bash = {str(p.relative_to(ROOT)) for p in pages if "```bash" in p.read_text()}
    assert {c.source for c in commands + skipped} == with_bash
    assert {"README.md", "docs/training.md", "docs/checkpoints.md", "docs/scaling-out.md"} <= with_bash
    first = next(c for c in commands if c.source == "docs/checkpoints.md")
    lines = (ROOT / "docs" / "checkpoints.md").read_text().splitlines()
    assert lines[first.line - 1].startswith(first.text.split(" --")[0]), first
    assert "class Walk" in files["my_pkg/walk.py"]
    texts = [c.text for c in commands]
    for command in ("podrl anakin ", "podrl sebulba ", "podrl launch ", "podrl evaluate ", "podrl plot ",
                    "podrl reproduce ", "-m benchmarks.anakin"):
        assert any(command in t for t in texts), command
    assert any(t.endswith("--resume runs/long") for t in texts)  # the bare resume, as written
    assert any("Ctrl-C" in c.comment for c in commands)  # the run a user interrupts before resuming it
    # continuation lines are joined into one command
    assert any("--agent.no-clip-value-loss" in t and "Pendulum-v1" in t for t in texts)
    skipped_texts = " ".join(c.text for c in skipped)
    assert "pip install" in skipped_texts
    for recipe in ("deploy/tpu_vm.sh setup", "deploy/tpu_spot_loop.sh anakin", "sbatch deploy/slurm.sbatch",
                   "sbatch deploy/slurm_requeue.sbatch"):  # need a cloud or a cluster (tests/deploy simulates them)
        assert recipe in skipped_texts and not any(recipe in t for t in texts), recipe
    assert not any(t.startswith("#") for t in texts)
    assert INSTALL_AND_TRAIN in skipped_texts and INSTALL_AND_TEST in skipped_texts
    assert "python -m benchmarks.peer_ppo --setup-peer" in skipped_texts  # builds a venv: an install


def test_readme_is_a_front_door_to_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for command in (INSTALL_AND_TRAIN, INSTALL_AND_TEST):  # CI and the checks run them as written
        assert f"```bash\n{command}\n```" in readme
    index = (ROOT / "docs" / "README.md").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name != "README.md":
            assert f"(docs/{page.name})" in readme and f"({page.name})" in index, page.name


def test_every_relative_link_of_the_pages_resolves():
    assert [link for page in check_readme.doc_paths() for link in check_readme.broken_links(page)] == []


def test_broken_links_names_each_missing_target(tmp_path):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "r.md").write_text("x")
    page = tmp_path / "docs" / "page.md"
    page.write_text("[ok](results/r.md) [folder](results/) [anchor](results/r.md#top) [web](https://x.org/a)\n"
                    "[same page](#intro) and [from the root](docs/results/r.md), [gone](../nope.py#L3)\n")
    assert check_readme.broken_links(page, root=tmp_path) == [
        "docs/page.md:2: docs/results/r.md", "docs/page.md:2: ../nope.py#L3"]


def test_two_pages_showing_one_file_differently_is_an_error(tmp_path):
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("```python\n# my_envs.py\nX = 1\n```\n")
    b.write_text("```python\n# my_envs.py\nX = 2\n```\n")
    assert check_readme.extract_pages([a, a], root=tmp_path)[0] == {"my_envs.py": "# my_envs.py\nX = 1\n"}
    with pytest.raises(ValueError, match="b.md shows my_envs.py differently"):
        check_readme.extract_pages([a, b], root=tmp_path)


def test_shortens_only_step_counts():
    shorten = check_readme.shorten
    assert shorten(["python", "scripts/train_anakin.py", "--total-steps", "3000000", "--num-envs", "8"], 100, 20000) \
        == ["python", "scripts/train_anakin.py", "--total-steps", "30000", "--num-envs", "8"]
    assert shorten(["python", "scripts/train_anakin.py", "--total-steps", "300000"], 100, 20000)[3] == "20000"
    assert shorten(["python", "scripts/train_anakin.py", "agent:impala"], 100, 20000) \
        == ["python", "scripts/train_anakin.py", "--total-steps", "20000", "agent:impala"]
    assert shorten(["python", "scripts/train_anakin.py", "--resume", "runs/long"], 100, 20000) \
        == ["python", "scripts/train_anakin.py", "--resume", "runs/long"]  # its own total, as a user would
    launched = shorten(["python", "scripts/launch_local.py", "--num-processes", "2", "--", "python",
                        "scripts/train_sebulba.py", "--lag", "1"], 100, 20000)
    assert launched[-4:] == ["--total-steps", "20000", "--lag", "1"] and launched[:4] == [
        "python", "scripts/launch_local.py", "--num-processes", "2"]
    assert shorten(["python", "scripts/train_anakin.py", "--checkpoint.stop-after-updates", "1000",
                    "--checkpoint.every-updates", "100", "--total-steps", "3000000"], 100, 20000)[3:8:2] == [
        "10", "1", "30000"]
    assert shorten(["python", "-m", "benchmarks.anakin", "--out", "b.json"], 100, 20000)[3] == "--quick"
    # the installed command's training subcommands, also behind `podrl launch ... --`
    assert shorten(["podrl", "anakin", "--total-steps", "3000000", "--num-envs", "8"], 100, 20000) \
        == ["podrl", "anakin", "--total-steps", "30000", "--num-envs", "8"]
    assert shorten(["podrl", "reproduce", "cartpole-ppo", "--", "--num-envs", "8"], 100, 20000) \
        == ["podrl", "reproduce", "--total-steps", "20000", "cartpole-ppo", "--", "--num-envs", "8"]
    launched = shorten(["podrl", "launch", "--num-processes", "2", "--", "podrl", "sebulba", "--lag", "1"], 100, 20000)
    assert launched == ["podrl", "launch", "--num-processes", "2", "--", "podrl", "sebulba", "--total-steps",
                        "20000", "--lag", "1"]
    assert shorten(["podrl", "evaluate", "runs/long", "--episodes", "100"], 100, 20000) \
        == ["podrl", "evaluate", "runs/long", "--episodes", "100"]  # not a training command
    code = "config = AnakinConfig(num_seeds=4, total_steps=200_000)\nother = RunConfig(total_steps=30000000)\n"
    assert check_readme.shorten_source(code, 100, 2048) == \
        "config = AnakinConfig(num_seeds=4, total_steps=2048)\nother = RunConfig(total_steps=300000)\n"


@pytest.mark.timeout(400)
def test_runs_the_python_example_and_a_custom_env_command_with_the_extracted_files(tmp_path):
    out = tmp_path / "summary.json"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # a user's machine, not the 8-device test mesh
    # `python quickstart.py` (README.md) and `--env my_pkg.walk:make_walk` (docs/training.md; the file is in
    # docs/environments.md); the other make_walk command differs only in its (shortened) step count
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "check_readme.py"), "--only",
                             "quickstart|make_walk$", "--keep", str(tmp_path / "cwd"), "--json", str(out)],
                            capture_output=True, text=True, timeout=380, env=env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = json.loads(out.read_text())
    assert summary["commands"] == 2 and summary["failed"] == 0 and summary["broken_links"] == []
    assert "README.md:" in result.stdout and "docs/training.md:" in result.stdout
    assert (tmp_path / "cwd" / "my_pkg" / "walk.py").exists()
    assert "total_steps=2048" in (tmp_path / "cwd" / "quickstart.py").read_text()  # shortened like the commands
