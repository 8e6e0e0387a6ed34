"""The training commands (`podrl anakin`, `podrl sebulba`; `scripts/train_<layout>.py` launch them):
resolve, set up, train, report.

    podrl anakin                                            # PPO, CartPole-v1, all local devices
    podrl anakin --preset minatar-ppo --num-envs 32 agent:ppo --agent.learning-rate 1e-3
    podrl anakin --num-seeds 8 --cpu-devices 2              # 8 seeds on a 2-device CPU mesh
    podrl anakin --cpu-devices 8 --num-envs 8 --population 8 --population-shards 2 \
        --sweep agent.learning_rate=loguniform:1e-4:3e-3 agent.entropy_coef=0.0,0.01   # a sweep, 2 x 4 mesh
    podrl anakin --env my_pkg.my_env:MyEnv                  # your own JaxEnv class
    podrl sebulba --cpu-devices 3                           # PPO, gymnasium CartPole-v1
    podrl sebulba --env ale:Pong --envs-per-thread 16 --lag 1 agent:impala --agent.torso nature_cnn
    podrl sebulba --env dm_env:my_pkg.envs:make_env         # a dm_env.Environment factory
    podrl sebulba --env my_pkg.envs:make_env                # gymnasium / dm_env / vector env factory

`run_cli(layout)` splits the CPU into `--cpu-devices` JAX devices and joins the
multi-process group (before anything can start a JAX backend), resolves the experiment
(`podrl.cli.flags.resolve`), then trains. A `UserInputError` (invalid config, unknown env, unsupported
space, an env that breaks its spec, a missing extra, an unreadable checkpoint) exits 2
with its one-paragraph message `error: <label>: <message>`; the traceback only with
`--debug` / `PODRL_DEBUG=1`. A stalled stage (`StageTimeout`) exits 3 at once, naming
the stage. In a multi-process run, another process's loss (`podrl.run.preemption.ProcessLost`)
exits 4 at once, naming it and the last good checkpoint, and any other failure prints its
traceback and exits 1 at once (a normal exit would wait for the others at JAX's shutdown
barrier; they learn of it through their next collective). `module:attr` env references resolve
from the current folder, as `python -m` would.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import traceback
import typing
from typing import Any, Callable, Sequence

import jax

from podrl.cli.experiment import Experiment
from podrl.cli.flags import resolve
from podrl.core.distributed import DistributedConfig, initialize
from podrl.core.errors import UserInputError
from podrl.run.compile_cache import enable
from podrl.run.outcome import USER_ERROR_EXIT_CODE
from podrl.run.preemption import LOST_EXIT_CODE, ProcessLost
from podrl.run.watchdog import StageTimeout, exit_now


def debug_requested(argv: Sequence[str]) -> tuple[bool, list[str]]:
    """(whether --debug or PODRL_DEBUG=1 asks for tracebacks, argv without --debug)."""
    rest = [a for a in argv if a != "--debug"]
    return len(rest) < len(argv) or os.environ.get("PODRL_DEBUG", "") not in ("", "0"), rest


def report_user_error(error: UserInputError, debug: bool) -> int:
    """Prints `error: <label>: <message>` (after the traceback when `debug`); returns exit status 2."""
    if debug:
        traceback.print_exception(error)
    hint = "" if debug else "\n(add --debug or set PODRL_DEBUG=1 for the traceback)"
    notes = "".join(f"\n{note}" for note in getattr(error, "__notes__", ()))  # e.g. the last good checkpoint
    print(f"error: {error.label}: {error}{notes}{hint}", file=sys.stderr)
    return USER_ERROR_EXIT_CODE


def set_up_devices(argv: Sequence[str]) -> None:
    """`--cpu-devices` and the multi-process group (`DistributedConfig`'s flags), read from `argv` before
    the experiment is resolved: both must take effect before JAX starts a backend, which validating the
    config may do (a gymnax env's params are arrays). tyro parses the same flags again with the rest."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--cpu-devices", type=int)
    hints = typing.get_type_hints(DistributedConfig)
    for field in dataclasses.fields(DistributedConfig):
        flag = field.name.replace("_", "-")
        if hints[field.name] is bool:
            parser.add_argument(f"--{flag}", dest=field.name, action="store_const", const=True)
            parser.add_argument(f"--no-{flag}", dest=field.name, action="store_const", const=False)
        else:
            kind = int if int in (hints[field.name], *typing.get_args(hints[field.name])) else str
            parser.add_argument(f"--{flag}", dest=field.name, type=lambda text, kind=kind: None if text == "None"
                                else kind(text))
    known, _ = parser.parse_known_args(list(argv))
    if known.cpu_devices is not None:
        jax.config.update("jax_num_cpu_devices", known.cpu_devices)
    given = {f.name: getattr(known, f.name) for f in dataclasses.fields(DistributedConfig)}
    initialize(DistributedConfig(**{name: value for name, value in given.items() if value is not None}))


def train(experiment: Experiment) -> Any:
    """Trains `experiment` with its layout; returns the layout's result."""
    enable(experiment.run.compile_cache)  # before anything compiles
    if experiment.layout == "anakin":
        from podrl.anakin import train_anakin

        return train_anakin(experiment.run, experiment.agent, full_config=experiment)
    from podrl.sebulba import train_sebulba

    return train_sebulba(experiment.run, experiment.agent, full_config=experiment)


def run_cli(layout: str, train_fn: Callable[[Experiment], object] = train, argv: list[str] | None = None) -> int:
    """Resolves `argv` for `layout`, sets up devices and calls `train_fn`; returns the exit status."""
    importable_cwd()
    debug, argv = debug_requested(sys.argv[1:] if argv is None else argv)
    try:
        if layout == "sebulba":  # before JAX starts a backend, as the device flags
            from podrl.sebulba.setup import inline_cpu_dispatch

            inline_cpu_dispatch()
        set_up_devices(argv)
        train_fn(resolve(layout, argv))
    except UserInputError as e:
        return report_user_error(e, debug)
    except StageTimeout as e:
        exit_now(e)  # a thread is still blocked in XLA: a normal exit could wait on it for ever
    except ProcessLost as e:
        exit_now(e, LOST_EXIT_CODE)  # a normal exit would wait for the lost process at JAX's shutdown barrier
    except Exception as e:
        if not _several_processes():
            raise
        traceback.print_exception(e)  # then leave at once: the others learn of it through their next collective
        exit_now(e, 1)
    return 0


def _several_processes() -> bool:
    return jax.process_count() > 1


def importable_cwd() -> None:
    """Puts the current folder first on `sys.path`, as `python -m` does (`--env my_envs:Chain`)."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
