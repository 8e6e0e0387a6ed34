"""What every peer driver shares, and the line `benchmarks.harness` reads back from a child.

A child (a driver in a peer's venv, or a benchmark's own `--child` run) prints its result as one
stdout line, `RESULT_PREFIX` + JSON. Imports only the standard library at import time (jax
inside the timing helpers), so it runs in every peer's venv (jax 0.4.38, 0.5.3, ...) and in
podrl's.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Callable

RESULT_PREFIX = "BENCH_RESULT "
"""A child prints its result as one stdout line starting with this."""


def emit_result(result: dict[str, Any]) -> None:
    """Prints `result` as the one RESULT_PREFIX line the parent reads."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def compile_ahead(fn: Callable, *args: Any) -> tuple[Callable, float]:
    """`(compiled, compile_seconds)`: `jax.jit(fn).lower(*args).compile()` and its seconds."""
    import jax

    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - start


def compile_and_run(fn: Callable, *args: Any) -> tuple[Any, float, float]:
    """`(output, compile_seconds, run_seconds)` of `fn(*args)`: compiled ahead of time, then one call
    blocked on (the run seconds exclude the compile)."""
    import jax

    compiled, compile_seconds = compile_ahead(fn, *args)
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    return out, compile_seconds, time.perf_counter() - start


def main(measure: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """A driver's entry point: `measure` of the spec JSON in `sys.argv[1]`, printed as the result line."""
    emit_result(measure(json.loads(sys.argv[1])))
    return 0
