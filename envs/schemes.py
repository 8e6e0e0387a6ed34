"""The forms of an env name, in one table (`FORMS`): which layout takes each, what builds it, its help.

Everything that reads an env name reads it here: `podrl.envs.make` (Anakin: a `JaxEnv`) and
`podrl.envs.adapters.make.make_host_env` (Sebulba: a `HostVectorEnv`) send a `scheme:rest`
name to the builder of its row, the run configs' `--env` help is `help_text(layout)`, an
unknown name's error lists `expected(layout)`, and Sebulba's config checks a scheme's host
options (`--env-kwargs`) with `check_host_options` before anything is built.

A name is `scheme:rest` when the text before its first colon is a scheme of the table (`split`;
`dm_env:pkg.mod:factory` keeps its import path whole in `rest`). Any other name is a plain form:
a registered JAX id (Anakin), a gymnasium id (Sebulba), or a `module:attr` import path of the
user's own env (both; the current folder is importable). A user module called like a scheme is
shadowed by the scheme.

    split("gymnax:Breakout-MinAtar")    # (SCHEMES["gymnax"], "Breakout-MinAtar")
    split("my_envs:Chain")              # (None, "my_envs:Chain"): an import path
    help_text("anakin")                 # "A JAX env id (...); 'gymnax:<id>' (...); ...; or 'module:Class' (...)."
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping, NamedTuple

from podrl.envs.errors import UnknownEnvError

LAYOUTS = ("anakin", "sebulba")
"""The layouts, as the table's builder columns name them."""


class Form(NamedTuple):
    """One form of env name (a row of `FORMS`)."""

    syntax: str  # how help and errors write it, e.g. "'gymnax:<id>'"
    about: str  # what it names, a short phrase (help shows it after `syntax`, in parentheses)
    scheme: str | None = None  # the text before the first colon ('gymnax'); None for a plain form
    anakin: str | None = None  # the module whose check_name(name) / make(name, **kwargs) build it as a JaxEnv
    sebulba: str | None = None  # "module:function" building it as a HostVectorEnv:
    #                             function(name, num_envs, seed=, vectorization=, **options)
    check_options: str | None = None  # "module:function" checking Sebulba's host options (**options), unbuilt

    def builder(self, layout: str) -> str | None:
        """Where `layout` builds this form (`anakin` or `sebulba` above); None when it does not take it."""
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        return getattr(self, layout)


_MAKE = "podrl.envs.adapters.make"
_PARAMS = "env params as ',field=value' after the id"

FORMS: tuple[Form, ...] = (
    Form("a JAX env id", "CartPole-v1, Acrobot-v1, Pendulum-v1, MatchSign-v0, ...", anakin="podrl.envs.registry"),
    Form("a gymnasium id", "CartPole-v1, ALE/Pong-v5, MuJoCo's HalfCheetah-v5, ...", sebulba=f"{_MAKE}:make_host_env"),
    Form("'jax:<id>'", "any podrl.envs.make name, stepped on the host CPU", "jax", sebulba=f"{_MAKE}:jax_name_on_host"),
    Form("'gymnax:<id>'", f"a gymnax env, e.g. MinAtar's Breakout-MinAtar; {_PARAMS}", "gymnax",
         anakin="podrl.envs.gymnax", sebulba=f"{_MAKE}:jax_env_on_host"),
    Form("'craftax:<id>'", f"a Craftax env; {_PARAMS}", "craftax",
         anakin="podrl.envs.gymnax", sebulba=f"{_MAKE}:jax_env_on_host"),
    Form("'brax:<env>'", f"a Brax env; brax's backend=... and {_PARAMS}", "brax",
         anakin="podrl.envs.brax", sebulba=f"{_MAKE}:jax_env_on_host"),
    Form("'jumanji:<id>'", "a Jumanji env (nested observations, action masks), e.g. Knapsack-v1; constructor "
         "options as ',field=value' after the id", "jumanji", anakin="podrl.envs.jumanji",
         sebulba=f"{_MAKE}:jax_env_on_host"),
    Form("'xminigrid:<id>'", f"an xland-minigrid MiniGrid task, e.g. MiniGrid-DoorKey-5x5; {_PARAMS}", "xminigrid",
         anakin="podrl.envs.xminigrid", sebulba=f"{_MAKE}:jax_env_on_host"),
    Form("'ale:Pong'", "Atari via ale-py", "ale", sebulba=f"{_MAKE}:ale_env",
         check_options="podrl.envs.adapters.atari:atari_protocol"),
    Form("'envpool:<id>'", "an envpool task", "envpool", sebulba=f"{_MAKE}:envpool_env"),
    Form("'dm_env:module:factory'", "a factory of dm_env environments", "dm_env", sebulba=f"{_MAKE}:dm_env_factory"),
    Form("'dmc:<domain>-<task>'", "a dm_control suite task", "dmc", sebulba=f"{_MAKE}:dmc_env"),
    Form("'module:Class'", "your own JaxEnv class or factory; the current folder is importable",
         anakin="podrl.envs.registry"),
    Form("'module:factory'", "your own env: a factory of gymnasium, dm_env or host vector envs; the current "
         "folder is importable, and --env-kwargs reach it", sebulba=f"{_MAKE}:make_host_env"),
)
"""Every form of env name, in the order help texts list them."""

SCHEMES: Mapping[str, Form] = {form.scheme: form for form in FORMS if form.scheme is not None}
"""The `scheme:` prefixes, each with its row."""


def split(name: str) -> tuple[Form | None, str]:
    """`(row, rest)` of a `scheme:rest` name; `(None, name)` for a plain form (an id or a `module:attr` path)."""
    scheme, sep, rest = name.partition(":")
    form = SCHEMES.get(scheme) if sep else None
    return (form, rest) if form is not None else (None, name)


def forms(layout: str) -> tuple[Form, ...]:
    """The forms `layout` takes, in table order."""
    return tuple(form for form in FORMS if form.builder(layout) is not None)


def expected(layout: str) -> str:
    """The forms `layout` takes as an error lists them: "a JAX env id, 'gymnax:<id>', ... or 'module:Class'"."""
    syntaxes = [form.syntax for form in forms(layout)]
    return ", ".join(syntaxes[:-1]) + " or " + syntaxes[-1]


def help_text(layout: str) -> str:
    """The `--env` help of `layout`: every form it takes, with what it names."""
    items = [f"{form.syntax} ({form.about})" for form in forms(layout)]
    text = "; ".join(items[:-1]) + "; or " + items[-1] + "."
    return text[0].upper() + text[1:]


def _load(path: str) -> Any:
    """The module `path` names, or its attribute for a `module:attr` path."""
    module, _, attr = path.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attr) if attr else loaded


def builder(name: str, layout: str) -> Any:
    """What builds the `scheme:rest` name `name` in `layout` (`Form.builder`, imported), None for a plain
    name; UnknownEnvError when `layout` does not take its scheme, naming the layout that does and the
    forms this one takes."""
    form, _ = split(name)
    if form is None:
        return None
    where = form.builder(layout)
    if where is None:
        takers = " and ".join(other for other in LAYOUTS if form.builder(other) is not None)
        raise UnknownEnvError(f"env {name!r}: {form.syntax} ({form.about}) is for the {takers} layout; "
                              f"the {layout} layout takes {expected(layout)}")
    return _load(where)


def check_host_options(name: str, options: Mapping[str, Any]) -> None:
    """Checks Sebulba's host options of `name` without building the env, where its scheme knows them
    (`Form.check_options`: ale's Atari protocol); a bad one raises that check's ConfigError."""
    form, _ = split(name)
    if form is not None and form.check_options is not None:
        _load(form.check_options)(**options)
