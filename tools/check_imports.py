"""Checks the import rules of CONTRIBUTING.md on every module of the `podrl` package.

    python tools/check_imports.py [ROOT]

ROOT (default: this repository) holds `podrl/`, `agents/` and `envs/`; the last two install
as `podrl.agents` and `podrl.envs` (pyproject.toml's package-dir), and are checked under those
names. Every import counts: top-level ones, lazy ones inside functions, `if TYPE_CHECKING:` ones,
relative ones, and `importlib.import_module("...")` / `__import__("...")` with a literal name.
Each violation prints as `path:line: <module> imports <name>: <rule>`; the exit status is 1 if
there is any, else 0 (with a one-line summary). Imports no JAX and nothing of podrl.

The rules: the house has floors, and a module imports only from its own room and the floors
under it (`FLOORS`):
- podrl.envs (JAX envs, wrappers, host adapters) imports nothing else of podrl;
- podrl.core (types, mesh, parallel, keys, learner state, hosts, populations, errors) imports
  only podrl.envs;
- podrl.agents imports podrl.core and podrl.envs: never a layout, the run services or the
  front door;
- podrl.run (driver, run context, configs, checkpoints, logging, evaluation) imports podrl.core
  and podrl.envs;
- podrl.testing (the conformance checks: check_agent, check_env) imports podrl.run, podrl.core and
  podrl.envs: it checks any agent through podrl.core.types.Agent, never names one;
- the layouts (podrl.anakin, podrl.sebulba) import podrl.testing (the check they run before a
  run), podrl.run, podrl.core and podrl.envs: never an agent (they see podrl.core.types.Agent),
  never each other, never the front door;
- the front door (podrl.cli) and the reports (podrl.reports) may import any floor, but only
  podrl.cli.experiment, podrl.cli.flags and podrl.cli.policy read the agent registry
  (`podrl.agents`), and nothing imports a specific agent (`podrl.agents.<name>`);
- no circle: no module imports (top-level or inside a function) a module that imports it back, however
  long the way round. An import counts for the module it names: `from podrl.run import config` names
  podrl.run.config, not the package face podrl.run (`from podrl.run import X` with X no module names
  the face). Each circle prints as `circle: a -> b -> a` (the modules of one strongly connected part).
"""

from __future__ import annotations

import ast
import pathlib
import sys
from typing import Iterator, NamedTuple

SOURCES = {"podrl": "podrl", "agents": "podrl.agents", "envs": "podrl.envs"}
"""Folder of the repository -> the package it installs as."""

GROUND = ("podrl.envs",)
FLOORS: dict[str, tuple[str, ...]] = {
    "podrl.envs": GROUND,
    "podrl.core": ("podrl.core",) + GROUND,
    "podrl.agents": ("podrl.agents", "podrl.core") + GROUND,
    "podrl.run": ("podrl.run", "podrl.core") + GROUND,
    "podrl.testing": ("podrl.testing", "podrl.run", "podrl.core") + GROUND,
    "podrl.anakin": ("podrl.anakin", "podrl.testing", "podrl.run", "podrl.core") + GROUND,
    "podrl.sebulba": ("podrl.sebulba", "podrl.testing", "podrl.run", "podrl.core") + GROUND,
}
"""Room -> the podrl packages its modules may import (the bare `podrl` package face always)."""

REGISTRY_READERS = ("podrl.cli.experiment", "podrl.cli.flags", "podrl.cli.policy")
"""The modules that may import the agent registry (the `podrl.agents` package itself)."""

WHY = {
    "podrl.envs": "envs import nothing else of podrl (their errors: podrl.envs.errors)",
    "podrl.core": "the core imports only podrl.envs",
    "podrl.agents": "agents import only podrl.core and podrl.envs (never a layout, run service or the CLI)",
    "podrl.run": "run services import only podrl.core and podrl.envs",
    "podrl.testing": "the conformance checks import podrl.run, podrl.core, podrl.envs (never an agent, a layout "
                     "or the CLI)",
    "podrl.anakin": "a layout imports podrl.testing, podrl.run, podrl.core, podrl.envs (never an agent, the other "
                    "layout or the CLI)",
    "podrl.sebulba": "a layout imports podrl.testing, podrl.run, podrl.core, podrl.envs (never an agent, the other "
                     "layout or the CLI)",
}


class Rule(NamedTuple):
    """Modules under `importer` (minus `exempt`) must not import a name under any of `forbidden`."""

    importer: str
    forbidden: tuple[str, ...]
    why: str
    exempt: tuple[str, ...] = ()


RULES = (
    Rule("podrl", ("podrl.agents",), f"only {', '.join(REGISTRY_READERS)} read the agent registry",
         exempt=REGISTRY_READERS + ("podrl.agents",) + tuple(FLOORS)),
    Rule("podrl", ("podrl.agents.",), "podrl never imports a specific agent (it reads the registry, "
                                      "podrl.agents.AGENTS)", exempt=("podrl.agents",) + tuple(FLOORS)),
)
"""What the front door and the reports may not import (the floors are `FLOORS`)."""


class Violation(NamedTuple):
    path: pathlib.Path
    line: int
    module: str
    imported: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.module} imports {self.imported}: {self.why}"


def under(name: str, prefix: str) -> bool:
    """`name` is `prefix` or inside it; a `prefix` ending in "." matches only names inside it."""
    if prefix.endswith("."):
        return name.startswith(prefix)
    return name == prefix or name.startswith(prefix + ".")


def module_name(root: pathlib.Path, path: pathlib.Path) -> str:
    """`agents/ppo/agent.py` -> `podrl.agents.ppo.agent`; a package's `__init__.py` -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    parts = SOURCES[parts[0]].split(".") + parts[1:]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_path(root: pathlib.Path, name: str) -> pathlib.Path:
    """Where module `name` lives in the repository (`podrl.agents.x` -> `agents/x`), without suffix."""
    for folder, package in sorted(SOURCES.items(), key=lambda item: -len(item[1])):
        if under(name, package):
            return root.joinpath(folder, *name[len(package):].strip(".").split(".")) if name != package \
                else root / folder
    return root.joinpath(*name.split("."))


def is_module(root: pathlib.Path, name: str) -> bool:
    """Whether `name` is a module or package under `root` (tells `from a import b` submodules from names)."""
    path = source_path(root, name)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def floor_of(module: str) -> str | None:
    """The room of `FLOORS` that `module` belongs to, if any."""
    return next((room for room in FLOORS if under(module, room)), None)


def imported_names(root: pathlib.Path, module: str, is_package: bool, tree: ast.AST,
                   faces: bool = True) -> Iterator[tuple[int, str]]:
    """`(line, module name)` of every import in `tree`, wherever it sits (also inside functions).
    `from a import b` names `a` and, when `a.b` is a module, `a.b`; with `faces=False` it names `a`
    only when some imported name is no module (what the circle check follows)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = absolute_base(package, node)
            names = [f"{base}.{a.name}".lstrip(".") for a in node.names]
            modules = [name for name in names if is_module(root, name)]
            if faces or len(modules) < len(names):
                yield node.lineno, base
            yield from ((node.lineno, name) for name in modules)
        elif isinstance(node, ast.Call) and _dynamic_import(node):
            yield node.lineno, node.args[0].value


def absolute_base(package: str, node: ast.ImportFrom) -> str:
    """The module `from <module> import ...` names, a relative one resolved against `package`."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    anchor = parts[: len(parts) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def _dynamic_import(node: ast.Call) -> bool:
    """`importlib.import_module("literal")` or `__import__("literal")`."""
    func = node.func
    named = (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__"))
    return named and bool(node.args) and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)


def check_module(root: pathlib.Path, path: pathlib.Path) -> list[Violation]:
    """The violations of RULES in one file, at most one per line (`from podrl.anakin import train`
    names podrl.anakin and podrl.anakin.train: one violation)."""
    module = module_name(root, path)
    rules = [r for r in RULES if under(module, r.importer) and not any(under(module, e) for e in r.exempt)]
    room = floor_of(module)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: dict[int, Violation] = {}
    for line, name in imported_names(root, module, path.name == "__init__.py", tree):
        why = _broken(rules, room, name)
        if why is not None and line not in found:
            found[line] = Violation(path.relative_to(root), line, module, name, why)
    return sorted(found.values())


def _broken(rules: list[Rule], room: str | None, name: str) -> str | None:
    """Why importing `name` breaks a rule (None if it does not)."""
    if room is not None and under(name, "podrl.") and not any(under(name, allowed) for allowed in FLOORS[room]):
        return WHY[room]
    return next((r.why for r in rules if any(under(name, f) for f in r.forbidden)), None)


def check_tree(root: pathlib.Path) -> tuple[list[Violation], int]:
    """(all violations under `root`'s PACKAGES, number of modules checked)."""
    paths = sorted(p for folder in SOURCES for p in (root / folder).rglob("*.py"))
    return [v for path in paths for v in check_module(root, path)], len(paths)


def import_graph(root: pathlib.Path) -> dict[str, set[str]]:
    """Module -> the modules of the tree it imports (anywhere in it, also inside functions)."""
    paths = {module_name(root, p): p for folder in SOURCES for p in sorted((root / folder).rglob("*.py"))}
    graph = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        names = imported_names(root, module, path.name == "__init__.py", tree, faces=False)
        graph[module] = {name for _, name in names if name in paths and name != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of `graph` with more than one module (Tarjan's algorithm, without
    recursion), each as one way round it: `[a, b, ..., a]`."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, edges = work[-1]
            step = next((w for w in edges if w not in index or w in stack), None)
            if step is not None and step not in index:
                index[step] = low[step] = len(index)
                stack.append(step)
                work.append((step, iter(sorted(graph[step]))))
                continue
            if step is not None:
                low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = stack[stack.index(node):]
                del stack[stack.index(node):]
                if len(part) > 1:
                    found.append(_way_round(graph, sorted(part)))
    return found


def _way_round(graph: dict[str, set[str]], part: list[str]) -> list[str]:
    """A shortest way from `part[0]` back to itself inside `part` (breadth first)."""
    inside = set(part)
    came_from: dict[str, str] = {}
    frontier = [part[0]]
    while frontier:
        nxt = []
        for node in frontier:
            for w in sorted(graph[node] & inside):
                if w == part[0]:
                    way = [node]
                    while way[-1] != part[0]:
                        way.append(came_from[way[-1]])
                    return way[::-1] + [part[0]]
                if w not in came_from:
                    came_from[w] = node
                    nxt.append(w)
        frontier = nxt
    return part + [part[0]]


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[0] if argv else pathlib.Path(__file__).resolve().parents[1]).resolve()
    violations, checked = check_tree(root)
    found = circles(import_graph(root))
    for violation in violations:
        print(violation)
    for way in found:
        print(f"circle: {' -> '.join(way)} (move what one of them needs so the other need not import it back)")
    if violations or found:
        print(f"{len(violations)} import rule violation(s), {len(found)} circle(s) in {checked} modules "
              "(rules: CONTRIBUTING.md)")
        return 1
    print(f"import rules ok: {checked} modules under {', '.join(f'{f}/' for f in SOURCES)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
