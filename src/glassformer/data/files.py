"""User data: parallel sentences in a TSV file, plain text for language modelling, sentences to
translate — every file a command reads goes through `text_lines` (issue 31 §4: one reader, one set
of refusals, one wording, whichever command it is).

The readers stream: they read one line at a time, so a file larger than memory works, and
they check each line as it comes. A malformed file (binary, empty, one column, bad UTF-8,
an empty source or target) stops with an InputError of one line that names the file and the
line number and says what was expected.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..limits import max_line_bytes

TSV_FORMAT = "one 'source<TAB>target' pair per line, UTF-8"


def text_lines(path: str | Path, what: str) -> Iterator[tuple[int, str]]:
    """(line number, text without the newline) for each line, decoded and checked for binary.
    `-` reads standard input."""
    if str(path) == "-":
        import sys
        yield from _decoded(sys.stdin.buffer, "standard input", what)
        return
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file; expected {what}")
    if p.is_dir():
        raise InputError(f"{p} is a folder; expected a file with {what}")
    try:
        f = p.open("rb")
    except OSError as e:
        raise InputError(f"{p}: cannot be read ({e.strerror or e}); expected a readable file with {what}") from None
    with f:
        yield from _decoded(f, p, what)


def check_text_file(path: str | Path, what: str) -> None:
    """Read a whole file through `text_lines` once, so that a file that is not text is refused before
    anything is done with its first lines (standard input cannot be read twice: it is checked as it
    streams)."""
    if str(path) != "-":
        for _ in text_lines(path, what):
            pass


def _decoded(f, p, what: str) -> Iterator[tuple[int, str]]:
    """The lines of an open binary stream `f`, named `p` in messages."""
    limit = max_line_bytes()
    # readline(limit + 1), not `for raw in f`: a file with no newline is never read whole
    for number, raw in enumerate(iter(lambda: f.readline(limit + 1), b""), start=1):
        if len(raw.rstrip(b"\r\n")) > limit:
            raise InputError(f"{p} line {number} is longer than {limit:,} bytes (the line limit; set "
                             f"GLASSFORMER_MAX_LINE_BYTES to raise it); expected {what}")
        if b"\x00" in raw:
            raise InputError(f"{p} line {number}: binary data (a NUL byte: not text, or UTF-16);"
                             f" expected a text file with {what}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{p} line {number}: not valid UTF-8 (byte {e.start + 1} of the line);"
                             f" save the file as UTF-8") from None
        if number == 1:
            text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark is not data
        yield number, text.rstrip("\r\n")


def read_tsv(path: str | Path) -> Iterator[tuple[str, str]]:
    """Stream (source, target) pairs from a TSV file; blank lines are skipped."""
    count = 0
    for number, line in text_lines(path, TSV_FORMAT):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 2:
            found = "no tab (one column)" if len(cols) == 1 else f"{len(cols)} columns"
            raise InputError(f"{path} line {number}: {found}; expected {TSV_FORMAT}")
        src, tgt = cols[0].strip(), cols[1].strip()
        if not src or not tgt:
            side = "source" if not src else "target"
            raise InputError(f"{path} line {number}: empty {side}; expected {TSV_FORMAT}")
        count += 1
        yield src, tgt
    if count == 0:
        raise InputError(f"{path} is empty; expected {TSV_FORMAT}")


def read_text(path: str | Path) -> Iterator[str]:
    """Stream the non-empty lines of a UTF-8 text corpus (for language modelling)."""
    count = 0
    for _number, line in text_lines(path, "UTF-8 text, read line by line in order"):
        if line.strip():
            count += 1
            yield line
    if count == 0:
        raise InputError(f"{path} is empty; expected UTF-8 text, read line by line in order")
