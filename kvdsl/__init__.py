"""kvdsl: plan GPU memory for LLM serving from declarative .kvspec files."""

__version__ = "0.1.0"
