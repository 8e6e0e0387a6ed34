"""The jax-version control of `benchmarks.peer_programs`: one fixed pure-JAX update, timed.

Imports nothing but jax, numpy and `benchmarks.peers.driver`, so the same code runs in every peer's venv (jax 0.4.38,
0.5.3, ...) and in podrl's; the ratio of two venvs' times is what their jax/XLA versions alone
make of the same arithmetic, to set beside a framework ratio. Each kernel is a PPO-style
clipped-surrogate + value loss, its gradient and a hand-written Adam step, on one minibatch:

  mlp64     64-64 tanh actor and critic MLPs, obs [128, 4], 2 actions (CartPole, Sebulba rows)
  mlp256    256-256 relu actor and critic MLPs, obs [512, 400], 6 actions (MinAtar flattened)
  cnn16     conv 16 3x3 valid + dense 128 relu, obs [128, 10, 10, 4], 6 actions (MinAtar CNN)

`steps` updates run in one jitted `lax.scan`; the result is the median over `repeats` calls of
microseconds per update (compile excluded).

The actor kernel times what a Sebulba actor thread does once per env step instead:

  act64     the 64-64 tanh actor and critic MLPs on 16 CartPole observations (a host numpy array, as
            an env returns it), one categorical sample with that step's key of a pre-split `[steps]`
            key array, its log-probability and the value, then the host copy of the three (`device_get`)

one jitted call and one copy per step, `steps` steps in a Python loop; the result is the median over
`repeats` loops of microseconds per step (each venv's jax with its default dispatch). Prints one
`BENCH_RESULT {json}` line:

    python -m benchmarks.peers.jax_control '{"kernel": "mlp64", "steps": 200, "repeats": 5}'
    python -m benchmarks.peers.jax_control '{"kernel": "act64", "steps": 2000, "repeats": 5}'
"""

from __future__ import annotations

import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.peers import driver

KERNELS = {
    "mlp64": {"obs": (128, 4), "actions": 2, "hidden": (64, 64), "conv": False},
    "mlp256": {"obs": (512, 400), "actions": 6, "hidden": (256, 256), "conv": False},
    "cnn16": {"obs": (128, 10, 10, 4), "actions": 6, "hidden": (128,), "conv": True},
    "act64": {"obs": (16, 4), "actions": 2, "hidden": (64, 64), "conv": False},
}
ACTOR_KERNELS = ("act64",)
"""Kernels timed per env step of an actor (`measure_act`), not per update."""


def init_params(key: jax.Array, kernel: dict) -> dict:
    """Actor and critic weights (scaled normal), zero biases: {'actor': [(w, b), ...], 'critic': ...}."""
    def layers(key, sizes):
        out = []
        for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
            w = jax.random.normal(jax.random.fold_in(key, i), (m, n)) / np.sqrt(m)
            out.append((w, jnp.zeros(n)))
        return out

    obs = kernel["obs"][1:]
    if kernel["conv"]:
        flat = (obs[0] - 2) * (obs[1] - 2) * 16
        conv = jax.random.normal(jax.random.fold_in(key, 99), (3, 3, obs[2], 16)) / np.sqrt(9 * obs[2])
        return {"conv": conv, "actor": layers(key, (flat, *kernel["hidden"], kernel["actions"])),
                "critic": layers(jax.random.fold_in(key, 7), (flat, *kernel["hidden"], 1))}
    size = int(np.prod(obs))
    return {"actor": layers(key, (size, *kernel["hidden"], kernel["actions"])),
            "critic": layers(jax.random.fold_in(key, 7), (size, *kernel["hidden"], 1))}


def mlp(layers: list, x: jax.Array, act) -> jax.Array:
    for w, b in layers[:-1]:
        x = act(x @ w + b)
    w, b = layers[-1]
    return x @ w + b


def loss_fn(params: dict, batch: dict, conv: bool) -> jax.Array:
    """Clipped surrogate + 0.5 value loss - 0.01 entropy of a minibatch."""
    x = batch["obs"]
    act = jnp.tanh
    if conv:
        x = jax.lax.conv_general_dilated(x, params["conv"], (1, 1), "VALID",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        x, act = jax.nn.relu(x).reshape(x.shape[0], -1), jax.nn.relu
    logits = mlp(params["actor"], x, act)
    value = mlp(params["critic"], x, act)[:, 0]
    logp_all = jax.nn.log_softmax(logits)
    logp = jnp.take_along_axis(logp_all, batch["action"][:, None], axis=1)[:, 0]
    ratio = jnp.exp(logp - batch["old_logp"])
    adv = (batch["adv"] - batch["adv"].mean()) / (batch["adv"].std() + 1e-8)
    surrogate = jnp.minimum(ratio * adv, jnp.clip(ratio, 0.8, 1.2) * adv).mean()
    entropy = -(jnp.exp(logp_all) * logp_all).sum(-1).mean()
    return -surrogate + 0.5 * ((value - batch["ret"]) ** 2).mean() - 0.01 * entropy


def adam_update(params, grads, state, lr=2.5e-4, b1=0.9, b2=0.999, eps=1e-5):
    """One Adam step (written out, so no optimizer library is needed)."""
    mu, nu, count = state
    count = count + 1
    mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
    nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, nu, grads)
    step = lambda p, m, v: p - lr * (m / (1 - b1 ** count)) / (jnp.sqrt(v / (1 - b2 ** count)) + eps)  # noqa: E731
    return jax.tree.map(step, params, mu, nu), (mu, nu, count)


def make_batch(kernel: dict) -> dict:
    rng = np.random.default_rng(0)
    n = kernel["obs"][0]
    return {"obs": jnp.asarray(rng.normal(size=kernel["obs"]), jnp.float32),
            "action": jnp.asarray(rng.integers(0, kernel["actions"], n), jnp.int32),
            "old_logp": jnp.full(n, -np.log(kernel["actions"]), jnp.float32),
            "adv": jnp.asarray(rng.normal(size=n), jnp.float32),
            "ret": jnp.asarray(rng.normal(size=n), jnp.float32)}


def measure(name: str, steps: int, repeats: int) -> dict:
    """Microseconds per update of kernel `name` (median over `repeats` calls of `steps` updates)."""
    kernel = KERNELS[name]
    params, batch = init_params(jax.random.PRNGKey(0), kernel), make_batch(kernel)
    zeros = jax.tree.map(jnp.zeros_like, params)
    grad = jax.grad(loss_fn)

    def run(params, opt):
        def body(carry, _):
            p, o = carry
            return adam_update(p, grad(p, batch, kernel["conv"]), o), None
        return jax.lax.scan(body, (params, opt), None, length=steps)[0]

    compiled, compile_seconds = driver.compile_ahead(run, params, (zeros, zeros, 0))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(params, (zeros, zeros, 0)))
        times.append(time.perf_counter() - t0)
    return {"kernel": name, "us_per_update": statistics.median(times) / steps * 1e6, "compile_seconds": compile_seconds,
            "jax_version": jax.__version__, "steps": steps, "repeats": repeats}


def measure_act(name: str, steps: int, repeats: int) -> dict:
    """Microseconds per actor step of kernel `name` (module docstring): median over `repeats` loops of `steps`."""
    kernel = KERNELS[name]
    params = init_params(jax.random.PRNGKey(0), kernel)
    observation = np.asarray(make_batch(kernel)["obs"])  # host data, as an env returns it
    keys = jax.random.split(jax.random.PRNGKey(1), steps)

    def act(params, observation, keys, t):
        logits = mlp(params["actor"], observation, jnp.tanh)
        action = jax.random.categorical(keys[t], logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=1)[:, 0]
        return action, log_prob, mlp(params["critic"], observation, jnp.tanh)[:, 0]

    compiled, compile_seconds = driver.compile_ahead(act, params, observation, keys, 0)
    act = jax.jit(act)  # the jit path, as an actor calls it (the compile above warmed its cache)
    jax.device_get(act(params, observation, keys, 0))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for t in range(steps):
            jax.device_get(act(params, observation, keys, t))
        times.append(time.perf_counter() - t0)
    return {"kernel": name, "us_per_step": statistics.median(times) / steps * 1e6, "compile_seconds": compile_seconds,
            "jax_version": jax.__version__, "steps": steps, "repeats": repeats}


def measure_spec(spec: dict) -> dict:
    """`measure` (or `measure_act` for an actor kernel) of a spec {kernel, steps (default 200), repeats (default 5)}."""
    timed = measure_act if spec["kernel"] in ACTOR_KERNELS else measure
    return timed(spec["kernel"], int(spec.get("steps", 200)), int(spec.get("repeats", 5)))


if __name__ == "__main__":
    sys.exit(driver.main(measure_spec))
