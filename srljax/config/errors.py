"""The one error every config check raises."""

from __future__ import annotations


class ConfigError(ValueError):
    """Raised with every problem in a config, one per line."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid config:\n" + "\n".join(f"  - {p}" for p in problems))
