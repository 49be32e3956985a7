"""The `kvdsl` command: thin click commands over the library.

The commands are in cli_files.py (check, fmt, export, import, lsp) and
cli_answers.py (eval, table, solve, plan, sweep, explain, compare); what
they share (exit statuses, error reporting, options) in cli_common.py.
"""

from __future__ import annotations

import os

# hazard: NumPy's OpenBLAS starts a thread per core as it is imported, which
# costs a command about 0.05 s of CPU (most of NumPy's import); kvdsl's arrays
# are element by element and never call BLAS
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import click  # noqa: E402

from . import cli_answers, cli_files

COMMANDS = (cli_files.check, cli_files.fmt_command, cli_answers.eval_command, cli_answers.table, cli_answers.solve,
            cli_answers.plan, cli_answers.sweep, cli_answers.explain, cli_answers.compare, cli_files.export,
            cli_files.import_command, cli_files.lsp)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kvdsl")
def main():
    """kvdsl: plan GPU memory for LLM serving from declarative .kvspec files."""


for command in COMMANDS:
    main.add_command(command)


if __name__ == "__main__":  # pragma: no cover
    main()
