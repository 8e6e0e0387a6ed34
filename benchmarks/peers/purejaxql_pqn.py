"""The peer side of the MinAtar PQN row of `benchmarks.peer_programs`: purejaxql's PQN.

Runs inside the purejaxql venv (jax 0.4.38, gymnax 0.0.9; see benchmarks/peers/registry.py),
from a purejaxql source tree (`src`, default ~/.cache/podrl/peer-src/purejaxql), never imports
podrl. It imports the tree's own `purejaxql/pqn_minatar.py` and calls its `make_train(config)`
with its own `config/alg/pqn_minatar.yaml` values (podrl's `agent:pqn` side is given the same),
wandb off, its in-training test rollouts off (podrl's side evaluates once, after training).
Prints one `BENCH_RESULT {json}` line (benchmarks.peers.driver):

  compile_seconds    jit(train).lower(key).compile()
  steps_per_second   TOTAL_TIMESTEPS / the compiled call's seconds (run only)
  final_return       mean over the last 10% of updates of its LogWrapper `returned_episode_returns`
                     metric (per update: each env's last finished episode, averaged over steps and envs)

    python -m benchmarks.peers.purejaxql_pqn '{"env": "Breakout-MinAtar", "total_timesteps": 131072}'
"""

from __future__ import annotations

import os
import sys

from benchmarks.peers import driver

MINATAR_PQN = {
    "NUM_ENVS": 128, "NUM_STEPS": 32, "EPS_START": 1.0, "EPS_FINISH": 0.05, "EPS_DECAY": 0.1,
    "NUM_MINIBATCHES": 32, "NUM_EPOCHS": 2, "NORM_TYPE": "layer_norm", "LR": 5e-4, "MAX_GRAD_NORM": 10,
    "LR_LINEAR_DECAY": True, "GAMMA": 0.99, "LAMBDA": 0.65, "ENV_KWARGS": {}, "TEST_DURING_TRAINING": False,
    "TEST_INTERVAL": 0.05, "TEST_NUM_ENVS": 128, "EPS_TEST": 0.0, "WANDB_MODE": "disabled", "ALG_NAME": "pqn",
}
"""purejaxql config/alg/pqn_minatar.yaml, except the in-training tests (off) and wandb (disabled)."""


def measure(spec: dict) -> dict:
    """Compiles and runs purejaxql's PQN once on `spec` (env, total_timesteps, decay_timesteps, seed, src)."""
    src = os.path.expanduser(spec.get("src", "~/.cache/podrl/peer-src/purejaxql"))
    sys.path.insert(0, src)
    import jax
    import jax.numpy as jnp
    from purejaxql import pqn_minatar

    total = int(spec["total_timesteps"])
    config = {**MINATAR_PQN, "ENV_NAME": spec.get("env", "Breakout-MinAtar"), "TOTAL_TIMESTEPS": total,
              "TOTAL_TIMESTEPS_DECAY": int(spec.get("decay_timesteps", total))}
    key = jax.random.PRNGKey(int(spec.get("seed", 0)))
    out, compile_seconds, seconds = driver.compile_and_run(pqn_minatar.make_train(config), key)
    returns = out["metrics"]["returned_episode_returns"]  # [updates]: NaN-free mean per update
    tail = max(1, returns.shape[0] // 10)
    return {"compile_seconds": compile_seconds, "steps_per_second": total / seconds, "run_seconds": seconds,
            "final_return": float(jnp.mean(returns[-tail:])), "jax_version": jax.__version__}


if __name__ == "__main__":
    sys.exit(driver.main(measure))
