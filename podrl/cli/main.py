"""The `podrl` command: one subcommand per thing a user runs.

    podrl anakin --env CartPole-v1 agent:ppo --agent.learning-rate 1e-3   # train (Anakin layout)
    podrl sebulba --env ale:Pong agent:impala                           # train (Sebulba layout)
    podrl evaluate runs/r --episodes 100                                # a checkpoint's greedy policy
    podrl launch --num-processes 2 -- podrl anakin --num-envs 8         # a local CPU pod
    podrl checkpoints runs/r --last                                     # the latest complete checkpoint
    podrl reproduce cartpole-ppo --seeds 3                              # a preset over seeds, into a report
    podrl plot runs/r --out plots                                       # learning curves of run folders
    podrl --help                                                        # every subcommand, one line each

Each subcommand is a module's `main(argv) -> exit status`, imported only when it runs (so
`podrl --help` starts no JAX); `podrl <subcommand> --help` is that subcommand's own help.
`python -m podrl` is the same command; the launchers in `scripts/` call `launch(<subcommand>)`.
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple, Sequence

PROG = "podrl"


class Subcommand(NamedTuple):
    """Where a subcommand lives and what it does."""

    target: str  # "module:function", called as function(*args, argv=<the words after the subcommand>)
    summary: str  # one line for `podrl --help`
    args: tuple[str, ...] = ()  # leading positional arguments of the call


SUBCOMMANDS = {
    "anakin": Subcommand("podrl.cli.train:run_cli", "train with the Anakin layout: JAX env and agent in one "
                         "program per device", ("anakin",)),
    "sebulba": Subcommand("podrl.cli.train:run_cli", "train with the Sebulba layout: host envs, actor threads, "
                          "learner devices", ("sebulba",)),
    "evaluate": Subcommand("podrl.cli.evaluate:main", "run the greedy policy of a checkpoint for some episodes"),
    "launch": Subcommand("podrl.cli.launch:main", "run a training command as N local processes (a CPU pod "
                         "through jax.distributed on 127.0.0.1)"),
    "checkpoints": Subcommand("podrl.cli.scripting:checkpoints_main", "list the complete checkpoints of a "
                              "checkpoint or run folder (for scripts: --last, exit 1 when none; no JAX)"),
    "retry-decision": Subcommand("podrl.cli.scripting:retry_decision_main", "retry, done or stop after a run, "
                                 "from its exit status and log (the supervisor's rule, for restart scripts)"),
    "reproduce": Subcommand("podrl.reports.reproduce:main", "run a preset over seeds and write a report "
                            "beside its published figure"),
    "plot": Subcommand("podrl.reports.plot:main", "plot the metrics.jsonl of run folders as PNG files"),
    "aggregate": Subcommand("podrl.reports.reproduce:aggregate_main", "IQM and optimality gap over the seeds and games "
                            "of reproduction reports"),
    "population-summary": Subcommand("podrl.reports.population:main", "the figures and sentences of a "
                                     "population (PBT) report from its runs' metrics"),
    "profile-summary": Subcommand("podrl.reports.profile:main", "where a training call spends its time, "
                                  "from a --profile trace"),
}
"""Subcommand name -> where it lives (`podrl --help` lists them in this order)."""


def usage() -> str:
    """`podrl --help`: the usage line and one line per subcommand."""
    width = max(len(name) for name in SUBCOMMANDS)
    lines = [f"usage: {PROG} <subcommand> [flags ...]   ({PROG} <subcommand> --help for its flags)", "",
             "Distributed reinforcement learning in JAX, in the Podracer layouts (Anakin and Sebulba).", "",
             "subcommands:"]
    lines += [f"  {name:<{width}}  {sub.summary}" for name, sub in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs `podrl <subcommand> ...` (`argv`: the words after `podrl`; default `sys.argv[1:]`); its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"{PROG}: error: unknown subcommand {name!r} (one of: {', '.join(SUBCOMMANDS)}; "
              f"see {PROG} --help)", file=sys.stderr)
        return 2
    sub = SUBCOMMANDS[name]
    module, _, function = sub.target.partition(":")
    run = getattr(importlib.import_module(module), function)
    program, sys.argv[:1] = sys.argv[:1], [f"{PROG} {name}"]  # argparse and tyro name it in usage lines
    try:
        return run(*sub.args, argv=rest)
    finally:
        sys.argv[:1] = program


def launch(name: str) -> int:
    """`podrl <name>` with this process's arguments: what a launcher in `scripts/` runs."""
    return main([name, *sys.argv[1:]])
