"""Deterministic generators for the mini-K3 tasks, in the public dataset formats.

- `mrcr`: openai/mrcr rows (multi-round co-reference: find the k-th of several identical requests)
- `aime`: math-ai/aime25 rows (problem, integer answer 0-999) with long worked solutions
- `json_output`: prompts asking for a JSON object, with the JSON schema it must satisfy

Each generator takes a `random.Random`, so a seed fixes the rows. `python -m mini_k3.data`
writes the shipped evaluation sets (seeds distinct from the training seeds, see `SEEDS`).
"""

SEEDS = {"train": 1, "eval": 20251202}
