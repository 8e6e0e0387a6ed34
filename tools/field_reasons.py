"""Why no ordinary test can see a config field read at its default (`tools/check_mutations.py --fields`).

Keys: "<owner>.<field>" (owner: an agent's registry name, or the layout anakin / sebulba) or "*.<field>" for
every owner. Each reason is a sentence a reviewer can check: a pure speed or resource setting, a field that
only selects what is logged, or a setting whose effect no small ordinary test can observe (and which test
would be needed). A field caught by a test must not be here (the guard reports it "stale").
"""

from __future__ import annotations

REASONS: dict[str, str] = {
    "*.compile_cache": (
        "Read by the command line only (podrl/cli/train.py enables JAX's persistent cache before anything "
        "compiles), whose reads the guard counts as an observer's; a pure speed setting (the same programs, "
        "loaded from disk). tests/run/test_compile_cache.py trains through the command line with "
        "`--compile-cache none` and with the default and checks the cache folder stays empty / fills."),
}
