"""`build()`: run a sentence through a small encoder and keep every number (seed 000 ch. 7).

The result is the JSON contract of the walkthrough:

    {"tokens": [...], "config": {...}, "params": {name: nested list}, "trace": {hook: nested list},
     ... extra keys: "vocab", "ids", "embedding_source", "seed", "stack", "analysis"}

with the batch dimension dropped. Parameter names are the model's own (`enc.0.attn.W_Q`
(n_heads, d_model, d_k), `enc.0.ffn.W_1` (d_model, d_ff), `embed.W_E` ...) and every weight is
stored (in, out), Q = X·W_Q + b_Q, so each traced number can be recomputed by hand or in NumPy.
The forward pass runs in float64: the printed digits are the math's, not float32 rounding.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from ..config import ModelConfig
from ..errors import ConfigError, InputError
from ..nn import build_model
from .analysis import analyse
from .inputs import SEED_WIDTH, embedding_table, segment, vocabulary

# Seed 000 §7.1: d_model 12, 3 heads of d_k 4, d_ff 48, 2 encoder layers; §6.1: GELU (tanh form);
# §7.3: Post-LN ("Add & Norm"), sinusoidal PE added to the embedding (§7.2).
SEED_MODEL = dict(d_model=SEED_WIDTH, n_heads=3, n_layers=2, d_ff=48, activation="gelu_tanh",
                  norm_position="post", pe="sinusoidal")
# Flags that would make it another model than the walkthrough can show.
_FIXED = {"arch": "the walkthrough runs an encoder (use --ckpt for a trained decoder or translator)",
          "vocab_size": "the vocabulary is the sentence's own tokens",
          "tgt_vocab_size": "the walkthrough runs an encoder"}


def _flag(field: str) -> str:
    """The CLI flag of a ModelConfig field (n_heads → --heads)."""
    return {"n_heads": "--heads", "n_layers": "--layers"}.get(field, "--" + field.replace("_", "-"))


def seed_config(n_vocab: int, **model_flags: Any) -> ModelConfig:
    """The seed's §7.1 model with `model_flags` (ModelConfig field names) changed."""
    for name, why in _FIXED.items():
        if name in model_flags:
            raise ConfigError(f"{name} cannot be set for the walkthrough: {why}")
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(model_flags) - known)
    if unknown:
        raise ConfigError(f"unknown model setting(s) {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(known - set(_FIXED)))})")
    settings = {**SEED_MODEL, **{k: v for k, v in model_flags.items() if v is not None}}
    return ModelConfig(arch="encoder", vocab_size=n_vocab, **settings)


def seed_model(sentence: str | None = None, seed: int = 0, random_embeddings: bool = False,
               **model_flags: Any) -> tuple[torch.nn.Module, list[str], list[int], list[str], dict[str, str]]:
    """The seed's encoder for `sentence`: (model, tokens, ids, vocab, embedding source per token).

    The vocabulary is the sentence's own tokens; weights come from `seed`, embeddings from §7.2."""
    tokens = segment(sentence)
    vocab, ids = vocabulary(tokens)
    cfg = seed_config(len(vocab), **model_flags)
    with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
        torch.manual_seed(seed)  # every weight drawn from --seed (§7.3: "random initialisation")
        model = build_model(cfg)
    W_E, source = embedding_table(vocab, cfg.embed_width, seed, random_embeddings)
    with torch.no_grad():
        model.embed.W_E.copy_(W_E)
    return model, tokens, ids, vocab, source


def build(sentence: str | None = None, seed: int | None = None, ckpt: str | None = None,
          random_embeddings: bool = False, **model_flags: Any) -> dict:
    """Trace `sentence` (default 猫 吃 鱼) through the seed's encoder, or through a checkpoint's model.

    `seed` draws the seed model's weights (default 0); a checkpoint's are trained, so it takes none."""
    if ckpt is not None:
        given = sorted(_flag(k) for k, v in model_flags.items() if v is not None)
        if given or random_embeddings or seed is not None:
            extra = ", ".join(given + (["--random-embeddings"] if random_embeddings else [])
                              + (["--seed"] if seed is not None else []))
            raise InputError(f"--ckpt takes the model and embeddings from the checkpoint; drop {extra}")
        model, tokens, ids, vocab, source, stack = _from_checkpoint(ckpt, sentence)
    else:
        seed = 0 if seed is None else seed
        model, tokens, ids, vocab, source = seed_model(sentence, seed, random_embeddings, **model_flags)
        stack = "enc"
    model = model.to(torch.float64).eval()
    if model.config.pe == "learned" and len(ids) > model.config.max_len:
        raise InputError(f"the sentence has {len(ids)} tokens but the learned position table holds "
                         f"{model.config.max_len} positions; shorten it")
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the sinusoids too are computed in float64
    try:
        trace = _trace_stack(model, ids)
    finally:
        torch.set_default_dtype(before)
    result = {
        "tokens": tokens,
        "config": model.config.to_dict(),
        "params": export_params(model, encoder_only=model.config.arch == "encoder-decoder"),
        "trace": trace.to_lists(drop_batch=True),
        "vocab": vocab,
        "ids": ids,
        "embedding_source": source,
        "seed": seed,
        "stack": stack,
        "ckpt": str(ckpt) if ckpt is not None else None,
    }
    result["analysis"] = analyse(result)
    return result


def build_loaded(model: torch.nn.Module, tokens: list[str], ids: list[int], source: str = "pretrained") -> dict:
    """The same result for a model already loaded elsewhere (MiniLM, a Hugging Face conversion).

    The model is shared (the explorer keeps one copy), so it runs in its own dtype, float32 for a
    pretrained one, and is not converted; `params` are the weights as arrays (only their shapes are
    read by the analysis), not the nested lists a JSON file needs.
    """
    from .inputs import MAX_TOKENS
    if len(ids) > MAX_TOKENS:
        raise InputError(f"the sentence has {len(ids)} tokens; the walkthrough prints every number "
                         f"and takes at most {MAX_TOKENS} (shorten it)")
    stack = "dec" if model.config.arch == "decoder" else "enc"
    result = {
        "tokens": list(tokens),
        "config": model.config.to_dict(),
        "params": {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()},
        "trace": _trace_stack(model, ids).to_lists(drop_batch=True),
        "ids": list(ids),
        "embedding_source": {t: source for t in tokens},
        "stack": stack,
    }
    result["analysis"] = analyse(result)
    return result


def _trace_stack(model, ids: list[int]):
    """Every hook of the stack the chapter walks: the encoder (of a translator too) or an LM's decoder."""
    id_tensor = torch.tensor([ids])
    with torch.no_grad():
        if model.config.arch == "encoder-decoder":
            return _trace_encoder(model, id_tensor)[1]
        return model.run_with_trace(id_tensor)[1]


def _trace_encoder(model, ids: torch.Tensor):
    """Trace only the encoder of an encoder-decoder (the seed's chapter 7 stops at the encoder)."""
    from ..trace import Trace, hooks

    trace = Trace()

    def record(value, name):
        trace[name] = value.detach().clone()

    with hooks(model, {"*": record}):
        memory, _ = model.encode(ids)
    return memory, trace


def export_params(model: torch.nn.Module, encoder_only: bool = False) -> dict[str, list]:
    """Every parameter and buffer needed to recompute the trace, by its module-tree name."""
    decoder_side = ("dec", "dec_embed", "dec_pos", "dec_embed_norm", "dec_x0", "dec_norm", "head")
    out = {}
    for name, t in model.state_dict().items():
        if t is None or (encoder_only and name.split(".")[0] in decoder_side):
            continue
        out[name] = t.detach().cpu().double().tolist()
    return out


def _from_checkpoint(ckpt: str, sentence: str | None):
    """Model, tokens and ids from a trained checkpoint (contracts.md: load_checkpoint)."""
    try:
        from ..train.checkpoint import load_checkpoint
    except ImportError:
        raise InputError("--ckpt needs glassformer.train.checkpoint, which this installation lacks") from None
    loaded = load_checkpoint(ckpt)
    tok = loaded.src_tokenizer
    text = sentence if sentence is not None else "猫 吃 鱼"
    if not text.strip():
        raise InputError("the sentence is empty; give at least one token, e.g. \"猫 吃 鱼\"")
    from ..unknown import unseen_line, unseen_pieces
    pieces = unseen_pieces(tok, text)  # every piece it never saw, named in one line (as lens and patch do)
    if pieces:
        raise InputError(unseen_line(tok, text, pieces, "source" if loaded.config.arch == "encoder-decoder" else "")
                         + "; the walkthrough prints the checkpoint's own vectors, so give words it was trained on")
    tokens = list(tok.tokens(text))
    ids = list(tok.encode(text))
    if len(ids) != len(tokens):  # a tokenizer that adds specials in encode(): align with tokens()
        ids = [tok.token_to_id(t) for t in tokens]
    for t, i in zip(tokens, ids):
        if i is None or (tok.unk_id is not None and i == tok.unk_id and t != tok.id_to_token(tok.unk_id)):
            raise InputError(f"unknown token {t!r} is not in the checkpoint's vocabulary; "
                             f"use words the model was trained on")
    if not tokens:
        raise InputError("the sentence has no tokens the checkpoint's tokenizer recognises")
    from .inputs import MAX_TOKENS
    if len(tokens) > MAX_TOKENS:
        raise InputError(f"the sentence has {len(tokens)} tokens; the walkthrough prints every number "
                         f"and takes at most {MAX_TOKENS} (shorten it)")
    stack = "dec" if loaded.config.arch == "decoder" else "enc"
    vocab = [tok.id_to_token(i) for i in range(tok.vocab_size)]
    return loaded.model, tokens, ids, vocab, {t: "checkpoint" for t in tokens}, stack
