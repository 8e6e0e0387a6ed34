"""The peers `scripts/bench_peer_programs.py` times, where their source comes from, and their venvs.

Each peer runs from its own source tree (a git checkout at a pinned commit: the setup step
prints how to get it; nothing of it is in this repository) in its own venv, because each pins
a jax podrl cannot share. `setup(peer, venv_root, src_root)` builds the venv with `pip install`
of the pins below (the versions the peer's lock file or pyproject names, where PyPI has them)
and says whether the source tree is in place.

    python scripts/bench_peer_programs.py --setup-peer stoix   # or purejaxrl, purejaxql, all
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
VENV_ROOT = Path(os.environ.get("PODRL_PEER_VENVS", Path.home() / ".cache" / "podrl" / "peers"))
"""Where the peers' venvs live (`<root>/<peer>`); $PODRL_PEER_VENVS overrides."""
SRC_ROOT = Path(os.environ.get("PODRL_PEER_SRC", Path.home() / ".cache" / "podrl" / "peer-src"))
"""Where the peers' source trees live (`<root>/<peer>`); $PODRL_PEER_SRC overrides."""


@dataclasses.dataclass(frozen=True)
class Peer:
    """One peer program: its source, its venv's pins, its driver and the file the driver imports."""

    name: str
    repo: str  # git URL of the source
    commit: str  # the commit measured
    entry: str  # the peer's file the driver imports, relative to its source root
    driver: str  # our driver under scripts/peers/
    pins: tuple[str, ...]  # pip requirements of its venv
    jax_note: str  # why its jax differs from podrl's

    def python(self, venv_root: Path = VENV_ROOT) -> Path:
        return venv_root / self.name / "bin" / "python"

    def source(self, src_root: Path = SRC_ROOT) -> Path:
        return src_root / self.name

    def how_to_get_source(self, src_root: Path = SRC_ROOT) -> str:
        dest = self.source(src_root)
        return f"git clone {self.repo} {dest} && git -C {dest} checkout {self.commit}"


PEERS = {p.name: p for p in (
    Peer("stoix", "https://github.com/EdanToledo/Stoix", "8fff19c94a478c1e1ff75fbf10396d488aa25d70",
         "stoix/systems/ppo/sebulba/ff_ppo.py", "stoix_sebulba_ppo.py",
         ("jax==0.5.3", "jaxlib==0.5.3", "flax==0.10.5", "chex==0.1.89", "optax==0.2.4", "distrax==0.1.5",
          "rlax==0.1.6", "tensorflow-probability==0.25.0", "stoa-env==0.1.2", "envpool==1.2.5",
          "orbax-checkpoint==0.11.10", "neptune==1.13.0", "wandb==0.19.8", "tensorboard-logger==0.1.0",
          "hydra-core==1.3.2", "gymnasium==1.1.1", "flashbax==0.1.3", "protobuf==3.20.3", "colorama", "rich", "pandas",
          "etils"),
         "pyproject pins jax>=0.4.25,<0.6.0 (uv.lock: 0.5.3); envpool is podrl's 1.2.5 (its lock: 0.8.4)"),
    Peer("purejaxrl", "https://github.com/luchris429/purejaxrl", "31756b197773a52db763fdbe6d635e4b46522a73",
         "purejaxrl/ppo.py", "purejaxrl_ppo.py",
         ("jax==0.4.38", "jaxlib==0.4.38", "flax==0.10.2", "optax==0.2.4", "chex==0.1.88", "distrax==0.1.5",
          "tensorflow-probability==0.25.0", "gymnax==0.0.9"),
         "no pin of its own; gymnax 0.0.9 and distrax 0.1.5 run on jax 0.4.38 (the purejaxql pin, kept alike)"),
    Peer("purejaxql", "https://github.com/mttga/purejaxql", "47af6d7b35c89ddfe633aaf7341bdb8964cb7cce",
         "purejaxql/pqn_minatar.py", "purejaxql_pqn.py",
         ("jax==0.4.38", "jaxlib==0.4.38", "flax==0.10.2", "optax==0.2.4", "chex==0.1.88", "gymnax==0.0.9",
          "hydra-core==1.3.2", "omegaconf", "wandb==0.19.8"),
         "pyproject pins jax>=0.4.16,<=0.4.38"),
)}


def source_status(peer: Peer, src_root: Path = SRC_ROOT) -> str | None:
    """None when `peer`'s source tree holds its entry file, else how to get it."""
    if (peer.source(src_root) / peer.entry).is_file():
        return None
    return f"{peer.name} source not found at {peer.source(src_root)}; get it with: {peer.how_to_get_source(src_root)}"


def setup(peer: Peer, venv_root: Path = VENV_ROOT, src_root: Path = SRC_ROOT, python: str | None = None) -> int:
    """Creates `peer`'s venv under `venv_root` and pip-installs its pins; reports its source tree."""
    venv = venv_root / peer.name
    subprocess.run([python or sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *peer.pins])
    print(f"{peer.name} venv {venv}: {'ready' if done.returncode == 0 else 'pip failed'} ({' '.join(peer.pins)})")
    print(source_status(peer, src_root) or f"{peer.name} source: {peer.source(src_root)} (commit {peer.commit})")
    return done.returncode
