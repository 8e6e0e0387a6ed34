"""The peer side of `benchmarks.peer_ppo`: rejax 0.1.3's PPO on gymnax CartPole-v1.

Runs inside the peer's own venv (rejax needs gymnax 0.0.9; see benchmarks/peers/registry.py),
never imports podrl, and prints one `BENCH_RESULT {json}` line (benchmarks.peers.driver):

  compile_seconds    jit(train).lower(key).compile()
  steps_per_second   total_timesteps * num_seeds / the compiled call's seconds (run only)
  final_return       mean return of rejax's own final evaluation (128 episodes per seed)

    python -m benchmarks.peers.rejax_ppo '{"num_envs": 4, "num_steps": 128, "total_timesteps": 500000, "num_seeds": 1}'
    (optional "hidden": [64, 64], the MLP's hidden sizes)
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import rejax

from benchmarks.peers import driver

# The PPO config podrl's side runs too (benchmarks.peer_ppo): CleanRL / PureJaxRL CartPole PPO.
PPO = {
    "env": "CartPole-v1", "num_epochs": 4, "num_minibatches": 4, "learning_rate": 2.5e-4, "gamma": 0.99,
    "gae_lambda": 0.95, "clip_eps": 0.2, "ent_coef": 0.01, "vf_coef": 0.5, "max_grad_norm": 0.5,
    "agent_kwargs": {"activation": "tanh", "hidden_layer_sizes": [64, 64]},
    "normalize_observations": False, "normalize_rewards": False, "skip_initial_evaluation": True,
}


def cartpole_steps(states: list[list[float]], actions: list[int]) -> list[list[float]]:
    """gymnax CartPole-v1's observation after one step from each (x, x_dot, theta, theta_dot) and action."""
    from gymnax.environments.classic_control.cartpole import CartPole, EnvState

    env = CartPole()
    s = jnp.asarray(states, jnp.float32)
    state = EnvState(x=s[:, 0], x_dot=s[:, 1], theta=s[:, 2], theta_dot=s[:, 3], time=jnp.zeros(len(states), jnp.int32))
    step = jax.vmap(env.step_env, in_axes=(None, 0, 0, None))
    obs = step(jax.random.key(0), state, jnp.asarray(actions, jnp.int32), env.default_params)[0]
    return obs.tolist()


def measure(spec: dict) -> dict:
    """The env check's observations (`check_env`), or one compiled training run's timings and final return."""
    if spec.get("check_env"):
        return {"observations": cartpole_steps(spec["states"], spec["actions"])}
    total = int(spec["total_timesteps"])
    hidden = [int(h) for h in spec.get("hidden", PPO["agent_kwargs"]["hidden_layer_sizes"])]
    ppo = {**PPO, "agent_kwargs": {**PPO["agent_kwargs"], "hidden_layer_sizes": hidden}}
    algo = rejax.PPO.create(**ppo, num_envs=spec["num_envs"], num_steps=spec["num_steps"], total_timesteps=total,
                            eval_freq=total)  # one evaluation, at the end
    seeds = int(spec.get("num_seeds", 1))
    keys = jax.random.split(jax.random.key(spec.get("seed", 0)), seeds)
    train, key = (jax.vmap(algo.train), keys) if seeds > 1 else (algo.train, keys[0])
    (_, (_, returns)), compile_seconds, seconds = driver.compile_and_run(train, key)
    final = float(jnp.mean(returns[..., -1, :]))  # [seeds,] num_evals, episodes
    return {"compile_seconds": compile_seconds, "steps_per_second": total * seeds / seconds,
            "run_seconds": seconds, "final_return": final,
            "rejax": rejax.__version__ if hasattr(rejax, "__version__") else "0.1.3",
            "jax_version": jax.__version__, "devices": str(jax.devices()[0].platform)}


if __name__ == "__main__":
    sys.exit(driver.main(measure))
