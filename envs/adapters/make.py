"""`make_host_env`: a `HostVectorEnv` by name, for the Sebulba layout.

Accepted names:

==========================  =====================================================
"CartPole-v1"               a gymnasium id (gymnasium.make, sync/async vectorised)
"ALE/Pong-v5"               a gymnasium ALE id (registers ale-py's envs first)
"jax:CartPole-v1"           any `podrl.envs.make` name, stepped on the host CPU
"gymnax:Breakout-MinAtar"   a gymnax env (`podrl.envs.gymnax`), stepped on the host CPU as
                            'jax:gymnax:Breakout-MinAtar' is (the same env)
"craftax:Craftax-Classic-Symbolic-v1"  a Craftax env, likewise
"dm_env:pkg.mod:factory"    a factory of `dm_env.Environment`s
"dmc:cartpole-swingup"      a dm_control suite task (`podrl.envs.adapters.dmc`, flat observations)
"ale:Pong", "ale:ALE/Pong-v5"  Atari via ale-py (`podrl.envs.adapters.ale`)
"envpool:Pong-v5"           an envpool task (`podrl.envs.adapters.envpool`)
"pkg.mod:factory"           a user's factory returning a gymnasium.Env, a gymnasium
                            VectorEnv, a dm_env.Environment or a HostVectorEnv
==========================  =====================================================

A user factory is called once to see what it returns; it gets `num_envs=` and/or
`seed=` if its signature names them (a VectorEnv/HostVectorEnv factory should take
`num_envs`). gymnasium's own "module:EnvId-v0" syntax also works when the module
registers that id on import.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import dm_env
import gymnasium
from gymnasium.vector import VectorEnv

from podrl.envs.adapters.dm_env import DmEnvVectorEnv
from podrl.envs.adapters.gymnasium import GymnasiumVectorEnv
from podrl.envs.adapters.jax_host import JaxHostVectorEnv
from podrl.envs.gymnax import is_suite_name
from podrl.envs.host import HostVectorEnv
from podrl.envs.registry import UnknownEnvError, check_name, import_user_module, make

FORMS = (
    "a gymnasium id ('CartPole-v1'), 'jax:<podrl.envs.make name>', 'gymnax:<id>', 'craftax:<id>', "
    "'dm_env:module:factory', 'dmc:<domain>-<task>', "
    "'ale:Pong', 'envpool:Pong-v5' or 'module:factory'"
)


def _import_attr(name: str, path: str) -> Any:
    module_name, _, attr = path.partition(":")
    try:
        module = import_user_module(module_name)
    except ImportError as e:
        raise UnknownEnvError(f"env {name!r}: cannot import module {module_name!r} ({e}); expected {FORMS}") from e
    if not hasattr(module, attr):
        raise UnknownEnvError(f"env {name!r}: module {module_name!r} has no attribute {attr!r}; expected {FORMS}")
    return getattr(module, attr)


def _call_with(factory: Callable, **kwargs: Any) -> Any:
    """Calls `factory` with the keyword arguments its signature names."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return factory()
    return factory(**{k: v for k, v in kwargs.items() if k in params})


def _from_user_factory(name: str, factory: Callable, num_envs: int, seed: int, vectorization: str) -> HostVectorEnv:
    """Builds a host env from whatever `factory` returns (see module docstring)."""
    made = _call_with(factory, num_envs=num_envs, seed=seed)
    if isinstance(made, VectorEnv):
        return GymnasiumVectorEnv(made, num_envs)
    if isinstance(made, gymnasium.Env):
        made.close()
        single = functools.partial(_call_with, factory, seed=seed)  # envs reseeded on reset(seed)
        return GymnasiumVectorEnv(single, num_envs, vectorization=vectorization)
    if isinstance(made, dm_env.Environment):
        made.close()
        return DmEnvVectorEnv(factory, num_envs, seed=seed)
    if isinstance(made, HostVectorEnv):
        if made.num_envs != num_envs:
            raise ValueError(f"env {name!r}: the factory made {made.num_envs} envs, asked for {num_envs}")
        return made
    raise UnknownEnvError(
        f"env {name!r}: the factory returned {type(made).__name__}, expected a gymnasium.Env, a "
        "gymnasium.vector.VectorEnv, a dm_env.Environment or a HostVectorEnv"
    )


def _gymnasium_id(name: str) -> bool:
    if name.startswith("ALE/"):
        from podrl.envs.adapters.ale import import_ale

        gymnasium.register_envs(import_ale())
    return name in gymnasium.registry


def make_host_env(
    name: str, num_envs: int, seed: int = 0, vectorization: str = "sync", **kwargs: Any
) -> HostVectorEnv:
    """A `HostVectorEnv` of `num_envs` envs named `name` (forms in the module docstring).

    `seed` seeds what is fixed at construction (envpool, seeded dm_env factories);
    call `env.reset(seed)` before stepping. `vectorization` ("sync" or "async",
    spawn context) applies to envs built from single gymnasium envs. `kwargs` are
    Atari options for `ale:` and Atari `envpool:` ids (`podrl.envs.adapters.atari`), else
    go to the backend's constructor (gymnasium.make, envpool.make, podrl.envs.make, a factory).
    Raises `envs.UnknownEnvError` for a name that resolves to nothing.
    """
    prefix, _, rest = name.partition(":")
    if prefix == "jax" or is_suite_name(name):
        jax_name = rest if prefix == "jax" else name
        check_name(jax_name)
        return JaxHostVectorEnv(make(jax_name, **kwargs), num_envs)
    if prefix == "dm_env":
        if ":" not in rest:
            raise UnknownEnvError(f"env {name!r}: expected 'dm_env:module:factory'")
        return DmEnvVectorEnv(_with_options(_import_attr(name, rest), kwargs), num_envs, seed=seed)
    if prefix == "dmc":
        from podrl.envs.adapters.dmc import make_dmc_env

        return make_dmc_env(name, num_envs, seed=seed, **kwargs)
    if prefix == "ale":
        from podrl.envs.adapters.ale import make_ale_env

        return make_ale_env(rest, num_envs, vectorization=vectorization, **kwargs)
    if prefix == "envpool":
        from podrl.envs.adapters.envpool import EnvpoolVectorEnv

        return EnvpoolVectorEnv(rest, num_envs, seed=seed, **kwargs)
    if not rest:  # no colon: a gymnasium id
        if not _gymnasium_id(name):
            raise UnknownEnvError(f"unknown env {name!r}: not a registered gymnasium id; expected {FORMS}")
        return GymnasiumVectorEnv(name, num_envs, vectorization=vectorization, **kwargs)
    module_name = prefix
    try:
        module = import_user_module(module_name)
    except ImportError as e:
        raise UnknownEnvError(f"env {name!r}: cannot import module {module_name!r} ({e}); expected {FORMS}") from e
    if not hasattr(module, rest) and rest in gymnasium.registry:  # gymnasium's "module:EnvId"
        return GymnasiumVectorEnv(rest, num_envs, vectorization=vectorization, **kwargs)
    return _from_user_factory(name, _with_options(_import_attr(name, name), kwargs), num_envs, seed, vectorization)


def _with_options(factory: Callable, options: dict[str, Any]) -> Callable:
    """`factory` with `options` bound as keyword arguments (a TypeError on call if it lacks one)."""
    return functools.partial(factory, **options) if options else factory
