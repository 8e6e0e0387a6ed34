"""Atari evaluation protocols and how each host backend is set up to follow one.

Two protocols, chosen with the env option `protocol` (`--env-kwargs protocol=dqn`):

==========================  ===========================  ===========================
setting                     "machado" (default)          "dqn"
==========================  ===========================  ===========================
sticky actions              p = 0.25 (per frame)         none (p = 0)
no-op starts                none                         up to 30 no-ops
episodic life               no                           a lost life ends the learning
                                                         episode (discount 0); the
                                                         game and its score go on
fire on reset               no                           yes (games that need FIRE)
action set                  minimal (`full_action_space=True` for all 18)
frames                      frame skip 4, max-pool of the last 2 frames, 84x84 grayscale,
                            4 stacked frames (uint8 `[4, 84, 84]`)
episode cap                 108,000 frames (27,000 agent steps), a truncation
rewards                     the raw game rewards: never clipped by the env (clip them
                            in the learner: the agents' `reward_clip`)
==========================  ===========================  ===========================

"machado" is Machado et al. 2018, "Revisiting the Arcade Learning Environment"
(JAIR 61): sticky actions (p = 0.25) instead of no-op starts for stochasticity,
no life signal, the minimal action set by default. "dqn" is the DQN-era protocol
of Mnih et al. 2015, "Human-level control through deep RL" (Nature 518): up to
30 no-op starts and life loss as a training episode end, plus the fire reset of
the OpenAI Baselines wrappers that era's agents were trained with. Both cap
episodes at 108,000 frames (30 minutes at 60 Hz), the cap of ale-py's and
envpool's Atari envs.

Episodic life is applied by podrl on every backend (`life_lost`, from the
backends' `info["lives"]`), never by the backend: ale-py 0.12.1's
`AtariVectorEnv(episodic_life=True)` restarts the whole game at every lost life
in SAME_STEP mode (measured: lives back to 5, frame number 1), so no game score
could be reported. `episode_return` therefore always sums a whole game.

Backends: ale-py's `AtariVectorEnv` (`ale:`) takes every setting; envpool 1.2.5
(`envpool:<Game>-v5`) too, except that it cannot do zero no-ops (see `envpool_kwargs`:
one fixed NOOP frame after a reset); gymnasium's `AtariPreprocessing` fallback has no
fire reset, so "dqn" is refused there.

Options (the `env_kwargs` of an `ale:` or Atari `envpool:` env), checked by
`atari_protocol`: protocol, full_action_space, repeat_action_probability (overrides
the protocol's), max_episode_frames (overrides 108,000), num_threads (the
backend's worker threads; AtariVectorEnv and envpool only) and thread_affinity_offset
(opt-in pinning: worker thread i runs on core offset + i; -1, the default, pins nothing;
AtariVectorEnv and envpool only).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from podrl.envs.errors import ConfigError

FIELD = "env_kwargs"
"""The run-config field whose errors these are."""

OPTIONS = ("protocol", "full_action_space", "repeat_action_probability", "max_episode_frames", "num_threads",
           "thread_affinity_offset")
"""Keys an Atari env accepts (module docstring)."""


@dataclasses.dataclass(frozen=True)
class AtariProtocol:
    """Every setting of an Atari protocol (module docstring), as one backend-neutral record."""

    name: str
    repeat_action_probability: float
    noop_max: int
    episodic_life: bool
    fire_reset: bool
    full_action_space: bool = False
    max_episode_frames: int = 108_000
    num_threads: int = 0  # 0: the backend's default
    thread_affinity_offset: int = -1  # >= 0: worker thread i pinned to core offset + i; -1: no pinning
    frame_skip: int = 4
    screen_size: int = 84
    frame_stack: int = 4

    def describe(self) -> str:
        """One line for the console: the protocol and its settings."""
        return (f"Atari protocol {self.name!r}: sticky actions p={self.repeat_action_probability}, "
                f"{self.noop_max} no-op starts max, episodic life {'on' if self.episodic_life else 'off'}, "
                f"fire reset {'on' if self.fire_reset else 'off'}, "
                f"{'full' if self.full_action_space else 'minimal'} action set, frame skip {self.frame_skip} "
                f"+ max-pool, {self.screen_size}x{self.screen_size} gray x {self.frame_stack}, "
                f"cap {self.max_episode_frames:,} frames, rewards unclipped")


PROTOCOLS = {
    "machado": AtariProtocol("machado", repeat_action_probability=0.25, noop_max=0, episodic_life=False,
                             fire_reset=False),
    "dqn": AtariProtocol("dqn", repeat_action_probability=0.0, noop_max=30, episodic_life=True, fire_reset=True),
}
"""The protocols by name (Machado et al. 2018; Mnih et al. 2015)."""


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(FIELD, f"{key} must be True or False, got {value!r}")


def _number(key: str, value: Any, kind: type, low: float, high: float = float("inf")) -> Any:
    try:
        number = kind(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or not (low <= number <= high) or (kind is int and float(value) != number):
        raise ConfigError(FIELD, f"{key} must be a{'n integer' if kind is int else ' number'} in "
                                 f"[{low}, {high}], got {value!r}")
    return number


def atari_protocol(protocol: str = "machado", **options: Any) -> AtariProtocol:
    """The protocol named `protocol` with `options` applied (strings from the CLI accepted).

    Raises ConfigError("env_kwargs", ...) naming an unknown key, protocol or bad value.
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ConfigError(FIELD, f"{unknown[0]!r} is not an Atari env option; known: {', '.join(OPTIONS)}")
    if protocol not in PROTOCOLS:
        raise ConfigError(FIELD, f"protocol must be one of {sorted(PROTOCOLS)} (machado: Machado et al. 2018; "
                                 f"dqn: Mnih et al. 2015), got {protocol!r}")
    checks = {
        "full_action_space": lambda v: _bool("full_action_space", v),
        "repeat_action_probability": lambda v: _number("repeat_action_probability", v, float, 0.0, 1.0),
        "max_episode_frames": lambda v: _number("max_episode_frames", v, int, 4),
        "num_threads": lambda v: _number("num_threads", v, int, 0),
        "thread_affinity_offset": lambda v: _number("thread_affinity_offset", v, int, -1),
    }
    return dataclasses.replace(PROTOCOLS[protocol], **{k: checks[k](v) for k, v in options.items()})


def refuse(backend: str, setting: str, protocol: AtariProtocol, fix: str) -> ConfigError:
    """The error for a protocol setting a backend cannot give (never deviate silently)."""
    return ConfigError(FIELD, f"protocol {protocol.name!r} needs {setting}, which {backend} does not offer; {fix}")


def ale_vector_kwargs(p: AtariProtocol) -> dict[str, Any]:
    """`ale_py.AtariVectorEnv` keyword arguments (ale-py 0.12.1) for protocol `p`."""
    return dict(
        repeat_action_probability=p.repeat_action_probability, noop_max=p.noop_max, use_fire_reset=p.fire_reset,
        full_action_space=p.full_action_space, max_num_frames_per_episode=p.max_episode_frames,
        frameskip=p.frame_skip, maxpool=True, img_height=p.screen_size, img_width=p.screen_size, grayscale=True,
        stack_num=p.frame_stack, reward_clipping=False, episodic_life=False, life_loss_info=False,
        num_threads=p.num_threads, **_pinning(p),
    )


def envpool_kwargs(p: AtariProtocol) -> dict[str, Any]:
    """`envpool.make` keyword arguments (envpool 1.2.5, which always max-pools the last 2 frames) for `p`.

    envpool's reset takes `uniform{0..noop_max-1} + 1 - fire` NOOP frames, and crashes
    (segfault) with `noop_max=0`; "no no-op starts" is therefore `noop_max=1`: one fixed
    NOOP emulator frame after each reset without fire (deterministic, so no start-state
    randomness is added), none with fire. "up to 30" is `noop_max=30`: 1-30 NOOP frames, 0-29 with fire.
    """
    if p.max_episode_frames % p.frame_skip:
        raise ConfigError(FIELD, f"envpool caps episodes in agent steps: max_episode_frames must be a multiple "
                                 f"of the frame skip {p.frame_skip}, got {p.max_episode_frames}")
    return dict(
        repeat_action_probability=p.repeat_action_probability, noop_max=max(p.noop_max, 1),
        use_fire_reset=p.fire_reset, full_action_space=p.full_action_space,
        max_episode_steps=p.max_episode_frames // p.frame_skip,
        frame_skip=p.frame_skip, img_height=p.screen_size, img_width=p.screen_size, gray_scale=True,
        stack_num=p.frame_stack, reward_clip=False, episodic_life=False, zero_discount_on_life_loss=False,
        num_threads=p.num_threads, **_pinning(p),
    )


def _pinning(p: AtariProtocol) -> dict[str, int]:
    """`thread_affinity_offset` for AtariVectorEnv and envpool (same name in both) when pinning is asked for."""
    return {"thread_affinity_offset": p.thread_affinity_offset} if p.thread_affinity_offset >= 0 else {}


def gymnasium_fallback_kwargs(p: AtariProtocol) -> tuple[dict[str, Any], dict[str, Any]]:
    """`(gymnasium.make kwargs, AtariPreprocessing kwargs)` of the single-env fallback for `p`.

    Refuses what gymnasium's wrappers cannot do: a fire reset, `num_threads` and `thread_affinity_offset`."""
    backend = "gymnasium's ALE v5 + AtariPreprocessing fallback"
    if p.fire_reset:
        raise refuse(backend, "a fire reset", p, "use ale-py >= 0.11 (AtariVectorEnv) or envpool")
    for name, asked in (("num_threads", p.num_threads > 0), ("thread_affinity_offset", p.thread_affinity_offset >= 0)):
        if asked:
            raise ConfigError(FIELD, f"{name} applies to AtariVectorEnv and envpool, not to the {backend}")
    make = dict(frameskip=1, repeat_action_probability=p.repeat_action_probability,
                full_action_space=p.full_action_space, max_num_frames_per_episode=p.max_episode_frames)
    preprocessing = dict(noop_max=p.noop_max, frame_skip=p.frame_skip, screen_size=p.screen_size,
                         grayscale_obs=True, terminal_on_life_loss=False)
    return make, preprocessing


def life_lost(lives_before: np.ndarray, lives: np.ndarray, ended: np.ndarray) -> np.ndarray:
    """`[B]` bool: a life was lost in this step of a game that goes on (episodic life).

    Args:
      lives_before: `[B]` lives after the previous step (or reset).
      lives: `[B]` lives after this step (`info["lives"]`; after the reset where an env's
        game ended and the backend resets in the same step).
      ended: `[B]` bool, the game ended this step (terminated or truncated): never a life
        loss, whatever `lives` says (a new game may have more or fewer lives).
    """
    return (np.asarray(lives) < np.asarray(lives_before)) & ~np.asarray(ended, bool)
