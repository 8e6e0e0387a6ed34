"""Two small subcommands for shell scripts (the restart loops of `deploy/`), which import no JAX and
answer in a fraction of a second:

    podrl checkpoints runs/r --last          # the latest complete checkpoint's update; exit 1 if none
    podrl retry-decision --exit-code 0 job.log   # 'retry: ...', 'done: ...' or 'stop: ...'

`podrl checkpoints PATH` lists the complete checkpoints of a checkpoint folder or of a run folder
holding `checkpoints/` (`podrl.run.checkpoint_folder`: a step orbax is still writing,
`<step>.orbax-checkpoint-tmp-<n>`, never counts), one update a line; with `--last`, the latest
only. It prints nothing and exits 1 when there is none (no folder yet included), so a script
resumes with `if podrl checkpoints "$CKPT" --last >/dev/null; then ... --resume "$CKPT"; fi`.

`podrl retry-decision --exit-code N LOG ...` says what a restart loop does after a run whose exit
status was N (`srun`'s, `gcloud compute tpus tpu-vm ssh --worker=all`'s, or a process's) and whose
output is in the LOG files: one line, `retry: <why>`, `done: <why>` or `stop: <why>`, by the
rule `podrl launch --supervise` follows (`podrl.run.outcome`). A missing log reads as empty.
"""

from __future__ import annotations

import argparse
import os
import sys

from podrl.run.checkpoint_folder import complete_steps, resume_dir
from podrl.run.outcome import Closing, decide


def checkpoints_main(argv: list[str] | None = None) -> int:
    """`podrl checkpoints PATH [--last]` (module doc); the exit status."""
    parser = argparse.ArgumentParser(description="List the complete checkpoints (their updates) of a checkpoint "
                                                 "folder or a run folder; exit 1 when there is none.")
    parser.add_argument("path", help="a checkpoint folder, or a run folder holding checkpoints/")
    parser.add_argument("--last", action="store_true", help="print the latest complete checkpoint's update only")
    args = parser.parse_args(argv)
    if os.path.exists(args.path) and not os.path.isdir(args.path):
        parser.error(f"{args.path} is a file; give a checkpoint folder or a run folder")
    steps = complete_steps(resume_dir(args.path))
    if not steps:
        print(f"no complete checkpoint in {args.path}", file=sys.stderr)
        return 1
    print("\n".join(map(str, steps[-1:] if args.last else steps)))
    return 0


def retry_decision_main(argv: list[str] | None = None) -> int:
    """`podrl retry-decision --exit-code N LOG ...` (module doc); the exit status (0 unless misused)."""
    parser = argparse.ArgumentParser(description="What a restart loop does after a run: prints 'retry: <why>', "
                                                 "'done: <why>' or 'stop: <why>' (the rule of podrl launch "
                                                 "--supervise).")
    parser.add_argument("--exit-code", type=int, required=True,
                        help="the run's exit status as the shell saw it (128 + N: killed by signal N)")
    parser.add_argument("logs", nargs="+", metavar="LOG", help="the run's output (this job's log only)")
    args = parser.parse_args(argv)
    closing = Closing()
    for path in args.logs:
        if os.path.isfile(path):
            with open(path, errors="replace") as f:
                for line in f:
                    closing.see(line)
    decision = decide(args.exit_code, closing)
    print(f"{decision.action}: {decision.why}")
    return 0
