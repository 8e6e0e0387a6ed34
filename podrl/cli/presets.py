"""Named configs with known-good hyperparameters, and the published figures they are checked against.

A `Preset` is a layout, an agent and the fields that differ from their defaults, with the
paper or peer implementation the values come from. The training commands take
`--preset NAME`; every field stays overridable by its own flag (the preset only changes the
defaults). `podrl reproduce` runs a preset over seeds and sets the result beside the
preset's `anchors`: returns a published source reports for that benchmark at its budget.

Values are plain field names and values (nothing imported from the agents), so this table
reads as documentation; `podrl.cli.experiment.preset_experiment` builds and validates the configs.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

from podrl.core.errors import ConfigError


class Anchor(NamedTuple):
    """A published return for one env, at a stated budget, from a named source."""

    value: float
    source: str  # who reports it, where, and how it was measured


class Preset(NamedTuple):
    """One named config (see the module doc)."""

    name: str
    layout: str  # "anakin" or "sebulba": the training command that runs it (`podrl <layout>`)
    agent: str  # a key of agents.AGENTS
    summary: str  # one line for --help
    source: str  # where the hyperparameters come from
    run: Mapping[str, Any]  # run-config fields the preset sets (its source's values; the rest keep the defaults)
    agent_fields: Mapping[str, Any]  # agent-config fields the preset sets, likewise
    anchors: Mapping[str, Anchor] = {}  # env id -> published return at the preset's budget


_GYMNAX_PPO = ("gymnax README, PPO checkpoints trained by gymnax-blines (MLP 256x256, 64 envs x 128 steps, "
               "1e7 steps; return of the trained policy)")
_MINATAR_ANCHORS = {
    "gymnax:Breakout-MinAtar": Anchor(28.0, _GYMNAX_PPO),
    "gymnax:Asterix-MinAtar": Anchor(15.0, _GYMNAX_PPO),
    "gymnax:Freeway-MinAtar": Anchor(58.0, _GYMNAX_PPO),
    "gymnax:SpaceInvaders-MinAtar": Anchor(131.0, _GYMNAX_PPO),
}
_MUZERO_MINATAR_RUN = {"env": "gymnax:Breakout-MinAtar", "num_envs": 64, "rollout_length": 8,
                       "total_steps": 1_000_000, "updates_per_call": 64, "eval_every": 512, "eval_max_steps": 2_500}
"""The run of both MinAtar MuZero presets: Stoix's 8-step rollouts, 64 envs, 1M steps."""
_MUZERO_MINATAR_NET = {"anneal_lr": False, "max_grad_norm": 0.5, "gamma": 0.99, "unroll_steps": 5, "td_steps": 5,
                       "value_loss_weight": 0.25, "torso": "minatar_cnn", "latent_size": 128, "dynamics_sizes": (128,),
                       "prediction_sizes": (128,)}
"""What both MinAtar MuZero presets take from Stoix's ff_mz.yaml and the MinAtar network."""
_CLEANRL_PONG = Anchor(20.45, "CleanRL ppo_atari_envpool.py, Pong-v5, 10M steps (40M frames), 3 seeds: 20.45 ± 0.09 "
                              "(docs/benchmark/ppo_atari_envpool.md)")
_BRAX_PPO = ("brax notebooks/training.ipynb (google/brax), its PPO hyperparameter table ('We determined some "
             "reasonable hyperparameters offline and share them here'): inverted_pendulum: 2M steps, 2048 envs, "
             "batch 1024 x 32 minibatches of 5-step unrolls, 4 epochs, gamma 0.97, lr 3e-4, entropy 1e-2, reward "
             "scaling 10, episode length 1000, observations normalised; brax ppo/train.py defaults for the rest "
             "(GAE 0.95, clip 0.3, no value clipping, no gradient clipping, constant lr)")
_IMPALA_PONG = Anchor(20.98, "Espeholt et al. 2018 (IMPALA), appendix table of Atari-57 scores: IMPALA (deep), one "
                             "game per agent, 200M frames (50M env steps), no-op starts")
_CLEANRL_SAC_DOCS = ("CleanRL docs, rl-algorithms/sac.md "
                     "(docs.cleanrl.dev/rl-algorithms/sac/#sac_continuous_actionpy), "
                     "sac_continuous_action.py, 1M steps, training episodic return, mean +- std over seeds")
_CLEANRL_TD3_DOCS = ("CleanRL docs, rl-algorithms/td3.md "
                     "(docs.cleanrl.dev/rl-algorithms/td3/#td3_continuous_actionpy), "
                     "td3_continuous_action.py, 1M steps, training episodic return, mean +- std over seeds")
_MUJOCO_RUN = {"env": "HalfCheetah-v5", "envs_per_thread": 1, "rollout_length": 64, "total_steps": 1_000_000,
               "eval_every": 160, "eval_episodes": 4, "log_every": 8}
"""CleanRL's one env and 1M steps; 64 env steps per update (64 gradient steps each at replay_ratio 1); a greedy eval
every ~10k steps."""

_JUMANJI_A2C = ("Jumanji's A2C baselines (Bonnet et al. 2024, arXiv:2306.09884; jumanji/training/configs/env/"
                "{knapsack,snake}.yaml): 20-step rollouts, GAE lambda 0.95, entropy 0.01, lr 3e-4 (Snake's; "
                "Knapsack's 1e-4), discount 0.997 (Snake's; Knapsack's 1.0), 64 envs (Knapsack's; Snake's 128)")
_KNAPSACK_OPTIMUM = Anchor(20.16, "the optimum, not a trained agent: the mean best packing of 1,024 Knapsack-v1 "
                                  "instances (50 items, budget 12.5) solved exactly with scipy's MILP "
                                  "(docs/results/jumanji-ppo/README.md); greedy by value/weight gets 99.7% of it")

PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset(
        "cartpole-ppo", "anakin", "ppo",
        "PPO on CartPole-v1, 4 envs x 128 steps, 500k steps (the README default).",
        "CleanRL ppo.py and PureJaxRL ppo.py defaults (lr 2.5e-4 annealed, 4 epochs x 4 minibatches, "
        "clip 0.2, entropy 0.01, 64-64 tanh MLPs)",
        {"env": "CartPole-v1", "num_envs": 4, "rollout_length": 128, "total_steps": 500_000},
        {},
        {"CartPole-v1": Anchor(500.0, "the maximum return of CartPole-v1 (500 steps)")},
    ),
    Preset(
        "minatar-ppo", "anakin", "ppo",
        "PPO on a gymnax MinAtar game (default Breakout), 64 envs x 128 steps, 1e7 steps.",
        "gymnax-blines agents/<game>-MinAtar/ppo.yaml: 64 envs x 128 steps, 8 minibatches x 4 epochs, "
        "lr 5e-4 constant, gamma 0.999, GAE 0.95, clip 0.2, entropy 0.01, MLP 256x256 on the flattened "
        "frame (their 5% lr warm-up is left out)",
        {"env": "gymnax:Breakout-MinAtar", "num_envs": 64, "rollout_length": 128, "total_steps": 10_000_000,
         "updates_per_call": 32, "eval_every": 256, "eval_max_steps": 2_500},
        {"learning_rate": 5e-4, "anneal_lr": False, "gamma": 0.999, "gae_lambda": 0.95, "num_epochs": 4,
         "num_minibatches": 8, "clip_eps": 0.2, "entropy_coef": 0.01, "value_coef": 0.5, "max_grad_norm": 0.5,
         "torso": "mlp", "hidden_sizes": (256, 256), "activation": "relu"},
        _MINATAR_ANCHORS,
    ),
    Preset(
        "minatar-impala", "anakin", "impala",
        "IMPALA (V-trace) with the MinAtar CNN on a gymnax MinAtar game, 64 envs x 20 steps, 1e7 steps.",
        "Cleanba IMPALA (Huang et al. 2023: lr 6e-4 annealed, PyTorch-style RMSProp eps 0.01, entropy 0.01, "
        "grad norm 40 "
        "on summed losses, 20-step unrolls) with the Young & Tian (2019) MinAtar network; anchors are gymnax's "
        "PPO figures (no published IMPALA MinAtar return)",
        {"env": "gymnax:Breakout-MinAtar", "num_envs": 64, "rollout_length": 20, "total_steps": 10_000_000,
         "updates_per_call": 64, "eval_every": 512, "eval_max_steps": 2_500},
        {"learning_rate": 6e-4, "anneal_lr": True, "optimizer": "rmsprop", "optimizer_eps": 0.01,
         "rmsprop_eps_in_sqrt": False,
         "gamma": 0.99, "entropy_coef": 0.01, "value_coef": 0.5, "max_grad_norm": 40.0, "reward_scale": 1.0,
         "num_minibatches": 4, "torso": "minatar_cnn", "loss_reduction": "sum"},
        _MINATAR_ANCHORS,
    ),
    Preset(
        "minatar-pqn", "anakin", "pqn",
        "PQN (Q(lambda), LayerNorm, no replay) with the MinAtar CNN on a gymnax MinAtar game, 128 envs x 32 steps, "
        "1e7 steps.",
        "purejaxql config/alg/pqn_minatar.yaml (Gallici et al. 2024: 128 envs x 32 steps, 2 epochs x 32 "
        "minibatches, lr 5e-4 linearly decayed, grad norm 10, gamma 0.99, lambda 0.65, epsilon 1 -> 0.05 over "
        "the first 10% of updates, LayerNorm) with the Young & Tian (2019) MinAtar network; anchors are "
        "gymnax's PPO figures (no published PQN return per MinAtar game at this budget)",
        {"env": "gymnax:Breakout-MinAtar", "num_envs": 128, "rollout_length": 32, "total_steps": 10_000_000,
         "updates_per_call": 32, "eval_every": 256, "eval_max_steps": 2_500},
        {"learning_rate": 5e-4, "anneal_lr": True, "max_grad_norm": 10.0, "gamma": 0.99, "q_lambda": 0.65,
         "num_epochs": 2, "num_minibatches": 32, "epsilon_start": 1.0, "epsilon_end": 0.05,
         "epsilon_decay_fraction": 0.1, "layer_norm": True, "torso": "minatar_cnn"},
        _MINATAR_ANCHORS,
    ),
    Preset(
        "minatar-muzero", "anakin", "muzero",
        "MuZero (Gumbel search, 8 simulations) with the MinAtar CNN on a gymnax MinAtar game, 64 envs x 8 steps, "
        "8 replayed windows per env step.",
        "this project's issue-41 settings for Breakout-MinAtar (docs/results.md: its report beside PPO and PQN): "
        "Stoix ff_mz.yaml's rollout, returns, unroll, value weight and grad norm, with Gumbel MuZero's "
        "search (Danihelka et al. 2022) at 8 simulations, 41-atom supports (h^-1(20) ~ 420 covers MinAtar's "
        "returns), lr 1e-3 constant, 64 gradient steps of 64 windows per 512 env steps and a buffer of 1,024 steps "
        "per env; the Young & Tian (2019) MinAtar network; anchors are gymnax's PPO figures (no published MinAtar "
        "MuZero return at this budget)",
        _MUZERO_MINATAR_RUN,
        {**_MUZERO_MINATAR_NET, "search": "gumbel", "num_simulations": 8, "learning_rate": 1e-3, "support_size": 20,
         "buffer_size": 65_536, "min_fill": 4_096, "batch_size": 64, "replay_ratio": 1 / 8},
        _MINATAR_ANCHORS,
    ),
    Preset(
        "minatar-muzero-stoix", "anakin", "muzero",
        "MuZero (mctx search, 25 simulations) with the MinAtar CNN on a gymnax MinAtar game, 64 envs x 8 steps "
        "(Stoix's values; minatar-muzero before issue 41).",
        "Stoix ff_mz.yaml (MuZero with mctx search: lr 3e-4 constant, 8 steps per rollout, 8 gradient steps "
        "of 128 sequences per rollout, buffer 10k, 64 warm-up steps, gamma 0.99, 5-step returns, 5 unroll "
        "steps, value weight 0.25, grad norm 0.5, 25 simulations of muzero search, 601-atom value and reward "
        "supports on [-300, 300]) with the Young & Tian (2019) MinAtar network; anchors are gymnax's PPO "
        "figures (no published MinAtar MuZero return at this budget)",
        _MUZERO_MINATAR_RUN,
        {**_MUZERO_MINATAR_NET, "search": "muzero", "num_simulations": 25, "learning_rate": 3e-4, "support_size": 300,
         "buffer_size": 10_240, "min_fill": 4_096, "batch_size": 128, "replay_ratio": 1 / 64},
        _MINATAR_ANCHORS,
    ),
    Preset(
        "minatar-r2d2", "anakin", "r2d2",
        "R2D2 (LSTM 128, dueling, prioritised sequence replay) with the MinAtar CNN on a gymnax MinAtar game, "
        "64 envs x 16 steps, 1e7 steps.",
        "Kapturowski et al. 2019 (R2D2) appendix hyper-parameters (priority exponent 0.9, importance sampling "
        "exponent 0.6, eta 0.9, n = 5, minibatch 64, Adam eps 1e-3, value rescaling eps 1e-3, Ape-X epsilons "
        "0.4 / 7, hard target copies) scaled to MinAtar: sequences of 8 + 16 steps every 8 (the paper's 40 + 80 "
        "every 40, / 5), an LSTM of 128 after the Young & Tian (2019) MinAtar network, gamma 0.99, replay "
        "100k steps and 5k to start (the MinAtar paper's DQN), lr 2.5e-4 (MinAtar's DQN; the paper's 1e-4 "
        "is for 1e10-frame runs), a target copy every 500 gradient steps, replay_ratio 1/40 = 0.41 learned "
        "steps per env step (the paper's ~0.38: 5 updates/s of 64 x 80 steps against 256 actors at ~260 "
        "steps/s); anchors are gymnax's PPO figures (no published MinAtar R2D2 return)",
        {"env": "gymnax:Breakout-MinAtar", "num_envs": 64, "rollout_length": 16, "total_steps": 10_000_000,
         "updates_per_call": 16, "eval_every": 256, "eval_max_steps": 2_500},
        {"torso": "minatar_cnn", "core": "lstm", "core_size": 128, "dueling": True, "burn_in": 8,
         "sequence_length": 16, "sequence_period": 8, "n_step": 5, "gamma": 0.99, "priority_exponent": 0.9,
         "importance_exponent": 0.6, "priority_eta": 0.9, "buffer_size": 102_400, "min_fill": 5_120,
         "batch_size": 64, "replay_ratio": 1 / 40, "learning_rate": 2.5e-4, "anneal_lr": False, "adam_eps": 1e-3,
         "target_update_period": 500, "target_tau": 1.0, "epsilon": 0.4, "epsilon_alpha": 7.0,
         "value_rescaling": True},
        _MINATAR_ANCHORS,
    ),
    Preset(
        "minatar-dqn", "anakin", "dqn",
        "DQN (Double, 1-step, hard target copies) with the MinAtar CNN on a gymnax MinAtar game, 64 envs x 16 "
        "steps, 1e7 steps.",
        "Young & Tian 2019 (MinAtar) DQN: replay 100k, batch 32, lr 2.5e-4 (Adam here, RMSProp there), gamma "
        "0.99, target copy every 1000 gradient steps, epsilon 1 -> 0.1 over the first 100k of their 5M frames "
        "(2% of the run), replay start 5000, their network; one difference: a gradient step every 4 env "
        "steps (replay_ratio 0.25, Mnih et al. 2015) where MinAtar's DQN takes one every step. Anchors are "
        "gymnax's PPO figures",
        {"env": "gymnax:Breakout-MinAtar", "num_envs": 64, "rollout_length": 16, "total_steps": 10_000_000,
         "updates_per_call": 16, "eval_every": 256, "eval_max_steps": 2_500},
        {"torso": "minatar_cnn", "buffer_size": 100_000, "batch_size": 32, "learning_rate": 2.5e-4,
         "anneal_lr": False, "gamma": 0.99, "n_step": 1, "double_dqn": True, "target_update_period": 1000,
         "target_tau": 1.0, "epsilon_start": 1.0, "epsilon_end": 0.1, "epsilon_decay_fraction": 0.02,
         "min_fill": 5_000, "replay_ratio": 0.25, "loss": "huber"},
        _MINATAR_ANCHORS,
    ),
    Preset(
        "atari-ppo", "sebulba", "ppo",
        "PPO with the Nature CNN on an Atari game (default Pong), DQN-era protocol, 8 envs x 128 steps, 10M steps.",
        "CleanRL ppo_atari_envpool.py (Huang et al. 2022, 'The 37 implementation details of PPO'): "
        "lr 2.5e-4 annealed, 4 epochs x 4 minibatches, clip 0.1, entropy 0.01, rewards clipped to [-1, 1], "
        "episodic life, no sticky actions",
        {"env": "ale:Pong", "envs_per_thread": 8, "rollout_length": 128, "total_steps": 10_000_000,
         "env_kwargs": ("protocol=dqn",)},
        {"learning_rate": 2.5e-4, "anneal_lr": True, "num_epochs": 4, "num_minibatches": 4, "clip_eps": 0.1,
         "entropy_coef": 0.01, "value_coef": 0.5, "max_grad_norm": 0.5, "torso": "nature_cnn",
         "reward_clip": 1.0},
        {"ale:Pong": _CLEANRL_PONG},
    ),
    Preset(
        "atari-impala", "sebulba", "impala",
        "IMPALA with the IMPALA ResNet on an Atari game (default Pong), Machado protocol, 2 x 32 envs x 20 steps.",
        "Cleanba cleanba_impala.py (Huang et al. 2023): lr 6e-4 annealed, PyTorch-style RMSProp (eps 0.01 outside "
        "the sqrt), entropy 0.01, "
        "grad norm 40 on losses summed over the batch, 20-step unrolls, rewards clipped to [-1, 1], "
        "sticky actions 0.25 (Machado et al. 2018); one difference: Cleanba makes 64 envs per actor thread "
        "(2 x 64 per actor device), this preset 32 (2 x 32; kept, the committed Pong run used it)",
        {"env": "ale:Pong", "threads_per_actor_device": 2, "envs_per_thread": 32, "rollout_length": 20,
         "lag": "1", "total_steps": 50_000_000, "env_kwargs": ("protocol=machado",)},
        {"learning_rate": 6e-4, "anneal_lr": True, "optimizer": "rmsprop", "optimizer_eps": 0.01,
         "rmsprop_eps_in_sqrt": False,
         "gamma": 0.99, "entropy_coef": 0.01, "value_coef": 0.5, "max_grad_norm": 40.0, "reward_scale": 1.0,
         "reward_clip": 1.0, "num_minibatches": 4, "torso": "impala_resnet", "loss_reduction": "sum"},
        {"ale:Pong": _IMPALA_PONG},
    ),
    Preset(
        "atari-r2d2", "sebulba", "r2d2",
        "R2D2 (Nature CNN, LSTM 512, dueling, prioritised sequence replay) on an Atari game (default Pong), "
        "Machado protocol, 2 x 64 envs x 80 steps, lag 1.",
        "Kapturowski et al. 2019 (R2D2), the paper's network (Nature CNN, LSTM 512, dueling head with 512-wide "
        "streams) and appendix hyper-parameters: sequences of 80 steps after a 40-step burn-in, every 40 steps; "
        "priority exponent 0.9, importance sampling exponent 0.6, eta 0.9; gamma 0.997, n = 5, minibatch 64; "
        "Adam lr 1e-4, eps 1e-3; target network copied every 2500 updates; value rescaling eps 1e-3; Ape-X "
        "epsilons eps 0.4, alpha 7; rewards unclipped (h rescales them); no life-loss episode ends (the paper "
        "disabled them too). Differences: the replay is 204,800 steps per learner device (the paper's 4M "
        "observations in one learner: 20 such devices), 128 actor columns instead of 256, one gradient step "
        "per 10,240-step update (~1e-4 per env step; the paper's ~7.5e-5: 5 updates/s against 256 actors "
        "at ~260 steps/s), the Machado protocol's sticky actions and 4 stacked frames",
        {"env": "ale:Pong", "threads_per_actor_device": 2, "envs_per_thread": 64, "rollout_length": 80,
         "lag": "1", "total_steps": 50_000_000, "env_kwargs": ("protocol=machado",)},
        {"torso": "nature_cnn", "core": "lstm", "core_size": 512, "dueling": True, "head_hidden": 512,
         "burn_in": 40, "sequence_length": 80, "sequence_period": 40, "n_step": 5, "gamma": 0.997,
         "priority_exponent": 0.9, "importance_exponent": 0.6, "priority_eta": 0.9, "buffer_size": 204_800,
         "min_fill": 51_200, "batch_size": 64, "replay_ratio": 1e-4, "learning_rate": 1e-4, "anneal_lr": False,
         "adam_eps": 1e-3, "target_update_period": 2500, "target_tau": 1.0, "epsilon": 0.4, "epsilon_alpha": 7.0,
         "value_rescaling": True, "reward_clip": None},
    ),
    Preset(
        "memory-ppo-lstm", "anakin", "ppo",
        "PPO with an LSTM core on RecallCue-v0, a cue shown once and asked for later (a feed-forward agent "
        "stays at chance).",
        "PureJaxRL ppo_rnn.py's recurrent PPO layout (minibatches over environments, whole sequences), "
        "sized for the memory task",
        {"env": "RecallCue-v0", "num_envs": 64, "rollout_length": 32, "total_steps": 1_000_000},
        {"core": "lstm", "core_size": 64, "learning_rate": 1e-3, "num_minibatches": 4, "entropy_coef": 0.01},
    ),
    Preset(
        "mujoco-sac", "sebulba", "sac",
        "SAC on a gymnasium MuJoCo env (default HalfCheetah-v5), 1 env, 1M steps, CleanRL's hyperparameters.",
        "CleanRL sac_continuous_action.py (Huang et al. 2022): buffer 1e6, batch 256, gamma 0.99, tau 0.005, "
        "q lr 1e-3, policy lr 3e-4, alpha autotuned from 1 (lr 1e-3, CleanRL's q lr), learning_starts 5e3, "
        "256x256 ReLU MLPs, one gradient step per env step, target update every step (target_network_frequency 1); "
        "CleanRL's policy_frequency 2 runs 2 actor steps every 2nd critic step, here 1 actor step per critic "
        "step (the same count)",
        _MUJOCO_RUN,
        {"buffer_size": 1_000_000, "batch_size": 256, "gamma": 0.99, "tau": 0.005, "critic_learning_rate": 1e-3,
         "actor_learning_rate": 3e-4, "temperature_learning_rate": 1e-3, "learn_temperature": True,
         "initial_temperature": 1.0, "warmup_steps": 5_000, "hidden_sizes": (256, 256), "activation": "relu",
         "replay_ratio": 1.0},
        {"HalfCheetah-v5": Anchor(9634.89, "HalfCheetah-v2: 9634.89 +- 1423.73; " + _CLEANRL_SAC_DOCS),
         "Walker2d-v5": Anchor(3591.45, "Walker2d-v2: 3591.45 +- 911.33; " + _CLEANRL_SAC_DOCS),
         "Hopper-v5": Anchor(2310.46, "Hopper-v2: 2310.46 +- 342.82; " + _CLEANRL_SAC_DOCS)},
    ),
    Preset(
        "mujoco-td3", "sebulba", "td3",
        "TD3 on a gymnasium MuJoCo env (default HalfCheetah-v5), 1 env, 1M steps, CleanRL's hyperparameters.",
        "CleanRL td3_continuous_action.py (Huang et al. 2022; Fujimoto et al. 2018): buffer 1e6, batch 256, "
        "gamma 0.99, tau 0.005, lr 3e-4 for actor and critics, learning_starts 25e3, exploration noise 0.1, "
        "policy noise 0.2 clipped at 0.5, policy_frequency 2 (actor and target updates every 2nd critic step), "
        "256x256 ReLU MLPs, one gradient step per env step",
        _MUJOCO_RUN,
        {"buffer_size": 1_000_000, "batch_size": 256, "gamma": 0.99, "tau": 0.005, "critic_learning_rate": 3e-4,
         "actor_learning_rate": 3e-4, "warmup_steps": 25_000, "exploration_noise": 0.1, "policy_noise": 0.2,
         "noise_clip": 0.5, "policy_delay": 2, "hidden_sizes": (256, 256), "activation": "relu", "replay_ratio": 1.0},
        {"HalfCheetah-v5": Anchor(9018.31, "HalfCheetah-v2: 9018.31 +- 1078.31; " + _CLEANRL_TD3_DOCS),
         "Walker2d-v5": Anchor(4246.07, "Walker2d-v2: 4246.07 +- 1210.84; " + _CLEANRL_TD3_DOCS),
         "Hopper-v5": Anchor(3391.78, "Hopper-v2: 3391.78 +- 232.21; " + _CLEANRL_TD3_DOCS)},
    ),
    Preset(
        "jumanji-ppo", "anakin", "ppo",
        "PPO on a Jumanji env with its action mask (default Knapsack-v1), 64 envs x 20 steps, 5M steps.",
        _JUMANJI_A2C + ", with PPO's clipped updates (CleanRL's 4 epochs x 4 minibatches, clip 0.2, value 0.5, "
        "grad norm 0.5); the multi-input torso reads Jumanji's observation leaf by leaf (128 x 128 ReLU MLPs on "
        "vectors, the MinAtar CNN on Snake's grid) where Jumanji's networks are a transformer (Knapsack) and a "
        "CNN (Snake)",
        {"env": "jumanji:Knapsack-v1", "num_envs": 64, "rollout_length": 20, "total_steps": 5_000_000,
         "updates_per_call": 50, "eval_every": 250, "eval_episodes": 64, "eval_max_steps": 1_000},
        {"learning_rate": 3e-4, "anneal_lr": False, "gamma": 0.997, "gae_lambda": 0.95, "num_epochs": 4,
         "num_minibatches": 4, "clip_eps": 0.2, "entropy_coef": 0.01, "value_coef": 0.5, "max_grad_norm": 0.5,
         "hidden_sizes": (128, 128), "activation": "relu"},
        {"jumanji:Knapsack-v1": _KNAPSACK_OPTIMUM},
    ),
    Preset(
        "jumanji-pqn", "anakin", "pqn",
        "PQN (Q(lambda), LayerNorm, no replay) on a Jumanji env with its action mask (default Knapsack-v1), "
        "128 envs x 32 steps, 5M steps.",
        "purejaxql config/alg/pqn_minatar.yaml (Gallici et al. 2024: 128 envs x 32 steps, 2 epochs x 32 "
        "minibatches, lr 5e-4 linearly decayed, grad norm 10, gamma 0.99, lambda 0.65, epsilon 1 -> 0.05 over "
        "the first 10% of updates, LayerNorm) with the multi-input torso's 128 x 128 ReLU MLPs; exploration and "
        "every bootstrap maximum are over the legal actions only",
        {"env": "jumanji:Knapsack-v1", "num_envs": 128, "rollout_length": 32, "total_steps": 5_000_000,
         "updates_per_call": 16, "eval_every": 112, "eval_episodes": 64, "eval_max_steps": 1_000},
        {"learning_rate": 5e-4, "anneal_lr": True, "max_grad_norm": 10.0, "gamma": 0.99, "q_lambda": 0.65,
         "num_epochs": 2, "num_minibatches": 32, "epsilon_start": 1.0, "epsilon_end": 0.05,
         "epsilon_decay_fraction": 0.1, "layer_norm": True, "hidden_sizes": (128, 128), "activation": "relu"},
        {"jumanji:Knapsack-v1": _KNAPSACK_OPTIMUM},
    ),
    Preset(
        "xminigrid-ppo", "anakin", "ppo",
        "PPO on an xland-minigrid MiniGrid task (default DoorKey-5x5), 64 envs x 16 steps, 1M steps.",
        "xland-minigrid's single-task PPO (Nikulin et al. 2024, training/train_single_task.py defaults: 16-step "
        "rollouts, 1 epoch x 16 minibatches, lr 1e-3 linearly decayed, gamma 0.99, GAE 0.95, clip 0.2, entropy "
        "0.01, value 0.5, grad norm 0.5, 1M steps; the view's ids embedded 16 wide before the convolutions and the "
        "direction given, as its DirectionObservationWrapper does) without its recurrent core and previous action "
        "and reward inputs (a 7 x 7 view sees all of DoorKey-5x5) and with 64 envs where it runs 8,192",
        {"env": "xminigrid:MiniGrid-DoorKey-5x5", "num_envs": 64, "rollout_length": 16, "total_steps": 1_000_000,
         "updates_per_call": 32, "eval_every": 64, "eval_episodes": 64, "eval_max_steps": 250},
        {"learning_rate": 1e-3, "anneal_lr": True, "gamma": 0.99, "gae_lambda": 0.95, "num_epochs": 1,
         "num_minibatches": 16, "clip_eps": 0.2, "entropy_coef": 0.01, "value_coef": 0.5, "max_grad_norm": 0.5},
    ),
    Preset(
        "brax-ppo", "anakin", "ppo",
        "PPO on a Brax env (default brax:inverted_pendulum, positional backend), 2048 envs x 80 steps, "
        "observations normalised, 2M steps.",
        _BRAX_PPO + "; brax's 16 unrolls of 5 steps per update are one 80-step rollout here (the same "
                    "163,840 steps per update; GAE runs over 80 steps instead of 5), and one MLP width serves "
                    "both nets: brax's policy (4 x 32, swish), where brax's value net is 5 x 256",
        {"env": "brax:inverted_pendulum", "num_envs": 2048, "rollout_length": 80, "total_steps": 2_000_000,
         "updates_per_call": 1, "eval_every": 2, "eval_max_steps": 1_000},
        {"normalize_observations": True, "learning_rate": 3e-4, "anneal_lr": False, "gamma": 0.97,
         "gae_lambda": 0.95, "num_epochs": 4, "num_minibatches": 32, "clip_eps": 0.3, "clip_value_loss": False,
         "entropy_coef": 0.01, "value_coef": 0.5, "max_grad_norm": 1e9, "reward_scale": 10.0,
         "hidden_sizes": (32, 32, 32, 32), "activation": "silu", "adam_eps": 1e-8},
        {"brax:inverted_pendulum": Anchor(1000.0, "the maximum return of brax's inverted_pendulum (+1 per step "
                                                  "alive for 1000 steps); brax's training notebook gives this "
                                                  "config a 2M-step budget for it")},
    ),
)}
"""Every preset by name (the order `--help` lists them in)."""


def get(name: str) -> Preset:
    """The preset called `name`; ConfigError("preset") naming the known ones otherwise."""
    if name not in PRESETS:
        raise ConfigError("preset", f"unknown preset {name!r}; expected one of {sorted(PRESETS)}")
    return PRESETS[name]


def help_text(layout: str) -> str:
    """The `--preset` part of a training command's --help: the presets of `layout`, one line each."""
    lines = [f"  {p.name}: {p.summary}" for p in PRESETS.values() if p.layout == layout]
    others = {p.layout for p in PRESETS.values()} - {layout}
    elsewhere = [f"{other.capitalize()} presets (podrl {other}): "
                 + ", ".join(p.name for p in PRESETS.values() if p.layout == other) + "." for other in sorted(others)]
    return "\n".join(["Presets (--preset NAME; every field stays overridable):", *lines, *elsewhere])

