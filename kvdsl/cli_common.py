"""What the `kvdsl` commands share: their exit statuses, errors printed as kvspec words, the options several take."""

from __future__ import annotations

import functools
import os
import traceback
import sys

import click

from .errors import KvdslError, UsageError


EXIT_SPEC_ERROR = 1
EXIT_USAGE_ERROR = 2
EXIT_INTERNAL_ERROR = 3
EXIT_NO_ANSWER = 1  # `solve` and `plan` found nothing that meets the condition (the reason is printed)


def reports_errors(fn):
    """Print kvdsl errors as `path:line:col: error: ...` and exit 1 (2 for usage)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from .progress import reporting

        _fewer_collections()
        command = fn.__name__[: -len("_command")] if fn.__name__.endswith("_command") else fn.__name__
        try:
            if command == "lsp":  # a server: its stderr is its log
                return fn(*args, **kwargs)
            with reporting(command):
                return fn(*args, **kwargs)
        except UsageError as exc:
            click.echo(exc.render(), err=True)
            sys.exit(EXIT_USAGE_ERROR)
        except KvdslError as exc:
            click.echo(exc.render(), err=True)
            sys.exit(EXIT_SPEC_ERROR)
        except RecursionError:
            click.echo("error: the spec nests too deeply to evaluate (an expression or a chain of rules "
                       "thousands of levels deep)", err=True)
            sys.exit(EXIT_SPEC_ERROR)
        except BrokenPipeError:  # the reader went away (`| head`): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(1)
        except (click.exceptions.Exit, click.ClickException, KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # a bug in kvdsl, not the user's mistake: say so plainly
            if os.environ.get("KVDSL_DEBUG"):
                traceback.print_exc()
            click.echo(f"internal error: {type(exc).__name__}: {exc}\n"
                       "this is a bug in kvdsl; run with KVDSL_DEBUG=1 for the traceback", err=True)
            sys.exit(EXIT_INTERNAL_ERROR)
        finally:
            built = sys.modules.get("kvdsl.build")
            if built is not None:  # programs built a second time are kept on disk for the next command
                built.store_pending()

    return wrapper


def _fewer_collections() -> None:
    """Collect cyclic garbage less often: a command builds one large, long-lived program.

    With the default thresholds, a spec of 100,000 cells spends about as long
    in the garbage collector as in resolving; the imports are frozen out of
    its reach and the youngest generation is collected every 50,000
    allocations instead of every 700.  Only the first command of a process
    freezes, and only its program read back from disk is frozen as it
    arrives: a process that runs many (the fuzzer, the tests) keeps
    collecting what they leave.

    hazard: `gc.freeze()` freezes every object alive, the reference cycles
    an earlier command left included; freezing at each command's program
    kept them all, some 2.5 MB a command.
    """
    import gc

    from . import cache

    first = gc.get_threshold()[0] != _YOUNGEST
    if first:
        gc.freeze()
        gc.set_threshold(_YOUNGEST, 20, 20)
    cache.freeze_loaded = first


_YOUNGEST = 50_000


def parsed_settings(values):
    """The `--set` values given, parsed."""
    from .api import parse_setting

    return [parse_setting(v) for v in values]


set_option = click.option(
    "--set", "sets", multiple=True, metavar="[BLOCK.]CELL=VALUE",
    help="Override a cell: in every block that has it, or in one block. VALUE is kvspec (32K, 80 GiB, fp8).",
)
paths_argument = click.argument("paths", nargs=-1, required=True, type=click.Path())
