"""`python -m podrl ...`: the `podrl` command (podrl/cli/main.py)."""
from podrl.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
