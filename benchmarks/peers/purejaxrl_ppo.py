"""The peer side of the MinAtar PPO row of `benchmarks.peer_programs`: PureJaxRL's `ppo.py`.

Runs inside the PureJaxRL venv (jax 0.4.38, gymnax 0.0.9; see benchmarks/peers/registry.py),
from a PureJaxRL source tree (`src`, default ~/.cache/podrl/peer-src/purejaxrl), never imports
podrl. It imports the tree's own `purejaxrl/ppo.py` and calls its `make_train(config)` with
gymnax-blines' MinAtar PPO config (the values of podrl's `--preset minatar-ppo`). Two things
are set from here, not by editing the peer's file:

  - `ppo.ActorCritic` is replaced before `make_train` by a module of the same shape (separate
    actor and critic MLPs, orthogonal init sqrt(2) / 0.01 / 1.0, zero biases, a distrax
    Categorical) whose hidden width is `hidden` (256, gymnax-blines' width; the file's is 64);
  - `purejaxrl/wrappers.py` imports brax and navix at its top for wrappers this row does not
    use; empty stand-in modules are registered for them so the venv needs neither.

Prints one `BENCH_RESULT {json}` line (benchmarks.peers.driver):

  compile_seconds    jit(train).lower(key).compile()
  steps_per_second   total_timesteps / the compiled call's seconds (run only)
  final_return       mean return of the training episodes that ended in the last 10% of updates

    python -m benchmarks.peers.purejaxrl_ppo '{"env": "Breakout-MinAtar", "total_timesteps": 131072}'
"""

from __future__ import annotations

import os
import sys
import types

from benchmarks.peers import driver

MINATAR_PPO = {
    "LR": 5e-4, "NUM_ENVS": 64, "NUM_STEPS": 128, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 8, "GAMMA": 0.999,
    "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "relu", "ANNEAL_LR": False, "DEBUG": False,
}
"""gymnax-blines agents/<game>-MinAtar/ppo.yaml (as podrl's --preset minatar-ppo; no lr warm-up)."""


def stand_in_modules() -> None:
    """Empty brax / navix modules, so `purejaxrl/wrappers.py` imports without them."""
    names = {"brax": {}, "brax.envs": {}, "brax.envs.wrappers": {},
             "brax.envs.wrappers.training": {"EpisodeWrapper": object, "AutoResetWrapper": object}, "navix": {}}
    for name, attrs in names.items():
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__dict__.update(attrs)
            sys.modules[name] = module
    sys.modules["brax"].envs = sys.modules["brax.envs"]


def actor_critic(width: int):
    """An ActorCritic module like the peer's, `width` units per hidden layer."""
    import distrax
    import flax.linen as nn
    import jax.numpy as jnp
    import numpy as np
    from flax.linen.initializers import constant, orthogonal

    class WideActorCritic(nn.Module):
        action_dim: int
        activation: str = "tanh"

        @nn.compact
        def __call__(self, x):
            act = nn.relu if self.activation == "relu" else nn.tanh

            def tower(x, out, gain):
                for _ in range(2):
                    x = act(nn.Dense(width, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x))
                return nn.Dense(out, kernel_init=orthogonal(gain), bias_init=constant(0.0))(x)

            return distrax.Categorical(logits=tower(x, self.action_dim, 0.01)), jnp.squeeze(tower(x, 1, 1.0), -1)

    return WideActorCritic


def measure(spec: dict) -> dict:
    """Compiles and runs PureJaxRL's PPO once on `spec` (env, total_timesteps, hidden, seed, src)."""
    src = os.path.expanduser(spec.get("src", "~/.cache/podrl/peer-src/purejaxrl"))
    sys.path.insert(0, os.path.join(src, "purejaxrl"))  # ppo.py does `from wrappers import ...`
    stand_in_modules()
    import jax
    import jax.numpy as jnp
    import ppo

    ppo.ActorCritic = actor_critic(int(spec.get("hidden", 256)))
    config = {**MINATAR_PPO, "ENV_NAME": spec.get("env", "Breakout-MinAtar"),
              "TOTAL_TIMESTEPS": int(spec["total_timesteps"])}
    key = jax.random.PRNGKey(int(spec.get("seed", 0)))
    out, compile_seconds, seconds = driver.compile_and_run(ppo.make_train(config), key)
    metric = out["metrics"]  # [updates, steps, envs] leaves
    tail = max(1, metric["returned_episode"].shape[0] // 10)
    ended = metric["returned_episode"][-tail:]
    final = float(jnp.sum(metric["returned_episode_returns"][-tail:] * ended) / jnp.maximum(jnp.sum(ended), 1))
    return {"compile_seconds": compile_seconds, "steps_per_second": config["TOTAL_TIMESTEPS"] / seconds,
            "run_seconds": seconds, "final_return": final, "jax_version": jax.__version__}


if __name__ == "__main__":
    sys.exit(driver.main(measure))
