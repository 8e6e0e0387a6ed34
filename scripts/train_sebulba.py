"""Train an agent with the Sebulba layout (host envs, actor threads, learner devices).

Examples:
  python scripts/train_sebulba.py --cpu-devices 3                          # PPO, gymnasium CartPole-v1
  python scripts/train_sebulba.py --env ale:Pong --envs-per-thread 16 --lag 1 agent:impala --agent.torso nature_cnn \
      --agent.reward-clip 1.0                                              # Machado et al. 2018 protocol (default)
  python scripts/train_sebulba.py --env ale:Breakout --env-kwargs protocol=dqn full_action_space=True \
      agent:ppo --agent.torso nature_cnn --agent.reward-clip 1.0           # DQN-era protocol, 18 actions
  python scripts/train_sebulba.py --env jax:Acrobot-v1 --threads-per-actor-device 2
  python scripts/train_sebulba.py --env dm_env:my_pkg.envs:make_env       # a dm_env.Environment factory
  python scripts/train_sebulba.py --env my_pkg.envs:make_env              # gymnasium / dm_env / vector env factory

Everything is in `podrl.cli.train` (flags, presets, resume: `podrl.cli.experiment`).
"""

import sys

from podrl.cli.train import main

if __name__ == "__main__":
    sys.exit(main("sebulba"))
