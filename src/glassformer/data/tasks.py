"""Algorithmic tasks: copy, reverse, sort and add — sequence-to-sequence problems with exact answers.

Each example is a pair of strings of space-separated symbols (digits), so the same word
tokenizer and the same translator serve them and the zh→en corpus:

    copy     "3 1 2"      → "3 1 2"
    reverse  "3 1 2"      → "2 1 3"
    sort     "3 1 2"      → "1 2 3"
    add      "1 2 + 3 4"  → "4 6"      (12 + 34 = 46; numbers of min_len..max_len digits)

Copy needs no attention pattern beyond the diagonal, reverse the anti-diagonal, sort a
content-based lookup, and add carries from right to left: four checks that attention learns
where to look.
"""

from __future__ import annotations

import random

from ..errors import InputError

TASKS = ("copy", "reverse", "sort", "add")


def _digits(rng: random.Random, length: int, n_symbols: int) -> list[str]:
    return [str(rng.randrange(n_symbols)) for _ in range(length)]


def _number(rng: random.Random, length: int) -> int:
    """A number of exactly `length` digits (no leading zero unless it is 0 itself)."""
    if length == 1:
        return rng.randrange(10)
    return rng.randrange(10 ** (length - 1), 10 ** length)


def _spaced(n: int) -> str:
    return " ".join(str(n))


def make_task(name: str, n: int, seed: int = 0, min_len: int = 1, max_len: int = 8,
              n_symbols: int = 10, **kw) -> list[tuple[str, str]]:
    """n (source, target) examples of task `name`, deterministic for `seed`.

    Lengths are drawn uniformly from [min_len, max_len] (for "add": digits of each operand);
    n_symbols (≤ 10) sets the alphabet 0..n_symbols-1 of copy/reverse/sort.
    """
    if name not in TASKS:
        raise InputError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    if kw:
        raise InputError(f"unknown option(s) for make_task: {', '.join(sorted(kw))}"
                         " (known: n, seed, min_len, max_len, n_symbols)")
    if not (isinstance(n, int) and n >= 0):
        raise InputError(f"n={n!r} must be a non-negative integer")
    if not (1 <= min_len <= max_len):
        raise InputError(f"min_len={min_len}, max_len={max_len}: need 1 <= min_len <= max_len")
    if not (2 <= n_symbols <= 10):
        raise InputError(f"n_symbols={n_symbols} must be between 2 and 10 (digits 0-9)")
    rng = random.Random(f"{name}:{seed}")
    out = []
    for _ in range(n):
        if name == "add":
            a = _number(rng, rng.randint(min_len, max_len))
            b = _number(rng, rng.randint(min_len, max_len))
            out.append((f"{_spaced(a)} + {_spaced(b)}", _spaced(a + b)))
            continue
        xs = _digits(rng, rng.randint(min_len, max_len), n_symbols)
        ys = {"copy": xs, "reverse": xs[::-1], "sort": sorted(xs, key=int)}[name]
        out.append((" ".join(xs), " ".join(ys)))
    return out
