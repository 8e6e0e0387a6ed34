"""The peers podrl is timed against: `registry` (their venvs, pins and source trees, and how a
driver runs in a peer's venv) and the drivers, which run inside a peer's own venv
(`python -m benchmarks.peers.<driver> '<spec JSON>'`, from the repository root), import only the
peer's code, jax and `driver` (never podrl), and print one `BENCH_RESULT {json}` line.

    rejax_ppo          rejax 0.1.3's PPO (benchmarks.peer_ppo)
    rejax_sac          rejax 0.1.3's SAC (benchmarks.peer_sac)
    stoix_sebulba_ppo  Stoix's Sebulba PPO (benchmarks.peer_programs)
    purejaxrl_ppo      PureJaxRL's ppo.py (benchmarks.peer_programs)
    purejaxql_pqn      purejaxql's pqn_minatar.py (benchmarks.peer_programs)
    jax_control        one fixed pure-JAX update, timed in any venv (benchmarks.peer_programs)
"""
