"""``vllm bench serve`` where the ``vllm`` console script cannot run (vLLM's CPU build: see
`fasttrack.manifest.vllm_serve`): the same code, vLLM's own ``vllm.benchmarks.serve`` parser and
``main``, as ``python -m fasttrack.targets.vllm.bench ARGS`` with the arguments of
``vllm bench serve ARGS``."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as serve_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    serve_main(parser.parse_args(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
