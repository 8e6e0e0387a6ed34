"""Recording one greedy episode of a policy as a video (mp4, else GIF, else PNG frames).

Only gymnasium envs render `rgb_array` frames; a JAX env with a gymnasium twin
(CartPole-v1, Acrobot-v1, Pendulum-v1: the same dynamics) is recorded in
gymnasium's version.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Callable

import gymnasium
import jax
import numpy as np

from podrl.cli.policy import EvalEnv, PolicyError, describe_error
from podrl.envs.schemes import SCHEMES, split


def gymnasium_id(name: str) -> str | None:
    """The gymnasium id behind an env name ('CartPole-v1', 'jax:CartPole-v1'), or None."""
    form, rest = split(name)
    for candidate in (name, rest if form is SCHEMES["jax"] else name):
        if candidate in gymnasium.registry:
            return candidate
    return None


def record_video(agent, params, make_env: Callable[[], Any], directory: str, seed: int, max_steps: int) -> str:
    """Plays one greedy episode in `make_env()` (render_mode="rgb_array") and saves it under `directory`.

    mp4 via gymnasium's RecordVideo when moviepy is installed; otherwise a GIF
    (PIL) or PNG frames (matplotlib). Returns a message saying what was written;
    raises PolicyError when nothing could be.
    """
    os.makedirs(directory, exist_ok=True)
    env = make_env()
    if getattr(env, "render_mode", None) != "rgb_array":
        env.close()
        raise PolicyError(f"the env renders {getattr(env, 'render_mode', None)!r}, not 'rgb_array'")
    if importlib.util.find_spec("moviepy") is not None:
        from gymnasium.wrappers import RecordVideo

        env = RecordVideo(env, directory, episode_trigger=lambda _: True, name_prefix="eval")
        _play(agent, params, env, seed, max_steps, frames=None)
        env.close()
        return f"video: wrote an mp4 to {directory}"
    frames: list[np.ndarray] = []
    _play(agent, params, env, seed, max_steps, frames)
    env.close()
    return save_frames(frames, directory)


def _play(agent, params, env, seed: int, max_steps: int, frames: list | None) -> None:
    act = jax.jit(agent.act_greedy)
    actor_state = agent.init_actor_state(1)
    obs, _ = env.reset(seed=seed)
    for _ in range(max_steps):
        if frames is not None:
            frames.append(np.asarray(env.render()))
        obs = np.asarray(obs)
        obs = obs.astype(np.float32) if np.issubdtype(obs.dtype, np.floating) else obs
        action, actor_state = act(params, actor_state, obs[None])
        action = np.asarray(action)[0]
        obs, _, terminated, truncated, _ = env.step(action.item() if action.ndim == 0 else action)
        if terminated or truncated:
            break
    if frames is not None:
        frames.append(np.asarray(env.render()))


def save_frames(frames: list[np.ndarray], directory: str) -> str:
    """Saves frames as `eval.gif` (PIL) or `frame_00000.png`... (matplotlib); a message says which."""
    if not frames:
        raise PolicyError("the episode produced no frames")
    if importlib.util.find_spec("PIL") is not None:
        from PIL import Image

        path = os.path.join(directory, "eval.gif")
        images = [Image.fromarray(np.asarray(f, np.uint8)) for f in frames]
        images[0].save(path, save_all=True, append_images=images[1:], duration=40, loop=0)
        return f"video: moviepy is not installed; wrote a GIF of {len(frames)} frames to {path}"
    if importlib.util.find_spec("matplotlib") is not None:
        import matplotlib.pyplot as plt

        for i, frame in enumerate(frames):
            plt.imsave(os.path.join(directory, f"frame_{i:05d}.png"), np.asarray(frame, np.uint8))
        return f"video: moviepy and PIL are not installed; wrote {len(frames)} PNG frames to {directory}"
    raise PolicyError("none of moviepy, PIL or matplotlib is installed (pip install moviepy)")


def try_video(agent, params, env: EvalEnv, directory: str, seed: int, max_steps: int) -> str:
    """`record_video` for a gymnasium env name; any failure becomes a message (never raises).

    A JAX env with a gymnasium twin (CartPole-v1, Acrobot-v1, Pendulum-v1: same
    dynamics) is recorded in gymnasium's version, which can render.
    """
    gym_id = gymnasium_id(env.name)
    if gym_id is None:
        return f"video: skipped, {env.name!r} is not a gymnasium env (only those render rgb_array frames)"
    try:
        return record_video(agent, params, lambda: gymnasium.make(gym_id, render_mode="rgb_array"),
                            directory, seed, max_steps)
    except Exception as e:  # noqa: BLE001 - a video is a bonus, never a reason to fail
        return f"video: skipped, recording {gym_id!r} failed: {describe_error(e)}"
