"""One error hierarchy. User-facing errors print as one paragraph, without a traceback."""

from __future__ import annotations

# Exit codes, as in docs/design.md ("Verdict: fail closed").
EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3
EXIT_INTERRUPTED = 130


def missing_module(err: BaseException) -> str | None:
    """The Python module a check found missing while it ran (``import httpx`` inside a function),
    the way a runner that cannot be imported for want of numpy is: not_run(dependency), never
    errored. None for any other error, and for fasttrack's own modules (a bug, not a dependency)."""
    if isinstance(err, ModuleNotFoundError) and err.name and err.name.partition(".")[0] != "fasttrack":
        return err.name
    return None


def missing_module_reason(kind: str, module: str) -> str:
    return f"the {kind} check needs the Python module {module!r}, which is not installed here (pip install 'fasttrack[gate]')"


class FasttrackError(Exception):
    """Base of every error fasttrack reports to a user. ``exit_code`` is what the CLI returns."""

    exit_code: int = EXIT_USAGE

    def user_message(self) -> str:
        return str(self)


class UsageError(FasttrackError):
    """Bad command-line input, missing file, unreadable input."""


class ManifestError(FasttrackError):
    """A manifest that cannot be loaded or does not validate; carries every problem found."""

    def __init__(self, path: str, problems: list[str]):
        self.path = path
        self.problems = list(problems)
        super().__init__(self.user_message())

    def user_message(self) -> str:
        head = f"{self.path}: manifest is invalid ({len(self.problems)} problem(s))"
        return "\n".join([head, *self.problems])


class EvidenceError(FasttrackError):
    """Evidence that is missing, malformed, or fails schema validation."""


class TargetError(FasttrackError):
    """The system under test could not be started or reached (dead server, bad command)."""


class OutputError(OSError, FasttrackError):
    """An output could not be written (a full disk, a read-only or vanished folder, too long a
    name): the gate's answer is incomplete (exit 3); what was written before stays intact."""

    exit_code = EXIT_INCOMPLETE

    def __init__(self, errno: int | None, why: str, filename: str, context: str = ""):
        super().__init__(errno, why, filename)
        self.context = context

    def user_message(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}" + (f"; {self.context}" if self.context else "")

    def __str__(self) -> str:
        return self.user_message()

    def with_context(self, context: str) -> OutputError:
        return OutputError(self.errno, str(self.strerror), str(self.filename), context)


class Interrupted(FasttrackError):
    exit_code = EXIT_INTERRUPTED
