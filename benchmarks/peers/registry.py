"""The peers podrl is timed against: their venvs, pins and source trees, and how a driver runs in one.

Each peer runs in its own venv, because each pins a jax (or a gymnax) podrl cannot share. A peer
published as a program (Stoix, PureJaxRL, purejaxql) runs from its own source tree, a git checkout
at a pinned commit (the setup step prints how to get it; nothing of it is in this repository); a
peer published as a package (rejax) is one of its venv's pins. `setup(peer)` builds the venv with
`pip install` of the pins below (the versions the peer's lock file or pyproject names, where PyPI
has them; `same_jax`: podrl's own jax and jaxlib versions too) and says whether the source tree is
in place. Every peer benchmark takes the same flags for them (`add_peer_flags`):

    python -m benchmarks.peer_programs --setup-peer all   # or stoix, purejaxrl, purejaxql, <peer>-samejax
    python -m benchmarks.peer_ppo --setup-peer            # rejax 0.1.3 (benchmarks.peer_sac's too)
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from benchmarks.harness import run_child, run_process

VENV_ROOT = Path(os.environ.get("PODRL_PEER_VENVS", Path.home() / ".cache" / "podrl" / "peers"))
"""Where the peers' venvs live (`<root>/<peer>`); $PODRL_PEER_VENVS overrides."""
SRC_ROOT = Path(os.environ.get("PODRL_PEER_SRC", Path.home() / ".cache" / "podrl" / "peer-src"))
"""Where the peers' source trees live (`<root>/<peer>`); $PODRL_PEER_SRC overrides."""


@dataclasses.dataclass(frozen=True)
class Peer:
    """One peer: its venv's pins and, for a program, its source and the file the driver imports."""

    name: str  # its folder under the venv root (and under the source root)
    pins: tuple[str, ...]  # pip requirements of its venv
    jax_note: str  # why its jax (or gymnax) differs from podrl's
    repo: str | None = None  # git URL of the source; None: the pins install the peer
    commit: str | None = None  # the commit measured
    entry: str | None = None  # the peer's file the driver imports, relative to its source root
    same_jax: bool = False  # its venv also pins podrl's own jax and jaxlib versions
    src_name: str | None = None  # its source tree's folder, where it shares another peer's (default: name)

    def python(self, venv_root: Path = VENV_ROOT) -> Path:
        return venv_root / self.name / "bin" / "python"

    def source(self, src_root: Path = SRC_ROOT) -> Path:
        return src_root / (self.src_name or self.name)

    def how_to_get_source(self, src_root: Path = SRC_ROOT) -> str:
        dest = self.source(src_root)
        return f"git clone {self.repo} {dest} && git -C {dest} checkout {self.commit}"

    def all_pins(self) -> tuple[str, ...]:
        """`pins`, plus podrl's jax and jaxlib versions when `same_jax`."""
        if not self.same_jax:
            return self.pins
        return (*self.pins, *(f"{name}=={importlib.metadata.version(name)}" for name in ("jax", "jaxlib")))


REJAX = "rejax-0.1.3"
SAME_JAX_NOTE = ("podrl's own jax and jaxlib; the libraries around it at the versions that run on that jax (flax 0.12, "
                 "optax 0.2.8, chex 0.1.92, distrax 0.1.9), gymnax 0.0.9 as the cross-version venv")
STOIX_SAME_JAX = ("flax==0.12.8", "chex==0.1.92", "optax==0.2.8", "distrax==0.1.9", "rlax==0.1.9", "stoa-env==0.1.2",
                  "envpool==1.2.5", "orbax-checkpoint==0.12.8", "neptune==1.13.0", "wandb==0.19.8",
                  "tensorboard-logger==0.1.0", "hydra-core==1.3.2", "gymnasium==1.1.1", "flashbax==0.1.3",
                  "protobuf==3.20.3", "colorama", "rich", "pandas", "etils", "gymnax==0.0.9", "mctx")
PEERS = {p.name: p for p in (
    Peer("stoix", ("jax==0.5.3", "jaxlib==0.5.3", "flax==0.10.5", "chex==0.1.89", "optax==0.2.4", "distrax==0.1.5",
                   "rlax==0.1.6", "tensorflow-probability==0.25.0", "stoa-env==0.1.2", "envpool==1.2.5",
                   "orbax-checkpoint==0.11.10", "neptune==1.13.0", "wandb==0.19.8", "tensorboard-logger==0.1.0",
                   "hydra-core==1.3.2", "gymnasium==1.1.1", "flashbax==0.1.3", "protobuf==3.20.3", "colorama", "rich",
                   "pandas", "etils", "gymnax==0.0.9", "mctx==0.0.5"),
         "pyproject pins jax>=0.4.25,<0.6.0 (uv.lock: 0.5.3); envpool is podrl's 1.2.5 (its lock: 0.8.4); gymnax 0.0.9 "
         "for the MuZero row (its lock takes gymnax from git; podrl's gymnax 1.0.1 needs jax >= 0.6) and mctx 0.0.5 "
         "(its lock's) for ff_mz",
         "https://github.com/EdanToledo/Stoix", "8fff19c94a478c1e1ff75fbf10396d488aa25d70",
         "stoix/systems/ppo/sebulba/ff_ppo.py"),
    Peer("purejaxrl", ("jax==0.4.38", "jaxlib==0.4.38", "flax==0.10.2", "optax==0.2.4", "chex==0.1.88",
                       "distrax==0.1.5", "tensorflow-probability==0.25.0", "gymnax==0.0.9"),
         "no pin of its own; gymnax 0.0.9 and distrax 0.1.5 run on jax 0.4.38 (the purejaxql pin, kept alike)",
         "https://github.com/luchris429/purejaxrl", "31756b197773a52db763fdbe6d635e4b46522a73", "purejaxrl/ppo.py"),
    Peer("purejaxql", ("jax==0.4.38", "jaxlib==0.4.38", "flax==0.10.2", "optax==0.2.4", "chex==0.1.88",
                       "gymnax==0.0.9", "hydra-core==1.3.2", "omegaconf", "wandb==0.19.8"),
         "pyproject pins jax>=0.4.16,<=0.4.38",
         "https://github.com/mttga/purejaxql", "47af6d7b35c89ddfe633aaf7341bdb8964cb7cce", "purejaxql/pqn_minatar.py"),
    # The same programs on podrl's jax (benchmarks.peer_programs' `-samejax` rows, no jax-version control):
    # the same source trees and commits, run by the same drivers.
    Peer("purejaxrl-samejax", ("flax==0.12.8", "optax==0.2.8", "chex==0.1.92", "distrax==0.1.9", "gymnax==0.0.9"),
         SAME_JAX_NOTE, "https://github.com/luchris429/purejaxrl", "31756b197773a52db763fdbe6d635e4b46522a73",
         "purejaxrl/ppo.py", same_jax=True, src_name="purejaxrl"),
    Peer("purejaxql-samejax", ("flax==0.12.8", "optax==0.2.8", "chex==0.1.92", "gymnax==0.0.9", "hydra-core==1.3.2",
                               "omegaconf", "wandb==0.19.8"),
         SAME_JAX_NOTE, "https://github.com/mttga/purejaxql", "47af6d7b35c89ddfe633aaf7341bdb8964cb7cce",
         "purejaxql/pqn_minatar.py", same_jax=True, src_name="purejaxql"),
    Peer("stoix-samejax", STOIX_SAME_JAX, SAME_JAX_NOTE + "; Stoix's driver stands in for two jax 0.10 changes "
         "(benchmarks/peers/stoix_sebulba_ppo.py)", "https://github.com/EdanToledo/Stoix",
         "8fff19c94a478c1e1ff75fbf10396d488aa25d70", "stoix/systems/ppo/sebulba/ff_ppo.py", same_jax=True,
         src_name="stoix"),
    Peer(REJAX, ("rejax==0.1.3", "gymnax==0.0.9"),
         "rejax 0.1.3 needs gymnax 0.0.9, which conflicts with podrl's gymnax; podrl's own jax and jaxlib",
         same_jax=True),
)}


def source_status(peer: Peer, src_root: Path = SRC_ROOT) -> str | None:
    """None when `peer` needs no source tree or its tree holds its entry file, else how to get it."""
    if peer.entry is None or (peer.source(src_root) / peer.entry).is_file():
        return None
    return f"{peer.name} source not found at {peer.source(src_root)}; get it with: {peer.how_to_get_source(src_root)}"


def setup(peer: Peer, venv_root: Path = VENV_ROOT, src_root: Path = SRC_ROOT, python: str | None = None) -> int:
    """Creates `peer`'s venv under `venv_root` and pip-installs its pins; reports its source tree."""
    venv = venv_root / peer.name
    pins = peer.all_pins()
    subprocess.run([python or sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *pins])
    print(f"{peer.name} venv {venv}: {'ready' if done.returncode == 0 else 'pip failed'} ({' '.join(pins)})")
    if peer.entry is not None:
        print(source_status(peer, src_root) or f"{peer.name} source: {peer.source(src_root)} (commit {peer.commit})")
    return done.returncode


def run_driver(python: Path, driver: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """`python -m benchmarks.peers.<driver> <spec JSON>` from the repository root: its result line, with
    `wall_seconds` (its time to result) and `load_1m` (`benchmarks.harness.run_process`), or an `error`."""
    if not python.exists():
        return {"error": f"peer interpreter {python} not found (run --setup-peer)"}
    return run_process([str(python), "-m", f"benchmarks.peers.{driver}", json.dumps(spec)], timeout)


def run_peer(name: str, driver: str, spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """`driver` in peer `name`'s venv under `--venv-root` (its interpreter: `--peer-python` where the
    benchmark has it), its source tree under `--src-root` passed as the spec's `src`; an `error` naming
    what is missing when the venv or the tree is not there."""
    peer = PEERS[name]
    missing = source_status(peer, Path(args.src_root))
    if missing:
        return {"error": missing}
    if peer.entry is not None:
        spec = {**spec, "src": str(peer.source(Path(args.src_root)))}
    return run_driver(peer_python(name, args), driver, spec, args.timeout)


def peer_python(name: str, args: argparse.Namespace) -> Path:
    """Peer `name`'s interpreter: `--peer-python` where given, else its venv's under `--venv-root`."""
    given = getattr(args, "peer_python", None)
    return Path(given) if given else PEERS[name].python(Path(args.venv_root))


def add_peer_flags(parser: argparse.ArgumentParser, names: tuple[str, ...]) -> None:
    """--setup-peer (of one of `names`, or all; bare: the first), --venv-root and --src-root, and for a
    benchmark of one peer --peer-python (another interpreter for it)."""
    if len(names) == 1:
        parser.add_argument("--peer-python", default=None, help="the peer's interpreter (default: its venv's)")
    parser.add_argument("--setup-peer", nargs="?", const=names[0], choices=[*names, "all"],
                        help=f"create that peer's venv and exit (bare: {names[0]})")
    parser.add_argument("--venv-root", default=str(VENV_ROOT), help="the peers' venvs: <root>/<peer>")
    parser.add_argument("--src-root", default=str(SRC_ROOT), help="the peers' source trees: <root>/<peer>")


def setup_peers(args: argparse.Namespace, names: tuple[str, ...]) -> int:
    """`setup` of `--setup-peer`'s peer (or of every one of `names`); the worst pip exit code."""
    chosen = names if args.setup_peer == "all" else (args.setup_peer,)
    return max(setup(PEERS[n], Path(args.venv_root), Path(args.src_root)) for n in chosen)


def compare_envs(module: str, python: Path, driver: str, spec: dict[str, Any], timeout: float,
              compare: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """The same env-check `spec` stepped by podrl (a `--child` of `module`) and by the peer (`driver` run by
    `python`): `compare(ours, theirs)`, or the first line of the first error."""
    ours = run_child(module, spec, timeout)
    theirs = run_driver(python, driver, spec, timeout)
    if "error" in ours or "error" in theirs:
        return {"error": (ours.get("error") or theirs.get("error")).splitlines()[0]}
    return compare(ours, theirs)
