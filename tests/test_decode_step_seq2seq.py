"""The prepared decode step for encoder-decoder models (nn/decode_step.py, issue 29) against
independent references: the explicit-math model recomputing the whole target prefix without a cache
(logits, every step), HF Marian and BART (tokens), and the module path it replaces (tokens, greedy,
seeded sampling and beam search over padded source batches). Each test also counts the calls into
the prepared step and into the module path's decoder: a silent fallback fails it."""

from __future__ import annotations

import pytest
import torch
from transformers import BartConfig, BartForConditionalGeneration, MarianConfig, MarianMTModel, T5Config, \
    T5ForConditionalGeneration

from glassformer.config import ModelConfig
from glassformer.generate import generate
from glassformer.nn import build_model, decode_gemm, decode_step, gemv
from glassformer.nn.decode_step import DecodeStep
from glassformer.nn.model import EncoderDecoder
from glassformer.nn.prepared import prepared
from cli_helpers import run
from explorer_helpers import tiny_translator
from seq2seq_helpers import generations, padded_batch, perturb

pytestmark = pytest.mark.usefixtures("one_thread")
VOCAB, PAD, BOS, EOS = 40, 0, 1, 2

# our own translators: Post-LN (the paper) and Pre-LN, both sinusoid layouts, tied and untied heads,
# and the position schemes that act inside attention
VARIANTS = {
    "post-ln-tied-relu": dict(norm_position="post", pe="sinusoidal", tie_embeddings=True, activation="relu"),
    "pre-ln-untied-gelu": dict(norm_position="pre", pe="sinusoidal_half", tie_embeddings=False, activation="gelu",
                               embed_scale=True, head_bias=True),
    "post-ln-separate-vocab": dict(norm_position="post", pe="sinusoidal", share_embeddings=False,
                                   tgt_vocab_size=33, activation="silu", n_dec_layers=3),
    # positions inside attention, a gated FFN, RMSNorm (LLaMA's choices in a translator)
    "pre-rms-rope-swiglu": dict(norm_position="pre", norm="rmsnorm", pe="rope", activation="swiglu",
                                tie_embeddings=False, attn_bias=False, ffn_bias=False),
    "post-ln-alibi": dict(norm_position="post", pe="alibi", activation="gelu_tanh"),
}


def translator(variant: str, attn_impl: str = "fast", **extra) -> EncoderDecoder:
    cfg = ModelConfig(arch="encoder-decoder", vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=2, d_ff=48,
                      dropout=0.0, pad_id=PAD, bos_id=BOS, eos_id=EOS, attn_impl=attn_impl,
                      **dict(VARIANTS[variant], **extra))
    torch.manual_seed(3)
    model = build_model(cfg).eval()
    # away from the initialisation: gains off 1, biases off 0, so a wrong term shows; twice the usual
    # spread, with this seed, so that greedy decoding does not repeat one token (random models tend to)
    g = torch.Generator().manual_seed(6)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g)
            p.copy_(1 + 0.3 * r if name.endswith("gamma") else 0.3 * r if p.dim() == 1 else 2 * r * p.shape[-1] ** -0.5)
    return model


def sources(batch: int = 3, lengths=(7, 5, 2)):
    """Right-padded source ids (batch, 7): rows of different lengths."""
    g = torch.Generator().manual_seed(5)
    src = torch.randint(3, VOCAB, (batch, 7), generator=g)
    return src.masked_fill(torch.arange(7)[None, :] >= torch.tensor(lengths)[:, None], PAD)


class Calls:
    """How many decoding steps took the prepared step, and how many ran the module path's decoder."""

    def __init__(self, monkeypatch):
        self.prepared = self.module = 0
        step, decode = DecodeStep.__call__, EncoderDecoder.decode

        def counted_step(step_self, *args):
            self.prepared += 1
            return step(step_self, *args)

        def counted_decode(model, *args, **kwargs):
            self.module += 1
            return decode(model, *args, **kwargs)
        monkeypatch.setattr(DecodeStep, "__call__", counted_step)
        monkeypatch.setattr(EncoderDecoder, "decode", counted_decode)


def module_path(monkeypatch):
    """Generation without the prepared step: every step through the modules, as before issue 29."""
    monkeypatch.setattr(decode_step, "prepared", lambda *args, **kwargs: None)


OPTIONS = {"greedy": dict(strategy="greedy"), "sample": dict(strategy="sample", temperature=1.3),
           "beam": dict(strategy="beam", beam_size=3)}


def run_generate(model, src, strategy, **extra):
    kwargs = dict(OPTIONS[strategy], max_new_tokens=9, **extra)
    if strategy == "sample":
        kwargs["generator"] = torch.Generator().manual_seed(11)
    return generate(model, src, **kwargs)


@pytest.mark.parametrize("own_attention", [True, False])
@pytest.mark.parametrize("variant", VARIANTS)
def test_step_logits_equal_explicit_math_recomputation(variant, own_attention, monkeypatch):
    """Every prepared step's logits — the start token's included — equal the explicit-math model
    reading the whole target prefix without a cache, over a padded source batch, to 1e-4; attention
    by glassformer's kernel (nn/attend.cpp, where built) and by torch's SDPA."""
    monkeypatch.setattr(decode_step, "OWN_ATTENTION", own_attention)
    fast, math = translator(variant), translator(variant, attn_impl="math")
    src = sources()
    tgt_vocab = fast.config.out_vocab_size
    with torch.inference_mode(), prepared(fast):
        memory, src_pad = fast.encode(src)
        assert src_pad is not None and bool(src_pad.any())
        cache = fast.new_cache(16)
        step = decode_step.prepared(fast, cache, None, memory, src_pad)
        assert step is not None
        seq = torch.full((3, 1), BOS)
        for _ in range(6):
            got = step(seq[:, -1], cache)
            ref = math(src, seq)[:, -1]
            assert (got - ref).abs().max() <= 1e-4 * ref.abs().max()
            seq = torch.cat([seq, torch.randint(3, tgt_vocab, (3, 1))], dim=1)
    assert cache.length == 6


@pytest.mark.parametrize("variant", ["post-ln-tied-relu", "pre-ln-untied-gelu", "post-ln-separate-vocab"])
def test_gemv_epilogue_step_equals_explicit_math(variant, monkeypatch):
    """Every product on glassformer's GEMV kernel, which applies φ and the self-, cross-attention and
    FFN residual Adds in its epilogue (decode_gemm.product): the steps still equal the explicit-math
    model to 1e-4, Pre- and Post-LN."""
    monkeypatch.setattr(decode_gemm, "FORCE", "gemv")
    fast, math = translator(variant), translator(variant, attn_impl="math")
    src = sources()
    calls = []
    real_attend = gemv.attend
    monkeypatch.setattr(gemv, "attend", lambda *a: calls.append(1) or real_attend(*a))
    with torch.inference_mode(), prepared(fast):
        memory, src_pad = fast.encode(src)
        cache = fast.new_cache(16)
        step = decode_step.prepared(fast, cache, None, memory, src_pad)
        seq = torch.full((3, 1), BOS)
        for _ in range(5):
            got = step(seq[:, -1], cache)
            ref = math(src, seq)[:, -1]
            assert (got - ref).abs().max() <= 1e-4 * ref.abs().max()
            seq = torch.cat([seq, torch.randint(3, fast.config.out_vocab_size, (3, 1))], dim=1)
    if gemv.available():
        assert {g.route for layer in step.layers for g in (layer.W_O, layer.cross_W_O, layer.W_1, layer.W_2)} \
            == {"gemv"}
        assert len(calls) == 5 * 2 * len(step.layers)  # self- and cross-attention by the kernel, every step


@pytest.mark.parametrize("strategy", OPTIONS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_tokens_equal_the_module_path(variant, strategy, monkeypatch):
    """Greedy, seeded sampling and beam search over a padded batch: the prepared step's tokens are
    the module path's and the explicit-math model's (no cache); every step took the prepared one,
    also after a row ended with eos (its pad fill does not send the batch to the module path)."""
    model, math = translator(variant), translator(variant, attn_impl="math")
    src = sources()
    calls = Calls(monkeypatch)
    got = run_generate(model, src, strategy)
    assert calls.module == 0 and calls.prepared >= got.shape[1] - 1
    ref = run_generate(math, src, strategy, use_cache=False)
    module_path(monkeypatch)
    module = run_generate(model, src, strategy)
    assert calls.module > 0
    assert torch.equal(got, module) and torch.equal(got, ref), (got, module, ref)
    assert len(set(got[:, 1:].flatten().tolist())) > 2  # not one token repeated


def test_some_rows_end_early_and_the_rest_stay_on_the_prepared_step(monkeypatch):
    """A batch where a row produces eos while the others go on: the others' tokens are the module
    path's, every step prepared (the case that sent every batch to the module path before)."""
    model = translator("pre-ln-untied-gelu")
    with torch.no_grad():
        model.head.b_U[EOS] += 1.5  # eos likely, but not at once for every row
    src = sources(6, (7, 6, 5, 4, 3, 2))
    calls = Calls(monkeypatch)
    got = generate(model, src, max_new_tokens=9)
    ends = (got == EOS).float().argmax(dim=1)
    assert (got == EOS).any(dim=1).any() and len(set(ends.tolist())) > 1, got  # rows end at different steps
    assert calls.module == 0
    module_path(monkeypatch)
    assert torch.equal(got, generate(model, src, max_new_tokens=9))


def test_beam_search_keeps_one_copy_of_the_memory_per_source(monkeypatch):
    """Beam search: the prepared step's cross-attention keys hold one row per source, not per beam,
    and the self-attention cache is reordered in place (same buffers, rows moved)."""
    model = translator("pre-ln-untied-gelu")
    src = sources()
    made: list[DecodeStep] = []
    init = DecodeStep.__init__

    def keep(step_self, *args, **kwargs):
        init(step_self, *args, **kwargs)
        made.append(step_self)
    monkeypatch.setattr(DecodeStep, "__init__", keep)
    buffers: list[set[int]] = []
    reorder = type(model.new_cache()).reorder

    def watched(cache, index):
        before = {b.data_ptr() for bufs in cache.self_kv.values() for b in bufs}
        reorder(cache, index)
        buffers.append(before ^ {b.data_ptr() for bufs in cache.self_kv.values() for b in bufs})
    monkeypatch.setattr(type(model.new_cache()), "reorder", watched)
    run_generate(model, src, "beam")
    (step,) = made
    k, _ = step.memory.kv[0]
    assert k.shape == (3, 4, 7, 8)  # (source, head, src_seq, d_k): 3 sources, not 3 × 3 beams
    assert buffers and all(not changed for changed in buffers)


def test_cross_attention_recording_takes_the_module_path(monkeypatch):
    """return_cross_attention hooks the last layer's pattern: the prepared step, which has no hook
    points, must not run, and the rows recorded are the ones of the tokens returned."""
    model = translator("post-ln-tied-relu")
    calls = Calls(monkeypatch)
    seq, rows = generate(model, sources(), max_new_tokens=5, return_cross_attention=True)
    assert calls.prepared == 0 and calls.module > 0
    assert rows.shape == (3, seq.shape[1] - 1, 7)
    assert torch.allclose(rows.sum(-1), torch.ones(rows.shape[:2]), atol=1e-5)


@pytest.mark.parametrize("inside_scope", [False, True])
def test_after_an_optimizer_step_the_new_weights_decode(inside_scope, monkeypatch):
    """Generate (prepared step: packed cross W_KV, W_QKV, tied W_U copies), take an AdamW step, generate
    again — outside a `prepared` scope or inside one that was open all along: the tokens are those of
    a freshly built model given the new weights (which has never made a copy)."""
    model = translator("post-ln-tied-relu")
    src = sources()
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    calls = Calls(monkeypatch)
    with prepared(model) if inside_scope else torch.enable_grad():
        before = {s: run_generate(model, src, s) for s in ("greedy", "beam")}
        model.train()
        tgt = torch.randint(3, VOCAB, (3, 6))
        model(src, tgt, targets=torch.randint(3, VOCAB, (3, 6))).backward()
        opt.step()
        model.eval()
        after = {s: run_generate(model, src, s) for s in ("greedy", "beam")}
    fresh = translator("post-ln-tied-relu")
    fresh.load_state_dict(model.state_dict())
    for s in after:
        assert torch.equal(after[s], run_generate(fresh, src, s)), s
    assert any(not torch.equal(before[s], after[s]) for s in after)  # the step changed what is decoded
    assert calls.prepared > 0


# ---- Hugging Face models imported with from_hf ----
def marian():
    cfg = MarianConfig(vocab_size=VOCAB, d_model=30, encoder_layers=2, decoder_layers=2, encoder_attention_heads=5,
                       decoder_attention_heads=5, encoder_ffn_dim=61, decoder_ffn_dim=61, activation_function="swish",
                       scale_embedding=True, max_position_embeddings=64, pad_token_id=32, decoder_start_token_id=32,
                       eos_token_id=0, attn_implementation="eager")
    hf = MarianMTModel(cfg)
    perturb(hf, skip=("embed_positions",), seed=7)  # the sinusoid tables are fixed, never trained
    # (seed 7: greedy decoding of this random model does not repeat one token)
    return hf, 32, 32


def bart():
    cfg = BartConfig(vocab_size=VOCAB, d_model=15, encoder_layers=1, decoder_layers=2, encoder_attention_heads=3,
                     decoder_attention_heads=3, encoder_ffn_dim=33, decoder_ffn_dim=33, activation_function="gelu",
                     max_position_embeddings=16, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                     decoder_start_token_id=2, attn_implementation="eager")
    hf = BartForConditionalGeneration(cfg)
    perturb(hf, seed=7)
    return hf, 1, 2


def t5(ff: str):
    cfg = T5Config(vocab_size=VOCAB, d_model=20, d_kv=6, d_ff=41, num_layers=2, num_decoder_layers=2, num_heads=3,
                   feed_forward_proj=ff, relative_attention_num_buckets=8, relative_attention_max_distance=10,
                   pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, attn_implementation="eager")
    hf = T5ForConditionalGeneration(cfg)
    perturb(hf, seed=7)
    return hf, 0, 0


@pytest.mark.parametrize("beams", [1, 3])
@pytest.mark.parametrize("family", ["marian", "bart", "t5", "t5-gated"])
def test_hf_tokens_through_the_prepared_step(family, beams, monkeypatch):
    """Marian (Post-LN, half-split sinusoids, swish, × sqrt(d_model), final_logits_bias), BART
    (learned positions, layernorm_embedding, gelu) and T5 (relative position bias on the decoder's
    self-attention, RMSNorm, unscaled scores, the tied head's rescale; ReLU and gated-GELU FFNs)
    imported with from_hf: greedy and beam search pick HF's tokens, every step on the prepared step."""
    make = {"marian": marian, "bart": bart, "t5": lambda: t5("relu"), "t5-gated": lambda: t5("gated-gelu")}[family]
    hf, pad, start = make()
    src, mask, _ = padded_batch(VOCAB, pad, start=start)
    calls = Calls(monkeypatch)
    ref, got = generations(hf, src, mask, pad, beams)
    assert calls.module == 0 and calls.prepared >= got.shape[1] - 1
    assert torch.equal(got, ref), (got, ref)
    assert len(set(got[:, 1:].flatten().tolist())) > 2  # not one token repeated


def test_what_the_step_does_not_compute_falls_back_to_the_module_path(monkeypatch):
    """A concatenated position encoding (pe_combine='concat') is not in the prepared step: decoding
    runs the module path, all of it, and its tokens are the explicit-math model's (no cache)."""
    concat = dict(pe_combine="concat", d_pos=8, tie_embeddings=False, share_embeddings=False)
    model = translator("post-ln-tied-relu", **concat)
    math = translator("post-ln-tied-relu", attn_impl="math", **concat)
    src = sources()
    assert decode_step.prepared(model, model.new_cache(8), None, *model.encode(src)) is None
    calls = Calls(monkeypatch)
    got = run_generate(model, src, "greedy")
    assert calls.prepared == 0 and calls.module >= got.shape[1] - 1
    assert torch.equal(got, run_generate(math, src, "greedy", use_cache=False))


# ---- the CLI ----
@pytest.mark.parametrize("beam", ["1", "2"])
def test_translate_command_takes_the_prepared_step(beam, tmp_path, monkeypatch, capsys):
    """`glassformer translate` (batched sentences, greedy and beam): every decoding step on the
    prepared step, none on the module path's decoder, and the same translations as the module path."""
    runs = tiny_translator(tmp_path)
    argv = ["translate", "--ckpt", str(runs / "tiny"), "--beam", beam, "--json",
            "猫 吃 鱼", "狗 吃 肉 猫", "我"]
    calls = Calls(monkeypatch)
    code, out, err = run(monkeypatch, capsys, *argv)
    assert code == 0, err
    assert calls.prepared > 0 and calls.module == 0
    assert len(out.splitlines()) == 3 and all('"translation"' in line for line in out.splitlines())
    module_path(monkeypatch)
    code, module_out, _ = run(monkeypatch, capsys, *argv)
    assert code == 0 and calls.module > 0
    assert out == module_out


def test_python_work_per_step_does_not_grow_with_the_target():
    """The same Python calls at target length 3 as at 60: no loop over cached positions, and the
    memory's keys and values are not rebuilt."""
    import sys
    model = translator("pre-ln-untied-gelu")

    def calls_of_one_step(steps_before: int) -> int:
        with torch.inference_mode(), prepared(model):
            cache = model.new_cache(64)
            step = decode_step.prepared(model, cache, None, *model.encode(sources()))
            for _ in range(steps_before):
                step(torch.full((3,), 5), cache)
            count = [0]

            def tracer(frame, event, arg):
                count[0] += 1
            sys.setprofile(tracer)
            try:
                step(torch.full((3,), 5), cache)
            finally:
                sys.setprofile(None)
        return count[0]

    assert calls_of_one_step(3) == calls_of_one_step(60)


def test_cache_reorder_in_place_equals_index_select():
    """KVCache.reorder (beam search) against torch's index_select of the whole buffers: repeated,
    moved and unmoved rows, the cached positions only; the buffers are the same tensors after."""
    from glassformer.nn.attention import KVCache
    g = torch.Generator().manual_seed(0)
    cache = KVCache(10)
    k, v = torch.randn(6, 2, 4, 3, generator=g), torch.randn(6, 2, 4, 3, generator=g)
    cache.append(0, k, v)
    cache.extend("positions", torch.arange(24).view(6, 4))
    cache.length, cache.next_pos = 4, torch.arange(6)
    index = torch.tensor([0, 0, 2, 5, 4, 5])  # row 1 takes row 0, row 3 takes row 5, rows 0, 2, 4, 5 stay
    want_k, want_v = (t.index_select(0, index) for t in (k, v))
    want_pos = torch.arange(24).view(6, 4).index_select(0, index)
    buffers = [b.data_ptr() for b in cache.self_kv[0]]
    cache.reorder(index)
    kb, vb = cache.self_kv[0]
    assert [b.data_ptr() for b in cache.self_kv[0]] == buffers
    assert torch.equal(kb[:, :, :4], want_k) and torch.equal(vb[:, :, :4], want_v)
    assert torch.equal(cache.positions, want_pos) and torch.equal(cache.next_pos, index)
