"""`podrl reproduce`: a preset over seeds into a report (podrl/reports/reproduce.py)."""
from podrl.cli.main import launch

if __name__ == "__main__":
    raise SystemExit(launch("reproduce"))
