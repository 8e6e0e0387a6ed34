"""Atari (ALE) host envs via ale-py: optional, `pip install 'podrl[atari]'` (ale-py).

`make_ale_env("Pong", num_envs, protocol="machado")` returns a `GymnasiumVectorEnv` over

* ale-py's own batched `ale_py.AtariVectorEnv` (C++ threads, ale-py >= 0.11)
  when available, run in SAME_STEP autoreset mode; or else
* gymnasium's `ALE/<Game>-v5` single envs (needs opencv) with gymnasium's
  `AtariPreprocessing` and `FrameStackObservation`,

set up to follow an Atari protocol (`podrl.envs.adapters.atari`: "machado", the
default, or "dqn"). Either way observations are uint8 `[B, 4, 84, 84]`, actions
Discrete, rewards the raw game rewards (never clipped here) and `episode_return`
the game's score. The returned env's `protocol` attribute says which settings it
follows (`env.protocol.describe()`).
"""

from __future__ import annotations

import importlib.util
import re
from functools import partial
from types import ModuleType
from typing import Any

import gymnasium
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

from podrl.envs.adapters.atari import AtariProtocol, ale_vector_kwargs, atari_protocol, gymnasium_fallback_kwargs
from podrl.envs.adapters.gymnasium import GymnasiumVectorEnv
from podrl.envs.adapters.optional import MissingExtraError, import_optional
from podrl.envs.errors import UnknownEnvError


def import_ale() -> ModuleType:
    """`ale_py`, or an ImportError naming the pip extra."""
    return import_optional("ale_py", "ALE", "atari", "ale-py")


def game_names(name: str) -> tuple[str, str]:
    """(rom name, gymnasium CamelCase name) for "Pong", "ALE/Pong-v5", "MsPacman" or "ms_pacman"."""
    match = re.fullmatch(r"(?:ALE/)?([A-Za-z0-9_]+?)(?:-v\d+)?", name)
    if match is None:
        raise UnknownEnvError(f"not an Atari game name: {name!r} (try 'Pong' or 'ALE/Pong-v5')")
    game = match.group(1)
    if "_" in game or game.islower():
        rom = game.lower()
        camel = "".join(part.capitalize() for part in rom.split("_"))
    else:
        rom = re.sub(r"(?<!^)(?=[A-Z])", "_", game).lower()
        camel = game
    return rom, camel


def _preprocessed_atari(env_id: str, make_kwargs: dict[str, Any], preprocessing: dict[str, Any]):
    """One gymnasium ALE env: `gymnasium.make(env_id, **make_kwargs)`, `AtariPreprocessing`, 4 stacked frames."""
    gymnasium.register_envs(import_ale())
    env = AtariPreprocessing(gymnasium.make(env_id, **make_kwargs), **preprocessing)
    return FrameStackObservation(env, 4)


def make_ale_env(game: str, num_envs: int, *, vectorization: str = "sync", use_vector_env: bool | None = None,
                 **options: Any) -> GymnasiumVectorEnv:
    """A host vector env of `num_envs` Atari `game`s (module docstring).

    Args:
      game: "Pong", "ALE/Pong-v5", "ms_pacman", ...
      num_envs: batch size B.
      vectorization: "sync"/"async" for the gymnasium fallback (AtariVectorEnv has its own threads).
      use_vector_env: force (True) or avoid (False) `ale_py.AtariVectorEnv`; default: use it if present.
      **options: Atari options (`podrl.envs.adapters.atari.OPTIONS`: protocol, full_action_space, ...);
        an unknown one is a ConfigError naming `env_kwargs`.
    """
    protocol = atari_protocol(**options)
    ale_py = import_ale()
    rom, camel = game_names(game)
    if rom not in ale_py.roms.get_all_rom_ids():
        raise UnknownEnvError(f"unknown Atari game {game!r} (ROM {rom!r}); known: ale_py.roms.get_all_rom_ids()")
    has_vector = hasattr(ale_py, "AtariVectorEnv")
    if use_vector_env and not has_vector:
        raise MissingExtraError(f"ale-py {ale_py.__version__} has no AtariVectorEnv; upgrade ale-py (>= 0.11)")
    if has_vector and use_vector_env is not False:
        vector = ale_py.AtariVectorEnv(rom, num_envs, autoreset_mode="SameStep", **ale_vector_kwargs(protocol))
        env = GymnasiumVectorEnv(vector, episodic_life=protocol.episodic_life)
    else:
        env = _gymnasium_fallback(camel, num_envs, vectorization, protocol)
    env.protocol = protocol
    return env


def _gymnasium_fallback(camel: str, num_envs: int, vectorization: str, protocol: AtariProtocol) -> GymnasiumVectorEnv:
    """gymnasium's `ALE/<camel>-v5` single envs, preprocessed, vectorised (refuses what they cannot do)."""
    make_kwargs, preprocessing = gymnasium_fallback_kwargs(protocol)
    if importlib.util.find_spec("cv2") is None:
        raise MissingExtraError("the gymnasium ALE fallback's AtariPreprocessing (ale-py without AtariVectorEnv) "
                                "needs opencv: pip install opencv-python-headless, or ale-py >= 0.11")
    factory = partial(_preprocessed_atari, f"ALE/{camel}-v5", make_kwargs, preprocessing)
    return GymnasiumVectorEnv(factory, num_envs, vectorization=vectorization, episodic_life=protocol.episodic_life)
