"""Atari (ALE) host envs via ale-py: optional, `pip install 'podrl[atari]'` (ale-py).

`make_ale_env("Pong", num_envs)` returns a `GymnasiumVectorEnv` over

* ale-py's own batched `ale_py.AtariVectorEnv` (C++ threads, ale-py >= 0.11)
  when available, run in SAME_STEP autoreset mode; or else
* gymnasium's `ALE/<Game>-v5` single envs (needs opencv) with the standard preprocessing
  (`AtariPreprocessing`: 30 no-op starts, frame skip 4, max-pool, 84x84
  grayscale; reward clipped to [-1, 1]; 4 stacked frames).

Both give observations uint8 `[B, 4, 84, 84]`, Discrete actions (the minimal
action set) and no sticky actions (repeat_action_probability 0), life loss is
not an episode end. Keyword arguments go to `AtariVectorEnv` (e.g.
`max_num_frames_per_episode`, `num_threads`) or to `gymnasium.make`.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

from envs.adapters.gymnasium import GymnasiumVectorEnv
from envs.adapters.optional import MissingExtraError, import_optional
from envs.registry import UnknownEnvError


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


def _preprocessed_atari(env_id: str, **kwargs: Any):
    """One gymnasium ALE env with the standard preprocessing (module docstring)."""
    import gymnasium
    from gymnasium.wrappers import AtariPreprocessing, ClipReward, FrameStackObservation

    gymnasium.register_envs(import_ale())
    kwargs = {"frameskip": 1, "repeat_action_probability": 0.0, **kwargs}
    env = gymnasium.make(env_id, **kwargs)
    env = AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True)
    return FrameStackObservation(ClipReward(env, -1.0, 1.0), 4)


def make_ale_env(
    game: str, num_envs: int, *, vectorization: str = "sync", use_vector_env: bool | None = None, **kwargs: Any
) -> GymnasiumVectorEnv:
    """A host vector env of `num_envs` Atari `game`s (module docstring).

    Args:
      game: "Pong", "ALE/Pong-v5", "ms_pacman", ...
      num_envs: batch size B.
      vectorization: "sync"/"async" for the gymnasium fallback (AtariVectorEnv has its own threads).
      use_vector_env: force (True) or avoid (False) `ale_py.AtariVectorEnv`; default: use it if present.
    """
    ale_py = import_ale()
    rom, camel = game_names(game)
    if rom not in ale_py.roms.get_all_rom_ids():
        raise UnknownEnvError(f"unknown Atari game {game!r} (ROM {rom!r}); known: ale_py.roms.get_all_rom_ids()")
    has_vector = hasattr(ale_py, "AtariVectorEnv")
    if use_vector_env and not has_vector:
        raise MissingExtraError(f"ale-py {ale_py.__version__} has no AtariVectorEnv; upgrade ale-py (>= 0.11)")
    if has_vector and use_vector_env is not False:
        return GymnasiumVectorEnv(ale_py.AtariVectorEnv(rom, num_envs, autoreset_mode="SameStep", **kwargs))
    import importlib.util
    from functools import partial

    if importlib.util.find_spec("cv2") is None:
        raise MissingExtraError("the gymnasium ALE fallback's AtariPreprocessing (ale-py without AtariVectorEnv) "
                                "needs opencv: pip install opencv-python-headless, or ale-py >= 0.11")
    factory = partial(_preprocessed_atari, f"ALE/{camel}-v5", **kwargs)
    return GymnasiumVectorEnv(factory, num_envs, vectorization=vectorization)
