"""The peer: CTranslate2, fp32 and int8, on the same weights (issue 29 §4).

A user who wants fast CPU decoding picks CTranslate2, not Hugging Face, so it is the engine to race.
Both models are built from HF configs with random weights and written as HF folders; glassformer
imports the HF model (`interop.from_hf`), CTranslate2 converts the folder with its own converter
(`TransformersConverter`, as its users do). Rows:

- the Marian-size translator (d_model 512, 6 + 6 layers, 8 heads, FFN 2048, vocabulary 8,000):
  greedy at batch 1, beam 4 at batch 16;
- the GPT-2-size LM (d 384, 6 layers, 6 heads, vocabulary 8,000): greedy at batch 1 and 8.

Each row times four sides interleaved (harness.interleaved: ABBA order, medians) — ours fp32,
CTranslate2 fp32, ours int8, CTranslate2 int8 — with CTranslate2's `intra_threads` = torch's thread
count and one translator thread. CTranslate2 runs in a worker process of its own (bench/ct2_worker.py:
in torch's process its OpenMP runtime cost torch about half its speed, and CTranslate2 was slower
there too), timed by its own clock around each call. Ratios are our tokens/s over theirs at the same precision; the
tokens are compared (fp32 with fp32, int8 with int8, and our int8 with our fp32).

CTranslate2's int8 is quantised when the float32 model is loaded (`compute_type="int8"`): it is
int8 weights *and* int8 activations; ours is nn/precision.py's (on an AVX2 machine fbgemm's
dynamic int8, the same kind). A random translator almost never emits </s> (1 in 8,000), so both
sides decode the full length; the LM is forced to (`min_length`, eos off).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from ..nn.prepared import prepared
from .harness import SelfTimed, interleaved

FULL = dict(marian=dict(d_model=512, layers=6, heads=8, ffn=2048, vocab=8000), src_len=24, mt_new=48,
            gpt2=dict(n_embd=384, n_layer=6, n_head=6, vocab=8000), prompt=8, lm_new=128,
            rows=(("translator", "greedy", 1), ("translator", "beam", 16), ("lm", "greedy", 1), ("lm", "greedy", 8)),
            repeats=5)
QUICK = dict(marian=dict(d_model=32, layers=1, heads=2, ffn=64, vocab=120), src_len=6, mt_new=8,
             gpt2=dict(n_embd=32, n_layer=2, n_head=2, vocab=120), prompt=4, lm_new=8,
             rows=(("translator", "greedy", 1), ("translator", "beam", 2), ("lm", "greedy", 1), ("lm", "greedy", 2)),
             repeats=1)
BEAM = 4
EOS, UNK = 0, 1  # Marian's layout: </s> 0, <unk> 1, <pad> last (the decoder's start)


class _Vocabulary:
    """What CTranslate2's converter reads from a tokenizer: the tokens in id order and the special
    ones. The benchmark models have no tokenizer (random weights); token i is named "t{i}"."""

    def __init__(self, tokens: list[str], eos: str, unk: str, bos: str | None = None):
        self._vocab = {t: i for i, t in enumerate(tokens)}
        self.eos_token, self.unk_token, self.bos_token = eos, unk, bos if bos is not None else eos

    def get_vocab(self) -> dict[str, int]:
        return dict(self._vocab)


def _converted(hf_model, folder: Path, vocabulary: _Vocabulary) -> str:
    """The HF model saved to `folder`/hf and converted by CTranslate2 into `folder`/ct2 (float32)."""
    from ctranslate2.converters import TransformersConverter

    class Converter(TransformersConverter):  # the folder has no tokenizer files: give the vocabulary
        def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
            return vocabulary

    hf_model.save_pretrained(folder / "hf")
    out = folder / "ct2"
    Converter(str(folder / "hf")).convert(str(out), quantization=None, force=True)
    return str(out)


def marian_pair(p: dict):
    from transformers import MarianConfig, MarianMTModel

    from ..interop import from_hf
    m, V = p["marian"], p["marian"]["vocab"]
    torch.manual_seed(0)
    cfg = MarianConfig(vocab_size=V, d_model=m["d_model"], encoder_layers=m["layers"], decoder_layers=m["layers"],
                       encoder_attention_heads=m["heads"], decoder_attention_heads=m["heads"],
                       encoder_ffn_dim=m["ffn"], decoder_ffn_dim=m["ffn"], max_position_embeddings=256,
                       pad_token_id=V - 1, decoder_start_token_id=V - 1, eos_token_id=EOS,
                       dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    hf = MarianMTModel(cfg).eval()
    tokens = ["</s>", "<unk>", *[f"t{i}" for i in range(2, V - 1)], "<pad>"]
    return from_hf(hf).eval(), hf, _Vocabulary(tokens, "</s>", "<unk>")


def gpt2_pair(p: dict):
    from transformers import GPT2Config, GPT2LMHeadModel

    from ..interop import from_hf
    g, V = p["gpt2"], p["gpt2"]["vocab"]
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=g["n_layer"], n_embd=g["n_embd"], n_head=g["n_head"], vocab_size=V, n_positions=512,
                     bos_token_id=None, eos_token_id=None)
    hf = GPT2LMHeadModel(cfg).eval()
    tokens = ["<|endoftext|>", *[f"t{i}" for i in range(1, V)]]
    return from_hf(hf).eval(), hf, _Vocabulary(tokens, "<|endoftext|>", "<|endoftext|>")


def _names(ids: torch.Tensor, tokens: list[str]) -> list[list[str]]:
    return [[tokens[i] for i in row] for row in ids.tolist()]


class _Worker:
    """CTranslate2 in its own process (bench/ct2_worker.py: why), both compute types of one model."""

    def __init__(self, kind: str, path: str, threads: int):
        self.proc = subprocess.Popen([sys.executable, "-m", "glassformer.bench.ct2_worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self._ask({"load": {"kind": kind, "path": path, "threads": threads}})

    def _ask(self, msg: dict) -> dict:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the CTranslate2 worker stopped (exit code {self.proc.wait()})")
        return json.loads(line)

    def run(self, compute_type: str, method: str, *args, **kwargs) -> SelfTimed:
        reply = self._ask({"run": {"compute_type": compute_type, "method": method, "args": args, "kwargs": kwargs}})
        return SelfTimed(reply["tokens"], reply["seconds"])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def _translator_row(ours, ct2: _Worker, tokens: list[str], strategy: str, batch: int, p: dict) -> dict:
    from ..generate import generate
    g = torch.Generator().manual_seed(batch)
    # sources of real ids (no </s>, <unk> or <pad>), ending in </s> as Marian's tokenizer writes them
    src = torch.randint(2, p["marian"]["vocab"] - 1, (batch, p["src_len"]), generator=g)
    src[:, -1] = EOS
    source_tokens = _names(src, tokens)
    n, beam = p["mt_new"], BEAM if strategy == "beam" else 1
    index = {t: i for i, t in enumerate(tokens)}

    def ours_fn(precision):
        def run():
            out = generate(ours, src, max_new_tokens=n, strategy=strategy, beam_size=beam, precision=precision)
            return [_strip(row) for row in out[:, 1:].tolist()]  # the start token off, up to </s>
        return run

    def ct2_fn(kind):
        def run():
            res = ct2.run(kind, "translate_batch", source_tokens, beam_size=beam, max_decoding_length=n,
                          length_penalty=1.0)
            return SelfTimed([[index[t] for t in hyp] for hyp in res.value], res.seconds)
        return run
    return _row({"ours fp32": ours_fn("fp32"), "CT2 fp32": ct2_fn("float32"), "ours int8": ours_fn("int8"),
                 "CT2 int8": ct2_fn("int8")}, batch * n, p["repeats"], greedy=strategy == "greedy")


def _strip(row: list[int]) -> list[int]:
    return row[:row.index(EOS)] if EOS in row else row


def _lm_row(ours, ct2: _Worker, tokens: list[str], batch: int, p: dict) -> dict:
    from ..generate import generate
    g = torch.Generator().manual_seed(batch)
    ids = torch.randint(1, p["gpt2"]["vocab"], (batch, p["prompt"]), generator=g)
    prompts = _names(ids, tokens)
    index = {t: i for i, t in enumerate(tokens)}
    n = p["lm_new"]

    def ours_fn(precision):
        return lambda: generate(ours, ids, max_new_tokens=n, strategy="greedy", eos_id=None,
                                precision=precision)[:, ids.shape[1]:].tolist()

    def ct2_fn(kind):
        def run():
            res = ct2.run(kind, "generate_batch", prompts, max_length=n, min_length=n, sampling_topk=1,
                          include_prompt_in_result=False, end_token=[])
            return SelfTimed([[index[t] for t in seq] for seq in res.value], res.seconds)
        return run
    return _row({"ours fp32": ours_fn("fp32"), "CT2 fp32": ct2_fn("float32"), "ours int8": ours_fn("int8"),
                 "CT2 int8": ct2_fn("int8")}, batch * n, p["repeats"])


def same_prefix_agreement(a: list[list[int]], b: list[list[int]]) -> float:
    """How often two decoders pick the same next token when they were given the same prefix.

    Position by position, a free-running comparison counts every token after the first difference
    as different, though from there the two decode different prefixes; this counts only the steps
    where both had the same history: the tokens equal up to each row's first difference, over those
    plus one per row that differs (a row that ends earlier differs where it ends)."""
    equal = differ = 0
    for x, y in zip(a, b):
        k = next((i for i, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
        equal += k
        differ += x != y
    return equal / max(1, equal + differ)


def _row(sides: dict, work: int, repeats: int, greedy: bool = True) -> dict:
    """Four sides interleaved; ratios ours / CT2 per precision; token agreement (and, for greedy
    rows, next-token agreement on the same prefix: a beam's best hypothesis is not a sequence of
    next-token choices, so there it is None)."""
    outs: dict = {}
    t = interleaved(sides, repeats, warmup=1, outputs=outs)
    rate = {name: work / timing.median for name, timing in t.items()}

    def same(a, b) -> dict:
        rows = sum(x == y for x, y in zip(outs[a], outs[b]))
        pairs = [(u, v) for x, y in zip(outs[a], outs[b]) for u, v in zip(x, y)]
        return {"rows_equal": rows, "rows": len(outs[a]),
                "token_agreement": sum(u == v for u, v in pairs) / max(1, len(pairs)),
                "same_prefix_agreement": same_prefix_agreement(outs[a], outs[b]) if greedy else None}
    return {"sides": {name: {**timing.to_dict(), "tokens_per_s": rate[name]} for name, timing in t.items()},
            "ratio_fp32": rate["ours fp32"] / rate["CT2 fp32"], "ratio_int8": rate["ours int8"] / rate["CT2 int8"],
            "tokens_fp32": same("ours fp32", "CT2 fp32"), "tokens_int8": same("ours int8", "CT2 int8"),
            "int8_vs_fp32": same("ours int8", "ours fp32"), "ct2_int8_vs_fp32": same("CT2 int8", "CT2 fp32"),
            "work_tokens": work}


def run(quick: bool = False) -> dict:
    try:
        import ctranslate2
    except ImportError:  # a dev extra, not a dependency: the other sections still run
        return {"skipped": "ctranslate2 is not installed (pip install ctranslate2, or the dev extras)"}
    p = QUICK if quick else FULL
    out: dict = {"params": {k: v for k, v in p.items() if k != "rows"}, "ctranslate2": ctranslate2.__version__,
                 "threads": torch.get_num_threads(), "rows": {}}
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        models = {}
        for kind, make in (("translator", marian_pair), ("lm", gpt2_pair)):
            if any(r[0] == kind for r in p["rows"]):
                ours, hf, vocabulary = make(p)
                tokens = [t for t, _ in sorted(vocabulary.get_vocab().items(), key=lambda kv: kv[1])]
                models[kind] = (ours, _converted(hf, Path(tmp) / kind, vocabulary), tokens)
        workers = {kind: _Worker("translator" if kind == "translator" else "generator", path,
                                 torch.get_num_threads()) for kind, (_, path, _) in models.items()}
        try:
            for kind, strategy, batch in p["rows"]:
                ours, _, tokens = models[kind]
                name = f"{kind} {strategy}{f' {BEAM}' if strategy == 'beam' else ''} batch {batch}"
                # one `prepared` scope around the row: our derived weights (fused, quantised) are made once,
                # as CTranslate2 makes its own once when it loads the model (nothing trains meanwhile)
                with prepared(ours):
                    out["rows"][name] = (_translator_row(ours, workers[kind], tokens, strategy, batch, p)
                                         if kind == "translator" else _lm_row(ours, workers[kind], tokens, batch, p))
        finally:
            for w in workers.values():
                w.close()
    return out
