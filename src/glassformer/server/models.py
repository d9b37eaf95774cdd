"""The models the explorer can run, by name — never by a path taken from a request.

Names: "walkthrough" (seed 000 ch. 7's two-layer encoder, every number traced), "minilm"
(pretrained, converted into glassformer), and "run:<folder>" for each checkpoint found under the
runs directory at startup or on a refresh. A request names one of these; the path behind it comes
from our own scan of the runs directory.

One lock serialises every forward pass: tracing registers hooks on the shared model, and the
walkthrough switches torch's default dtype, so two requests must never run a model at once.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import InputError
from ..nn.prepared import prepared

DEFAULT_MODEL = "walkthrough"
# attention weights one trace may return (layers × heads × n²): MiniLM at 256 tokens is 4.7 M
MAX_CELLS = 5_000_000
_LOCK = threading.Lock()


def _lists(t: Any, digits: int = 6) -> Any:
    """A tensor or array as nested lists of rounded floats (JSON-ready, batch dim dropped)."""
    a = t.detach().cpu().double().numpy() if isinstance(t, torch.Tensor) else np.asarray(t, dtype=np.float64)
    return np.round(a, digits).tolist()


class ModelRegistry:
    """Model names -> loaded models, loaded on first use and kept."""

    def __init__(self, runs_dir: str | Path = "runs", max_tokens: int = 64, precision: str = "fp32"):
        self.runs_dir = Path(runs_dir)
        # the weights a translation is decoded with (`serve --precision`, nn/precision.py); the
        # traces, and /api/generate's step-by-step view, run the fp32 module path they show
        self.precision = precision
        self.max_tokens = max_tokens
        self._subjects: dict[str, Any] = {}
        # one `prepared` scope per loaded model for the server's life (nn/prepared.py): a served model
        # never trains, so its derived weights (fused, or quantised for --precision int8) are made on
        # its first translation and kept, as they would be across a file's batches; an in-place edit
        # of a weight still rebuilds them (their key holds each source's version)
        self._scopes = contextlib.ExitStack()
        self._runs: dict[str, Path] = {}
        self.refresh()

    def refresh(self) -> None:
        """Scan the runs directory (two levels deep) for checkpoint folders."""
        found: dict[str, Path] = {}
        if self.runs_dir.is_dir():
            for cfg in sorted(self.runs_dir.glob("*/config.json")) + sorted(self.runs_dir.glob("*/*/config.json")):
                folder = cfg.parent
                if (folder / "meta.json").is_file() and (folder / "model.safetensors").is_file():
                    found["run:" + folder.relative_to(self.runs_dir).as_posix()] = folder
        self._runs = found

    def names(self) -> list[str]:
        return [DEFAULT_MODEL, "minilm", *self._runs]

    def describe(self) -> list[dict]:
        out = [{"name": DEFAULT_MODEL, "description": "seed 000 ch. 7: 2-layer encoder, d_model 12, 3 heads"},
               {"name": "minilm", "description": "all-MiniLM-L6-v2 (6 layers × 12 heads) in glassformer"}]
        # the name, never the path: an answer must not map this machine's folders
        out += [{"name": n, "description": f"checkpoint {n[len('run:'):]} in the runs folder"} for n in self._runs]
        return out

    def check(self, name: str) -> None:
        if name not in self.names():
            raise KeyError(f"unknown model {name!r}; choose one of: {', '.join(self.names())}")

    # ---- running ----
    def trace(self, name: str, sentence: str) -> dict:
        self.check(name)
        with _LOCK:
            if name == DEFAULT_MODEL:
                return self._walkthrough(sentence)
            return self._subject_trace(name, sentence)

    def _subject(self, name: str):
        if name not in self._subjects:
            from ..inspect.loader import load_subject
            subject = load_subject("minilm" if name == "minilm" else str(self._runs[name]))
            self._scopes.enter_context(prepared(subject.model))
            self._subjects[name] = subject
        return self._subjects[name]

    def _check_length(self, n: int) -> None:
        if n > self.max_tokens:
            raise InputError(f"the sentence has {n} tokens; the limit is {self.max_tokens}")

    def _walkthrough(self, sentence: str) -> dict:
        from ..walkthrough import build
        from ..walkthrough.inputs import segment
        self._check_length(len(segment(sentence)))
        # any word is allowed: 猫/吃/鱼 keep the seed's vectors, other words get seeded random ones
        result = build(sentence, random_embeddings=True)
        trace = result["trace"]
        L = result["config"]["n_layers"]
        return {
            "model": DEFAULT_MODEL,
            "kind": "encoder",
            "tokens": result["tokens"],
            "config": result["config"],
            "trace": trace,
            "pattern_hooks": [f"enc.{l}.attn.pattern" for l in range(L)],
            "pe": trace.get("pos"),
            "steps": _steps(result),
            "unknown": None,  # any word is allowed here (seeded random vectors)
        }

    def _subject_trace(self, name: str, sentence: str) -> dict:
        subject = self._subject(name)
        ids, _ = subject.encode(sentence)
        self._check_length(len(ids))
        cfg = subject.model.config
        cells = (cfg.dec_layers if subject.kind == "decoder" else cfg.n_layers) * cfg.n_heads * len(ids) ** 2
        if cells > MAX_CELLS:
            raise InputError(f"{len(ids)} tokens give {cells:,} attention weights for {name}; the limit is "
                             f"{MAX_CELLS:,} — shorten the sentence")
        stack = "dec" if subject.kind == "decoder" else "enc"
        wanted = ["embed", "pos", "x0", subject.pattern_hook, f"{stack}.*.out"]
        tokens, tr = subject.trace(sentence, wanted)
        # patterns to 5 digits (the page prints 4): MiniLM at 256 tokens is 4.7 M of them
        trace = {k: _lists(v[0], 5 if k.endswith(".pattern") else 6) for k, v in tr.items()
                 if not k.startswith("dec.") or subject.kind == "decoder"}
        hooks = [k for k in trace if k.endswith(".pattern")]
        out = {"model": name, "kind": subject.kind, "tokens": tokens,
               "config": subject.model.config.to_dict(), "trace": trace, "pattern_hooks": hooks,
               "pe": trace.get("pos"), "steps": None,
               "unknown": subject.unknown(sentence)}  # {"pieces", "note"} of what it never saw, or None
        if subject.kind == "encoder-decoder":
            out["translation"] = _translate(subject, ids, self.precision)
        return out


def _translate(subject, src_ids: list[int], precision: str = "fp32") -> dict:
    """Greedy translation and the cross-attention of every decoder layer over the source."""
    from ..generate import generate
    from ..trace import run_with_trace
    model, cfg, tgt_tok = subject.model, subject.model.config, subject.tgt_tokenizer
    src = torch.tensor([src_ids])
    with torch.no_grad():
        ys = generate(model, src, max_new_tokens=48, strategy="greedy", eos_id=cfg.eos_id, precision=precision)
        row = ys[0].tolist()
        if cfg.eos_id in row[1:]:
            row = row[:row.index(cfg.eos_id, 1) + 1]
        _, tr = run_with_trace(model, src, torch.tensor([row[:-1] if len(row) > 1 else row]),
                               names=["dec.*.cross_attn.pattern"])
    queries = row[:-1] if len(row) > 1 else row
    return {
        "text": tgt_tok.decode(row),
        "target_tokens": [tgt_tok.id_to_token(i) for i in queries],  # query i predicts token i+1
        "predicted_tokens": [tgt_tok.id_to_token(i) for i in row[1:]],
        "cross_attention": {k: _lists(v[0]) for k, v in tr.items()},
    }


def _steps(result: dict, lang: str = "en", max_cols: int | None = None) -> list[dict] | None:
    """The walkthrough's narrated step tables, as JSON; each table cut to its first `max_cols` columns."""
    from ..walkthrough.steps import build_steps
    steps = []
    for s in build_steps(result, lang):
        tables = []
        for t in s.tables:
            cols, values, _ = t.view(max_cols or len(t.cols))
            tables.append({"caption": t.caption, "rows": list(t.rows), "cols": list(cols), "cols_total": len(t.cols),
                           "values": [[_cell(v) for v in row] for row in np.asarray(values).tolist()]})
        steps.append({"title": s.title, "formula": s.formula, "shape": s.shape, "text": s.text,
                      "level": s.level, "tables": tables})
    return steps


def _cell(v: Any) -> Any:
    """A table cell: numbers rounded to the 4 digits the seed prints, labels kept as text."""
    return round(float(v), 4) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
