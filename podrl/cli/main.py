"""The `podrl` command (placeholder, filled in below)."""


def main() -> int:
    return 0
