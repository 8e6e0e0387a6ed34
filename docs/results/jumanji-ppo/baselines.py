"""Reference returns for the Jumanji and xland-minigrid reports (docs/results/jumanji-ppo, jumanji-pqn,
xminigrid-ppo): what the runs start from, what chance does, and Knapsack's optimum.

    python docs/results/jumanji-ppo/baselines.py          # from the repository root, about 5 minutes on 2 cores

For each (preset, env) of the reports:
- untrained greedy: the greedy return of the parameters each of the 3 seeds starts from (`podrl reproduce`'s
  runs: seeds 0-2 in one Anakin program), measured by the run's own evaluation program (the preset's
  `eval_episodes` and `eval_max_steps`), as tests/untrained.py does for the learning tests;
- random legal: uniform over the legal actions (the `action_mask`; all 6 actions for xland-minigrid), the first
  episode of each of `EPISODES` envs, cut at the preset's `eval_max_steps` (a cut episode counts its return so
  far, as the greedy evaluation counts it);
- Knapsack-v1's optimum: the best packing of `EPISODES` instances drawn from Jumanji's generator, solved
  exactly as a 0/1 integer program (scipy's `milp`), and the greedy packing by value/weight.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import podrl.envs
from podrl.envs.observations import action_mask

from podrl.anakin import AnakinCompiled
from podrl.cli.experiment import preset_experiment
from podrl.core.mesh import data_mesh

EPISODES = 1024
REPORTS = (("jumanji-ppo", "jumanji:Knapsack-v1"), ("jumanji-ppo", "jumanji:Snake-v1"),
           ("jumanji-pqn", "jumanji:Knapsack-v1"), ("xminigrid-ppo", "xminigrid:MiniGrid-DoorKey-5x5"))


def untrained_greedy(preset: str, env_name: str) -> np.ndarray:
    """`[3]` greedy returns of the parameters seeds 0-2 of `podrl reproduce <preset>` start from."""
    experiment = preset_experiment("anakin", preset)
    run = dataclasses.replace(experiment.run, env=env_name, num_seeds=3, num_devices=1)
    env = podrl.envs.make(env_name)
    spec = podrl.envs.env_spec(env)
    program = AnakinCompiled(experiment.agent.make_agent(spec, run.num_updates), env, run,
                             data_mesh(jax.devices()[:1]), spec)
    return program.evaluate(program.init(), run.seed + 1)


def random_legal(env_name: str, max_steps: int) -> np.ndarray:
    """`[EPISODES]` returns of uniform-random legal actions, the first episode of each env, cut at `max_steps`."""
    env = podrl.envs.wrap_for_training(podrl.envs.make(env_name))
    num_actions = env.action_spec().num_values

    def body(carry, key):
        state, ts, returns, done = carry
        mask = action_mask(ts.observation)
        logits = jnp.zeros(done.shape + (num_actions,)) if mask is None else jnp.where(mask, 0.0, -jnp.inf)
        state, ts = jax.vmap(env.step)(state, jax.random.categorical(key, logits))
        returns = jnp.where(done, returns, ts.extras["episode_return"])
        return (state, ts, returns, done | ts.last()), None

    def run():
        state, ts = jax.vmap(env.reset)(jax.random.split(jax.random.key(7), EPISODES))
        start = (state, ts, jnp.zeros(EPISODES), jnp.zeros(EPISODES, bool))
        return jax.lax.scan(body, start, jax.random.split(jax.random.key(8), max_steps))[0][2]

    return np.asarray(jax.jit(run)())


def knapsack_optimum() -> tuple[np.ndarray, np.ndarray]:
    """`([EPISODES], [EPISODES])`: the optimal and the value/weight-greedy packings of Knapsack-v1 instances."""
    import jumanji
    from scipy.optimize import Bounds, LinearConstraint, milp

    env = jumanji.make("Knapsack-v1")
    states, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(12345), EPISODES))
    budget = float(env.total_budget)
    optimal, greedy = [], []
    for w, v in zip(np.asarray(states.weights, np.float64), np.asarray(states.values, np.float64)):
        solved = milp(-v, constraints=LinearConstraint(w[None], -np.inf, budget), integrality=np.ones_like(v),
                      bounds=Bounds(0, 1))
        optimal.append(-solved.fun)
        left, total = budget, 0.0
        for i in np.argsort(-v / w):
            if w[i] <= left:
                left, total = left - w[i], total + v[i]
        greedy.append(total)
    return np.array(optimal), np.array(greedy)


def main() -> None:
    for preset, env_name in REPORTS:
        untrained = untrained_greedy(preset, env_name)
        print(f"{preset} {env_name}: untrained greedy per seed {np.round(untrained, 3).tolist()}, "
              f"mean {untrained.mean():.3f}")
    for env_name in sorted({env_name for _, env_name in REPORTS}):
        max_steps = preset_experiment("anakin", next(p for p, e in REPORTS if e == env_name)).run.eval_max_steps
        returns = random_legal(env_name, max_steps)
        print(f"{env_name}: random legal over {EPISODES} episodes (cut at {max_steps} steps): "
              f"{returns.mean():.3f} +- {returns.std():.3f}")
    optimal, greedy = knapsack_optimum()
    print(f"jumanji:Knapsack-v1 over {EPISODES} instances: optimum {optimal.mean():.3f} +- {optimal.std():.3f}, "
          f"value/weight greedy {greedy.mean():.3f} ({(greedy / optimal).mean():.4f} of the optimum)")


if __name__ == "__main__":
    main()
