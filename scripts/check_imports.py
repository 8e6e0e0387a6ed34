"""Checks the import rules of CONTRIBUTING.md on every module under podrl/, agents/ and envs/.

    python scripts/check_imports.py [ROOT]

ROOT (default: this repository) holds the three packages. Every import counts: top-level
ones, lazy ones inside functions, `if TYPE_CHECKING:` ones, relative ones, and
`importlib.import_module("...")` / `__import__("...")` with a literal name. Each violation
prints as `path:line: <module> imports <name>: <rule>`; the exit status is 1 if there is
any, else 0 (with a one-line summary). Imports no JAX and nothing of podrl.

The rules:
- agents never import a layout or the run driver (podrl.anakin, podrl.sebulba, podrl.run,
  podrl.driver);
- envs import neither agents nor podrl (their errors live in envs.errors);
- the layouts (podrl.anakin, podrl.sebulba) never import agents: they see podrl.types.Agent;
- elsewhere in podrl only podrl.experiment, podrl.cli_flags and podrl.policy read the agent registry (`agents`,
  lazily), and nothing in podrl imports a specific agent (`agents.<name>`).
"""

from __future__ import annotations

import ast
import pathlib
import sys
from typing import Iterator, NamedTuple

PACKAGES = ("podrl", "agents", "envs")
"""The top-level packages whose modules are checked."""

REGISTRY_READERS = ("podrl.experiment", "podrl.cli_flags", "podrl.policy")
"""The podrl modules that may import the agent registry (the `agents` package itself)."""


class Rule(NamedTuple):
    """Modules under `importer` (minus `exempt`) must not import a name under any of `forbidden`."""

    importer: str
    forbidden: tuple[str, ...]
    why: str
    exempt: tuple[str, ...] = ()


RULES = (
    Rule("agents", ("podrl.anakin", "podrl.sebulba", "podrl.run", "podrl.driver"),
         "agents never import a layout or the run driver"),
    Rule("envs", ("agents", "podrl"), "envs import neither agents nor podrl (errors: envs.errors)"),
    Rule("podrl.anakin", ("agents",), "layouts never import an agent (they see podrl.types.Agent)"),
    Rule("podrl.sebulba", ("agents",), "layouts never import an agent (they see podrl.types.Agent)"),
    Rule("podrl", ("agents",), f"only {', '.join(REGISTRY_READERS)} read the agent registry",
         exempt=REGISTRY_READERS + ("podrl.anakin", "podrl.sebulba")),
    Rule("podrl", ("agents.",), "podrl never imports a specific agent (it reads the registry, agents.AGENTS)"),
)


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
    """`podrl/anakin/train.py` -> `podrl.anakin.train`; a package's `__init__.py` -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(root: pathlib.Path, name: str) -> bool:
    """Whether `name` is a module or package under `root` (tells `from a import b` submodules from names)."""
    path = root.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_names(root: pathlib.Path, module: str, is_package: bool, tree: ast.AST) -> Iterator[tuple[int, str]]:
    """`(line, module name)` of every import in `tree`, wherever it sits (also inside functions)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = absolute_base(package, node)
            yield node.lineno, base
            names = (f"{base}.{a.name}".lstrip(".") for a in node.names)
            yield from ((node.lineno, name) for name in names if is_module(root, name))
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
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: dict[int, Violation] = {}
    for line, name in imported_names(root, module, path.name == "__init__.py", tree):
        broken = next((r for r in rules if any(under(name, f) for f in r.forbidden)), None)
        if broken is not None and line not in found:
            found[line] = Violation(path.relative_to(root), line, module, name, broken.why)
    return sorted(found.values())


def check_tree(root: pathlib.Path) -> tuple[list[Violation], int]:
    """(all violations under `root`'s PACKAGES, number of modules checked)."""
    paths = sorted(p for package in PACKAGES for p in (root / package).rglob("*.py"))
    return [v for path in paths for v in check_module(root, path)], len(paths)


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[0] if argv else pathlib.Path(__file__).resolve().parents[1]).resolve()
    violations, checked = check_tree(root)
    for violation in violations:
        print(violation)
    if violations:
        print(f"{len(violations)} import rule violation(s) in {checked} modules (rules: CONTRIBUTING.md)")
        return 1
    print(f"import rules ok: {checked} modules under {', '.join(PACKAGES)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
