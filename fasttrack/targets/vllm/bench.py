"""``vllm bench serve`` where the ``vllm`` console script cannot run (vLLM's CPU build: see
`fasttrack.manifest.vllm_serve`): the same code, vLLM's own ``vllm.benchmarks.serve`` parser and
``main``, as ``python -m fasttrack.targets.vllm.bench ARGS`` with the arguments of
``vllm bench serve ARGS``; or, for many runs from one process, `InProcessBench` (vLLM's modules
imported once: on the CPU build the import is most of a short run's time)."""

from __future__ import annotations

import contextlib
import sys
import traceback
from importlib.util import find_spec
from pathlib import Path
from typing import Any


def _parser() -> Any:
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    return parser


def main(argv: list[str]) -> None:
    from vllm.benchmarks.serve import main as serve_main

    serve_main(_parser().parse_args(argv))


class InProcessBench:
    """vLLM's ``vllm bench serve`` run after run in this process, each run's output in its own log."""

    def __init__(self) -> None:
        from vllm.benchmarks.serve import main as serve_main

        self._main = serve_main
        self._parser = _parser()

    @staticmethod
    def available() -> bool:
        return find_spec("vllm") is not None and find_spec("vllm.benchmarks") is not None

    def run(self, argv: list[str], log_path: Path) -> tuple[int, str]:
        """One run with ``argv`` (``vllm bench serve``'s arguments): (exit code, the log's tail)."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with (
            open(log_path, "w", encoding="utf-8") as log,
            contextlib.redirect_stdout(log),
            contextlib.redirect_stderr(log),
        ):
            try:
                self._main(self._parser.parse_args(argv))
                code = 0
            except SystemExit as exc:  # argparse's refusal
                code = exc.code if isinstance(exc.code, int) else 2
            except Exception:  # vLLM's error is the run's result: logged, reported by exit code
                traceback.print_exc(file=log)
                code = 1
        return code, log_path.read_text(encoding="utf-8", errors="replace")[-400:]


if __name__ == "__main__":
    main(sys.argv[1:])
