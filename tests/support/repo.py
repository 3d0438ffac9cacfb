"""Where the repository is, for tests that read its files (README, docs, queries, sample logs)."""

from pathlib import Path

#: The repository root (this file is tests/support/repo.py).
REPO = Path(__file__).resolve().parents[2]
