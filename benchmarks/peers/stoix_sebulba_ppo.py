"""The peer side of the Sebulba row of `benchmarks.peer_programs`: Stoix's Sebulba PPO.

Runs inside the Stoix venv (jax 0.5.3; see benchmarks/peers/registry.py), from a Stoix source
tree (`src`, default ~/.cache/podrl/peer-src/stoix), never imports podrl. It composes
Stoix's own hydra config `default/sebulba/default_ff_ppo` with the overrides below, and runs
its `stoix.systems.ppo.sebulba.ff_ppo.run_experiment` unchanged on 2 CPU JAX devices (actor
device 0, learner device 1). The only thing added is a clock: Stoix's learner step is wrapped
so that each update's end is stamped after `jax.block_until_ready` of its output (podrl's
learner fetches its metrics every update, the same sync). On podrl's jax (the `stoix-samejax`
venv: jax 0.10, flax 0.12) three library names are stood in for, none of Stoix's code, each only
where the installed library lacks it or gets it wrong:

  - flax's `unreplicate` takes the output of a pmap over one device (this row's one learner) for
    a fully replicated array and returns it with its replica axis, so Stoix's actor fails
    (`ScopeParamShapeError`: kernel (4, 64) expected, (1, 4, 64) received): `one_device_unreplicate`;
  - `jax.device_put_sharded` (its actor) and `jax.tree_map` (its evaluator), removed in jax 0.10
    (`AttributeError`): `removed_jax_names` puts them back.

Prints one `BENCH_RESULT {json}`
(benchmarks.peers.driver):

  steps_per_second   env steps of updates 2..N / seconds from the end of update 1 to the end of N
  first_update_s     process-relative seconds at the end of update 1 (both programs' compiles)
  final_return       Stoix's final evaluation (its `run_experiment` return value)

    python -m benchmarks.peers.stoix_sebulba_ppo '{"num_envs": 16, "rollout_length": 32, "updates": 40}'
"""

from __future__ import annotations

import os
import sys
import time

from benchmarks.peers import driver, stoix_source

START = time.perf_counter()
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")


def overrides(spec: dict) -> list[str]:
    """Hydra overrides: envpool CartPole-v1, MLP actor and critic, the shared PPO settings."""
    hidden = "[" + ",".join(str(h) for h in spec.get("hidden", [64, 64])) + "]"
    lr = spec.get("learning_rate", 2.5e-4)
    steps = spec["num_envs"] * spec["rollout_length"] * spec["updates"]
    return [
        "env=envpool/cartpole", "network=mlp",
        f"arch.total_num_envs={spec['num_envs']}", "arch.actor.actor_per_device=1", "arch.actor.device_ids=[0]",
        "arch.learner.device_ids=[1]", "arch.evaluator_device_id=0", f"arch.total_timesteps={steps}",
        "arch.num_evaluation=1", f"arch.num_eval_episodes={spec.get('eval_episodes', 32)}",
        "arch.synchronous=False", f"arch.seed={spec.get('seed', 0)}",
        f"system.rollout_length={spec['rollout_length']}", f"system.epochs={spec.get('epochs', 4)}",
        f"system.num_minibatches={spec.get('minibatches', 4)}", f"system.actor_lr={lr}", f"system.critic_lr={lr}",
        "system.decay_learning_rates=False", "system.gamma=0.99", "system.gae_lambda=0.95", "system.clip_eps=0.2",
        "system.ent_coef=0.01", "system.vf_coef=0.5", "system.max_grad_norm=0.5",
        f"network.actor_network.pre_torso.layer_sizes={hidden}",
        f"network.critic_network.pre_torso.layer_sizes={hidden}",
        f"network.actor_network.pre_torso.activation={spec.get('activation', 'tanh')}",
        f"network.critic_network.pre_torso.activation={spec.get('activation', 'tanh')}",
        "logger.loggers.console.enabled=False", "logger.checkpointing.save_model=False",
    ]


def one_device_unreplicate() -> None:
    """Where flax's `unreplicate` keeps the replica axis of an array sharded over one device (flax 0.12 on
    jax >= 0.8), replaces it with one that returns replica 0 of such an array (flax's for every other)."""
    import flax.jax_utils
    import jax

    flax_unreplicate = flax.jax_utils.unreplicate
    probe = flax.jax_utils.replicate(jax.numpy.zeros(2), devices=jax.devices()[:1])  # [1, 2]
    if flax_unreplicate(probe).shape == (2,):
        return

    def one(x):
        one_device = isinstance(x, jax.Array) and x.ndim and len(x.sharding.device_set) == 1
        return x.addressable_shards[0].data[0] if one_device else flax_unreplicate(x)

    flax.jax_utils.unreplicate = lambda tree: jax.tree_util.tree_map(one, tree)


def removed_jax_names() -> None:
    """Puts back the two names Stoix calls that jax 0.10 no longer exports, where they are gone:
    `jax.device_put_sharded` (its actor; jax's own implementation, still in `jax._src.api`) and `jax.tree_map`
    (its evaluator; the alias of `jax.tree_util.tree_map` it was)."""
    import jax
    from jax._src import api

    for name, value in (("device_put_sharded", api.device_put_sharded), ("tree_map", jax.tree_util.tree_map)):
        try:
            getattr(jax, name)
        except AttributeError:  # a removed name raises it (jax's deprecation module getattr)
            setattr(jax, name, value)


def measure(spec: dict) -> dict:
    """Runs Stoix's Sebulba PPO once on `spec` (see `overrides`); its clocked steps/s and final return."""
    src = stoix_source.enter(spec)
    import jax

    one_device_unreplicate()  # before Stoix imports it by name
    removed_jax_names()
    from stoix.systems.ppo.sebulba import ff_ppo

    stamps: list[float] = []
    setup = ff_ppo.learner_setup

    def timed_setup(*args, **kwargs):
        learn_step, apply_fns, learner_state = setup(*args, **kwargs)

        def timed_step(*step_args):
            out = jax.block_until_ready(learn_step(*step_args))
            stamps.append(time.perf_counter())
            return out

        return timed_step, apply_fns, learner_state

    ff_ppo.learner_setup = timed_setup
    config = stoix_source.compose(src, "sebulba", "default_ff_ppo", overrides(spec))
    final = float(ff_ppo.run_experiment(config))
    steps_per_update = spec["num_envs"] * spec["rollout_length"]
    seconds = stamps[-1] - stamps[0]
    return {"steps_per_second": steps_per_update * (len(stamps) - 1) / seconds, "updates": len(stamps),
            "first_update_s": stamps[0] - START, "final_return": final, "jax_version": jax.__version__,
            "devices": len(jax.devices())}


if __name__ == "__main__":
    sys.exit(driver.main(measure))
