"""podrl's benchmarks: throughput, compile time and peers, measured outside the tests.

Run from the repository root, `python -m benchmarks.<name> --help` (this package is not
installed with podrl; it imports podrl as the installed package). What every benchmark shares
(flags, child processes, interleaved repeats, medians, tables, the JSON document) is
`benchmarks.harness`; the peers (their venvs, source trees and the drivers that run inside
their venvs) are `benchmarks.peers`. docs/benchmarks.md lists the benchmarks and their figures.

Nothing here imports jax or podrl at import time: a peer's venv imports this package too.
"""
