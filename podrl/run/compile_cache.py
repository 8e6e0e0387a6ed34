"""JAX's persistent compilation cache, on by default for training runs.

A second launch of the same program loads its compiled executables from disk instead of
compiling again (TPU compiles take minutes). The training scripts call `enable` before
anything compiles, with `--compile-cache` (`RunConfig.compile_cache`):

  'auto'  JAX_COMPILATION_CACHE_DIR if set (or a cache folder already set in jax.config),
          else `default_dir()`: $XDG_CACHE_HOME/podrl/jax, or ~/.cache/podrl/jax
  'none'  no persistent cache
  DIR     that folder (created if missing)

JAX caches only programs that took at least `jax_persistent_cache_min_compile_time_secs`
(1 s by default; JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS) to compile. JAX decides whether
the cache is used at the process's first compilation, so `enable` must run before it.
"""

from __future__ import annotations

import os

import jax

from podrl.core.errors import ConfigError

AUTO, NONE = "auto", "none"


def default_dir() -> str:
    """The cache folder under the user's cache directory (XDG_CACHE_HOME, else ~/.cache)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "podrl", "jax")


def resolve(setting: str) -> str | None:
    """The cache folder `setting` ('auto', 'none' or a folder) asks for; None for no cache.

    Raises ConfigError naming `compile_cache` for an empty setting or a path that is a file."""
    if not isinstance(setting, str) or not setting.strip():
        raise ConfigError("compile_cache", f"must be 'auto', 'none' or a folder, got {setting!r}")
    if setting.lower() == NONE:
        return None
    if setting.lower() == AUTO:
        return os.environ.get("JAX_COMPILATION_CACHE_DIR") or jax.config.jax_compilation_cache_dir or default_dir()
    path = os.path.abspath(os.path.expanduser(setting))
    if os.path.isfile(path):
        raise ConfigError("compile_cache", f"{path} is a file, not a folder for the compilation cache")
    return path


def enable(setting: str) -> str | None:
    """Points JAX's persistent compilation cache at `resolve(setting)` (or turns it off); returns the folder."""
    path = resolve(setting)
    if path is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", path)
    return path
