"""AIME-format rows: a sum of three-digit numbers modulo 1000, with a long worked solution.

Format (math-ai/aime25): ``problem`` text and ``answer`` an integer 0-999. Each row also carries
``solution``, the step-by-step reference the model is trained on: a running total modulo 1000,
each addition done digit by digit with carries (hundreds of tokens), ending in ``\\boxed{N}``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


@dataclass(frozen=True)
class AimeRow:
    problem: str
    answer: int
    solution: str

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def _add_step(total: int, n: int) -> tuple[str, int]:
    """One digit-by-digit addition of ``n`` to ``total`` (both 0-999), keeping three digits."""
    a, b = f"{total:03d}", f"{n:03d}"
    carry, parts, digits = 0, [], []
    for i in (2, 1, 0):  # units, tens, hundreds
        s = int(a[i]) + int(b[i]) + carry
        parts.append(f"{a[i]}+{b[i]}+{carry}={s:02d}")
        digits.append(str(s % 10))
        carry = s // 10
    new_total = (total + n) % 1000
    assert "".join(reversed(digits)) == f"{new_total:03d}"
    return f"add {b}: {', '.join(parts)}; total {new_total:03d}.", new_total


def make_row(rng: random.Random) -> AimeRow:
    numbers = [rng.randint(1, 999) for _ in range(rng.randint(5, 8))]
    problem = (f"Let S = {' + '.join(map(str, numbers))}. "
               "Find the remainder when S is divided by 1000.")
    total = numbers[0]
    lines = ["We keep a running total modulo 1000 and add one number at a time, digit by digit.",
             f"start {total:03d}."]
    for n in numbers[1:]:
        line, total = _add_step(total, n)
        lines.append(line)
    lines.append(f"The remainder is {total}, so the answer is \\boxed{{{total}}}.")
    assert total == sum(numbers) % 1000
    return AimeRow(problem=problem, answer=total, solution="\n".join(lines))


def generate(seed: int, n: int) -> list[AimeRow]:
    rng = random.Random(seed)
    return [make_row(rng) for _ in range(n)]


def last_boxed(text: str) -> str | None:
    found = BOXED.findall(text)
    return found[-1].strip() if found else None


def grade(response: str, answer: int) -> float:
    """Exact match of the last ``\\boxed{}`` content with the integer answer."""
    boxed = last_boxed(response)
    if boxed is None:
        return 0.0
    try:
        return float(int(boxed) == int(answer))
    except ValueError:
        return 0.0
