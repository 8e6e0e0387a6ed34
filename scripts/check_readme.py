"""Run every command of README.md as written, shortened only in its step counts.

Extracts the ```bash blocks' commands (backslash continuations joined) and the
```python example files whose first line names them (`# my_pkg/walk.py`), writes
those files into a scratch folder that links the repository's packages and
scripts (so it looks like the repository root, where the README's commands run)
and runs the commands there, in README order (a later command may use what an
earlier one wrote, e.g. `--resume runs/long`).

Shortening: every training command (also behind `launch_local.py ... --`, and
`reproduce.py`, whose flags after its own `--` go to the training script) gets
its `--total-steps` divided by `--scale` but at least `--default-steps` (which
it gets when it gives none and does not resume), and
`--checkpoint.stop-after-updates` / `--checkpoint.every-updates` are divided
too; benchmarks get `--quick`. A command whose README comment starts with
`Ctrl-C` is sent SIGINT once it says it has compiled (so during its first
training call), as a user would stop it, and must still exit 0. Installs, TPU (`gcloud`) and SLURM (`srun`) lines are listed as skipped.

Usage:
  python scripts/check_readme.py                      # all commands; markdown table + JSON summary
  python scripts/check_readme.py --list               # only show what would run
  python scripts/check_readme.py --only 'resume|plot' --keep /tmp/readme-run
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
SKIP_PREFIXES = ("python3 -m venv", "pip ", "gcloud ", "srun ", "tensorboard ", "#")
TRAIN_SCRIPTS = ("scripts/train_anakin.py", "scripts/train_sebulba.py", "scripts/reproduce.py")
BENCH_SCRIPTS = ("scripts/bench_anakin.py", "scripts/bench_sebulba.py", "scripts/bench_scaling.py",
                 "scripts/bench_peers.py", "scripts/bench_minatar.py")


class Command(NamedTuple):
    line: int  # README line where it starts
    text: str  # the command as the README writes it (continuations joined)
    comment: str  # its trailing comment, if any


def extract(readme: str) -> tuple[dict[str, str], list[Command], list[Command]]:
    """`(example files by path, commands to run, commands skipped)` of a README's code blocks."""
    files: dict[str, str] = {}
    run: list[Command] = []
    skipped: list[Command] = []
    for start, lang, body in _blocks(readme):
        first = body.splitlines()[0] if body.strip() else ""
        if lang == "python" and re.match(r"#\s*[\w/.-]+\.py\b", first):
            files[first.lstrip("# ").split()[0]] = body
        elif lang == "bash":
            for command in _commands(body, start):
                (skipped if command.text.startswith(SKIP_PREFIXES) else run).append(command)
    return files, run, skipped


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
        if arg in TRAIN_SCRIPTS:
            end = argv.index("--", i) if "--" in argv[i:] else len(argv)
            argv[i + 1:end] = _shorten_training(argv[i + 1:end], scale, default_steps)
            break
        if arg in BENCH_SCRIPTS and "--quick" not in argv:
            argv.insert(i + 1, "--quick")
            break
    return argv


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
    env = {**os.environ, **env_words, "PYTHONPATH": str(ROOT)}
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", default=str(ROOT / "README.md"))
    parser.add_argument("--only", help="run only commands matching this regex")
    parser.add_argument("--list", action="store_true", help="print the commands and exit")
    parser.add_argument("--scale", type=int, default=100, help="divide step counts by this")
    parser.add_argument("--default-steps", type=int, default=2048,
                        help="total steps of commands that give none (and the floor of shortened totals)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per command")
    parser.add_argument("--keep", help="run in this folder (kept) instead of a temporary one")
    parser.add_argument("--json", help="also write the summary to this file")
    args = parser.parse_args()

    files, commands, skipped = extract(Path(args.readme).read_text())
    if args.only:
        commands = [c for c in commands if re.search(args.only, c.text)]
    if args.list:
        for c in commands:
            print(f"README:{c.line}: {' '.join(shorten(shlex.split(c.text), args.scale, args.default_steps))}")
        for c in skipped:
            print(f"README:{c.line}: (skipped) {c.text}")
        return 0
    cwd = Path(args.keep or tempfile.mkdtemp(prefix="podrl-readme-"))
    cwd.mkdir(parents=True, exist_ok=True)
    for name in ("scripts", "podrl", "agents", "envs"):  # README commands run from the repository root
        if not (cwd / name).exists():
            (cwd / name).symlink_to(ROOT / name)
    for path, code in files.items():
        (cwd / path).parent.mkdir(parents=True, exist_ok=True)
        (cwd / path).write_text(code)
    outcomes = []
    for command in commands:
        outcome = run_one(command, cwd, args.scale, args.default_steps, args.timeout)
        outcomes.append(outcome)
        status = "ok" if outcome.returncode == 0 else f"FAILED (exit {outcome.returncode})"
        print(f"README:{command.line} {status} in {outcome.seconds:.0f}s: {outcome.ran}", flush=True)
        if outcome.returncode != 0:
            print(outcome.tail, flush=True)
    return _report(outcomes, skipped, cwd, args.json)


def _report(outcomes: list[Outcome], skipped: list[Command], cwd: Path, json_path: str | None) -> int:
    print("\n| README line | command (as run) | exit | seconds |\n|---:|---|---:|---:|")
    for o in outcomes:
        print(f"| {o.command.line} | `{o.ran.replace(sys.executable, 'python')}` | {o.returncode} | {o.seconds:.0f} |")
    failed = [o for o in outcomes if o.returncode != 0]
    summary = {"commands": len(outcomes), "passed": len(outcomes) - len(failed), "failed": len(failed),
               "failed_lines": [o.command.line for o in failed], "skipped": [c.text for c in skipped],
               "folder": str(cwd)}
    print(json.dumps(summary, indent=2))
    if json_path:
        Path(json_path).write_text(json.dumps(summary, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
