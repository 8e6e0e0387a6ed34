"""One process of a multi-process test run (started by `podrl launch`).

Trains an Anakin or Sebulba run of `--agent` (default ppo) with the README's
multi-process settings and every other field at its default (evaluation included),
shortened only by the number of updates, and writes this process's final params (and
first shard of per-learner-shard state), step counts and last evaluation return to
`<out>/p<process_id>.npz`, with the number of programs spanning processes that this process
compiled itself (`spanning_compiles`; with `--share-compiles` every process but 0 loads them), and
`podrl.core.distributed.host_sum` of 2^24 + 1 + process index over the processes (`host_sum`: exact in float64).
"""

from __future__ import annotations

import argparse
import dataclasses
import os


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layout", choices=("anakin", "sebulba"), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--coordinator")
    parser.add_argument("--num-processes", type=int)
    parser.add_argument("--process-id", type=int)
    parser.add_argument("--cpu-devices", type=int)
    parser.add_argument("--share-compiles", action="store_true")
    parser.add_argument("--checkpoint-dir")
    parser.add_argument("--checkpoint-every", type=int, default=0, help="anakin: also save every this many updates")
    parser.add_argument("--updates-per-call", type=int,
                        help="anakin: updates of one compiled call (default: the config's)")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--agent", default="ppo", help="a registered agent name, at its default config")
    parser.add_argument("--population", action="store_true", help="population_config instead of anakin_config")
    parser.add_argument("--no-eval", action="store_true", help="anakin: eval_episodes=0 (no greedy evaluation)")
    parser.add_argument("--record-columns", action="store_true",
                        help="sebulba: save the env columns each actor state is made for (`columns`, `columns_total`)")
    parser.add_argument("--others-cache", help="processes 1.. use this (empty) compilation cache folder, not the "
                                               "suite's: they find nothing there, so every program spanning "
                                               "processes comes from process 0, which may find it in its cache")
    args = parser.parse_args()

    import jax
    import numpy as np

    jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    if args.others_cache:
        # JAX puts the cache folder's path in every program's compile options (for XLA's GPU autotuning
        # cache), which would make the processes' cache keys differ; that cache does nothing on CPU
        jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
        if args.process_id:
            jax.config.update("jax_compilation_cache_dir", args.others_cache)
    spanning_compiles = count_spanning_compiles()
    from podrl.core.distributed import DistributedConfig, initialize

    initialize(DistributedConfig(args.coordinator, args.num_processes, args.process_id,
                                 share_compiles=args.share_compiles))
    from podrl.agents import AGENTS
    from podrl.run.config import LoggingConfig

    agent_config = AGENTS[args.agent].config()
    columns: list[tuple[list[int], int]] = []
    if args.record_columns:
        agent_config = recording_columns(agent_config, columns)

    logging = LoggingConfig(run_dir=None, console=True)
    if args.layout == "anakin":
        from podrl.anakin import train_anakin
        from podrl.run.config import CheckpointConfig

        checkpoint = CheckpointConfig(directory=args.checkpoint_dir, every_updates=args.checkpoint_every,
                                      resume=args.checkpoint_dir if args.resume else None)
        config = (population_config if args.population else anakin_config)(args.updates, logging, checkpoint)
        if args.no_eval:
            config = dataclasses.replace(config, eval_episodes=0)
        if args.updates_per_call:
            config = dataclasses.replace(config, updates_per_call=args.updates_per_call)
        result = train_anakin(config, agent_config)
        train_state, local_steps, global_steps = result.state.train_state, 0, 0
        final_eval = np.nan if result.final_eval_return is None else np.mean(result.final_eval_return)
    else:
        from podrl.sebulba import train_sebulba

        result = train_sebulba(sebulba_config(args.updates, logging), agent_config)
        train_state, local_steps, global_steps = result.train_state, result.env_steps, result.global_env_steps
        final_eval = np.nan if result.final_eval_return is None else result.final_eval_return
    # params, and this process's first shard of any per-learner-shard state (e.g. DQN's replay buffer)
    leaves = [np.asarray(x.addressable_data(0)) for x in jax.tree.leaves((train_state.params, train_state.shard_state))]
    from podrl.core.distributed import host_sum

    past_float32 = host_sum(np.array([2 ** 24 + 1 + jax.process_index()]))  # float32 would round it
    np.savez(os.path.join(args.out, f"p{jax.process_index()}.npz"), *leaves,
             local_steps=local_steps, global_steps=global_steps, final_eval=final_eval,
             spanning_compiles=len(spanning_compiles), host_sum=past_float32,
             columns=np.array(sorted(i for index, _ in columns for i in index), np.int64),
             columns_total=np.array(sorted({total for _, total in columns}), np.int64))


def recording_columns(config, seen: list):
    """`config` whose agent's `init_actor_state` appends the env columns a training layout names to `seen`
    (`(global indices, total)`), and acts as `config`'s does."""

    @dataclasses.dataclass(frozen=True)
    class Recorded(type(config)):
        def make_agent(self, env_spec, total_updates):
            agent = super().make_agent(env_spec, total_updates)

            def init_actor_state(batch_size, columns=None):
                if columns is not None:
                    seen.append(([int(i) for i in columns.index], int(columns.total)))
                return agent.init_actor_state(batch_size, columns)

            return agent._replace(init_actor_state=init_actor_state)

    return Recorded(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)})


def count_spanning_compiles() -> list[str]:
    """The names of the programs spanning processes this process compiles from now on (appended as XLA
    compiles them; a program loaded from the cache or from process 0 is not a compile)."""
    from compile_spy import spy_compiles

    return spy_compiles(keep=lambda devices: len({device.process_index for device in devices}) > 1)


def anakin_config(updates: int, logging, checkpoint=None):
    """The README's `train_anakin.py --num-envs 8`, `updates` updates long; defaults otherwise."""
    from podrl.anakin.config import AnakinConfig
    from podrl.run.config import CheckpointConfig

    steps = AnakinConfig(num_envs=8).steps_per_update * updates
    return AnakinConfig(num_envs=8, total_steps=steps, logging=logging, checkpoint=checkpoint or CheckpointConfig())


def population_config(updates: int, logging, checkpoint=None):
    """A 4-member lr sweep with PBT every 2 updates on a (2 rows, 2 data shards) mesh: with 2 processes
    x 2 devices each process holds one row (2 members), so exploit copies members across processes."""
    from podrl.anakin.config import AnakinConfig
    from podrl.run.config import CheckpointConfig

    return AnakinConfig(num_envs=8, rollout_length=32, total_steps=8 * 32 * updates, eval_episodes=4,
                        eval_max_steps=200, logging=logging, checkpoint=checkpoint or CheckpointConfig(),
                        population=4, population_shards=2, sweep=("agent.learning_rate=0,1e-4,1e-3,3e-3",),
                        pbt_every=2, pbt_fraction=0.5, updates_per_call=2)


def sebulba_config(updates: int, logging):
    """The README's `train_sebulba.py --actor-devices 0 --learner-devices 1 --lag 1`,
    `updates` updates long; defaults otherwise (evaluation at the end included)."""
    from podrl.sebulba import SebulbaConfig

    readme = dict(actor_devices=(0,), learner_devices=(1,), lag="1")
    steps = SebulbaConfig(**readme).steps_per_update * updates
    return SebulbaConfig(**readme, total_steps=steps, logging=logging)


if __name__ == "__main__":
    main()
