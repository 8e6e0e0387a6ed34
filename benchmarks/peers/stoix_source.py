"""What the Stoix drivers share (`stoix_sebulba_ppo`, `stoix_ff_mz`): entering a Stoix source tree and
composing one of its hydra configs. Standard library at import time (hydra inside), so it runs in
the Stoix venv; it never imports podrl."""

from __future__ import annotations

import os
import sys


def enter(spec: dict) -> str:
    """Makes the Stoix tree `spec['src']` (default ~/.cache/podrl/peer-src/stoix) importable and the working
    folder (Stoix's configs name their search path relative to its source root); returns its path."""
    src = os.path.expanduser(spec.get("src", "~/.cache/podrl/peer-src/stoix"))
    os.chdir(src)
    sys.path.insert(0, src)
    return src


def compose(src: str, layout: str, name: str, overrides: list[str]):
    """Stoix's hydra config `stoix/configs/default/<layout>/<name>` with `overrides`, unlocked (Stoix adds
    fields to it as it runs)."""
    import hydra
    from omegaconf import OmegaConf

    config_dir = os.path.join(src, "stoix", "configs", "default", layout)
    with hydra.initialize_config_dir(config_dir=config_dir, version_base="1.2"):
        config = hydra.compose(name, overrides=overrides)
    OmegaConf.set_struct(config, False)
    return config
