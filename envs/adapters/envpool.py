"""EnvPool host envs: optional, `pip install 'podrl[envpool]'` (envpool).

EnvPool (>= 1.0 here; tested with 1.2.5 on Python 3.11) builds a batched
gymnasium `VectorEnv` in C++ with NEXT_STEP autoreset and `reset_mask`
support, so `GymnasiumVectorEnv` drives it: ended envs are reset by mask in the
same adapter step. EnvPool fixes its seed at construction (`reset(seed=...)`
is ignored by envpool), so `EnvpoolVectorEnv.reset(seed)` rebuilds the pool
whenever it needs a new or repeated seed. Only the synchronous mode is
supported (`batch_size` equal to `num_envs`, the default).

Atari tasks (those whose envpool config has `repeat_action_probability`) follow an
Atari protocol (`podrl.envs.adapters.atari`: "machado" by default, or "dqn"): their
keyword arguments are the Atari options (protocol, full_action_space, ...), mapped
onto envpool's; rewards are never clipped and episodic life is podrl's. Other
tasks take `envpool.make` keyword arguments; an unknown one is a ConfigError
naming `env_kwargs`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from podrl.envs.adapters.atari import FIELD, AtariProtocol, atari_protocol, envpool_kwargs
from podrl.envs.adapters.gymnasium import GymnasiumVectorEnv
from podrl.envs.adapters.optional import import_optional
from podrl.envs.errors import ConfigError, UnknownEnvError


def import_envpool() -> ModuleType:
    """`envpool`, or an ImportError naming the pip extra."""
    return import_optional("envpool", "EnvPool", "envpool", "envpool")


class EnvpoolVectorEnv(GymnasiumVectorEnv):
    """An envpool task (e.g. "Pong-v5", "CartPole-v1") as a HostVectorEnv.

    Args:
      task_id: an id from `envpool.list_all_envs()`.
      num_envs: batch size B.
      seed: the seed the pool is built with (`reset(seed)` rebuilds it for another seed).
      **kwargs: Atari options for an Atari task (module docstring), else passed to `envpool.make`.

    Attributes:
      protocol: the `AtariProtocol` an Atari task follows, else None.
    """

    def __init__(self, task_id: str, num_envs: int, seed: int = 0, **kwargs: Any):
        self._envpool = import_envpool()
        if task_id not in self._envpool.list_all_envs():
            raise UnknownEnvError(f"envpool has no task {task_id!r}; see envpool.list_all_envs()")
        if kwargs.get("batch_size", num_envs) != num_envs:
            raise ValueError("only synchronous envpool (batch_size == num_envs) is supported")
        self.protocol, self._make_kwargs = self._settings(task_id, kwargs)
        self.task_id, self._seed, self._fresh = task_id, seed, True
        episodic_life = self.protocol is not None and self.protocol.episodic_life
        super().__init__(self._make(num_envs, seed), episodic_life=episodic_life)

    def _settings(self, task_id: str, options: dict[str, Any]) -> tuple[AtariProtocol | None, dict[str, Any]]:
        """(protocol or None, `envpool.make` kwargs) for `task_id` given the user's `options`."""
        known = self._envpool.make_spec(task_id).config._fields
        if "repeat_action_probability" in known:  # an Atari task
            protocol = atari_protocol(**options)
            return protocol, envpool_kwargs(protocol)
        unknown = sorted(set(options) - set(known) - {"batch_size"})
        if unknown:
            raise ConfigError(FIELD, f"envpool task {task_id!r} has no option {unknown[0]!r}; "
                                     f"known: {', '.join(known)}")
        return None, options

    def _make(self, num_envs: int, seed: int):
        return self._envpool.make(self.task_id, env_type="gymnasium", num_envs=num_envs, seed=seed, **self._make_kwargs)

    def _reset_env(self, seed: int | None):
        if seed is not None and (seed != self._seed or not self._fresh):
            self.env.close()
            self.env, self._seed = self._make(self.num_envs, seed), seed
        self._fresh = False
        return self.env.reset()
