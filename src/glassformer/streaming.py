"""Translate any number of lines without dropping a batch (issue 10).

Lines come from arguments, a file or stdin and are read a chunk at a time, so a file larger
than memory works. Inside a chunk the sources are sorted by length and decoded in batches
(`translate_ids`: little padding, the same greedy or beam result as one at a time), then put
back in input order. A file that is not UTF-8 text is refused whole, as `train` and `eval` refuse
it. A bad line (empty, a piece unseen in training under `--strict`, too many tokens) becomes a
`{"source", "error"}` record and the other lines go on; if a whole batch
fails to decode, its lines are retried one by one so that only the bad one is lost.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from .errors import GlassformerError, InputError
from .limits import check_tokens
from .unknown import UnknownPolicy

CHUNK = 1024  # lines read, sorted and decoded together


SENTENCES = "one sentence per line, UTF-8"


def read_lines(path: str) -> Iterator[tuple[str, str | None]]:
    """(text, None) per line of a file, or of stdin for '-', read by the reader `train` and `eval` use
    (`data.files.text_lines`): a file that is not UTF-8 text (binary, UTF-16, a bad byte), a folder or
    a missing file is refused in its one line before anything is translated; on stdin, at the bad line."""
    from .data.files import check_text_file, text_lines
    check_text_file(path, SENTENCES)
    return ((text, None) for _number, text in text_lines(path, SENTENCES))


def _encode(policy: UnknownPolicy, text: str, error: str | None) -> list[int]:
    if error:
        raise InputError(error)
    if not text.strip():
        raise InputError("empty line; expected a sentence to translate")
    ids = policy.encode(text)
    if not ids:
        raise InputError(f"nothing to translate in {text!r}")
    # issue 16: a 30,000-token line is refused on its own line; the others go on
    check_tokens(len(ids), f"the sentence {text[:30]!r}{'…' if len(text) > 30 else ''}")
    return ids


def _decode(model, ids: list[list[int]], beam: int, device: str, precision: str = "fp32") -> list[list[int] | str]:
    """Target ids per source; when the batch fails, each source alone (its error as a string)."""
    from .train.evaluate import translate_ids
    try:
        return translate_ids(model, ids, beam, device=device, precision=precision)
    except (GlassformerError, RuntimeError, IndexError):
        out: list[list[int] | str] = []
        for one in ids:
            try:
                out.append(translate_ids(model, [one], beam, device=device, precision=precision)[0])
            except (GlassformerError, RuntimeError, IndexError) as e:
                out.append(f"could not translate: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        return out


def translate_lines(model, policy: UnknownPolicy, tgt_tok, lines: Iterable[tuple[str, str | None]],
                    beam: int = 1, device: str = "cpu", progress=None, precision: str = "fp32") -> Iterator[dict]:
    """One record per input line, in input order: {"source", "translation"} or {"source", "error"}."""
    chunk: list[tuple[str, str | None]] = []

    def flush() -> Iterator[dict]:
        records: list[dict] = []
        good, good_ids = [], []
        for i, (text, error) in enumerate(chunk):
            records.append({"source": text})
            try:
                good_ids.append(_encode(policy, text, error))
                good.append(i)
            except InputError as e:
                records[i]["error"] = str(e)
        for i, out in zip(good, _decode(model, good_ids, beam, device, precision) if good_ids else []):
            if isinstance(out, str):
                records[i]["error"] = out
            else:
                records[i]["translation"] = tgt_tok.decode(out)
        if progress is not None:
            progress(len(chunk))
        chunk.clear()
        yield from records

    from .nn.prepared import prepared
    with prepared(model):  # the derived weight copies serve every chunk of the file (nn/prepared.py)
        for item in lines:
            chunk.append(item)
            if len(chunk) >= CHUNK:
                yield from flush()
        if chunk:
            yield from flush()
