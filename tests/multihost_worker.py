"""One process of a multi-process test run (started by scripts/launch_local.py).

Trains a small Anakin or Sebulba run and writes this process's final params and
step counts to `<out>/p<process_id>.npz`.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layout", choices=("anakin", "sebulba"), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--coordinator")
    parser.add_argument("--num-processes", type=int)
    parser.add_argument("--process-id", type=int)
    parser.add_argument("--cpu-devices", type=int)
    parser.add_argument("--checkpoint-dir")
    parser.add_argument("--stop-after", type=int)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()

    import jax
    import numpy as np

    jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    from podrl.distributed import DistributedConfig, initialize

    initialize(DistributedConfig(args.coordinator, args.num_processes, args.process_id))
    from agents.ppo import PPOConfig
    from podrl.config import LoggingConfig

    quiet = LoggingConfig(run_dir=None, console=True)
    if args.layout == "anakin":
        from podrl.anakin import train_anakin

        from podrl.config import CheckpointConfig

        checkpoint = CheckpointConfig(directory=args.checkpoint_dir, stop_after_updates=args.stop_after,
                                      resume=args.checkpoint_dir if args.resume else None)
        config = anakin_config(args.updates, quiet, checkpoint)
        result = train_anakin(config, PPOConfig())
        params, local_steps, global_steps = result.state.train_state.params, 0, 0
    else:
        from podrl.sebulba import SebulbaConfig, train_sebulba

        config = SebulbaConfig(env="jax:CartPole-v1", envs_per_thread=4, rollout_length=16,
                               total_steps=4 * 16 * args.updates, actor_devices=(0,), learner_devices=(1,),
                               lag="1", log_every=2, eval_episodes=0, timeout_s=60.0, logging=quiet)
        result = train_sebulba(config, PPOConfig(num_minibatches=2))
        params, local_steps, global_steps = result.train_state.params, result.env_steps, result.global_env_steps
    leaves = [np.asarray(x.addressable_data(0)) for x in jax.tree.leaves(params)]
    np.savez(os.path.join(args.out, f"p{jax.process_index()}.npz"), *leaves,
             local_steps=local_steps, global_steps=global_steps)


def anakin_config(updates: int, logging, checkpoint=None):
    from podrl.config import AnakinConfig, CheckpointConfig

    return AnakinConfig(env="CartPole-v1", num_envs=8, rollout_length=16, total_steps=8 * 16 * updates,
                        updates_per_call=2, eval_every=0, eval_episodes=8, logging=logging,
                        checkpoint=checkpoint or CheckpointConfig())


if __name__ == "__main__":
    main()
