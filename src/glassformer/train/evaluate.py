"""Held-out evaluation: cross-entropy and perplexity, exact match, BLEU and chrF.

(Also the error rates of `error_rates`: WER/PER over output tokens, CER, the sequence error
rate, and bits per character for language models.)

- loss: mean cross-entropy per target token, *without* label smoothing, so perplexity
  = exp(loss) is comparable across runs (the paper reports perplexity per word-piece, §6.2);
- exact match: greedy translation (argmax at each step, the KV cache of `glassformer.generate`)
  compared with the reference string; a source on several lines with different targets (a word
  with two pronunciations) is one item, right if it matches any of them, its error rates against
  the closest;
- BLEU and chrF: sacrebleu's corpus scores on the same translations (the paper reports BLEU); BLEU
  on characters where few references have the 4 words its longest n-gram needs (`bleu_by`).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from ..errors import InputError
from ..limits import check_tokens
from ..nn.prepared import prepared
from ..tokenize import pad_batch
from . import error_rates
from .batching import collate_lm, collate_seq2seq


def batch_loss(model, batch: dict, pad_id: int, label_smoothing: float = 0.0) -> tuple[torch.Tensor, int]:
    """(summed cross-entropy over non-padding targets, number of those targets) for one batch.

    The model computes the loss from its targets (`targets=`): the output head fused with the
    cross-entropy where that gives the same numbers (nn/loss.py), never a (tokens × vocab) tensor.
    """
    loss_args = {"ignore_index": pad_id, "label_smoothing": label_smoothing, "reduction": "sum"}
    if "src" in batch:
        target = batch["tgt_out"]
        loss = model(batch["src"], batch["tgt_in"], targets=target, **loss_args)
    else:
        target = batch["out"]
        loss = model(batch["inp"], targets=target, **loss_args)
    return loss, int((target != pad_id).sum())


def collate(examples: Sequence[tuple], config) -> dict:
    if len(examples[0]) == 2:
        return collate_seq2seq(examples, config.start_id, config.eos_id, config.pad_id)
    return collate_lm(examples, config.pad_id)


def _batches(model, examples: Sequence[tuple], batch_size: int, device: str):
    """The examples collated in batches of like length (sorted by their longest side), on `device`."""
    order = sorted(range(len(examples)), key=lambda i: max(len(p) for p in examples[i]))
    for start in range(0, len(order), batch_size):
        batch = collate([examples[i] for i in order[start:start + batch_size]], model.config)
        yield {k: v.to(device) for k, v in batch.items()}


@torch.no_grad()
def mean_loss(model, examples: Sequence[tuple], batch_size: int = 64, device: str = "cpu") -> float:
    """Mean per-token cross-entropy (nats) over `examples`."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for batch in _batches(model, examples, batch_size, device):
        loss, n = batch_loss(model, batch, model.config.pad_id)
        total, count = total + float(loss), count + n
    model.train(was_training)
    return total / max(count, 1)


@torch.no_grad()
def mean_loss_stepped(model, examples: Sequence[tuple], precision: str, batch_size: int = 64,
                      device: str = "cpu") -> float:
    """Mean per-token cross-entropy (nats) of a language model's windows, scored through the prepared
    decode step one position at a time (teacher forcing: each window's own next token fed back).

    Low-precision weights live in the decode step only (nn/decode_step.py, nn/precision.py), so this
    is how an LM's bits/char at `--precision int8` is measured: the same targets as `mean_loss`
    (skipped and padding targets ignored), each from the logits the step gives after the window's
    tokens before it. Shorter windows of a batch are padded at the right: their padding comes after
    every token they score, so causal attention never lets it in, and its targets are ignored."""
    from ..nn import decode_step
    was_training = model.training
    model.eval()
    pad = model.config.pad_id
    total, count = 0.0, 0
    try:
        for batch in _batches(model, examples, batch_size, device):
            inp, out = batch["inp"], batch["out"]
            cache = model.new_cache(inp.shape[1])
            step = decode_step.prepared(model, cache, precision=precision)
            if step is None:
                raise InputError(f"--precision {precision} scores a language model through the prepared decode "
                                 "step, which this model cannot take (hooks, or an attention variant it lacks); "
                                 "use --precision fp32")
            for t in range(inp.shape[1]):
                logp = torch.log_softmax(step(inp[:, t], cache).float(), dim=-1)
                target = out[:, t]
                scored = target != pad
                total -= float(logp.gather(1, target[:, None]).squeeze(1)[scored].sum())
                count += int(scored.sum())
    finally:
        model.train(was_training)
    return total / max(count, 1)


def _strip(row: list[int], config) -> list[int]:
    """Target ids without the start token, cut at the first <eos>."""
    if row and row[0] == config.start_id:
        row = row[1:]
    if config.eos_id in row:
        row = row[:row.index(config.eos_id)]
    return [i for i in row if i != config.pad_id]


@torch.no_grad()
def translate_ids(model, sources: Sequence[Sequence[int]], beam_size: int = 1, batch_size: int = 64,
                  max_new_tokens: int | None = None, device: str = "cpu", precision: str = "fp32") -> list[list[int]]:
    """Greedy (beam_size=1) or beam-search target ids for each source id list, in input order."""
    from ..generate import generate

    cfg = model.config
    was_training = model.training
    model.eval()
    out: list[list[int] | None] = [None] * len(sources)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    step = batch_size if beam_size == 1 else max(1, batch_size // beam_size)
    # one scope over every batch: the weights cannot change between them, so the derived copies
    # (fused, reordered, quantised: nn/prepared.py) are built once, not once per batch
    with prepared(model):
        for start in range(0, len(order), step):
            idx = order[start:start + step]
            src = pad_batch([sources[i] for i in idx], cfg.pad_id).to(device)
            limit = max_new_tokens or 2 * src.shape[1] + 10
            ids = generate(model, src, max_new_tokens=limit, strategy="greedy" if beam_size == 1 else "beam",
                           beam_size=beam_size, eos_id=cfg.eos_id, src_padding_mask=src == cfg.pad_id,
                           precision=precision)
            for row, i in zip(ids.tolist(), idx):
                out[i] = _strip(row, cfg)
    model.train(was_training)
    return out  # type: ignore[return-value]


def translate_texts(model, src_tok, tgt_tok, texts: Sequence[str], beam_size: int = 1,
                    device: str = "cpu") -> list[str]:
    """Translate sentences with a trained encoder-decoder and its tokenizers."""
    sources = []
    for text in texts:
        ids = src_tok.encode(text)
        if not ids:
            raise InputError(f"nothing to translate in {text!r}; give a non-empty sentence")
        check_tokens(len(ids), f"the sentence {text[:30]!r}{'…' if len(text) > 30 else ''}")
        if src_tok.unk_id in ids:  # a word the model never saw: refuse rather than guess
            unknown = [t for t in src_tok.tokens(text) if src_tok.token_to_id(t) is None]
            known = [t for t in src_tok.vocab[4:] if t.strip()][:12]
            raise InputError(f"{', '.join(dict.fromkeys(unknown))} in {text!r} is not in the model's source "
                             f"vocabulary ({src_tok.vocab_size} tokens, e.g. {' '.join(known)})")
        sources.append(ids)
    return [tgt_tok.decode(ids) for ids in translate_ids(model, sources, beam_size, device=device)]


def same_answer(hypothesis: str, reference: str) -> bool:
    """An output is its reference when the two are equal up to whitespace."""
    return hypothesis.split() == reference.split()


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of hypotheses identical to their reference (whitespace-normalised)."""
    if not references:
        return 0.0
    return sum(map(same_answer, hypotheses, references)) / len(references)


def bleu_by(reference_lists: Sequence[Sequence[str]]) -> str:
    """sacrebleu's tokenizer for BLEU on these references: its default ('13a', words at spaces and
    punctuation), or 'char' where under a tenth of the references have 4 words — BLEU's longest
    n-gram — so that word BLEU is 0 whatever the outputs, or rests on a few sentences: a script
    written without spaces (kana: 0.0 at 64% exact match), one word per line, dates of three words
    (date-fr: 0.0 at 100%)."""
    four = sum(len(refs[0].split()) >= 4 for refs in reference_lists if refs)
    return "13a" if four >= len(reference_lists) / 10 else "char"


def bleu_chrf(hypotheses: Sequence[str], reference_lists: Sequence[Sequence[str]]) -> dict[str, Any]:
    """sacrebleu corpus BLEU and chrF, each sentence with its list of references (sacrebleu's
    reference streams, None where a sentence has fewer); `bleu_by` names BLEU's tokenizer."""
    import sacrebleu
    most = max(map(len, reference_lists), default=1)
    streams = [[refs[k] if k < len(refs) else None for refs in reference_lists] for k in range(most)]
    by = bleu_by(reference_lists)
    return {"bleu": sacrebleu.corpus_bleu(list(hypotheses), streams, tokenize=by).score, "bleu_by": by,
            "chrf": sacrebleu.corpus_chrf(list(hypotheses), streams).score}


def item_outputs(raw: Sequence[tuple[str, str]], output_of: dict[str, str]) -> tuple[list, list, list]:
    """The items exact match scores (error_rates.scored_items): each one's output, its right answers,
    and the answer closest to the output (the one its error rates are measured against)."""
    items = error_rates.scored_items(raw)
    hyps, ref_lists = [output_of[src] for src, _ in items], [refs for _, refs in items]
    return hyps, ref_lists, error_rates.closest_references(hyps, ref_lists)


def score_outputs(raw: Sequence[tuple[str, str]], output_of: dict[str, str], with_bleu: bool = False) -> dict:
    """Exact match and error rates (+ BLEU, chrF) of one output per source against the pairs `raw`:
    the scoring of every translator, and of train/baselines.py's simple baselines."""
    hyps, ref_lists, refs = item_outputs(raw, output_of)
    metrics: dict[str, Any] = {"exact_match": exact_match(hyps, refs), **error_rates.for_outputs(hyps, refs)}
    if len(hyps) < len(raw):
        metrics["n_scored"] = len(hyps)
    if with_bleu:
        metrics.update(bleu_chrf(hyps, ref_lists))
    return metrics


# tokenizers whose ids give back the text (tokenize.py; apart from a character never seen in training, one
# <unk> for every arm): an LM's summed loss over them is a cost for every character, so bits per character
# mean what they say. A word tokenizer makes an unseen word one cheap <unk> and drops runs of spaces.
CHARGES_EVERY_CHARACTER = ("char", "bpe", "unigram")


def evaluate(model, data, split: str, limit: int | None = None, with_bleu: bool = False,
             device: str = "cpu", beam_size: int = 1, precision: str = "fp32") -> dict[str, Any]:
    """Metrics of `model` on a split of a TaskData: loss, perplexity (+ exact match, BLEU, chrF)."""
    examples = data.encoded[split][:limit] if limit else data.encoded[split]
    if not examples:
        raise InputError(f"the {split} split of task {data.task} is empty; give more data")
    with prepared(model):  # the weights are fixed while scored: derived copies built once (nn/prepared.py)
        return _evaluate(model, data, split, examples, with_bleu, device, beam_size, precision)


def _evaluate(model, data, split, examples, with_bleu, device, beam_size, precision="fp32") -> dict[str, Any]:
    # a translator's loss is its fp32 forward's (precision is how it decodes); an LM is scored
    # through the decode step where its weights are in low precision (mean_loss_stepped)
    lm_low = data.kind != "seq2seq" and precision != "fp32"
    loss = mean_loss_stepped(model, examples, precision, device=device) if lm_low else \
        mean_loss(model, examples, device=device)
    metrics: dict[str, Any] = {"loss": loss, "ppl": math.exp(min(loss, 50.0)), "n": len(examples)}
    if data.kind == "seq2seq":
        # A source on several lines with different targets is one item with several right answers
        # (a word with two pronunciations), scored against the answer its output is closest to; a
        # line repeated word for word is a repeated example (error_rates.scored_items).
        raw = data.raw[split][:len(examples)]
        first_ids: dict[str, list[int]] = {}  # each source translated once
        for (src, _), (ids, _) in zip(raw, examples):
            first_ids.setdefault(src, ids)
        output_of = dict(zip(first_ids, (data.tgt_tok.decode(ids) for ids in
                                         translate_ids(model, list(first_ids.values()), beam_size, device=device,
                                                       precision=precision))))
        metrics.update(score_outputs(raw, output_of, with_bleu))
        metrics["hypotheses"] = [output_of[src] for src, _ in raw]  # one per line, in line order
    elif data.src_tok.kind not in CHARGES_EVERY_CHARACTER:
        metrics["bpc_note"] = (f"not measured: a {data.src_tok.kind} tokenizer reads an unseen word as one <unk> "
                               "and runs of spaces as one, so bits per character would not charge for them")
    elif len(examples) == len(data.encoded[split]):  # bits per character need the whole text
        predicted = sum(len(w[0]) - 1 - getattr(w, "skip", 0) for w in examples)  # targets scored
        metrics["bpc"] = error_rates.bits_per_character(loss * predicted, data.raw[split])
    return metrics
