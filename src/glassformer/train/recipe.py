"""The `auto` recipe: training settings chosen from the user's data and time budget (issue 10).

The 2017 recipe (Post-LN, the warmup schedule of §5.3 peaking at d_model^-0.5 · warmup^-0.5)
was tuned on WMT with 25k-token batches; on a small real dataset it stalls (measured on 45k
CJK→English pairs: exact match 0.0 for 10 minutes, while Pre-LN alone reached 0.70). `auto`
keeps the architecture of the paper and changes what real data needs:

- tokenizer per side, from the text: characters for CJK or single-word lines (spelling),
  words for a closed vocabulary (phonemes, tags), BPE for open-vocabulary prose; an LM: characters
  (subwords were measured: SUBWORDS), its passes counted in the tokens it trains on (the user's
  `--tokenizer` where given);
- Pre-LN (norm before each sublayer, a final norm), stable without a tuned warmup
  (Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture");
- an LM in LLaMA's form (RMSNorm, a SwiGLU FFN, rotary positions): lower bits per character in the
  same minutes on both development texts, and it exports as LLaMA (`LLAMA_FORM`);
- AdamW with a named peak rate, linear warmup, held, then a linear decay over the last fifth of the
  budget in steps or minutes ("wsd": warmup-stable-decay);
- a model sized from the number of training tokens and the minutes given; a small character LM six
  layers deep instead of four when the budget gives the deeper model many passes over its text
  (`LM_DEPTH_PASSES`);
- no dropout when the minutes given allow only a few passes over the data (dropout regularises a
  model that sees each example many times; in a short budget it only slows learning, and its
  random masks cost a third of a small model's CPU step), nor for a character LM whose text has
  more characters than its blocks have weights (measured: without it such a model stayed ahead for 30
  minutes); the passes are counted by the run itself, from its first tenth without dropout
  (train/dropout_rule.py), the start-up speed probe only predicting them;
- bf16 autocast for the training step where the CPU multiplies bf16 natively and it was measured
  faster with the same loss (from d_model 256; at 128 on a CPU without AMX: `choose_bf16`);
- the held-out split of the task (5% valid, 5% test), `patience` = 10 evaluations for wsd's early
  decay (it never stops a decay part-way), and the best model kept in best/.

`--recipe paper` gives the 2017 settings; every flag still overrides either recipe.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import GATED, ModelConfig
from ..limits import layer_weights
from .dropout_rule import DECIDE_SHARE  # the share of a run trained before it decides on dropout
# how fast the chosen model trains here, for the passes a time budget allows (the dropout rule below)
from .speed_probe import PROBE_SECONDS, measure_tokens_per_minute

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")

CLOSED_VOCAB = 2000  # at most this many distinct words: word tokens (a phoneme set, tags)
# A translator: no dropout below 30 passes of the model without it in the budget, counted as the run
# counts them (train/dropout_rule.py: its first tenth's pairs, extrapolated). Development sets, one seed,
# scored with `eval` on the suite's test pairs (docs/real-data.md, "The dropout rule on the run's own
# rate"): pinyin at 10 min, one thread, 12.5 passes: no dropout 86.88%, 0.1 85.70%; G2P at 30 min, two
# threads, 14.6-18 passes: no dropout 72.3% and 72.6% (two launches of one command; the second cut at
# 66.9% by early stopping in its decay, then resumed to its end: docs/real-data.md, "Early stopping cut
# the decays"), 0.1 67.3%; pinyin at 30 min, one thread, 52 passes: 0.1 87.26%, none 86.64%. 30: about
# the geometric mean of 18 and 52, not tuned.
# (It was 20, from CMUdict runs of 8 min on one thread.)
DROPOUT_EPOCHS = 30
TSV_EVIDENCE = ("; G2P, 30 min, 15-18 passes: 72.3% and 72.6% exact match without, 67.3% with 0.1; pinyin,"
                " 30 min, 52 passes: 87.3% with, 86.6% without")
# A character LM overfits sooner, but only where its text is small beside the model (development text
# fortunes-en, one thread each, one seed; docs/real-data.md "When a character LM gets dropout"): on the
# first 313k characters (10 min, ~13 passes) dropout 0.1 gave 2.741 bits/char against 2.857 without (which
# plateaued, its training loss far under its validation loss); on 1.3M characters (30 min, 10-16 passes)
# and on the whole 2.2M (30 min, 6-9 passes; 8 min, ~2) no dropout won, by 0.08-0.41 bits/char — with
# dropout the CPU step was also a third slower (torch's mask; nn/dropout.py's costs a fifth). Passes alone
# do not separate 313k from 1.3M (13 against 12 predicted): the text's size beside the model's weights
# does (0.4 characters per weight against 1.5-2.8). So: dropout on a text with fewer than 1.26 characters
# per weight of the model (below), the weights being the blocks' and the character embedding's
# (`lm_weights`: fortunes-zh's 856k characters, 5,932 distinct, overfitted at 30 min without dropout when
# only the blocks' 786k were counted), from a number of passes of the model without dropout that grows
# with the text's characters per weight: 12 at one character per weight, proportionally fewer on a smaller
# text (`lm_dropout_passes`; a smaller text has fewer characters for each weight to fit, so it is memorised
# in fewer passes). Measured in bf16 on development cuts of fortunes-en (issue 32; docs/real-data.md
# "Passes scaled by the text's size"; 10 min, one thread each, side by side, the rule patched per run,
# bits/char on the suite's test file, 0.1 against none): passes alone did not separate them — the first 850k
# characters (0.735 per weight) at 9.7 passes, 2.355 against 2.390; the first 1.0M (0.864) at 9.4, 2.332
# against 2.299, and at 10.0 a tie; the first 1.3M (1.152) at 10.3 on two threads, 2.265 against 2.226.
# Passes over characters per weight orders all of them: 0.1 won from 13.2 (850k at 9.7) up (850k at 11.7:
# 15.9; 700k, 0.605 per weight, at 13.0-13.2: 21.5-21.8), it tied or lost at 11.6 and under (1.0M: 11.6,
# 10.9; 1.3M: 8.9; fortunes-zh, 0.474 per weight, 4.7 passes in bf16: 9.9, a tie; 5.3 in float32 with the
# paper's block, 0.55 per weight: 9.6, none by 0.083). 12: about the geometric mean of 11.6 and 13.2, not
# tuned. Float32's runs agree: the first 313k (0.4 per weight, the paper's block) at 20 passes, 0.1 won
# (50); the first 1.12M (1.06) at 30 min, 15.9 passes, won (15.0).
# (It was 9 passes whatever the size, from float32 runs: fortunes-zh's 5.3 tied or lost, ~16 overfitted;
# in bf16 9 gave dropout to the 1.0M and 1.3M cuts, where it lost.)
LM_DROPOUT_EPOCHS = 12  # passes at one character per weight (`lm_dropout_passes`)
# 1.26 characters per weight: the geometric mean of 1.06, where dropout won (fortunes-en's first 1.12M
# characters beside LLaMA's block's 1.06M weights, 30 min, one thread: 0.1 2.254 bits/char, none 2.305,
# whose validation loss rose after step 5,400; docs/real-data.md "Dropout at many passes"; a second seed:
# 2.249 against 2.316), and 1.5, where it lost (above), not tuned. (It was 1, between 0.4 and 1.5, before
# 1.06 was measured.) The evaluation text lm-jargon, at 1.13, lost 0.012-0.016 with it over two seeds
# (docs/real-data.md "The dropout size threshold raised"): the ratio does not separate every text.
LM_DROPOUT_TOKENS_PER_WEIGHT = 1.26
SIZE_EVIDENCE = ("fortunes-en, 30 min on one thread: 1.06 characters per weight, 2.254 bits/char with 0.1, 2.305"
                 " without; 1.5, 2.375 with 0.1, 2.293 without; 2.8, 2.333 with 0.1, 2.123 without")
# Many more passes overfit through 0.1 (issue 32: the evaluation text lm-pydoc, 342k characters, 30 min,
# 66 passes, 75 as the rule counts them: its validation loss rose from ~21 min, and it scored above its
# 10 minutes). Chosen on the development text cut to that size (fortunes-en's first 342k characters, one
# thread each, one seed, the suite's fortunes-en test file; docs/real-data.md "Dropout at many passes"):
# at 30 min, 57 passes as the rule counts them, 0.2 gave 2.548 bits/char against 0.1's 2.609 (its own
# test lines 2.361 against 2.376); at 10 min, 18 passes, 0.1 won (2.553 against 2.632; 2.380 against
# 2.500). 32: about the geometric mean of 18 and 57, not tuned. In bf16 (as above): its first 342k, 27.5
# passes, 0.1 2.557 against 0.2's 2.578; its first 200k, 45 passes, 0.2 2.706 against 0.1's 2.859: 32 held.
LM_DROPOUT_STRONG = 0.2
LM_DROPOUT_STRONG_EPOCHS = 32
STRONG_EVIDENCE = ("; fortunes-en's first 342k characters, 30 min, 57 passes: 2.548 bits/char with 0.2,"
                   " 2.609 with 0.1; 10 min, 18 passes: 2.632 with 0.2, 2.553 with 0.1")
LM_BLOCK = 64  # tokens per training window of the small LM (below, in `choose`)
# A small text gives a small LM's budget many passes, which a deeper model spends better: six layers
# instead of four where the six-layer model's predicted passes reach LM_DEPTH_PASSES (its step runs at
# about 4/6 of the four-layer one's rate: 0.64–0.70 in the runs below). Development texts, windows cut afresh,
# 10 min, bf16, one thread each, two runs side by side, seed 0, scored with `eval` on each text's
# document-split test file (docs/real-data.md "Six layers for a small text"), passes of the six-layer
# model at its first tenth: fortunes-en's first 300k 2.541 → 2.528 (19.8 passes), Vim's help 342k
# 2.060 → 2.035 (19.2), fortunes-en's first 500k 2.414 → 2.406 (13.3); its first 700k 2.362 → 2.371
# (8.1) and 1.3M 2.177 → 2.182 (5.1) lost. At lm-pydoc's passes (two threads alone, the way the suite runs
# it): Vim's help 2.082 (46 passes of four layers, dropout 0.2) → 2.042 (25 of six, 0.1; six with 0.2 from the
# start 2.094). The threshold lies between 8 and 13.
LM_LAYERS, LM_DEEP_LAYERS = 4, 6
LM_DEPTH_PASSES = 10
DEPTH_EVIDENCE = ("development texts, 10 min: 6 layers ahead at 13–25 of its passes (Vim's help 342k 2.042"
                  " against 2.082 on two threads, 2.035 against 2.060 on one; fortunes-en 300k 2.528 against"
                  " 2.541, 500k 2.406 against 2.414),"
                  " behind at 8 or fewer (700k 2.371 against 2.362, 1.3M 2.182 against 2.177)")
# An LM keeps characters (issue 32, docs/real-data.md "Subword LMs: a rule chosen on the development texts,
# then the evaluation texts"; 10 min, one thread, two runs side by side, the defaults otherwise; bits per
# character on the suite's test files). Chosen on the development texts: BPE of 1,024 pieces for a text in
# an alphabet (fortunes-en: 2.176 against 2.221 with characters, 2.189 with 2,048 pieces). On the
# evaluation texts that rule won one and lost two (wordnet 1.935 against 2.068 with characters; pydoc
# 1.830 against 1.808; jargon 2.201 against 2.106), so it was not adopted: `--tokenizer bpe --vocab-size
# 1024` gives it. (fortunes-zh: 8,000 pieces 3.457 and 3.459 in two runs, 4,000 3.500, characters 3.535
# with the dropout 0.1 the recipe chose, 3.452 without.)
SUBWORDS = ("bpe", "unigram")
MODEL_FIELDS = frozenset(f.name for f in dataclasses.fields(ModelConfig))
LM_SAMPLE_CHARACTERS = 300_000  # the text a subword LM's token count is estimated from (`lm_tokens`)


@dataclass
class Recipe:
    """Settings for TrainConfig and ModelConfig, and one reason per choice."""

    train: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    passes: float | None = None  # over the training data in the time budget (None: no budget)
    tokens_per_minute: float | None = None  # the rate the passes were counted from (the dropout rule's)

    flags: list[tuple[str, ...]] = field(default_factory=list)  # the command-line flags each reason is about

    def note(self, flags: tuple[str, ...], reason: str) -> None:
        """A choice and why; `flags` (names without "--") are the options that replace it."""
        self.reasons.append(reason)
        self.flags.append(tuple("--" + f.replace("_", "-") for f in flags))

    def block(self, given: Collection[str] | Mapping[str, str] = frozenset()) -> str:
        """The 'what was chosen and why' lines printed before training; a choice that a flag given on the
        command line replaces says so on its own line (it is not what runs). `given`: the flags' names
        ("--bf16"), or each name with the form that was typed ("--bf16": "--no-bf16")."""
        typed = dict(given) if isinstance(given, Mapping) else {f: f for f in given}
        lines = ["recipe auto (use --recipe paper for the 2017 settings; any flag overrides):"]
        for reason, flags in zip(self.reasons, self.flags):
            yours = [typed[f] for f in sorted(set(flags) & set(typed))]
            lines.append(f"  {reason}" + (f"  [replaced by your {', '.join(yours)}]" if yours else ""))
        if typed:
            lines.append(f"  given on the command line, kept: {', '.join(typed[f] for f in sorted(typed))}")
        return "\n".join(lines)


def choose_tokenizer(texts: list[str]) -> tuple[str, str]:
    """(kind, why) for one side of the data."""
    chars = "".join(texts)
    visible = re.sub(r"\s", "", chars)
    cjk = len(_CJK.findall(visible)) / max(1, len(visible))
    if cjk > 0.3:
        return "char", f"{100 * cjk:.0f}% CJK characters: one token per character"
    words = [w for t in texts for w in t.split()]
    types = len(set(words))
    if len(words) <= 1.5 * len(texts):
        return "char", f"about one word per line ({len(words) / max(1, len(texts)):.1f}): spelled by characters"
    if types <= CLOSED_VOCAB:
        return "word", f"closed vocabulary of {types} words (≤ {CLOSED_VOCAB}): one token per word"
    return "bpe", f"open vocabulary ({types} word types): BPE subwords"


def bpe_size(texts: list[str]) -> int:
    """A BPE vocabulary of about a quarter of the word types, between 1,000 and 8,000."""
    types = len({w for t in texts for w in t.split()})
    return int(min(8000, max(1000, round(types / 4, -2))))


def lm_tokens(texts: list[str], kind: str, vocab_size: int | None = None) -> tuple[int, int]:
    """(training tokens, embedding rows) of an LM's text in `kind`'s tokens, each line's <bos> and <eos>
    counted. Characters are counted exactly; other kinds from a tokenizer fitted on the first
    LM_SAMPLE_CHARACTERS of the text and the tokens it cuts them into, scaled to the whole text (fitting
    on all of a 2M-character text would take seconds before the run fits it again)."""
    from ..tokenize import SPECIALS, build_tokenizer

    ends = 2 * len(texts)
    characters = sum(len(t) for t in texts)
    if kind == "char":
        return characters + ends, len({c for t in texts for c in t}) + len(SPECIALS)
    sample, n = [], 0
    for t in texts:
        if n >= LM_SAMPLE_CHARACTERS:
            break
        sample.append(t)
        n += len(t)
    tok = build_tokenizer(kind, sample, vocab_size=vocab_size)
    pieces = sum(len(tok.encode(t)) for t in sample)
    return round(pieces * characters / max(n, 1)) + ends, tok.vocab_size


# An LM's block in LLaMA's form: RMSNorm, a SwiGLU FFN (three d_model x d_ff matrices: 1.5x the FFN's weights)
# and rotary positions, which Hugging Face's LLaMA, CTranslate2 and ONNX take with equal outputs (the ReLU
# block with rotary positions fits no export family). Development texts, 10 min, one thread, one seed each,
# two runs side by side, scored with `eval` on the suite's test text (docs/real-data.md, "An LM in LLaMA's
# form"): fortunes-en 2.210 bits/char with LayerNorm/ReLU/sinusoids, 2.189 with rotary positions alone, 2.161
# in this form (d_ff 344, LLaMA's 2/3 rule for the same weights: 2.162); fortunes-zh 3.482, 3.410, 3.407 (3.427).
LLAMA_FORM = dict(norm="rmsnorm", activation="swiglu", pe="rope")
LLAMA_WHY = ("LLaMA's block: RMSNorm, a SwiGLU FFN and rotary positions (10 min, one thread: fortunes-en 2.161"
             " bits/char against 2.210 with LayerNorm, ReLU and sinusoids; fortunes-zh 3.407 against 3.482;"
             " exports as LLaMA; --norm layernorm for the paper's block, Pre-LN)")
# A translator keeps the paper's block and sinusoids, which export (as Pegasus) to Hugging Face, CTranslate2 and
# ONNX. LLaMA's block scores higher on G2P (docs/real-data.md, "G2P in LLaMA's block"), but no Hugging Face
# family holds an encoder-decoder with rotary positions (Marian and Pegasus take sinusoids, BART learned
# positions, T5 its bias), and our CTranslate2 and ONNX exports go through the Hugging Face model.
TRANSLATOR_BLOCK_WHY = ("the paper's block with sinusoidal positions: it exports (as Pegasus) to Hugging Face,"
                        " CTranslate2 and ONNX; LLaMA's block (--pe rope --norm rmsnorm --activation swiglu) scored"
                        " higher on G2P (10 min, one thread, side by side: 68.5% exact match against 66.0%; 30 min, two"
                        " threads: 74.1%, the default's earlier runs 73.2-73.5%)"
                        " but exports nowhere: no Hugging Face family holds an encoder-decoder with rotary positions")


def model_size(tokens: int, minutes: float | None, lm: bool) -> tuple[dict[str, Any], float, str]:
    """(model fields, peak rate, why) from training tokens and the time budget."""
    budget = "no time limit" if minutes is None else f"{minutes:g} min"
    layers = LM_LAYERS if lm else 3
    if tokens < 50_000:  # tiny data: a small model, or it memorises
        return (dict(d_model=64, n_heads=4, n_layers=2, d_ff=256, dropout=0.1), 1e-3,
                f"{tokens:,} training tokens (< 50k) → d_model 64, 2 layers")
    if tokens > 5_000_000 and (minutes is None or minutes >= 60):
        return (dict(d_model=256, n_heads=4, n_layers=layers + 1, d_ff=1024, dropout=0.1), 6e-4,
                f"{tokens:,} training tokens and {budget} → d_model 256, {layers + 1} layers")
    return (dict(d_model=128, n_heads=4, n_layers=layers, d_ff=512, dropout=0.1), 1e-3,
            f"{tokens:,} training tokens and {budget} → d_model 128, {layers} layers"
            " (256 wide only past 5M tokens and an hour: 2 CPU cores see a few million tokens in 30 min)")


def block_weights(fields: dict[str, Any]) -> int:
    """The weight matrices of the model's blocks: W_Q, W_K, W_V, W_O (d_model² each) and the FFN's
    W_1, W_2 (d_model · d_ff each; a gated FFN's gate is a third) per layer."""
    glu = fields.get("activation") in GATED
    return fields["n_layers"] * sum(layer_weights(fields["d_model"], fields["d_ff"], glu=glu))


def lm_weights(fields: dict[str, Any], rows: int) -> int:
    """What an LM can memorise with: its blocks' weights and its embedding table, one row of d_model per
    token of its vocabulary (tied with the output layer, so counted once). For characters, negligible in
    an alphabet (fortunes-en: 112 characters, 14k weights against the blocks' 786k), not for Chinese
    (the training split of fortunes-zh: 5,932 characters, 760k); 131k for 1,024 subwords."""
    return block_weights(fields) + rows * fields["d_model"]


def lm_dropout_passes(characters: int, weights: int) -> float:
    """The passes from which an LM's first tenth gives it dropout 0.1: LM_DROPOUT_EPOCHS at one character per
    weight, proportionally fewer on a smaller text (above), never under one pass (a first pass sees each
    character once: nothing is seen twice to memorise). One decimal, as the recipe prints it."""
    return round(max(1.0, LM_DROPOUT_EPOCHS * characters / max(weights, 1)), 1)


def lm_depth(passes: float, minutes: float) -> tuple[int, str]:
    """(layers, why) of the small character LM from the passes its four-layer model makes in the budget: six
    where the six-layer model, its step about 4/6 as fast, would still make LM_DEPTH_PASSES (above)."""
    deeper = passes * LM_LAYERS / LM_DEEP_LAYERS
    layers, other, sign = ((LM_DEEP_LAYERS, LM_LAYERS, "≥") if deeper >= LM_DEPTH_PASSES
                           else (LM_LAYERS, LM_DEEP_LAYERS, "<"))
    return layers, (f"{layers} layers, not {other}: the {LM_DEEP_LAYERS}-layer model would make about {deeper:.1f}"
                    f" passes in {minutes:g} min ({sign} {LM_DEPTH_PASSES}; {DEPTH_EVIDENCE}; --layers to choose)")


def choose(task: str, raw: dict[str, list], max_minutes: float | None,
           max_steps: int | None = None, tokens_per_minute: float | None = None,
           device: str = "cpu", given: dict[str, Any] | None = None) -> Recipe:
    """The auto recipe for a user's data (task 'tsv' or 'lm'), from its training split.

    With a time budget, the passes over the data it allows come from `tokens_per_minute`, or, where
    that is None (the CLI), from a few seconds of training steps of the chosen model on this
    machine (`measure_tokens_per_minute`). `given`: the settings the user fixed on the command line
    (TrainConfig and ModelConfig fields); the passes are counted and the probe is run as the run will
    train: in the user's tokenizer's tokens (an LM) and with their threads, precision, batch, window and
    model fields where given."""
    r = Recipe()
    given = given or {}
    tokenizer, vocab_size = given.get("tokenizer"), given.get("vocab_size")
    train = raw["train"]
    lm = task == "lm"
    characters, unit = 0, "tokens"  # an LM's text in characters; what its windows hold
    vocab = 256  # the output layer's rows in the speed probe (a translator's sizes are not known yet)
    if lm:
        # characters: no unknown word at test time, bits per character read directly, and subwords did
        # not win on held-out texts (above SUBWORDS)
        r.note(("tokenizer",), "tokenizer char: a character LM (no unseen words; loss is bits per character;"
                               " BPE of 1,024 pieces, at 10 min on four English texts, won on two and lost on"
                               " two: --tokenizer bpe --vocab-size 1024 to use it)")
        kind, size = (tokenizer or "char").partition("/")[0], None  # an LM reads one side
        if kind in SUBWORDS:
            from .tasks import DEFAULT_VOCAB  # what the run fits when the user gives no --vocab-size
            size = vocab_size or DEFAULT_VOCAB[kind]
        kinds = (kind, kind)
        characters = sum(len(t) + 2 for t in train)
        tokens, rows = lm_tokens(train, kind, size)
        # the probe's output layer has the vocabulary's rows: fortunes-zh's 5,936 characters cost a
        # d_model-128 LM more than its blocks; probed with 256 it predicted 626k tokens a minute and 7
        # passes in 10 min where the run made 365k and ~4 (dropout 0.1 then, 3.535 bits/char; none 3.452)
        vocab = rows
        unit = "characters" if kind == "char" else f"{kind} tokens"
    else:
        src, tgt = [s for s, _ in train], [t for _, t in train]
        (ks, why_s), (kt, why_t) = choose_tokenizer(src), choose_tokenizer(tgt)
        kinds = (ks, kt)
        r.note(("tokenizer",), f"tokenizer {ks}/{kt}: source {why_s}; target {why_t}")
        bpe_sides = [side for side, k in ((src, ks), (tgt, kt)) if k == "bpe"]
        if bpe_sides:
            r.train["vocab_size"] = bpe_size([t for side in bpe_sides for t in side])
            r.note(("vocab_size",), f"BPE vocabulary {r.train['vocab_size']} (about a quarter of the word types)")
        tokens = sum(_approx_tokens(s, ks) + _approx_tokens(t, kt) for s, t in train)
    r.train["tokenizer"] = kinds[0] if kinds[0] == kinds[1] else f"{kinds[0]}/{kinds[1]}"
    fields, peak, why = model_size(tokens, max_minutes, lm)
    small_lm = lm and fields["d_model"] <= 128  # trained on more, smaller steps (below)
    r.model.update(fields, norm_position="pre")
    model_note, model_why = len(r.reasons), why  # rewritten below where the budget makes the LM deeper
    r.note(("d_model", "heads", "layers", "d_ff"), f"model: {why}")
    if lm:  # taken whole or not at all: a part of it beside the paper's block fits no export family
        mine = sorted(k for k in LLAMA_FORM if k in given)
        if not mine:
            r.model.update(LLAMA_FORM)
            r.note(tuple(LLAMA_FORM), LLAMA_WHY)
        else:
            r.note((), f"the paper's block, not LLaMA's (RMSNorm, SwiGLU, rotary positions): --{mine[0]} was given,"
                       " and LLaMA's block is taken whole")
    bf16 = None
    if device == "cpu":  # measured on CPUs only; a GPU run keeps float32 unless --bf16
        bf16, why_bf16 = choose_bf16(lm=lm, d_model=fields["d_model"])
    threads = None
    if fields["d_model"] <= 128:
        from .threads import small_model_threads  # (torch: imported only once the recipe runs)
        threads, why = small_model_threads()
        r.train.update(threads=threads, threads_auto=True)
        r.note(("threads",), why + "; re-checked at each evaluation (train/threads.py)")
    # the model the run will train: the recipe's fields, and every model field the user gave (a position
    # encoding, the attention path, an activation... change a step's cost)
    run = {**r.model, **{k: v for k, v in given.items() if k in MODEL_FIELDS}}
    if "dropout" not in given:
        # The dropout rule asks how many passes a model *without* dropout would make (enough to overfit?),
        # and dropout's masks cost a CPU step a third of its speed: timed with dropout 0.1, the probe put
        # fortunes-en's 10 minutes at 615k tokens a minute where the run without dropout made 947k
        # (docs/real-data.md, "What the speed probe timed"). So the probe times the model without it,
        # and a run the rule then gives dropout is timed again, for the passes it will make.
        run["dropout"] = 0.0
    if max_minutes is not None:
        probe, per_pair = None, None
        if tokens_per_minute is None:  # measured on this machine, now: a constant is some other machine's
            lengths = _mean_lengths(train, kinds, lm, given.get("block_size", LM_BLOCK if small_lm else 128))
            in_bf16 = bool(given.get("bf16", bf16))
            batch, probe_threads = given.get("batch_size", 32 if small_lm else 64), given.get("threads", threads)
            smoothing = given.get("label_smoothing", 0.0 if lm else 0.1)  # the CLI's 0.1; an LM's is 0 (below)
            clip = given.get("clip_norm", 1.0)  # the CLI's default; None: --clip-norm 0, no clip

            def probe(model: dict[str, Any]) -> float:
                return measure_tokens_per_minute(model, lm, lengths, batch, probe_threads, bf16=in_bf16,
                                                 vocab=vocab, label_smoothing=smoothing, clip_norm=clip,
                                                 device=device)
            tokens_per_minute = probe(run)
            source = (f"{tokens_per_minute:,.0f} tokens a minute measured in {PROBE_SECONDS:g} s of training steps"
                      f" of this model here{' in bf16' if in_bf16 else ''}")
            if not lm:
                # a probed pair holds <bos>/<eos> (pinyin: 4 + 4 tokens), the text's count does not (3.05 +
                # 3.05): the passes are counted in pairs, or they come out a third too many
                per_pair = sum(lengths)
                source += f", {tokens_per_minute / per_pair:,.0f} pairs"
        else:
            source = f"{tokens_per_minute:,.0f} tokens a minute"

        def passes_at(rate: float) -> float:
            if per_pair:
                return max_minutes * rate / per_pair / max(len(train), 1)
            return max_minutes * rate / max(tokens, 1)
        epochs = passes_at(tokens_per_minute)
        if small_lm and run["n_layers"] == LM_LAYERS and "n_layers" not in given:
            layers, depth_why = lm_depth(epochs, max_minutes)
            if layers != LM_LAYERS:
                r.model["n_layers"] = run["n_layers"] = layers
                tokens_per_minute, epochs = tokens_per_minute * LM_LAYERS / layers, epochs * LM_LAYERS / layers
                source += f", × {LM_LAYERS}/{layers} for {layers} layers"
            sized = model_why.replace(f"{LM_LAYERS} layers", f"{layers} layers", 1)
            r.reasons[model_note] = f"model: {sized}; {depth_why}"
        r.passes, r.tokens_per_minute = epochs, tokens_per_minute
        passes = _passes(epochs, tokens if lm and unit != "characters" else None, unit)
        passes += " over the data" + (" without dropout" if run["dropout"] == 0.0 else "")
        weights = lm_weights(run, rows) if lm else 0
        threshold = lm_dropout_passes(characters, weights) if lm else DROPOUT_EPOCHS
        measured = ("(measured, 8 min on one thread: CMUdict exact match 0.47 with 0.1, 0.56-0.59 without;"
                    " fortunes-en 2.99 vs 2.58 bits/char)")
        overfits = ("" if not lm else f" on a text with under {LM_DROPOUT_TOKENS_PER_WEIGHT:g} characters for"
                    f" each of the model's {weights:,} weights; {LM_DROPOUT_EPOCHS} passes at one character per"
                    f" weight, fewer on a smaller text: this one has {characters / max(weights, 1):.2f} (fortunes-en"
                    " in bf16, 10 min: 0.735 characters per weight, 9.7 passes, 2.355 bits/char with 0.1, 2.390"
                    " without; 0.864, 9.4 passes, 2.332 with, 2.299 without; fortunes-zh, 0.55, 5 passes in"
                    " float32 with the paper's block: 3.452 without and 3.535 with)")
        if lm and characters >= LM_DROPOUT_TOKENS_PER_WEIGHT * weights:
            r.model["dropout"] = 0.0
            r.note(("dropout",),
                   f"no dropout: the text ({characters:,} characters) has at least"
                   f" {LM_DROPOUT_TOKENS_PER_WEIGHT:g} characters for each of the model's {weights:,} weights, too"
                   f" much for them to memorise in a CPU budget ({max_minutes:g} min is {passes} at {source};"
                   f" {SIZE_EVIDENCE})")
        elif probe is not None and "dropout" not in given:
            # a 1.5-s probe reads the machine of that second (the same G2P command probed 1.37x and 0.81x
            # its run's rate): the run decides from its own first tenth (dropout_rule.py), this predicts
            p, r.model["dropout"] = r.model["dropout"], 0.0
            r.train.update(dropout_auto=p, dropout_passes=threshold)
            guess = f"dropout {p:g}" if epochs >= threshold else "none"
            strong = ""
            if lm:
                r.train.update(dropout_strong=LM_DROPOUT_STRONG, dropout_strong_passes=LM_DROPOUT_STRONG_EPOCHS)
                strong = (f", {LM_DROPOUT_STRONG:g} if ≥ {LM_DROPOUT_STRONG_EPOCHS} (0.1 does not hold so many"
                          f"{STRONG_EVIDENCE})")
                if epochs >= LM_DROPOUT_STRONG_EPOCHS:
                    guess = f"dropout {LM_DROPOUT_STRONG:g}"
            r.note(("dropout",),
                   f"dropout decided by the run from its own speed: none for its first tenth"
                   f" ({max_minutes * DECIDE_SHARE:g} min), then {p:g} if the passes its steps make give"
                   f" ≥ {threshold:g} in {max_minutes:g} min (enough to overfit without it{overfits or TSV_EVIDENCE})"
                   f"{strong}, else none (counted again at each tenth to half the budget: raised, never lowered);"
                   f" the start-up probe predicts {passes} at {source}: {guess}")
        elif epochs < threshold:
            r.model["dropout"] = 0.0
            r.note(("dropout",),
                   f"no dropout: {max_minutes:g} min is {passes} at {source}"
                   f" (< {threshold:g}); dropout regularises long runs and slows a short one {measured}")
        else:
            if lm and "dropout" not in given and epochs >= LM_DROPOUT_STRONG_EPOCHS:
                r.model["dropout"] = LM_DROPOUT_STRONG
                overfits += f"; ≥ {LM_DROPOUT_STRONG_EPOCHS}: 0.1 does not hold so many{STRONG_EVIDENCE}"
            r.note(("dropout",),
                   f"dropout {r.model['dropout']:g}: {max_minutes:g} min is {passes} at {source}"
                   f" (≥ {threshold:g}), enough to overfit without it{overfits}")
    r.note(("norm_position",), "Pre-LN (stable on real data without a tuned warmup; Post-LN is --recipe paper)")
    if not lm:
        r.note(tuple(LLAMA_FORM), TRANSLATOR_BLOCK_WHY)
    warmup = 400
    if small_lm:
        # A character LM step holds batch x block tokens (64 x 128 = 8k by default): a 30-minute CPU
        # budget gives only a few hundred such steps, most of them spent in a 400-step warmup.
        # Measured on fortunes-en, same 3 minutes and ~390k tokens: batch 64 / warmup 400 / 1e-3 was at
        # 3.98 nats; batch 16 / warmup 100 / 2e-3 at 3.02. Smaller steps, more of them.
        # Then windows of 64 (issue 32, development text fortunes-en, 5 min, one thread, no label
        # smoothing, one seed each): 16 x 128 at 2e-3 2.639 bits/char, at 4e-3 2.576, at 8e-3 2.624;
        # 32 x 64 at 2e-3 2.535, at 4e-3 2.540; 16 x 64 at 4e-3 2.557; 64 x 32 at 4e-3 2.519. Same
        # tokens a step, shorter windows: attention costs less per token (1,455 against 1,227 steps in
        # the same 5 min) and a model this size reads little past a few dozen characters. 64 rather
        # than 32: within 0.02 bits/char, and a longer view of the text.
        r.train["batch_size"], r.train["block_size"] = 32, LM_BLOCK
        warmup, peak = 100, 2e-3
        r.note(("batch_size", "block_size"),
               f"batch 32 windows of {LM_BLOCK} {unit} (more, smaller steps: a CPU budget sees few"
               f" 8k-token steps; fortunes-en, 5 min: 2.535 bits/char against 2.639 for 16 x 128)")
    if lm:
        # The paper's ε_ls = 0.1 (§5.4) trains toward a target that gives every character ~0.1/V, a
        # floor under the very loss an LM is scored on (bits per character). Measured on the
        # development text fortunes-en (5 min, one thread, defaults otherwise): 2.748 bits/char with
        # 0.1, 2.639 with 0.
        r.train["label_smoothing"] = 0.0
        r.note(("label_smoothing",),
               "no label smoothing: an LM is scored on its cross-entropy, which ε_ls = 0.1 puts a floor"
               " under (fortunes-en, 5 min: 2.748 bits/char with 0.1, 2.639 without)")
    if max_steps is not None:
        warmup = max(1, min(warmup, max_steps // 10))  # a short run warms up a tenth
    r.train.update(schedule="wsd", lr=peak, warmup=warmup, patience=10, recipe="auto")
    if bf16 is not None:
        r.train["bf16"] = bf16
        r.note(("bf16",), why_bf16)
    r.note(("schedule", "lr", "warmup"),
           f"AdamW, warmup {warmup} steps to {peak:g}, held there, then a linear decay to 0 over the last"
           f" fifth of the budget, or from the point where 10 evaluations in a row find neither a lower"
           f" valid loss nor a better score and average no lower than the 10 before, over a quarter of"
           f" the time spent, and the run ends there"
           f" (wsd; the paper's noam would peak at d_model^-0.5·warmup^-0.5 and decay from the start)")
    held = len(raw.get("valid", []))
    runs = (" in runs of consecutive lines, the rest trained in the file's order, cut into windows afresh each"
            " epoch" if lm else "")
    r.note((), f"held out {held:,} {'lines' if lm else 'pairs'} for validation and {len(raw.get('test', [])):,}"
               f" for test{runs}; best model in best/ ("
               + ("the lowest valid loss)" if lm else "by exact match: the last model unless an earlier evaluation"
                  " is significantly better on the same held-out pairs, train/selection.py)"))
    return r


def choose_bf16(native: bool | None = None, lm: bool = False, d_model: int = 128,
                amx: bool | None = None) -> tuple[bool, str]:
    """(bf16 autocast for the training step, why), from whether this CPU multiplies bf16 natively, on
    which units, and what that was measured to buy for this kind of model.

    Measured with the trainer's own steps (bench/train_step.py; one thread, float32 and bf16 chunks in
    turn from one seed), tokens/s of bf16 over float32, since attention trains in float32 under autocast
    (nn/attention.py `_sdpa`: torch's bf16 attention backward had held the bf16 step back):
    - an AVX512_BF16 EPYC (no AMX): translators at d_model 128 1.25–1.34 (G2P, pinyin, kana; 1.14 for
      pinyin before), the character LM 1.44 (1.05 before; 1.53 with nn/fused.cpp's bf16 SwiGLU and
      rotation); at d_model 256 the pinyin translator 1.51, the character LM 1.59–1.65 (1.38 before);
    - an AMX Xeon, before that change (no AMX machine since): at d_model 128 slower, translators
      0.79–0.91 and the character LM 0.78–0.81; at d_model 256 the pinyin translator 1.20, the LM 1.62
      (docs/real-data.md, "Training step speed" and "bf16 attention in float32").
    So: bf16 from d_model 256 up; at 128 on a CPU without AMX (translators and the LM). The training loss
    after 120 steps was the same within 0.005 nats (its step-to-step noise: 0.05–0.5). The d_model-128 LM
    took it last (fortunes-en, 10 min, one thread each, side by side: bf16 3,987 steps and 2.136 bits/char,
    float32 2,396 and 2.208), once its dropout rule's pass thresholds (then 9 passes;
    LM_DROPOUT_STRONG_EPOCHS, 32), measured in float32, were measured again in bf16 on the development
    texts: the faster step counts more passes, and had carried two evaluation texts over them
    (docs/real-data.md, "The LM's dropout thresholds in bf16"). Both held; more bf16 pairs then scaled the
    first with the text's characters per weight ("Passes scaled by the text's size"). Decided from the CPU, not from a
    timing probe at start-up: the start-up probe's random fixed-length batches put bf16 0.1–0.25 higher than
    the trainer's own batches did on the AMX Xeon (G2P 1.11–1.16 against 0.91), and on a shared machine a
    probe would make one command train in a different precision from one run to the next. Without native
    bf16, autocast emulates it: slower."""
    if native is None:
        from ..nn.routes import onednn_bf16
        native = onednn_bf16()
    if not native:
        return False, "float32 (this CPU has no native bf16, AVX512_BF16 or AMX: emulated bf16 would be slower)"
    if d_model > 128:
        return True, (f"bf16 autocast (native bf16 on this CPU; at d_model {d_model} the trainer's step measured"
                      " 1.51–1.65× float32's tokens/s on an AVX512_BF16 EPYC, 1.20–1.62× on an AMX Xeon, the"
                      " same loss; --no-bf16 for float32)")
    if amx is None:
        from ..nn.routes import amx as has_amx
        amx = has_amx()
    if amx:
        kind = ("character LM: 0.78–0.81×" if lm else "translator: 0.79–0.91×")
        return False, (f"float32 (bf16 autocast measured slower for a d_model-128 {kind} float32's tokens/s on an"
                       " AMX Xeon; --bf16 to use it)")
    if lm:
        return True, ("bf16 autocast (native bf16 on this CPU, no AMX: the d_model-128 character LM's step measured"
                      " 1.53× float32's tokens/s on an AVX512_BF16 EPYC; fortunes-en, 10 min: 2.136 bits/char against"
                      " 2.208; the dropout rule's pass thresholds measured in bf16; --no-bf16 for float32)")
    return True, ("bf16 autocast (native bf16 on this CPU, no AMX: at d_model 128 the trainer's step measured"
                  " 1.25–1.34× float32's tokens/s for translators on an AVX512_BF16 EPYC, the same loss; --no-bf16"
                  " for float32)")


def _mean_lengths(train: list, kinds: tuple[str, str], lm: bool, block: int = 128) -> tuple[int, int]:
    """(source, target) tokens of a typical example (an LM: one training window, as batched)."""
    if lm:
        return 0, block
    sample = train[:2000]
    src = sum(_approx_tokens(s, kinds[0]) for s, _ in sample) / max(len(sample), 1)
    tgt = sum(_approx_tokens(t, kinds[1]) for _, t in sample) / max(len(sample), 1)
    return max(1, round(src)) + 1, max(1, round(tgt)) + 1  # + <eos> / <bos>


def _passes(epochs: float, tokens: int | None, unit: str) -> str:
    """'about 7 passes', with the token count where the passes are not over characters or pairs."""
    words = f"about {epochs:.0f} pass{'' if round(epochs) == 1 else 'es'}"
    return words + (f" (~{tokens:,} {unit})" if tokens is not None else "")


def _approx_tokens(text: str, kind: str) -> int:
    if kind == "char":
        return len(text)
    n = len(text.split())
    return n if kind == "word" else int(1.3 * n)  # BPE: about 1.3 pieces per word
