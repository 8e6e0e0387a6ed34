"""Benchmark a learner's CNN gradient steps: XLA's convolution gradient vs `podrl.agents.conv.conv2d`'s.

For each CNN torso (on the observations it is built for), `--steps` SGD steps on the sum of
the torso's features, each on its own minibatch, run two ways:
  scan      inside one `lax.scan` (a `while` loop), as every learner runs its minibatches;
  unrolled  the same steps written out one after another (no loop).
and with two convolutions: `xla` (`flax.linen.Conv`, XLA's own gradient) and `podrl`
(`podrl.agents.conv.Conv`, the torsos' layer: on CPU, patches for both passes of a differentiated
convolution). Prints ms per SGD step and compile seconds per row as a markdown table, and the JSON document with
`--out`. Measured in this process, one row after another (medians of `--repeats` timed calls
after one warm-up call); nothing is asserted.

Usage:
  python -m benchmarks.conv_grad --out conv_grad.json
  python -m benchmarks.conv_grad --torsos minatar_cnn --steps 4 --repeats 1
  python -m benchmarks.conv_grad --quick --torsos minatar_cnn   # smoke test: 2 steps, 1 timed call
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any
from unittest import mock

import flax.linen as nn
import jax
import jax.numpy as jnp

from benchmarks.harness import finish, fmt, new_parser, table
from podrl.agents import torsos

# torso -> (observation shape, dtype, minibatch size): the shapes the presets train on.
TORSOS: dict[str, tuple[tuple[int, ...], Any, int]] = {
    "minatar_cnn": ((10, 10, 4), jnp.bool_, 512),
    "nature_cnn": ((4, 84, 84), jnp.uint8, 64),
    "impala_resnet": ((4, 84, 84), jnp.uint8, 32),
}


def _flax_conv(features: int, kernel: int, stride: int = 1, padding: str = "VALID") -> nn.Conv:
    """`podrl.agents.torsos._conv`'s layer as `flax.linen.Conv` (same parameters, XLA's gradient)."""
    return nn.Conv(features, (kernel, kernel), (stride, stride), padding=padding, kernel_init=torsos._RELU_INIT)


def _sgd(torso: nn.Module, unrolled: bool):
    def step(params, obs):
        grads = jax.grad(lambda p: jnp.sum(torso.apply(p, obs)))(params)
        return jax.tree.map(lambda p, g: p - 1e-4 * g, params, grads), ()

    return jax.jit(lambda params, batches: jax.lax.scan(step, params, batches, unroll=unrolled)[0])


def measure(name: str, conv: str, loop: str, steps: int, repeats: int) -> dict[str, Any]:
    shape, dtype, batch = TORSOS[name]
    layer = _flax_conv if conv == "xla" else torsos._conv
    with mock.patch.object(torsos, "_conv", layer):
        torso = torsos.make_torso(name, shape)
        batches = jnp.zeros((steps, batch) + shape, dtype)
        params = torso.init(jax.random.key(0), batches[0])
        fn = _sgd(torso, unrolled=loop == "unrolled")
        start = time.perf_counter()
        compiled = fn.lower(params, batches).compile()
        compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(params, batches))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(params, batches))
        times.append(time.perf_counter() - start)
    ms = statistics.median(times) / steps * 1e3
    return {"torso": name, "conv": conv, "loop": loop, "batch": batch, "steps": steps,
            "ms_per_step": ms, "samples_per_s": batch / ms * 1e3, "compile_s": compile_s}


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one line per row; podrl rows also give XLA's ms per step over theirs (same torso, loop)."""
    xla_ms = {(r["torso"], r["loop"]): r["ms_per_step"] for r in rows if r["conv"] == "xla"}

    def cells(r: dict[str, Any]) -> list[Any]:
        base = xla_ms.get((r["torso"], r["loop"])) if r["conv"] == "podrl" else None
        speedup = f"{base / r['ms_per_step']:.1f}x" if base else ""
        return [r["torso"], r["batch"], r["loop"], r["conv"], fmt(r["ms_per_step"], ".1f"),
                fmt(r["samples_per_s"], ",.0f"), fmt(r["compile_s"], ".1f"), speedup]

    return table(["torso", ">batch", "loop", "conv", ">ms per SGD step", ">samples/s", ">compile s", ">xla / podrl"],
                 map(cells, rows))


def main(argv: list[str] | None = None) -> int:
    parser = new_parser(__doc__, quick="2 SGD steps per call, 1 timed call per row (smoke test, numbers meaningless)",
                        repeats=3, repeats_help="timed calls per row (median)")
    parser.add_argument("--torsos", nargs="+", choices=sorted(TORSOS), default=list(TORSOS))
    parser.add_argument("--steps", type=int, default=8, help="SGD steps (minibatches) per call")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.repeats < 1:
        parser.error("--steps and --repeats must be positive")
    if args.quick:
        args.steps, args.repeats = 2, 1
    start = time.perf_counter()
    rows = []
    for name in args.torsos:
        for loop in ("scan", "unrolled"):
            for conv in ("xla", "podrl"):
                rows.append(measure(name, conv, loop, args.steps, args.repeats))
                r = rows[-1]
                print(f"{name} {loop} {conv}: {r['ms_per_step']:.1f} ms/step, compile {r['compile_s']:.1f} s",
                      file=sys.stderr, flush=True)
    return finish("conv_grad", args, rows, markdown_table(rows), start, steps=args.steps)


if __name__ == "__main__":
    sys.exit(main())
