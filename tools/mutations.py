"""The named mutations `tools/check_mutations.py` applies, one at a time, to a copy of the tree.

Each is a small bug a user would meet as a silently worse agent (or a run that does not survive what
it should): an exact text of one file,
its replacement, and the tests that name that code and must fail under it (pytest arguments,
run from the copy's root; the check adds `-m "not learning"`: ordinary tests must catch them).
A text that is no longer found exactly once makes the check fail loudly ("mutation X no longer
applies"), so a refactor of the code shows up here; update the text with it.
"""

from __future__ import annotations

from typing import NamedTuple


class Mutation(NamedTuple):
    """One named bug: `path` (from the repository root) with `find` replaced by `replace`."""

    name: str
    path: str
    find: str
    replace: str
    tests: tuple[str, ...]  # pytest arguments: the test files / node ids that name this code
    bug: str  # one line: what a user would get


CONTINUOUS = ("tests/agents/test_continuous_update.py", "tests/agents/test_continuous.py")
MUZERO = ("tests/agents/test_muzero_update.py", "tests/agents/test_muzero_targets.py", "tests/agents/test_muzero.py")
REANALYSE = ("tests/agents/test_muzero_reanalyse.py",) + MUZERO  # its own file first: the others pass
PPO = ("tests/agents/test_ppo_update.py", "tests/agents/test_ppo_loss.py", "tests/agents/test_gae.py",
       "tests/agents/test_ppo_config.py")
OBS_NORM = ("tests/agents/test_obs_norm.py",)
DQN = ("tests/agents/test_dqn.py",)
PQN = ("tests/agents/test_pqn.py",)
MASKS = ("tests/agents/test_masking.py",)
IMPALA = ("tests/agents/test_impala.py", "tests/agents/test_vtrace.py")
R2D2 = ("tests/agents/test_targets.py", "tests/agents/test_importance_weights.py",
        "tests/agents/test_gradient_paths.py", "tests/agents/test_r2d2_sequences.py", "tests/agents/test_r2d2.py")
WEIGHTS = ("tests/agents/test_importance_weights.py", "tests/agents/test_prioritised.py")
SEBULBA_PIPELINE = ("tests/layouts/test_sebulba_pipeline.py",)

MUTATIONS: tuple[Mutation, ...] = (
    # ---------------------------------------------------------------- the six of issue 42
    Mutation(
        "td3-no-target-smoothing", "agents/td3/agent.py",
        "noise = cfg.policy_noise * jax.random.normal(",
        "noise = 0.0 * cfg.policy_noise * jax.random.normal(",
        CONTINUOUS, "TD3 without target policy smoothing (Fujimoto et al. 2018, eq. 14)"),
    Mutation(
        "td3-no-policy-delay", "agents/td3/agent.py",
        "due = learner.sgd_steps % parts.config.policy_delay == 0",
        "due = learner.sgd_steps % 1 == 0",
        CONTINUOUS, "TD3 updating the actor and the targets on every critic step"),
    Mutation(
        "obs-norm-fresh-statistics", "agents/obs_norm.py",
        '    stats = train_state.params["obs_norm"]\n'
        '    inner_state, metrics = agent.update(train_state._replace(params=train_state.params["agent"]),\n'
        '                                        normalize_trajectory(stats, traj, clip), key)\n'
        '    stats = update_observation_stats(stats, traj.observation)\n',
        '    stats = update_observation_stats(train_state.params["obs_norm"], traj.observation)\n'
        '    inner_state, metrics = agent.update(train_state._replace(params=train_state.params["agent"]),\n'
        '                                        normalize_trajectory(stats, traj, clip), key)\n',
        OBS_NORM, "the loss sees observations normalised by statistics the actors did not act with"),
    Mutation(
        "muzero-online-bootstrap", "agents/muzero/agent.py",
        "    bootstrap = bootstrap_values(parts, target_params, windows)  # the bootstrap values come from the target",
        "    bootstrap = bootstrap_values(parts, params, windows)  # the bootstrap values come from the target",
        MUZERO, "MuZero's n-step value targets bootstrapped from the online network, not the target network"),
    Mutation(
        "muzero-policy-toward-prior", "agents/muzero/losses.py",
        "policy_ce = optax.softmax_cross_entropy(policy_logits, targets.policy)",
        "policy_ce = optax.softmax_cross_entropy(policy_logits, jax.lax.stop_gradient(jax.nn.softmax(policy_logits)))",
        MUZERO, "MuZero's policy head trained toward its own prior instead of the stored search policy"),
    # ---------------------------------------------------------------- issue 41: MuZero Reanalyse
    Mutation(
        "muzero-reanalyse-stale-policy", "agents/muzero/reanalyse.py",
        "policy = windows.policy.at[:m, :k1].set(fresh_policy)",
        "policy = windows.policy",
        REANALYSE,
        "MuZero Reanalyse searching afresh but training the policy toward the actors' stale search policies"),
    Mutation(
        "muzero-reanalyse-stale-value", "agents/muzero/reanalyse.py",
        "bootstrap = bootstrap.at[rows, last].set(fresh_value)",
        "bootstrap = bootstrap",
        REANALYSE, "MuZero Reanalyse's value targets bootstrapped from the plain network values, not its search's"),
    Mutation(
        "muzero-reanalyse-online-value", "agents/muzero/reanalyse.py",
        "_searched(config, network, target_params, bootstrap_states, value_key, True)",
        "_searched(config, network, params, bootstrap_states, value_key, True)",
        REANALYSE, "MuZero Reanalyse's value searches run with the online network instead of the target network"),
    Mutation(
        "muzero-priority-without-prediction", "agents/muzero/losses.py",
        'metrics["priority"] = jnp.abs(logits_to_scalar(value_logits[0], s) - targets.value[0])',
        'metrics["priority"] = jnp.abs(targets.value[0])',
        ("tests/agents/test_muzero_prioritised.py",) + MUZERO,
        "MuZero's prioritised replay drawing windows by the size of their value targets, not the prediction's error"),
    Mutation(
        "muzero-search-bootstrap-same-step", "agents/muzero/agent.py",
        "following = jnp.concatenate([windows.search_value[:, 1:], network[:, -1:]], axis=1)",
        "following = jnp.concatenate([windows.search_value[:, :-1], network[:, -1:]], axis=1)",
        ("tests/agents/test_muzero_search_bootstrap.py",) + MUZERO,
        "MuZero's search bootstrap taking step j's own search value (from o_t) instead of step j + 1's (from o'_t)"),
    Mutation(
        "muzero-gru-no-residual", "agents/muzero/networks.py",
        "return jnp.concatenate(carries, axis=-1) + scaled, self.reward_head(self.reward_mlp(x))",
        "return jnp.concatenate(carries, axis=-1), self.reward_head(self.reward_mlp(x))",
        ("tests/agents/test_muzero_gru_dynamics.py",),
        "MuZero's GRU dynamics without the residual (the next state only the new carries)"),
    Mutation(
        "muzero-gru-unscaled-state", "agents/muzero/networks.py",
        "scaled = scale_hidden_state(state) * 2.0 - 1.0",
        "scaled = state",
        ("tests/agents/test_muzero_gru_dynamics.py",),
        "MuZero's GRU dynamics stepping from the raw state instead of the state scaled to [-1, 1]"),
    Mutation(
        "muzero-search-bootstrap-across-episodes", "agents/muzero/agent.py",
        "return jnp.where(episode_end, network, following)",
        "return following",
        ("tests/agents/test_muzero_search_bootstrap.py",) + MUZERO,
        "MuZero's search bootstrap after a truncation taking the next episode's first search value"),
    Mutation(
        "ppo-truncation-as-termination", "agents/ppo/agent.py",
        "discount_t=traj.discount,",
        "discount_t=traj.discount * (1.0 - traj.truncated),",
        PPO, "PPO's advantages not bootstrapped at time limits (truncation treated as termination)"),
    # ---------------------------------------------------------------- neighbours: which params a target uses
    Mutation(
        "td3-online-critic-in-target", "agents/td3/agent.py",
        "q_next = parts.critic.apply(learner.critic_target, sample.next_observation, next_u)",
        "q_next = parts.critic.apply(learner.critic, sample.next_observation, next_u)",
        CONTINUOUS, "TD3's target from the online critics, not their Polyak copy"),
    Mutation(
        "td3-actor-on-target-critic", "agents/td3/agent.py",
        "learner.actor_optimizer, learner.critic, observation)",
        "learner.actor_optimizer, learner.critic_target, observation)",
        CONTINUOUS, "TD3's actor ascending the lagging target critic instead of the updated critic"),
    Mutation(
        "td3-frozen-actor-target", "agents/td3/agent.py",
        "actor_target=polyak(actor, learner.actor_target, tau)",
        "actor_target=learner.actor_target",
        CONTINUOUS, "TD3's target actor never following the actor"),
    Mutation(
        "sac-online-critic-in-target", "agents/sac/agent.py",
        "q_next = parts.critic.apply(learner.critic_target, sample.next_observation, next_u)",
        "q_next = parts.critic.apply(learner.critic, sample.next_observation, next_u)",
        CONTINUOUS, "SAC's soft target from the online critics, not their Polyak copy"),
    Mutation(
        "sac-actor-on-target-critic", "agents/sac/agent.py",
        "learner.critic, alpha, sample.observation, actor_key)",
        "learner.critic_target, alpha, sample.observation, actor_key)",
        CONTINUOUS, "SAC's actor ascending the lagging target critic instead of the updated critic"),
    Mutation(
        "sac-no-entropy-in-target", "agents/sac/agent.py",
        "next_log_pi, alpha)",
        "0.0 * next_log_pi, alpha)",
        CONTINUOUS, "SAC's critic target without the entropy term (not a soft Q target)"),
    Mutation(
        "dqn-online-bootstrap", "agents/dqn/agent.py",
        "q_value = q_values(parts, target_params, sample.next_observation)",
        "q_value = q_values(parts, network_params, sample.next_observation)",
        DQN, "DQN's targets from the online network"),
    Mutation(
        "double-dqn-target-selects", "agents/dqn/agent.py",
        "q_selector = q_values(parts, network_params, sample.next_observation) if",
        "q_selector = q_values(parts, target_params, sample.next_observation) if",
        DQN, "Double DQN choosing the bootstrap action with the target network (plain DQN's overestimation)"),
    Mutation(
        "pqn-bootstrap-from-observation", "agents/pqn/agent.py",
        "q_next = masked_max(q_values(parts, network_params, traj.next_observation),",
        "q_next = masked_max(q_values(parts, network_params, traj.observation),",
        PQN, "PQN's Q(lambda) bootstrapping from Q(o_t) instead of Q(o_{t+1})"),
    Mutation(
        "pqn-truncation-as-termination", "agents/pqn/agent.py",
        "discount_t=cfg.gamma * traj.discount,",
        "discount_t=cfg.gamma * traj.discount * (1.0 - traj.truncated),",
        PQN, "PQN's targets not bootstrapped at time limits"),
    Mutation(
        "impala-on-policy-ratios", "agents/impala/losses.py",
        'log_rho = sg(log_prob) - batch.agent_extras["log_prob"]',
        "log_rho = sg(log_prob) - sg(log_prob)",
        IMPALA, "IMPALA ignoring its behaviour policy (V-trace without importance weights)"),
    Mutation(
        "ppo-bootstrap-from-observation", "agents/ppo/agent.py",
        "v_tm1=value, v_t=next_value,",
        "v_tm1=value, v_t=value,",
        PPO, "PPO's GAE bootstrapping from V(o_t) instead of V(o_{t+1})"),
    Mutation(
        "ppo-ratio-against-current-policy", "agents/ppo/losses.py",
        "log_ratio = dist.log_prob(dist_params, batch.action) - batch.log_prob",
        "log_ratio = dist.log_prob(dist_params, batch.action) - jax.lax.stop_gradient("
        "dist.log_prob(dist_params, batch.action))",
        PPO, "PPO's ratio taken against the current policy instead of the acting one (no clipping ever binds)"),
    Mutation(
        "frozen-target-network", "agents/off_policy.py",
        "target = target_update(learner.target, params, sgd_steps,",
        "target = learner.target if True else target_update(learner.target, params, sgd_steps,",
        MUZERO + DQN, "MuZero's and DQN's target networks never following the online one (target_sgd_step)"),
    Mutation(
        "obs-norm-acting-unnormalised", "agents/obs_norm.py",
        'return agent.act(params["agent"], actor_state, normalize_observation(params["obs_norm"], observation, clip), '
        'key)',
        'return agent.act(params["agent"], actor_state, observation, key)',
        OBS_NORM, "actors acting on raw observations while the learner normalises them"),
    # ---------------------------------------------------------------- legal-action masks (issue 58)
    Mutation(
        "policy-ignores-mask", "agents/unroll.py",
        "    return masked_logits(dist_params, action_mask(observation)) if network.discrete else dist_params",
        "    return dist_params",
        MASKS, "PPO and IMPALA sampling illegal actions, and their losses counting them in the ratio and entropy"),
    Mutation(
        "epsilon-explores-illegal-actions", "agents/masking.py",
        "        random = jax.random.categorical(action_key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)",
        "        random = jax.random.randint(action_key, greedy.shape, 0, q.shape[-1], dtype=jnp.int32)",
        MASKS, "PQN, DQN and R2D2 exploring illegal actions"),
    Mutation(
        "pqn-bootstrap-ignores-mask", "agents/pqn/agent.py",
        "                        action_mask(traj.next_observation))",
        "                        None)",
        MASKS, "PQN's targets bootstrapping from an illegal action's value"),
    Mutation(
        "dqn-bootstrap-ignores-mask", "agents/dqn/agent.py",
        "                                     action_mask(sample.next_observation))",
        "                                     None)",
        MASKS, "DQN's targets bootstrapping from an illegal action's value"),
    Mutation(
        "r2d2-bootstrap-ignores-mask", "agents/r2d2/losses.py",
        "config.value_rescaling, action_mask(learned.next_observation))",
        "config.value_rescaling, None)",
        MASKS, "R2D2's targets bootstrapping from an illegal action's value"),
    Mutation(
        "muzero-root-ignores-mask", "agents/muzero/search.py",
        "    invalid = invalid_actions(action_mask(observation))",
        "    invalid = None",
        MASKS, "MuZero searching, playing and targeting illegal actions"),
    Mutation(
        "no-legal-action-unreported", "podrl/core/finite.py",
        "        empty = jnp.sum(~jnp.any(mask, axis=-1), dtype=jnp.float32)",
        "        empty = jnp.zeros((), jnp.float32)",
        ("tests/layouts/test_action_masks.py::"
         "test_an_observation_without_a_legal_action_stops_the_run_naming_the_env",),
        "an env whose observation allows no action trains on with an arbitrary action instead of an error"),
    Mutation(
        "greedy-eval-ignores-no-legal", "podrl/run/evaluation.py",
        "            no_legal=carry.no_legal | (live & no_legal),",
        "            no_legal=carry.no_legal,",
        ("tests/layouts/test_action_masks.py::test_greedy_evaluation_flags_an_observation_without_a_legal_action",
         "tests/layouts/test_action_masks.py::"
         "test_anakin_evaluation_counts_each_members_episodes_without_a_legal_action"),
        "greedy evaluation acting on an observation without a legal action, unreported"),
    Mutation(
        "anakin-eval-drops-no-legal", "podrl/anakin/compiled.py",
        "                result.bad_reward, result.bad_observation, result.no_legal)))",
        "                result.bad_reward, result.bad_observation, 0 * result.no_legal)))",
        ("tests/layouts/test_action_masks.py::"
         "test_anakin_evaluation_counts_each_members_episodes_without_a_legal_action",),
        "Anakin's evaluation program losing the count of episodes without a legal action"),
    Mutation(
        "evaluate-command-ignores-no-legal", "podrl/cli/evaluate.py",
        "                     np.sum(result.no_legal), evaluated.name)",
        "                     0, evaluated.name)",
        ("tests/layouts/test_action_masks.py::"
         "test_podrl_evaluate_plays_only_legal_actions_and_names_an_env_without_one",),
        "podrl evaluate reporting returns of episodes that acted without a legal action"),
    # ---------------------------------------------------------------- runs that survive preemption (issue 38)
    Mutation(
        "pod-stop-is-local", "podrl/run/context.py",
        "    return StopRequests() if jax.process_count() == 1 else PodStopRequests()",
        "    return StopRequests()  # every process's stop is its own again",
        ("tests/system/test_preemption.py::"
         "test_the_supervisor_demo_preempts_relaunches_on_fewer_processes_and_finishes",),
        "a SIGTERM to one process of a pod stops that process alone: the others block in their next collective "
        "and no consistent checkpoint is written"),
    # ---------------------------------------------------------------- compile once (issue 41's suite time)
    Mutation(
        "resume-recompiles", "podrl/run/checkpoint.py",
        "        if isinstance(x, jax.Array) and x.sharding.is_equivalent_to(sharding, x.ndim):",
        "        if False:",
        ("tests/run/test_checkpoint.py::test_anakin_stop_resume_is_bit_identical_to_an_uninterrupted_run",),
        "a resumed Anakin run compiles its train and eval programs again instead of loading them from the cache"),
    # ---------------------------------------------------------------- stop at a target return
    Mutation(
        "stop-at-return-ignored", "podrl/run/driver.py",
        "    if loop.reached:  # every process decided the same (`reached_target`): none waits in after_update",
        "    if False:",
        ("tests/run/test_driver.py::test_stop_at_return_stops_at_the_first_evaluation_that_reaches_it",),
        "a run goes on past the first evaluation that reached stop_at_return"),
    Mutation(
        "stop-at-return-any-seed", "podrl/run/driver.py",
        "    return process_0s(eval_return is not None and bool(np.all(np.asarray(eval_return) >= target)))",
        "    return process_0s(eval_return is not None and bool(np.any(np.asarray(eval_return) >= target)))",
        ("tests/run/test_driver.py::test_reached_target_needs_every_seed_at_or_above_it",),
        "one seed reaching the target stops a multi-seed run"),

    # ---------------------------------------------------------------- issue 56: replay agents' blind spots
    Mutation(
        "r2d2-online-bootstrap", "agents/r2d2/agent.py",
        "    del params  # the online network's values are the loss's\n"
        "    cfg, network = parts.config, parts.network\n"
        "    drawn = prioritised.sample(buffer, key, cfg.batch_size, cfg.window, cfg.sequence_period, columns)\n"
        "    window = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), drawn.window)  # [W, N, ...]\n"
        "    q, next_carry = q_unroll(network, target_params, drawn.start_state, window.observation,",
        "    cfg, network = parts.config, parts.network\n"
        "    drawn = prioritised.sample(buffer, key, cfg.batch_size, cfg.window, cfg.sequence_period, columns)\n"
        "    window = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), drawn.window)  # [W, N, ...]\n"
        "    q, next_carry = q_unroll(network, params, drawn.start_state, window.observation,",
        R2D2, "R2D2's targets bootstrapped from the online network instead of the target network"),
    Mutation(
        "r2d2-target-selects", "agents/r2d2/losses.py",
        "        selector = bootstrap_q(network, *fixed, learned.next_observation, learned.truncated)",
        "        selector = batch.target_q",
        R2D2, "R2D2's double Q choosing the bootstrap action with the target network (the max's overestimation)"),
    Mutation(
        "r2d2-unweighted-loss", "agents/r2d2/losses.py",
        "loss = jnp.mean(batch.weight * jnp.mean(0.5 * jnp.square(td), axis=0))",
        "loss = jnp.mean(jnp.mean(0.5 * jnp.square(td), axis=0))",
        R2D2, "R2D2's prioritised draws not corrected by their importance weights (a biased update)"),
    Mutation(
        "r2d2-weights-with-priority-exponent", "agents/r2d2/agent.py",
        "weight = prioritised.importance_weights(drawn.probability, cfg.importance_exponent)",
        "weight = prioritised.importance_weights(drawn.probability, cfg.priority_exponent)",
        R2D2, "R2D2's importance weights built with alpha instead of beta"),
    Mutation(
        "r2d2-burn-in-gradient", "agents/r2d2/losses.py",
        "        _, burned = q_unroll(network, jax.lax.stop_gradient(params), carry, burn_obs, reset[:burn])\n"
        "        carry = jax.lax.stop_gradient(jax.tree.map(lambda x: x[-1], burned))",
        "        _, burned = q_unroll(network, params, carry, burn_obs, reset[:burn])\n"
        "        carry = jax.tree.map(lambda x: x[-1], burned)",
        R2D2, "R2D2's burn-in trained through (the warm-up's gradient flows into the params)"),
    Mutation(
        "sequence-priority-max-only", "agents/prioritised.py",
        "    return eta * jnp.max(td_abs, axis=-1) + (1.0 - eta) * jnp.mean(td_abs, axis=-1)",
        "    return jnp.max(td_abs, axis=-1)",
        R2D2, "R2D2's sequence priorities the max |delta| alone, eta ignored"),
    Mutation(
        "no-priority-floor", "agents/prioritised.py",
        "    priority = jnp.maximum(jax.lax.stop_gradient(priority).astype(jnp.float32), PRIORITY_FLOOR)",
        "    priority = jax.lax.stop_gradient(priority).astype(jnp.float32)",
        WEIGHTS, "a sequence replayed with zero TD error never drawn again (priority 0)"),
    Mutation(
        "priority-exponent-not-applied", "agents/prioritised.py",
        "    pending = PendingPriorities(index.astype(jnp.int32), priority ** exponent)",
        "    pending = PendingPriorities(index.astype(jnp.int32), priority)",
        WEIGHTS + ("tests/agents/test_r2d2_sequences.py",), "new priorities written as p, not p^alpha"),
    Mutation(
        "dqn-prioritised-unweighted", "agents/dqn/losses.py",
        "loss = jnp.mean(batch.weight * td_loss(td, config.loss))",
        "loss = jnp.mean(td_loss(td, config.loss))",
        WEIGHTS + DQN, "prioritised DQN's losses not weighted by their importance weights"),
    Mutation(
        "dqn-prioritised-online-bootstrap", "agents/dqn/agent.py",
        "    sample = jax.tree.map(lambda x: x[:, 0], drawn.window)\n"
        "    target = _targets(parts, network_params, target_params, sample)",
        "    sample = jax.tree.map(lambda x: x[:, 0], drawn.window)\n"
        "    target = _targets(parts, network_params, network_params, sample)",
        WEIGHTS + DQN, "prioritised DQN's targets from the online network"),
    Mutation(
        "dqn-weights-with-priority-exponent", "agents/dqn/agent.py",
        "weight = prioritised.importance_weights(drawn.probability, cfg.importance_exponent)",
        "weight = prioritised.importance_weights(drawn.probability, cfg.priority_exponent)",
        WEIGHTS + DQN, "prioritised DQN's importance weights built with alpha instead of beta"),
    Mutation(
        "muzero-prioritised-unweighted", "agents/muzero/losses.py",
        "loss = jnp.mean(per_window if batch.weight is None else batch.weight * per_window)",
        "loss = jnp.mean(per_window)",
        ("tests/agents/test_importance_weights.py",) + MUZERO, "MuZero's prioritised windows not weighted"),
    Mutation(
        "muzero-weights-with-priority-exponent", "agents/muzero/agent.py",
        "importance_weights(drawn.probability, cfg.importance_exponent)",
        "importance_weights(drawn.probability, cfg.priority_exponent)",
        ("tests/agents/test_importance_weights.py",) + MUZERO, "MuZero's importance weights built with alpha"),
    Mutation(
        "muzero-hidden-state-gradient-unscaled", "agents/muzero/losses.py",
        "        return scale_gradient(next_state, 0.5), (next_state, reward_logits)",
        "        return next_state, (next_state, reward_logits)",
        ("tests/agents/test_gradient_paths.py",) + MUZERO,
        "MuZero's unroll without the halved gradient into each hidden state (the pseudocode's scale_gradient)"),
    # ---------------------------------------------------------------- issue 56: pods and Sebulba
    Mutation(
        "sebulba-buffers-recycled-before-the-step", "podrl/sebulba/program.py",
        "        t1 = time.perf_counter()\n"
        "        state, metrics, inputs = self.step.checked(state, self.learner_keys, np.int32(i),\n"
        "                                                   *(r.trajectory for r in rollouts))\n"
        "        self._stepped = (i + 1, state, metrics, inputs)  # the driver's state lost its donated replay\n"
        "        metrics, inputs = _checked(metrics, inputs, i, self.config.env)\n"
        "        self.source.publish(state.params, i + 1)  # blocks until the update has finished on every learner "
        "device\n"
        "        self.pool.recycle(rollouts)  # ... so their buffers may be written again",
        "        t1 = time.perf_counter()\n"
        "        self.pool.recycle(rollouts)\n"
        "        state, metrics, inputs = self.step.checked(state, self.learner_keys, np.int32(i),\n"
        "                                                   *(r.trajectory for r in rollouts))\n"
        "        self._stepped = (i + 1, state, metrics, inputs)  # the driver's state lost its donated replay\n"
        "        metrics, inputs = _checked(metrics, inputs, i, self.config.env)\n"
        "        self.source.publish(state.params, i + 1)  # blocks until the update has finished on every learner "
        "device",
        SEBULBA_PIPELINE, "an actor overwriting a rollout's buffer while the learner step still reads it"),
    Mutation(
        "sebulba-groups-share-columns", "podrl/sebulba/rollout.py",
        "size, _group_columns(columns, g, size)), policy.device))",
        "size, _group_columns(columns, 0, size)), policy.device))",
        SEBULBA_PIPELINE, "every env group of a thread acting with its first group's columns (R2D2's epsilons)"),
    Mutation(
        "sebulba-hosts-share-columns", "podrl/sebulba/program.py",
        "        first_thread = jax.process_index() * config.num_threads  # global index of this process's thread 0",
        "        first_thread = 0 * config.num_threads  # global index of this process's thread 0",
        ("tests/system/test_multihost.py::test_sebulba_r2d2_two_processes_share_one_learner",),
        "every host's actors acting with the env columns (and keys) of host 0's"),
    Mutation(
        "sebulba-resume-waits-for-an-older-version", "podrl/sebulba/params.py",
        "        return None if self.lag is None else max(self.first_version, rollout - self.lag)",
        "        return None if self.lag is None else max(0, rollout - self.lag)",
        ("tests/layouts/test_sebulba_resume_lag.py",),
        "a lag >= 1 Sebulba resume waiting for a params version older than the checkpoint (a hang, then a timeout)"),
    Mutation(
        "resume-recounts-env-steps", "podrl/run/context.py",
        "        self._steps_at_start = config.logged_steps(self.start, jax.process_count()) "
        "if saved_steps is None \\\n",
        "        self._steps_at_start = config.logged_steps(self.start, jax.process_count()) if True \\\n",
        ("tests/layouts/test_sebulba_resume_lag.py",),
        "a resume on another process count recounting the env steps done as if this topology had done them"),
    Mutation(
        "time-saves-by-own-clock", "podrl/run/control.py",
        "            by_time = process_0s(by_time)",
        "            by_time = by_time",
        ("tests/run/test_pod_agreements.py",),
        "a time-based save that one process of a pod starts alone (a collective the others never join)"),
    Mutation(
        "coordinator-loss-unnamed", "podrl/run/preemption.py",
        "        return [0] if me != 0 else []",
        "        return []",
        ("tests/run/test_pod_agreements.py",), "a survivor of process 0's loss not saying which process was lost"),
    Mutation(
        "anakin-eval-shards-same-episodes", "podrl/anakin/compiled.py",
        "            keys = eval_keys(seed_key, shard, self.eval_per_shard)",
        "            keys = eval_keys(seed_key, 0, self.eval_per_shard)",
        ("tests/layouts/test_anakin_eval_shards.py",),
        "every learner shard playing the same evaluation episodes (fewer distinct episodes than eval_episodes)"),
    # ---------------------------------------------------------------- issue 56: the three bugs
    Mutation(
        "sebulba-failure-saves-the-donated-state", "podrl/sebulba/program.py",
        "        self._stepped = (i + 1, state, metrics, inputs)  # the driver's state lost its donated replay\n",
        "",
        ("tests/layouts/test_sebulba_failure_save.py",),
        "an interrupt during a Sebulba replay agent's learner step leaving no checkpoint of the step's work"),
    Mutation(
        "failure-save-of-a-deleted-state", "podrl/run/driver.py",
        "        if donated(state):",
        "        if False:",
        ("tests/layouts/test_sebulba_failure_save.py",),
        "the failure path serialising donated arrays (\"Array has been deleted\" instead of the failure)"),
    Mutation(
        "host-sum-in-float32", "podrl/core/distributed.py",
        "    gathered = np.asarray(multihost_utils.process_allgather(float64_words(values)))\n"
        "    return words_float64(gathered, values.shape).sum(axis=0)",
        "    return np.asarray(multihost_utils.process_allgather(values)).sum(axis=0)",
        ("tests/core/test_host_sum.py",), "Sebulba's global env-step count and SPS inexact past 2^24 steps"),
    Mutation(
        "second-sigterm-dropped", "podrl/run/control.py",
        "        elif previous != signal.SIG_IGN:  # SIGTERM's default action would lose the checkpoint on its way",
        "        elif False:",
        ("tests/run/test_second_signal.py",), "a second SIGTERM dropped without a word"),
)
