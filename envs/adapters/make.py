"""`make_host_env`: a `HostVectorEnv` by name, for the Sebulba layout.

The names it takes are the Sebulba column of `podrl.envs.schemes` (`expected("sebulba")`): a
`scheme:` name goes to its row's builder below (`jax_name_on_host`, `jax_env_on_host`, `ale_env`,
`envpool_env`, `dm_env_factory`, `dmc_env`); a plain name is a gymnasium id ("CartPole-v1",
"ALE/Pong-v5", which registers ale-py's envs first) or a user's "pkg.mod:factory" returning a
gymnasium.Env, a gymnasium VectorEnv, a dm_env.Environment or a HostVectorEnv.

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

from podrl.envs import schemes
from podrl.envs.adapters.ale import import_ale, make_ale_env
from podrl.envs.adapters.dm_env import DmEnvVectorEnv
from podrl.envs.adapters.dmc import make_dmc_env
from podrl.envs.adapters.envpool import EnvpoolVectorEnv
from podrl.envs.adapters.gymnasium import GymnasiumVectorEnv
from podrl.envs.adapters.jax_host import JaxHostVectorEnv
from podrl.envs.host import HostVectorEnv
from podrl.envs.registry import (
    ImportPathError,
    UnknownEnvError,
    check_name,
    close_names,
    import_path,
    import_user_module,
    make,
    registered,
)
from podrl.envs.types import JaxEnv

FORMS = schemes.expected("sebulba")
"""The names `make_host_env` takes, as its errors list them."""


def _import_attr(name: str, path: str) -> Any:
    try:
        return import_path(path)
    except ImportPathError as e:
        raise UnknownEnvError(f"env {name!r}: {e}; expected {FORMS}") from e.__cause__


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
    hint = ""
    if isinstance(made, JaxEnv):
        hint = (f"; it is a JAX env (reset(key), step(state, action)): 'jax:{name}' steps it on the host, "
                "as the anakin layout runs it on the device")
    raise UnknownEnvError(
        f"env {name!r}: the factory returned {type(made).__name__}, expected a gymnasium.Env, a "
        f"gymnasium.vector.VectorEnv, a dm_env.Environment or a HostVectorEnv{hint}"
    )


def _close_ids(name: str) -> str:
    """" (did you mean ...?)" naming the gymnasium ids closest to `name`; for one of podrl's JAX ids, its
    host form 'jax:<id>'."""
    if name in registered():
        return f" (podrl's JAX env {name!r} is 'jax:{name}' on the host)"
    return close_names(name, gymnasium.registry)


def _gymnasium_id(name: str) -> bool:
    if name.startswith("ALE/"):
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
    if (build := schemes.builder(name, "sebulba")) is not None:
        return build(name, num_envs, seed=seed, vectorization=vectorization, **kwargs)
    prefix, _, rest = name.partition(":")
    if not rest:  # no colon: a gymnasium id
        if not _gymnasium_id(name):
            raise UnknownEnvError(f"unknown env {name!r}: not a registered gymnasium id{_close_ids(name)}; "
                                  f"expected {FORMS}")
        return GymnasiumVectorEnv(name, num_envs, vectorization=vectorization, **kwargs)
    module_name = prefix
    try:
        module = import_user_module(module_name)
    except ImportError as e:
        raise UnknownEnvError(f"env {name!r}: cannot import module {module_name!r} ({e}); expected {FORMS}") from e
    if not hasattr(module, rest) and rest in gymnasium.registry:  # gymnasium's "module:EnvId"
        return GymnasiumVectorEnv(rest, num_envs, vectorization=vectorization, **kwargs)
    return _from_user_factory(name, _with_options(_import_attr(name, name), kwargs), num_envs, seed, vectorization)


# ---------------------------------------------------------------- the schemes' builders (podrl.envs.schemes)


def jax_name_on_host(name: str, num_envs: int, seed: int = 0, vectorization: str = "sync",
                     **options: Any) -> HostVectorEnv:
    """'jax:<name>': the JAX env `podrl.envs.make(<name>, **options)` stepped on the host CPU."""
    return _jax_on_host(schemes.split(name)[1], num_envs, options)


def jax_env_on_host(name: str, num_envs: int, seed: int = 0, vectorization: str = "sync",
                    **options: Any) -> HostVectorEnv:
    """A JAX scheme's own name ('gymnax:<id>', 'brax:<env>'), stepped on the host as 'jax:<name>' is."""
    return _jax_on_host(name, num_envs, options)


def _jax_on_host(jax_name: str, num_envs: int, options: dict[str, Any]) -> HostVectorEnv:
    check_name(jax_name)
    return JaxHostVectorEnv(make(jax_name, **options), num_envs)


def dm_env_factory(name: str, num_envs: int, seed: int = 0, vectorization: str = "sync",
                   **options: Any) -> HostVectorEnv:
    """'dm_env:pkg.mod:factory': a factory of `dm_env.Environment`s, called with `options`."""
    path = schemes.split(name)[1]
    if ":" not in path:
        raise UnknownEnvError(f"env {name!r}: expected 'dm_env:module:factory'")
    return DmEnvVectorEnv(_with_options(_import_attr(name, path), options), num_envs, seed=seed)


def dmc_env(name: str, num_envs: int, seed: int = 0, vectorization: str = "sync", **options: Any) -> HostVectorEnv:
    """'dmc:<domain>-<task>': a dm_control suite task (`podrl.envs.adapters.dmc`, flat observations)."""
    return make_dmc_env(name, num_envs, seed=seed, **options)


def ale_env(name: str, num_envs: int, seed: int = 0, vectorization: str = "sync", **options: Any) -> HostVectorEnv:
    """'ale:Pong', 'ale:ALE/Pong-v5': Atari via ale-py (`podrl.envs.adapters.ale`); `options` are Atari options."""
    return make_ale_env(schemes.split(name)[1], num_envs, vectorization=vectorization, **options)


def envpool_env(name: str, num_envs: int, seed: int = 0, vectorization: str = "sync",
                **options: Any) -> HostVectorEnv:
    """'envpool:Pong-v5': an envpool task (`podrl.envs.adapters.envpool`)."""
    return EnvpoolVectorEnv(schemes.split(name)[1], num_envs, seed=seed, **options)


def _with_options(factory: Callable, options: dict[str, Any]) -> Callable:
    """`factory` with `options` bound as keyword arguments (a TypeError on call if it lacks one)."""
    return functools.partial(factory, **options) if options else factory
