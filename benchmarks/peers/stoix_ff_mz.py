"""The peer side of the MinAtar MuZero row of `benchmarks.peer_programs`: Stoix's Anakin MuZero.

Runs inside the Stoix venv (jax 0.5.3, gymnax 0.0.9; see benchmarks/peers/registry.py), from a
Stoix source tree (`src`, default ~/.cache/podrl/peer-src/stoix), never imports podrl. It composes
Stoix's own hydra config `default/anakin/default_ff_mz` (system `search/ff_mz`, network `muzero`,
env `gymnax/<game>`) with the overrides below and runs `stoix.systems.search.ff_mz.run_experiment`
unchanged on one CPU device. Two things are added, both clocks and taps, no change to what runs:

  - the learner function `learner_setup` returns is compiled ahead of its first call (its compile
    seconds apart), then each of Stoix's `num_evaluation` training calls is timed, blocked on, and
    its finished training episodes' mean return kept;
  - the evaluator `search_evaluator_setup` returns is wrapped to keep each evaluation's mean return.

Prints one `BENCH_RESULT {json}` line (benchmarks.peers.driver):

  compile_seconds    the learner's compile
  steps_per_second   env steps of all training calls / their seconds (evaluations excluded)
  curve              per training call: env_steps, train_seconds (cumulative), train_return, eval_return
  final_return       the last evaluation's mean return (Stoix's `run_experiment` value)

    python -m benchmarks.peers.stoix_ff_mz '{"game": "breakout", "total_timesteps": 16384, "evaluations": 2}'
"""

from __future__ import annotations

import os
import sys
import time

from benchmarks.peers import driver, stoix_source

os.environ.setdefault("JAX_PLATFORMS", "cpu")

FF_MZ = {"lr": 3e-4, "rollout_length": 8, "epochs": 8, "warmup_steps": 16, "total_buffer_size": 25_000,
         "total_batch_size": 32, "sample_sequence_length": 6, "gamma": 0.99, "n_steps": 5, "vf_coef": 0.25,
         "max_grad_norm": 0.5, "num_simulations": 25, "search_method": "muzero", "decay_learning_rates": False}
"""Stoix's stoix/configs/system/search/ff_mz.yaml at the pinned commit, restated so the row names them."""


def overrides(spec: dict) -> list[str]:
    """Hydra overrides: the gymnax game, the envs, the budget, the evaluations, ff_mz's system values."""
    system = {**FF_MZ, **spec.get("system", {})}
    return [
        f"env=gymnax/{spec.get('game', 'breakout')}", f"arch.total_num_envs={spec.get('num_envs', 64)}",
        f"arch.total_timesteps={spec['total_timesteps']}", f"arch.num_evaluation={spec.get('evaluations', 8)}",
        f"arch.num_eval_episodes={spec.get('eval_episodes', 32)}", "arch.absolute_metric=False",
        f"arch.seed={spec.get('seed', 0)}", *(f"system.{k}={v}" for k, v in system.items()),
        "logger.loggers.console.enabled=False", "logger.checkpointing.save_model=False",
    ]


def measure(spec: dict) -> dict:
    """Runs Stoix's ff_mz once on `spec` (see `overrides`): its clocked curve and final return."""
    src = stoix_source.enter(spec)
    import jax
    import numpy as np
    from stoix.systems.search import ff_mz

    calls: list[dict] = []
    evals: list[float] = []
    compiled: dict = {}
    learner_setup, evaluator_setup = ff_mz.learner_setup, ff_mz.search_evaluator_setup

    def timed_learner_setup(*args, **kwargs):
        learn, root_fn, search_apply_fn, learner_state = learner_setup(*args, **kwargs)

        def timed_learn(state):
            if "fn" not in compiled:
                start = time.perf_counter()
                compiled["fn"] = learn.lower(state).compile()
                compiled["seconds"] = time.perf_counter() - start
            start = time.perf_counter()
            out = jax.block_until_ready(compiled["fn"](state))
            seconds = time.perf_counter() - start
            ended = np.asarray(out.episode_metrics["is_terminal_step"])
            returns = np.asarray(out.episode_metrics["episode_return"])
            calls.append({"seconds": seconds, "env_steps": int(ended.size),  # [devices, updates, batch, T, envs]
                          "train_return": float(returns[ended].mean()) if ended.any() else None})
            return out

        return timed_learn, root_fn, search_apply_fn, learner_state

    def tapped_evaluator_setup(*args, **kwargs):
        evaluator, absolute, rest = evaluator_setup(*args, **kwargs)

        def tapped(params, keys):
            out = jax.block_until_ready(evaluator(params, keys))
            evals.append(float(np.mean(out.episode_metrics["episode_return"])))
            return out

        return tapped, absolute, rest

    ff_mz.learner_setup, ff_mz.search_evaluator_setup = timed_learner_setup, tapped_evaluator_setup
    config = stoix_source.compose(src, "anakin", "default_ff_mz", overrides(spec))
    final = float(ff_mz.run_experiment(config))
    curve, seconds, steps = [], 0.0, 0
    for call, eval_return in zip(calls, evals):
        seconds, steps = seconds + call["seconds"], steps + call["env_steps"]
        curve.append({"env_steps": steps, "train_seconds": seconds, "train_return": call["train_return"],
                      "eval_return": eval_return})
    return {"steps_per_second": steps / seconds, "compile_seconds": compiled["seconds"],
            "final_return": final, "curve": curve, "jax_version": jax.__version__}


if __name__ == "__main__":
    sys.exit(driver.main(measure))
