"""glassformer model -> the Hugging Face family that computes the same function (the inverse of `from_hf`).

`to_hf(model)` picks the family from the config (`plan`): the first of the arch's families, closest
first, that nothing in the config rules out. It rewrites the model into the equivalent one that
family holds (rewrites.py: interleaved sinusoids through a permuted d_model basis, sinusoids as a
learned table, the embedding scale folded into the table, one vocabulary size), and the family's
`to_hf` in its own file (hf_bert.py, hf_gpt2.py, hf_llama.py, hf_openai_gpt.py, hf_marian.py,
hf_pegasus.py, hf_bart.py, hf_t5.py, beside each `from_hf`) copies the weights back into the
`transformers` layout. A configuration no family can express stops with one line that names, per
family tried, the field that rules it out.

The families our training lands in (train/tasks.py, train/recipe.py): --task zh-en and --recipe
paper translators (Post-LN, interleaved sinusoids, × sqrt(d_model), separate vocabularies) ->
Marian; --task tsv with the auto recipe (Pre-LN) -> Pegasus; --task lm auto (Pre-LN) -> GPT-2;
--task lm --recipe paper (Post-LN decoder) -> OpenAI GPT.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from torch import nn

from ..config import GATED, ModelConfig
from ..errors import InputError
from .rewrites import fold_embed_scale, half_split_basis, learned_table, one_vocab_size

ABSOLUTE = ("sinusoidal", "sinusoidal_half", "learned")


@dataclass
class Export:
    """What `plan` decided: the family, the equivalent model it holds, and the rewrites made."""

    family: str
    model: nn.Module
    notes: list[str] = field(default_factory=list)
    real_tgt_vocab: int | None = None  # logits past this index are padding of the target vocabulary


def _blockers(cfg: ModelConfig, family: str) -> list[str]:
    """Fields (with their value) that rule `family` out; empty: the family computes this model."""
    out: list[str] = []

    def need(ok: bool, text: str) -> None:
        if not ok:
            out.append(text)

    need(cfg.residual, "residual=False")
    need(cfg.pe_combine == "add", f"pe_combine={cfg.pe_combine!r}")
    gated = cfg.activation in GATED
    equal_heads = cfg.head_dim * cfg.n_heads == cfg.d_model
    arch = {"bert": "encoder", "gpt2": "decoder", "openai-gpt": "decoder", "llama": "decoder",
            "marian": "encoder-decoder", "bart": "encoder-decoder", "pegasus": "encoder-decoder",
            "t5": "encoder-decoder"}[family]
    need(cfg.arch == arch, f"arch={cfg.arch!r}")
    if out:
        return out
    if family in ("bert", "gpt2", "openai-gpt", "marian", "bart", "pegasus"):
        need(cfg.norm == "layernorm", f"norm={cfg.norm!r}")
        need(not gated, f"activation={cfg.activation!r}")
        need(equal_heads, f"d_k={cfg.head_dim} (needs d_model/n_heads={cfg.d_model // cfg.n_heads})")
        need(cfg.scale_scores or family == "gpt2", "scale_scores=False")
        post = family in ("bert", "openai-gpt", "marian", "bart")
        need(cfg.norm_position == ("post" if post else "pre"), f"norm_position={cfg.norm_position!r}")
        need(cfg.use_final_norm == (not post), f"final_norm={cfg.use_final_norm}")
        need(cfg.embed_norm == (family in ("bert", "bart")), f"embed_norm={cfg.embed_norm}")
        if family in ("marian", "pegasus"):
            need(cfg.pe in ("sinusoidal", "sinusoidal_half") and cfg.pe_base == 10000.0,
                 f"pe={cfg.pe!r}" + ("" if cfg.pe_base == 10000.0 else f", pe_base={cfg.pe_base}"))
        else:
            need(cfg.pe in ABSOLUTE, f"pe={cfg.pe!r}")
        if family in ("marian", "bart", "pegasus"):
            need(cfg.norm_eps == 1e-5, f"norm_eps={cfg.norm_eps} (torch.nn.LayerNorm's 1e-5)")
        if family == "openai-gpt":
            need(cfg.d_ff == 4 * cfg.d_model, f"d_ff={cfg.d_ff} (OpenAI GPT has 4·d_model={4 * cfg.d_model})")
            need(cfg.activation in ("relu", "gelu_tanh", "silu"), f"activation={cfg.activation!r}")
        if family in ("bert", "gpt2", "openai-gpt"):
            need(not cfg.head_bias, "head_bias=True")
    elif family == "llama":
        need(cfg.norm == "rmsnorm", f"norm={cfg.norm!r}")
        need(gated, f"activation={cfg.activation!r} (LLaMA's MLP is gated)")
        need(cfg.norm_position == "pre" and cfg.use_final_norm, f"norm_position={cfg.norm_position!r}")
        need(cfg.pe == "rope", f"pe={cfg.pe!r}")
        need(cfg.scale_scores, "scale_scores=False")
        need(not cfg.embed_norm, "embed_norm=True")
        need(not cfg.head_bias, "head_bias=True")
    elif family == "t5":
        need(cfg.norm == "rmsnorm", f"norm={cfg.norm!r}")
        need(cfg.norm_position == "pre" and cfg.use_final_norm, f"norm_position={cfg.norm_position!r}")
        need(cfg.pe == "relative", f"pe={cfg.pe!r}")
        need(not cfg.scale_scores, "scale_scores=True (T5 does not divide by sqrt(d_k))")
        need(not cfg.attn_bias and not cfg.ffn_bias, "attn_bias/ffn_bias=True (T5 has no biases)")
        need(not cfg.embed_norm and not cfg.head_bias, "embed_norm/head_bias=True")
        need(not cfg.embed_scale, "embed_scale=True")
        need(cfg.tie_embeddings, "tie_embeddings=False (transformers 5 always ties T5's head)")
        need(cfg.tgt_vocab_size in (None, cfg.vocab_size), f"tgt_vocab_size={cfg.tgt_vocab_size}")
    return out


# closest first: where two could fit, the first is taken (and printed by `glassformer export`)
FAMILIES = {"encoder": ("bert",), "decoder": ("gpt2", "llama", "openai-gpt"),
            "encoder-decoder": ("marian", "pegasus", "bart", "t5")}
HF_NAMES = {"bert": "BERT", "gpt2": "GPT-2", "openai-gpt": "OpenAI GPT", "llama": "LLaMA",
            "marian": "Marian", "pegasus": "Pegasus", "bart": "BART", "t5": "T5"}


def _check_weights(model) -> None:
    bad = next((k for k, t in model.state_dict().items() if t.is_floating_point() and not t.isfinite().all()), None)
    if bad is not None:
        raise InputError(f"cannot export: {bad} holds NaN or infinite values; export a checkpoint with finite "
                         "weights (best/ or an earlier one)")


def plan(model) -> Export:
    """The family for `model` and the equivalent model in the form that family holds."""
    cfg = model.config
    _check_weights(model)
    if cfg.norm == "batchnorm" or cfg.norm == "none":
        families_tried = ", ".join(HF_NAMES[f] for f in FAMILIES[cfg.arch])
        raise InputError(f"cannot export: norm={cfg.norm!r} is in no Hugging Face family (tried {families_tried}); "
                         "train with --norm layernorm or rmsnorm")
    reasons = {}
    for family in FAMILIES[cfg.arch]:
        blockers = _blockers(cfg, family)
        if not blockers:
            return _prepare(model, family)
        reasons[family] = blockers[0]
    tried = "; ".join(f"{HF_NAMES[f]}: {why}" for f, why in reasons.items())
    auto = "" if cfg.arch == "encoder" else " (`train --recipe auto`'s translators and LMs, without those flags, do)"
    raise InputError(f"cannot export this {cfg.arch}: no Hugging Face family computes it ({tried}); train it"
                     f" with fields one of them takes{auto}")


def _prepare(model, family: str) -> Export:
    cfg = model.config
    ex = Export(family, model)
    if family in ("marian", "pegasus") and cfg.pe == "sinusoidal":
        ex.model = half_split_basis(ex.model)
        ex.notes.append("interleaved sinusoids written as the half-split table: d_model basis permuted by σ")
    if family in ("bert", "gpt2", "openai-gpt", "bart") and cfg.pe != "learned":
        ex.model = learned_table(ex.model, cfg.max_len)
        ex.notes.append(f"sinusoid table stored as {cfg.max_len} learned positions (max_len)")
    if cfg.embed_scale and family not in ("marian", "pegasus", "bart"):
        ex.model = fold_embed_scale(ex.model)
        ex.notes.append("× sqrt(d_model) folded into the token table (head untied to keep the unscaled one)")
    c = ex.model.config
    if family in ("pegasus", "bart") and (not c.share_embeddings and c.out_vocab_size != c.vocab_size):
        ex.real_tgt_vocab = c.out_vocab_size
        ex.model = one_vocab_size(ex.model)
        ex.notes.append(f"source {c.vocab_size} / target {c.out_vocab_size} tokens as two tables of "
                        f"{max(c.vocab_size, c.out_vocab_size)}; target ids ≥ {c.out_vocab_size} get logit bias -1e9")
    return ex
MODULES = {"bert": "hf_bert", "gpt2": "hf_gpt2", "openai-gpt": "hf_openai_gpt", "llama": "hf_llama",
           "marian": "hf_marian", "pegasus": "hf_pegasus", "bart": "hf_bart", "t5": "hf_t5"}


def generation_defaults(hf, cfg: ModelConfig) -> None:
    """What glassformer's greedy `generate` does, as the HF model's generation config: pad is never
    generated, decoding starts from our start token and stops at eos, no forced or minimum tokens."""
    g = hf.generation_config
    g.do_sample, g.num_beams, g.min_length = False, 1, 0
    g.pad_token_id, g.eos_token_id, g.bos_token_id = cfg.pad_id, cfg.eos_id, cfg.bos_id
    g.forced_eos_token_id = g.forced_bos_token_id = None
    g.no_repeat_ngram_size, g.length_penalty = 0, 1.0
    g.bad_words_ids = [[cfg.pad_id]] if cfg.pad_id is not None and cfg.pad_id != cfg.eos_id else None
    if cfg.arch == "encoder-decoder":
        g.decoder_start_token_id = cfg.start_id
    g.max_new_tokens = 32  # our generate's default


def to_hf(model, tokenizers=None):
    """The `transformers` model (eval mode) of the family that computes `model`'s function.

    `tokenizers` (a glassformer Tokenizer, or a dict with 'src'/'tgt'/'lm'), when given, is checked
    against the vocabulary sizes. The chosen family and the rewrites made are in
    `hf_model.glassformer_export` (an `Export`).
    """
    if not hasattr(model, "config") or not isinstance(model.config, ModelConfig):
        raise InputError(f"to_hf takes a glassformer model, got {type(model).__name__}")
    _check_tokenizers(model.config, tokenizers)
    ex = plan(model)
    hf = importlib.import_module(f"{__package__}.{MODULES[ex.family]}").to_hf(ex.model.eval())
    if model.config.arch != "encoder":
        generation_defaults(hf, ex.model.config)
    hf.glassformer_export = Export(ex.family, model, ex.notes, ex.real_tgt_vocab)
    return hf.eval()


def _check_tokenizers(cfg: ModelConfig, tokenizers) -> None:
    if tokenizers is None:
        return
    toks = tokenizers if isinstance(tokenizers, dict) else {"lm": tokenizers}
    want = {"src": cfg.vocab_size, "lm": cfg.vocab_size, "tgt": cfg.out_vocab_size}
    for role, tok in toks.items():
        if tok is not None and role in want and tok.vocab_size != want[role]:
            raise InputError(f"the {role} tokenizer has {tok.vocab_size} tokens but the model's vocabulary has "
                             f"{want[role]}; pass the tokenizers the model was trained with")
