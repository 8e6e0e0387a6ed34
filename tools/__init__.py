"""Repository tools: the import-rule, README and learning-test checks (not installed)."""
