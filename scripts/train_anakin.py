"""Train an agent with the Anakin layout (JAX env + agent in one program per device).

Examples:
  python scripts/train_anakin.py                                  # PPO, CartPole-v1, all local devices
  python scripts/train_anakin.py --env Pendulum-v1 --total-steps 1000000
  python scripts/train_anakin.py --num-seeds 8 --cpu-devices 2    # 8 seeds on a 2-device CPU mesh
  python scripts/train_anakin.py --cpu-devices 8 --num-envs 8 --population 8 --population-shards 2 \
      --sweep agent.learning_rate=loguniform:1e-4:3e-3 agent.entropy_coef=0.0,0.01   # a sweep, 2 x 4 mesh
  python scripts/train_anakin.py --cpu-devices 8 --population 8 --population-shards 8 \
      --sweep agent.learning_rate=0,1e-4,3e-4,1e-3 --pbt-every 32        # population-based training
  python scripts/train_anakin.py --env my_pkg.my_env:MyEnv        # your own JaxEnv class
  python scripts/train_anakin.py agent:impala --agent.learning-rate 1e-3

Everything is in `podrl.cli.train` (flags, presets, resume: `podrl.cli.experiment`).
"""

import sys

from podrl.cli.train import main

if __name__ == "__main__":
    sys.exit(main("anakin"))
