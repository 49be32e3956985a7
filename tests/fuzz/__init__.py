"""A fuzz harness for kvdsl: mutated specs, configs and arguments through every command."""

from .runner import CATEGORIES, Report, run

__all__ = ["CATEGORIES", "Report", "run"]
