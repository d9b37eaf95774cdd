"""`glassformer eval`: score a checkpoint on held-out data.

    glassformer eval --ckpt runs/zh-en                  # the task's own test split
    glassformer eval --ckpt runs/mine --data test.tsv   # BLEU, chrF, exact match on your pairs
    glassformer eval --ckpt runs/lm --data held.txt     # perplexity of a language model

Translators: greedy (or --beam K) translations scored with sacrebleu BLEU and chrF, and exact
match; for zh-en also the role-reversed pairs (猫 追 狗 / 狗 追 猫) both translated right.
Translators also get WER (edit distance over output tokens: the PER of a G2P model), CER and
the sequence error rate. A source on several lines of --data with different targets (a word with
two pronunciations) is one item with several right answers, scored against the one its output is
closest to; a line repeated word for word counts as often as it occurs. Every model: cross-entropy
per token and perplexity; language models also bits per character.
"""

from __future__ import annotations

import json
from typing import Optional

import typer


def role_reversed_score(data, hypotheses: list[str]) -> tuple[int, int]:
    """(pairs with both sentences exactly right, pairs) over a zh-en split."""
    from ..data.zh_en import role_reversed_pairs
    refs = data.raw["test"][:len(hypotheses)]
    hyp = {src: h for (src, _), h in zip(refs, hypotheses)}
    pairs = role_reversed_pairs(refs)
    ok = sum(hyp[a[0]] == a[1] and hyp[b[0]] == b[1] for a, b in pairs)
    return ok, len(pairs)


def evaluate_checkpoint(ckpt: str, data_path: str | None = None, beam: int = 1, device: str = "cpu",
                        strict: bool = False, warn=None, precision: str = "fp32") -> dict:
    """Test-split (or --data) metrics of a checkpoint, as a plain dict.

    Pieces of --data unseen in training are read as <unk> with one warning each (`warn`), or
    refused under `strict`: the same policy as translate and generate (glassformer.unknown).
    `precision` is the weights' while translating (glassformer.generate), a translator's loss and
    perplexity being its fp32 forward pass's; a language model's loss, perplexity and bits/char are
    scored at that precision through the decode step, one position at a time
    (train.evaluate.mean_loss_stepped).
    """
    from ..errors import InputError
    from ..nn.precision import check as check_precision
    from ..train.checkpoint import load_checkpoint
    from ..train.evaluate import evaluate
    from ..train.tasks import lm_split_of, task_for_checkpoint

    check_precision(precision, "--precision")
    ck = load_checkpoint(ckpt, device=device)
    if beam > 1 and ck.config.arch != "encoder-decoder":  # only a translation is decoded: the beam would go unused
        article = "an" if ck.config.arch.startswith("e") else "a"
        raise InputError(f"--beam {beam} applies to translators, and this one is {article} {ck.config.arch}, scored by"
                         " its loss and perplexity with no decoding; drop --beam")
    if precision != "fp32" and ck.config.arch not in ("encoder-decoder", "decoder"):
        raise InputError(f"--precision {precision} applies to models that decode, and this one is an"
                         f" {ck.config.arch}; drop --precision")
    if data_path is not None:
        from ..unknown import UnknownPolicy
        policy = UnknownPolicy(ck.src_tokenizer, strict, side="source" if ck.config.arch != "decoder" else "",
                               warn=warn)
        policy.check_all(_data_items(data_path, ck.config.arch == "decoder"))  # one warning for the file
    data = task_for_checkpoint(ck.meta, ck.src_tokenizer, ck.tgt_tokenizer, data_path)
    m = evaluate(ck.model, data, "test", with_bleu=data.kind == "seq2seq", device=device, beam_size=beam,
                 precision=precision)
    out = {k: v for k, v in m.items() if k != "hypotheses"}
    out["checkpoint"], out["data"] = str(ck.path), data_path or f"{data.task} test split"
    if data_path is None and data.kind == "lm" and lm_split_of(ck.meta) == "shuffled":
        out["data"] += " (lines shuffled one by one: the split this checkpoint trained on, before text kept its order)"
    if data_path is None:  # the same test split: the simple baseline train logged for it (issue 32 §5)
        from ..train.baselines import logged
        b = logged(ck.path)
        if b is not None:
            out["baseline"] = {"description": b["description"], "metric": b["metric"], "test": b["test"]}
    if data.task == "zh-en" and data_path is None:
        out["role_reversed_ok"], out["role_reversed_pairs"] = role_reversed_score(data, m["hypotheses"])
    return out


def _data_items(path: str, lm: bool):
    """The texts the model reads from a --data file: lines (LM) or the TSV's sources."""
    from ..data.files import read_text, read_tsv
    return read_text(path) if lm else (s for s, _ in read_tsv(path))


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_cmd(
        ckpt: str = typer.Option(..., help="run folder or checkpoint folder"),
        data: Optional[str] = typer.Option(None, help="TSV pairs (translator) or text lines (language model)"),
        beam: int = typer.Option(1, help="beam size for translation (1: greedy)"),
        json_out: bool = typer.Option(False, "--json", help="print the metrics as one JSON object"),
        strict: bool = typer.Option(False, "--strict", help="refuse --data with a piece unseen in training"
                                    " (default: read it as <unk> and warn)"),
        precision: str = typer.Option("fp32", help="weights while decoding (a language model: while scored): fp32 | int8 |"
                                      " bf16 (fast only on CPUs with native bf16)"),
        device: str = typer.Option("cpu", help="cpu | cuda"),
    ) -> None:
        """Score a checkpoint: BLEU, chrF and exact match for translators, perplexity for all."""
        from ..errors import InputError
        if beam < 1:
            raise InputError(f"--beam {beam} must be at least 1 (1 is greedy decoding)")
        if strict and data is None:  # the task's own test split is not checked for unseen pieces
            raise InputError("--strict refuses pieces of --data unseen in training, and no --data is given; give"
                             " --data FILE, or drop --strict")
        m = evaluate_checkpoint(ckpt, data, beam, device, strict, warn=lambda line: typer.echo(line, err=True),
                                precision=precision)
        if json_out:
            typer.echo(json.dumps(m, ensure_ascii=False))
            return
        if "n_scored" in m:
            typer.echo(f"{m['checkpoint']} on {m['data']} ({m['n']} lines, {m['n_scored']} scored: a source on"
                       f" several lines with different targets is one item, right if it matches any)")
        else:
            typer.echo(f"{m['checkpoint']} on {m['data']} ({m['n']} example{'' if m['n'] == 1 else 's'})")
        if "exact_match" in m:
            on_chars = ("  (on characters: under a tenth of the references have 4 words)"
                        if m.get("bleu_by") == "char" else "")
            typer.echo(f"  BLEU        {m['bleu']:.2f}{on_chars}")
            typer.echo(f"  chrF        {m['chrf']:.2f}")
            typer.echo(f"  exact match {100 * m['exact_match']:.2f}%  (sequence error rate {100 * m['ser']:.2f}%)")
            typer.echo(f"  WER         {100 * m['wer']:.2f}%  (edit distance over output tokens: PER for phonemes)")
            typer.echo(f"  CER         {100 * m['cer']:.2f}%")
        if "role_reversed_pairs" in m:
            typer.echo(f"  role-reversed pairs both right: {m['role_reversed_ok']}/{m['role_reversed_pairs']}")
        typer.echo(f"  loss        {m['loss']:.4f} nats/token")
        typer.echo(f"  perplexity  {m['ppl']:.3f}")
        if "bpc" in m:
            typer.echo(f"  bits/char   {m['bpc']:.4f}  (a line end counts as one character)")
        elif "bpc_note" in m:
            typer.echo(f"  bits/char   {m['bpc_note']}")
        if "baseline" in m:
            from ..train.baselines import line
            typer.echo(f"  baseline    {line(m, m['baseline'])}")
