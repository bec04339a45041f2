"""Worked examples of extending srljax from outside its packages (see docs/architecture.md)."""
