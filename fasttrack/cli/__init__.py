"""The `fasttrack` command. Subcommands live in one small module each and are imported lazily,
so that `fasttrack --help` stays fast (no torch, jsonschema or lm-eval at import time)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from fasttrack import __version__

# command name -> (module under fasttrack.cli, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "validate": ("validate", "validate", "Validate manifest files against the schema and semantic rules."),
    "init": ("init", "init", "Write a commented starter manifest."),
    "plan": ("plan", "plan", "Show which checks would run on this machine, per scope point."),
    "schema": ("schema", "schema", "Print the JSON Schema of a manifest or of evidence."),
    "check": ("check", "check", "Run the gate: every check of a manifest, writing evidence and reports."),
    "merge": ("merge", "merge", "Join sharded evidence into one evidence and one verdict."),
    "diff-scope": ("diff_scope", "diff_scope", "Check that changed files stay inside the model's code paths."),
    "report": ("report", "report", "Render HTML, Markdown and JUnit reports from evidence."),
    "dashboard": ("dashboard", "dashboard", "Build a static site of verdicts across optimisations."),
    "verify": ("verify", "verify", "Verify evidence: digest, signature, manifest, head commit, scope, verdict."),
    "attest": ("attest", "attest", "Write an in-toto attestation for evidence, optionally signed."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if _module_exists(COMMANDS[name][0]))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not _module_exists(COMMANDS[name][0]):
            return None
        module_name, attr, _ = COMMANDS[name]
        module = importlib.import_module(f"fasttrack.cli.{module_name}")
        return getattr(module, attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Use the static help text so that --help imports no command module.
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _module_exists(module_name: str) -> bool:
    from importlib.util import find_spec

    return find_spec(f"fasttrack.cli.{module_name}") is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fasttrack")
def cli() -> None:
    """fasttrack: a compliance gate for fast-track model optimisations.

    Exit codes: 0 PASS, 1 FAIL, 2 usage or manifest error, 3 INCOMPLETE, 130 interrupted.
    """


class _ClosedPipeSafe:
    """stdout/stderr that keep working when the reader went away (``fasttrack check ... | head``):
    the first write to a closed pipe points the descriptor at /dev/null and the rest is dropped,
    so the run finishes, its evidence is written and the exit code stays the verdict's."""

    def __init__(self, stream: Any):
        self._stream = stream

    def _drop(self) -> None:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # no descriptor (a test's capture): nothing to redirect
            pass

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._drop()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> None:
    """Entry point: map fasttrack errors to exit codes and one-paragraph messages."""
    sys.stdout = _ClosedPipeSafe(sys.stdout)
    sys.stderr = _ClosedPipeSafe(sys.stderr)
    try:
        _main(argv)
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # before the interpreter's own flush, which would report a closed pipe


def _main(argv: list[str] | None) -> None:
    from fasttrack.errors import EXIT_INCOMPLETE, EXIT_INTERRUPTED, FasttrackError

    try:
        rv = cli.main(args=argv, prog_name="fasttrack", standalone_mode=False)
    except FasttrackError as err:
        click.echo(f"error: {err.user_message()}", err=True)
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as err:
        err.show()
        sys.exit(2 if err.exit_code == 1 else err.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Exception:  # a bug in fasttrack, not bad input: keep the traceback for the report
        import traceback

        traceback.print_exc()
        click.echo("internal error in fasttrack (a bug, please report it): the gate cannot decide", err=True)
        sys.exit(EXIT_INCOMPLETE)
    sys.exit(rv if isinstance(rv, int) else 0)
