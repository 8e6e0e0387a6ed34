"""The peer side of `benchmarks.peer_sac`: rejax 0.1.3's SAC on gymnax Pendulum-v1.

Runs inside the peer's own venv (rejax needs gymnax 0.0.9; see benchmarks/peers/registry.py),
never imports podrl, and prints one `BENCH_RESULT {json}` line (benchmarks.peers.driver):

  compile_seconds    jit(train).lower(key).compile()
  steps_per_second   total_timesteps / the compiled call's seconds (run only; its evaluations included)
  eval_steps         env steps at each of rejax's evaluations (every eval_freq steps)
  eval_returns       mean return of each evaluation (128 episodes)
  final_return       the last of them

    python -m benchmarks.peers.rejax_sac '{"num_envs": 4, "total_timesteps": 20480, "eval_freq": 2048,
        "num_epochs": 4, "buffer_size": 131072, "fill_buffer": 2048, "batch_size": 256,
        "learning_rate": 3e-4, "gamma": 0.99, "polyak": 0.99, "hidden": [64, 64]}'
    python -m benchmarks.peers.rejax_sac '{"check_env": true, "states": [[0.1, 0.2]], "actions": [0.5]}'
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import rejax

from benchmarks.peers import driver

CONFIG_FIELDS = ("num_envs", "num_epochs", "buffer_size", "fill_buffer", "batch_size", "learning_rate", "gamma",
                 "polyak", "total_timesteps", "eval_freq")


def pendulum_steps(states: list[list[float]], actions: list[float]) -> dict[str, list]:
    """gymnax Pendulum-v1's observation and reward after one step from each (theta, theta_dot) and torque."""
    from gymnax.environments.classic_control.pendulum import EnvState, Pendulum

    env = Pendulum()
    s = jnp.asarray(states, jnp.float32)
    n = len(states)
    state = EnvState(theta=s[:, 0], theta_dot=s[:, 1], last_u=jnp.zeros(n), time=jnp.zeros(n, jnp.int32))
    step = jax.vmap(env.step_env, in_axes=(None, 0, 0, None))
    action = jnp.asarray(actions, jnp.float32)[:, None]
    obs, _, reward, _, _ = step(jax.random.key(0), state, action, env.default_params)
    return {"observations": obs.tolist(), "rewards": reward.tolist()}


def train(spec: dict) -> dict:
    """Compiles and runs rejax's SAC once; its timings and evaluation curve."""
    config = {k: spec[k] for k in CONFIG_FIELDS}
    algo = rejax.SAC.create(env="Pendulum-v1", **config, skip_initial_evaluation=True,
                            agent_kwargs={"activation": "relu", "hidden_layer_sizes": [int(h) for h in spec["hidden"]]})
    key = jax.random.key(spec.get("seed", 0))
    (_, (_, returns)), compile_seconds, seconds = driver.compile_and_run(algo.train, key)
    curve = np.asarray(returns).mean(axis=-1)  # [num_evals, episodes] -> [num_evals]
    freq = int(np.ceil(config["eval_freq"] / config["num_envs"])) * config["num_envs"]
    return {"compile_seconds": compile_seconds, "run_seconds": seconds,
            "steps_per_second": len(curve) * freq / seconds, "eval_steps": [freq * (i + 1) for i in range(len(curve))],
            "eval_returns": curve.tolist(), "final_return": float(curve[-1]), "jax_version": jax.__version__}


def measure(spec: dict) -> dict:
    """The env check's observations and rewards (`check_env`), or one training run."""
    return pendulum_steps(spec["states"], spec["actions"]) if spec.get("check_env") else train(spec)


if __name__ == "__main__":
    sys.exit(driver.main(measure))
