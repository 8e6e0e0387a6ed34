"""`podrl reproduce`: run a preset over seeds and write a report beside the published figure.

    podrl reproduce minatar-ppo --env gymnax:Breakout-MinAtar --env gymnax:Asterix-MinAtar --seeds 3
    podrl reproduce cartpole-ppo --seeds 3 --total-steps 200000 --out /tmp/report -- --num-envs 8

For every `--env` (default: the preset's own), an Anakin preset trains all seeds in one
program (`--num-seeds N`); a Sebulba preset runs one process per seed (`--seed i`), each a
`podrl anakin` / `podrl sebulba` process. Flags after `--` go to the training command unchanged. Writes into `--out`
(default
`docs/results/<preset>`):

  README.md               the report: the machine, the commands, a table per env (final return
                          over seeds, greedy eval, the anchor's published return, wall time, SPS)
  <env>.png               learning curve: mean over seeds with a min-max band, the anchor dashed
  <env>.metrics.jsonl     each run's metrics (one file per env; a "seed" key per Sebulba run)
  results.json            the table's numbers, and the invocation that made them

Run folders (checkpoints, TensorBoard) go under `--runs-dir` (default `runs/reproduce`). Paths
are relative to the working directory (run it from the repository root to write into its docs/).

A run stopped before its own final evaluation (`--stop-after-s`) gets its greedy eval from its
last checkpoint: `podrl evaluate RUN_DIR --episodes N` (`--eval-episodes`, default 16),
listed with the report's commands. `--report-only` rebuilds README.md and the PNGs of an
earlier invocation from `--out` (its results.json and metrics) without training, with the
presets' current text and anchors, and evaluates the checkpoints of runs that still lack an
eval if their folders exist:

    podrl reproduce atari-impala --report-only --out docs/results/atari-impala-pong

`--continue` resumes every run of an earlier invocation in `--out` from its last checkpoint
(`podrl <layout> --resume RUN_DIR`, to `--total-steps` if given, else each run's own total;
`--stop-after-s` and flags after `--` apply to the continuation) and rewrites the report over
the whole runs, both invocations named in it (a reproduction cut short by a job slot goes on):

    podrl reproduce atari-impala --continue --out docs/results/atari-impala-pong --total-steps 7000000
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from podrl.cli import presets
from podrl.cli.flags import resolve
from podrl.core.errors import UserInputError
from podrl.reports import aggregate
from podrl.reports.plot import read_records, series
from podrl.reports.report import (
    EnvResult,
    aggregate_table,
    flag_value,
    is_evaluation,
    merge_seed_runs,
    plot_env,
    report,
    scored_results,
    slug,
    spread,
    summarize,
)

PODRL = [sys.executable, "-m", "podrl"]
"""How a `podrl` subcommand runs from here: this interpreter, wherever podrl is installed."""


def shown(argv: list[str]) -> str:
    """A `podrl` subcommand (`argv`: the words after `podrl`) as a report shows it."""
    return "podrl " + shlex.join(argv)


def machine() -> str:
    """One line naming this machine: OS, CPU model and count, JAX version and devices."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    probe = ("import jax; d = jax.devices(); "
             "print(f'jax {jax.__version__}, {len(d)} x {d[0].device_kind} ({d[0].platform})')")
    try:  # in a child process, so this one never holds an accelerator the training runs need
        accel = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                               check=True, env=dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")).stdout.strip()
    except (subprocess.SubprocessError, OSError) as e:
        accel = f"jax devices unknown ({type(e).__name__})"
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} CPU threads ({cpu}), {accel}"


def run_dirs(commands: list[str]) -> list[Path]:
    """The run folder of each training command shown in a report (`--logging.run-dir`/`--logging.run-name`)."""
    dirs = []
    for command in commands:
        words = shlex.split(command)
        root, name = flag_value(words, "--logging.run-dir"), flag_value(words, "--logging.run-name")
        if root and name and not is_evaluation(words):
            dirs.append(Path(root) / name)
    return dirs


def evaluate_checkpoints(result: EnvResult, dirs: list[Path], layout: str, episodes: int) -> EnvResult:
    """`result` with the greedy eval of each seed that has none taken from its run's last checkpoint.

    Anakin keeps all seeds in one run (`--seed-index s`); Sebulba has one run per seed. A seed
    whose run folder or checkpoint is gone keeps nan. Each evaluation's command joins the
    result's commands."""
    evals, commands = list(result.eval_return), list(result.commands)
    for s, value in enumerate(evals):
        run_dir = dirs[0] if layout == "anakin" and dirs else dirs[s] if s < len(dirs) else None
        if math.isfinite(value) or run_dir is None or not (run_dir / "checkpoints").is_dir():
            continue
        command = ["evaluate", str(run_dir), "--episodes", str(episodes), "--json"]
        command += ["--seed-index", str(s)] if layout == "anakin" else []
        print("$ " + shown(command), flush=True)
        done = subprocess.run(PODRL + command, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"[reproduce] warning: the evaluation failed (status {done.returncode}); the seed keeps no eval:\n"
                  + done.stderr[-2000:], flush=True)
            continue
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"[reproduce] seed {s}: greedy return {summary['mean']:.2f} over {summary['episodes']} episodes "
              f"of checkpoint step {summary['step']}", flush=True)
        evals[s] = float(summary["mean"])
        commands.append(shown(command))
    return result._replace(eval_return=evals, commands=commands)


def train_commands(preset: presets.Preset, env: str, seeds: int, total_steps: int | None, run_dir: Path,
                   extra: list[str], stamp: str) -> list[list[str]]:
    """The training command(s) for one env (the words after `podrl`): one Anakin program for all seeds,
    or one Sebulba run per seed.

    Run folders are named `<env>__<stamp>[__seed<i>]`, new for every invocation (`stamp`: its start
    time), so a second reproduction never appends to the metrics of an earlier one."""
    base = [preset.layout, "--preset", preset.name, "--env", env, "--logging.run-dir", str(run_dir)]
    if total_steps is not None:
        base += ["--total-steps", str(total_steps)]
    if preset.layout == "anakin":
        return [base + ["--num-seeds", str(seeds), "--seed", "0", "--logging.run-name", f"{slug(env)}__{stamp}"]
                + extra]
    return [base + ["--seed", str(i), "--logging.run-name", f"{slug(env)}__{stamp}__seed{i}"] + extra
            for i in range(seeds)]


def run(command: list[str], log: Path, stop_after_s: float | None = None) -> None:
    """Runs `podrl <command>` (from the working directory), its output shown and appended to `log`;
    exits on failure.

    With `stop_after_s`, the run gets SIGINT after that many seconds: it stops at its next
    update, checkpoints and exits like a finished run (a wall-clock budget).
    """
    print("$ " + shown(command), flush=True)
    with log.open("a") as out:
        out.write("$ " + shown(command) + "\n")
        proc = subprocess.Popen(PODRL + command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        timer = threading.Timer(stop_after_s, proc.send_signal, (signal.SIGINT,)) if stop_after_s else None
        if timer is not None:
            timer.start()
        try:
            for line in proc.stdout:  # type: ignore[union-attr]
                sys.stdout.write(line)
                out.write(line)
        finally:
            if timer is not None:
                timer.cancel()
        if proc.wait() != 0:
            raise SystemExit(f"error: the command exited with status {proc.returncode}; see {log}")


def invocation_of(argv: list[str], where: str, stop_after_s: float | None) -> dict[str, Any]:
    """What results.json records of the reproduce command that made it."""
    return {"argv": argv, "date": datetime.date.today().isoformat(), "machine": where, "stop_after_s": stop_after_s}


def write_results(out: Path, invocation: dict[str, Any], results: list[EnvResult]) -> None:
    """results.json: the invocation and each env's table row."""
    payload = dict(invocation, envs=[r._asdict() for r in results])
    (out / "results.json").write_text(json.dumps(payload, indent=1) + "\n")


def load_report_records(out: Path, env: str) -> list[dict[str, Any]]:
    """An env's records as `main` summarized them: the metrics file, with one-seed runs merged again."""
    path = out / f"{slug(env)}.metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not any("seed" in r for r in rows):
        return rows
    seeds = sorted({r["seed"] for r in rows})
    return merge_seed_runs([[r for r in rows if r["seed"] == s] for s in seeds])


def collect(preset: presets.Preset, env: EnvResult, dirs: list[Path], out: Path, eval_episodes: int) -> EnvResult:
    """The table row of `env`'s runs in `dirs` (one per seed in Sebulba, one in Anakin), which took
    `env.wall_s` and were made by `env.commands`: writes `<env>.metrics.jsonl` (a "seed" key per
    Sebulba run) and the learning curve into `out`, and evaluates the last checkpoint of a seed
    whose run ended before its own greedy eval."""
    seed_runs = [read_records(d) for d in dirs]
    records = seed_runs[0] if len(seed_runs) == 1 else merge_seed_runs(seed_runs)
    with (out / f"{slug(env.env)}.metrics.jsonl").open("w") as f:
        for i, run_records in enumerate(seed_runs):
            for r in run_records:
                f.write(json.dumps(dict(r, seed=i) if len(seed_runs) > 1 else r) + "\n")
    result = summarize(env.env, records, env.seeds, env.wall_s, env.commands)
    result = evaluate_checkpoints(result, dirs, preset.layout, eval_episodes)
    curve = series(records, "step", "episode_return")
    if curve is not None:
        plot_env(result, curve, preset.anchors.get(env.env), out / f"{slug(env.env)}.png")
    print(f"[reproduce] {env.env}: final return {spread(result.final_return)}, eval {spread(result.eval_return)}, "
          f"{env.wall_s / 60:.1f} min", flush=True)
    return result


def continue_runs(preset: presets.Preset, out: Path, argv: list[str], total_steps: int | None,
                  stop_after_s: float | None, extra: list[str], eval_episodes: int) -> int:
    """--continue: resumes every run of the invocation recorded in `out` from its last checkpoint
    (`podrl <layout> --resume RUN_DIR`, to `total_steps` or the run's own total, with `extra`
    flags), then rewrites the report over the whole of each run. An evaluation of an earlier
    checkpoint is dropped: the continued run's own eval, or one of its last checkpoint, replaces it."""
    invocation, saved = load_results(preset, out, "--continue")
    results = []
    for old in saved:
        train = [c for c in old.commands if not is_evaluation(c)]
        dirs = run_dirs(train)
        if len(dirs) != len(train) or not all((d / "checkpoints").is_dir() for d in dirs):
            raise SystemExit(f"error: --continue needs the checkpoints of every run of {old.env}: {dirs}")
        start, resumed = time.perf_counter(), []
        for run_dir in dirs:
            command = [preset.layout, "--resume", str(run_dir)]
            command += (["--total-steps", str(total_steps)] if total_steps else []) + extra
            run(command, out / "train.log", stop_after_s)
            resumed.append(shown(command))
        wall = old.wall_s + time.perf_counter() - start
        results.append(collect(preset, old._replace(wall_s=wall, commands=train + resumed), dirs, out, eval_episodes))
    invocation.setdefault("continued", []).append(invocation_of(argv, machine(), stop_after_s))
    write_results(out, invocation, results)
    (out / "README.md").write_text(report(preset, results, invocation))
    print(f"[reproduce] report: {out / 'README.md'}")
    return 0


def read_results(out: Path, mode: str) -> tuple[dict[str, Any], list[EnvResult]]:
    """The invocation and the table rows that results.json in `out` records; SystemExit naming `mode`
    (what needs them) where it is missing or older."""
    path = out / "results.json"
    try:
        saved = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"error: {mode} needs {path} from an earlier run: {e}")
    if not isinstance(saved, dict) or "envs" not in saved:
        raise SystemExit(f"error: {path} does not record the invocation that made it (an older reproduce.py "
                         "wrote it); run the reproduction again")
    return {k: v for k, v in saved.items() if k != "envs"}, [EnvResult(**row) for row in saved["envs"]]


def load_results(preset: presets.Preset, out: Path, mode: str) -> tuple[dict[str, Any], list[EnvResult]]:
    """`read_results`, and SystemExit where another preset made them."""
    invocation, results = read_results(out, mode)
    if preset.name not in invocation.get("argv", []):
        raise SystemExit(f"error: {out / 'results.json'} was made by `podrl reproduce "
                         f"{shlex.join(invocation.get('argv', []))}`, not by preset {preset.name}")
    return invocation, results


def report_only(preset: presets.Preset, out: Path, eval_episodes: int) -> int:
    """Rebuilds README.md and the PNGs in `out` from its results.json and metrics (see the module doc)."""
    invocation, saved = load_results(preset, out, "--report-only")
    results = []
    for result in saved:
        result = evaluate_checkpoints(result, run_dirs(result.commands), preset.layout, eval_episodes)
        curve = series(load_report_records(out, result.env), "step", "episode_return")
        if curve is not None:
            plot_env(result, curve, preset.anchors.get(result.env), out / f"{slug(result.env)}.png")
        results.append(result)
    write_results(out, invocation, results)
    (out / "README.md").write_text(report(preset, results, invocation, rebuilt=datetime.date.today().isoformat()))
    print(f"[reproduce] report rebuilt: {out / 'README.md'}")
    return 0


def parse_args(own: list[str]) -> argparse.Namespace:
    """This script's own flags (those before `--`), checked."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("preset", choices=sorted(presets.PRESETS), help="the preset to run")
    parser.add_argument("--env", action="append", help="env id (repeat for several); default: the preset's")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per env (default 3)")
    parser.add_argument("--total-steps", type=int, default=None, help="override the preset's budget")
    parser.add_argument("--out", type=Path, default=None, help="report folder (default docs/results/<preset>)")
    parser.add_argument("--stop-after-s", type=float, default=None,
                        help="stop each training run after this many seconds (SIGINT: it checkpoints and ends)")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs/reproduce"), help="run folders")
    parser.add_argument("--eval-episodes", type=int, default=16,
                        help="greedy episodes when evaluating the last checkpoint of a run stopped before its eval")
    parser.add_argument("--report-only", action="store_true",
                        help="rebuild the report in --out from its results.json and metrics; no training")
    parser.add_argument("--continue", dest="continue_runs", action="store_true",
                        help="resume every run of the report in --out from its last checkpoint (to --total-steps, "
                             "or each run's own total) and rewrite the report over the whole runs")
    args = parser.parse_args(own)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if args.eval_episodes < 1:
        parser.error("--eval-episodes must be at least 1")
    if args.report_only and args.continue_runs:
        parser.error("--report-only and --continue exclude each other")
    if (args.report_only or args.continue_runs) and args.env:
        parser.error("--report-only and --continue take the envs from the report's results.json, not --env")
    return args


def unresolvable(preset, plans: dict[str, list[list[str]]]) -> UserInputError | None:
    """The first error of resolving every planned training command (`podrl.cli.experiment`), else None:
    a bad flag fails here, in seconds, before the first run starts."""
    try:
        for commands in plans.values():
            for command in commands:
                resolve(preset.layout, command[1:])
    except UserInputError as e:
        return e
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    own, extra = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parse_args(own)
    preset = presets.get(args.preset)
    out = (args.out or Path("docs") / "results" / preset.name).resolve()
    if args.report_only:
        return report_only(preset, out, args.eval_episodes)
    if args.continue_runs:
        return continue_runs(preset, out, argv, args.total_steps, args.stop_after_s, extra, args.eval_episodes)
    out.mkdir(parents=True, exist_ok=True)
    runs_dir = (args.runs_dir / preset.name).resolve()
    envs = args.env or [preset.run.get("env", "CartPole-v1")]
    results, stamp = [], time.strftime("%Y%m%d-%H%M%S")
    plans = {env: train_commands(preset, env, args.seeds, args.total_steps, runs_dir, extra, stamp) for env in envs}
    error = unresolvable(preset, plans)
    if error is not None:
        print(f"error: {error.label}: {error}", file=sys.stderr)
        return 2
    invocation: dict[str, Any] | None = None
    for env in envs:
        commands = plans[env]
        start = time.perf_counter()
        for command in commands:
            run(command, out / "train.log", args.stop_after_s)
        wall = time.perf_counter() - start
        dirs = [runs_dir / c[c.index("--logging.run-name") + 1] for c in commands]
        said = [shown(c).replace(str(runs_dir), str(args.runs_dir / preset.name)) for c in commands]
        result = collect(preset, EnvResult(env, args.seeds, 0, [], [], wall, math.nan, said), dirs, out,
                         args.eval_episodes)
        results.append(result._replace(commands=[c.replace(str(runs_dir), str(args.runs_dir / preset.name))
                                                 for c in result.commands]))  # as the train commands show it
        invocation = invocation or invocation_of(argv, machine(), args.stop_after_s)
        write_results(out, invocation, results)
        (out / "README.md").write_text(report(preset, results, invocation))  # after each env
    print(f"[reproduce] report: {out / 'README.md'}")
    return 0


def aggregate_main(argv: list[str] | None = None) -> int:
    """`podrl aggregate REPORT_DIR ...`: the aggregate table over the multi-seed envs with a published
    return of these `podrl reproduce` folders; exit status 2 when they have none, or share an env."""
    parser = argparse.ArgumentParser(description=aggregate.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", type=Path, help="folders written by podrl reproduce (--out)")
    args = parser.parse_args(argv)
    results, published = [], []
    for folder in args.reports:
        invocation, rows = read_results(folder, "podrl aggregate")
        name = next((word for word in invocation.get("argv", []) if word in presets.PRESETS), None)
        if name is None:
            print(f"error: {folder / 'results.json'} names no preset of this version", file=sys.stderr)
            return 2
        preset = presets.get(name)
        results += scored_results(preset, rows)
        published += [preset.anchors[r.env].value for r in scored_results(preset, rows)]
    games = [r.env for r in results]
    if not results or len(set(games)) < len(games):
        said = "share an env" if results else "have no env with more than one seed and a published return"
        print(f"error: the reports {said}: {', '.join(games) or 'none'}", file=sys.stderr)
        return 2
    print("\n".join(aggregate_table(results, published)))
    return 0
