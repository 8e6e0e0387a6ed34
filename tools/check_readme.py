"""Run every command of README.md and docs/*.md as written, shortened only in its step counts.

Reads README.md, then docs/*.md in name order. Extracts the ```bash blocks'
commands (backslash continuations joined) and the ```python example files whose
first line names them (`# my_pkg/walk.py`; a page may run a file another page
shows), writes those files into a scratch folder that links the repository's
packages and scripts (so it looks like the repository root, where the commands
run) and runs the commands there, in page order (a later command may use what an
earlier one wrote, e.g. `--resume runs/long`). Before running anything it checks
that every relative link of those pages (`[text](path)`) names a file or folder
that exists; a broken link fails the check.

Shortening: every training command (`podrl anakin`, `podrl sebulba` or their scripts, also
behind `podrl launch ... --`, and `podrl reproduce`, whose flags after its own `--` go to the
training command) gets
its `--total-steps` divided by `--scale` but at least `--default-steps` (which
it gets when it gives none and does not resume), and
`--checkpoint.stop-after-updates` / `--checkpoint.every-updates` are divided
too; benchmarks (`python -m benchmarks.<name>`) get `--quick`; an example file's `total_steps=N` literals are
divided the same way (a file run by `python FILE.py`). A command whose comment starts with
`Ctrl-C` is sent SIGINT once it says it has compiled (so during its first
training call), as a user would stop it, and must still exit 0. Installs (and a benchmark's
`--setup-peer`, which builds a peer's venv), TPU (`gcloud`) and SLURM (`srun`, `sbatch`) lines and the deploy
scripts (`deploy/*.sh`, `deploy/*.sbatch`: they need a cloud or a cluster; tests/deploy runs them against
simulated ones) are listed as skipped.

Usage:
  python tools/check_readme.py                      # all commands; markdown table + JSON summary
  python tools/check_readme.py --docs docs/agents.md  # only this page's commands (and links)
  python tools/check_readme.py --list               # only show what would run
  python tools/check_readme.py --only 'resume|plot' --keep /tmp/readme-run
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
SKIP_PREFIXES = ("python3 -m venv", "pip ", "gcloud ", "srun ", "sbatch ", "tensorboard ", "#")
DEPLOY_SCRIPT = re.compile(r"(?:^|[\s/])deploy/\w+\.(?:sh|sbatch)\b")
"""A command that runs a deploy script (on a cloud or a cluster): listed as skipped."""
TRAIN_SCRIPTS = ("scripts/train_anakin.py", "scripts/train_sebulba.py", "scripts/reproduce.py")
TRAIN_SUBCOMMANDS = ("anakin", "sebulba", "reproduce")
"""`podrl <subcommand>`s that train (the same as TRAIN_SCRIPTS)."""
BENCH_PACKAGE = "benchmarks."  # `python -m benchmarks.<name>`: every benchmark takes --quick
INSTALL_FLAGS = ("--setup-peer",)  # a benchmark flag that installs (a peer's venv): skipped like pip


class Command(NamedTuple):
    line: int  # line of its page where it starts
    text: str  # the command as the page writes it (continuations joined)
    comment: str  # its trailing comment, if any
    source: str = "README.md"  # its page, relative to the repository root

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def doc_paths(root: Path = ROOT) -> list[Path]:
    """The pages whose commands are checked: README.md, then docs/*.md in name order."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def extract(readme: str, source: str = "README.md") -> tuple[dict[str, str], list[Command], list[Command]]:
    """`(example files by path, commands to run, commands skipped)` of a page's code blocks."""
    files: dict[str, str] = {}
    run: list[Command] = []
    skipped: list[Command] = []
    for start, lang, body in _blocks(readme):
        first = body.splitlines()[0] if body.strip() else ""
        if lang == "python" and re.match(r"#\s*[\w/.-]+\.py\b", first):
            files[first.lstrip("# ").split()[0]] = body
        elif lang == "bash":
            for command in _commands(body, start):
                command = command._replace(source=source)
                words = command.text.split()
                install = command.text.startswith(SKIP_PREFIXES) or any(f in words for f in INSTALL_FLAGS) \
                    or DEPLOY_SCRIPT.search(command.text) is not None
                (skipped if install else run).append(command)
    return files, run, skipped


def extract_pages(paths: list[Path], root: Path = ROOT) -> tuple[dict[str, str], list[Command], list[Command]]:
    """`extract` over several pages, in order; two pages showing one file name differently is an error."""
    files: dict[str, str] = {}
    run: list[Command] = []
    skipped: list[Command] = []
    for path in paths:
        source = _relative(path, root)
        page_files, page_run, page_skipped = extract(path.read_text(), source)
        clashes = [name for name, code in page_files.items() if files.get(name, code) != code]
        if clashes:
            raise ValueError(f"{source} shows {', '.join(clashes)} differently from an earlier page")
        files.update(page_files)
        run += page_run
        skipped += page_skipped
    return files, run, skipped


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """`page:line: target` for every relative markdown link of `path` that names no file or folder.

    Web links (`scheme:`) and links to an anchor of the same page (`#...`) are not checked;
    a link's own `#anchor` is dropped before the path is resolved from the page's folder.
    """
    lines = enumerate(path.read_text().splitlines(), start=1)
    links = [(number, target) for number, line in lines for target in re.findall(r"\]\(([^)\s]+)\)", line)]
    local = [(n, t) for n, t in links if not (re.match(r"^[a-z][a-z0-9+.-]*:", t) or t.startswith("#"))]
    return [f"{_relative(path, root)}:{n}: {t}" for n, t in local if not (path.parent / t.split("#")[0]).exists()]


def _relative(path: Path, root: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _blocks(readme: str):
    lines = readme.splitlines()
    i = 0
    while i < len(lines):
        match = re.match(r"^```(\w+)\s*$", lines[i])
        if match:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            yield i + 2, match.group(1), "\n".join(lines[i + 1:end]) + "\n"
            i = end
        i += 1


def _commands(body: str, first_line: int) -> list[Command]:
    """Commands of a bash block: backslash continuations and multi-line quotes joined."""
    out, pending, pending_line = [], "", 0
    for offset, raw in enumerate(body.splitlines()):
        line = raw.rstrip()
        if not pending:
            pending_line = first_line + offset
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        text = (pending + line.strip()).strip()
        if text and not _closed(text):
            pending = text + " "
            continue
        pending = ""
        code, _, comment = _split_comment(text)
        if code.strip():  # not a comment-only line (#!/bin/bash, #SBATCH ...)
            out.append(Command(pending_line, code.strip(), comment.strip()))
    return out


def _closed(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:  # "No closing quotation"
        return False
    return True


def _split_comment(text: str) -> tuple[str, str, str]:
    """Splits off a trailing `# comment` that is outside quotes."""
    quote = None
    for i, ch in enumerate(text):
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote == ch else ch
        elif ch == "#" and quote is None and (i == 0 or text[i - 1] == " "):
            return text[:i], "#", text[i + 1:]
    return text, "", ""


def shorten(argv: list[str], scale: int, default_steps: int) -> list[str]:
    """The command with its step counts shortened (see the module docstring)."""
    argv = list(argv)
    for i, arg in enumerate(argv):
        if arg in TRAIN_SCRIPTS or (arg in TRAIN_SUBCOMMANDS and i > 0 and argv[i - 1] == "podrl"):
            end = argv.index("--", i) if "--" in argv[i:] else len(argv)
            argv[i + 1:end] = _shorten_training(argv[i + 1:end], scale, default_steps)
            break
        if arg.startswith(BENCH_PACKAGE) and argv[i - 1] == "-m" and "--quick" not in argv:
            argv.insert(i + 1, "--quick")
            break
    return argv


def shorten_source(code: str, scale: int, default_steps: int) -> str:
    """An example file with each `total_steps=N` literal divided by `scale`, at least `default_steps`."""
    def shorter(match: re.Match) -> str:
        return f"total_steps={max(default_steps, int(match.group(1).replace('_', '')) // scale)}"
    return re.sub(r"\btotal_steps=(\d[\d_]*)", shorter, code)


def _shorten_training(flags: list[str], scale: int, default_steps: int) -> list[str]:
    flags = list(flags)
    for name in ("--total-steps", "--checkpoint.stop-after-updates", "--checkpoint.every-updates"):
        if name in flags:
            k = flags.index(name) + 1
            floor = default_steps if name == "--total-steps" else 1
            flags[k] = str(max(floor, int(flags[k]) // scale))
    if "--resume" not in flags and "--total-steps" not in flags:
        flags[:0] = ["--total-steps", str(default_steps)]
    return flags


class Outcome(NamedTuple):
    command: Command
    ran: str
    returncode: int | None
    seconds: float
    tail: str


def run_one(command: Command, cwd: Path, scale: int, default_steps: int, timeout: float) -> Outcome:
    env_words, argv = _split_env(shlex.split(command.text))
    argv = shorten(argv, scale, default_steps)
    if argv[0] == "python":
        argv[0] = sys.executable
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])  # `podrl` beside python
    env = {**os.environ, **env_words, "PYTHONPATH": str(ROOT), "PATH": path}
    ran = " ".join(shlex.quote(a) for a in argv)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines, interrupted, interrupt = [], False, command.comment.startswith("Ctrl-C")
    try:
        for line in proc.stdout:
            lines.append(line)
            if interrupt and not interrupted and "compiled in" in line:  # training has started
                proc.send_signal(signal.SIGINT)
                interrupted = True
            if time.perf_counter() - start > timeout:
                raise subprocess.TimeoutExpired(argv, timeout)
        code = proc.wait(timeout=max(1.0, timeout - (time.perf_counter() - start)))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        lines.append(f"[check_readme] killed after {timeout:.0f} s\n")
        code = None
    if interrupt and not interrupted:
        lines.append("[check_readme] the run never said it had compiled; nothing was interrupted\n")
        code = code if code else 1
    return Outcome(command, ran, code, time.perf_counter() - start, "".join(lines[-12:]))


def _split_env(words: list[str]) -> tuple[dict[str, str], list[str]]:
    env = {}
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


def main() -> int:
    args = _parser().parse_args()
    pages = [Path(p) for p in args.docs] if args.docs else doc_paths()
    broken = [b for page in pages for b in broken_links(page)]
    for link in broken:
        print(f"{link} (broken link: no such file or folder)")
    files, commands, skipped = extract_pages(pages)
    if args.only:
        commands = [c for c in commands if re.search(args.only, c.text)]
    if args.list:
        for c in commands:
            print(f"{c.where}: {' '.join(shorten(shlex.split(c.text), args.scale, args.default_steps))}")
        for c in skipped:
            print(f"{c.where}: (skipped) {c.text}")
        return 1 if broken else 0
    files = {path: shorten_source(code, args.scale, args.default_steps) for path, code in files.items()}
    cwd = _scratch_folder(args.keep, files)
    outcomes = []
    for command in commands:
        outcome = run_one(command, cwd, args.scale, args.default_steps, args.timeout)
        outcomes.append(outcome)
        status = "ok" if outcome.returncode == 0 else f"FAILED (exit {outcome.returncode})"
        print(f"{command.where} {status} in {outcome.seconds:.0f}s: {outcome.ran}", flush=True)
        if outcome.returncode != 0:
            print(outcome.tail, flush=True)
    return _report(outcomes, skipped, broken, cwd, args.json)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", nargs="+", help="check these pages only (default: README.md and docs/*.md)")
    parser.add_argument("--only", help="run only commands matching this regex")
    parser.add_argument("--list", action="store_true", help="print the commands (and broken links) and exit")
    parser.add_argument("--scale", type=int, default=100, help="divide step counts by this")
    parser.add_argument("--default-steps", type=int, default=2048,
                        help="total steps of commands that give none (and the floor of shortened totals)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per command")
    parser.add_argument("--keep", help="run in this folder (kept) instead of a temporary one")
    parser.add_argument("--json", help="also write the summary to this file")
    return parser


def _scratch_folder(keep: str | None, files: dict[str, str]) -> Path:
    """A folder that looks like the repository root (where the pages' commands run), with the example files."""
    cwd = Path(keep or tempfile.mkdtemp(prefix="podrl-readme-"))
    cwd.mkdir(parents=True, exist_ok=True)
    for name in ("scripts", "benchmarks", "podrl", "agents", "envs"):
        if not (cwd / name).exists():
            (cwd / name).symlink_to(ROOT / name)
    for path, code in files.items():
        (cwd / path).parent.mkdir(parents=True, exist_ok=True)
        (cwd / path).write_text(code)
    return cwd


def _report(outcomes: list[Outcome], skipped: list[Command], broken: list[str], cwd: Path,
            json_path: str | None) -> int:
    print("\n| page:line | command (as run) | exit | seconds |\n|---|---|---:|---:|")
    for o in outcomes:
        print(f"| {o.command.where} | `{o.ran.replace(sys.executable, 'python')}` | {o.returncode} | {o.seconds:.0f} |")
    failed = [o for o in outcomes if o.returncode != 0]
    summary = {"commands": len(outcomes), "passed": len(outcomes) - len(failed), "failed": len(failed),
               "failed_lines": [o.command.where for o in failed], "skipped": [c.text for c in skipped],
               "broken_links": broken, "folder": str(cwd)}
    print(json.dumps(summary, indent=2))
    if json_path:
        Path(json_path).write_text(json.dumps(summary, indent=2))
    return 1 if failed or broken else 0


if __name__ == "__main__":
    sys.exit(main())
