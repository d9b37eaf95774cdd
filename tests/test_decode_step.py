"""The prepared decode step (nn/decode_step.py, issue 11) against independent references:
Hugging Face GPT-2's logits and greedy tokens, on every GEMM route; the explicit-math model's
full recomputation for the variants GPT-2 lacks (Post-LN, sinusoidal PE, untied head, ReLU)."""

import sys

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from glassformer.config import ModelConfig
from glassformer.generate import Stepper, generate
from glassformer.interop import from_hf
from glassformer.nn import build_model
from glassformer.nn import decode_gemm, decode_step, gemv, routes
from glassformer.nn.decode_step import DecodeStep, supports
from glassformer.nn.prepared import prepared
from glassformer.nn.routes import TABLE, shape_class
from glassformer.trace import hooks

pytestmark = pytest.mark.usefixtures("one_thread")
VOCAB = 300


def gpt2_pair(width=96, heads=3, layers=3):
    cfg = GPT2Config(vocab_size=VOCAB, n_embd=width, n_head=heads, n_layer=layers, n_positions=128,
                     bos_token_id=None, eos_token_id=None, attn_implementation="eager")
    hf = GPT2LMHeadModel(cfg).eval()
    hf.generation_config.pad_token_id = 0
    return from_hf(hf).eval(), hf


@pytest.mark.parametrize("route", ["auto", "blas", "onednn", "onednn_packed", "onednn_blocked", "gemv"])
def test_step_logits_equal_hf_gpt2_on_every_route(route, monkeypatch):
    """Each prepared step's logits equal HF's forward over the whole sequence (last position).
    (Without oneDNN, as with GLASSFORMER_ONEDNN=0, a forced 'onednn' falls back to BLAS.)"""
    if route.startswith("onednn_") or route == "gemv":  # the decode step's own routes: oneDNN over a
        # (out, in) copy of W or over oneDNN's blocked layout of it; glassformer's kernel (nn/gemv.py)
        monkeypatch.setattr(decode_gemm, "FORCE", route)
    else:
        monkeypatch.setenv("GLASSFORMER_GEMM", route)
    TABLE.clear()
    decode_gemm._TABLE.clear()
    ours, hf = gpt2_pair(width=384, heads=6, layers=2)  # wide enough for the oneDNN route to apply
    ids = torch.randint(1, VOCAB, (2, 5))
    with torch.inference_mode():
        cache = ours.new_cache(32)
        ours(ids, cache=cache)
        step = DecodeStep(ours)
        seq = ids
        for _ in range(6):
            token = torch.randint(1, VOCAB, (2,))
            seq = torch.cat([seq, token[:, None]], dim=1)
            got = step(token, cache)
            ref = hf(seq).logits[:, -1]
            assert (got - ref).abs().max() <= 1e-4 * ref.abs().max()
    assert cache.length == seq.shape[1]
    if route == "gemv" and gemv.available():  # taken, not silently BLAS (make setup builds the kernel, and
        # tests/test_gemv.py fails where it did not; GLASSFORMER_GEMV=off, the portability leg, keeps BLAS)
        assert {g.route for g in (step.layers[0].qkv, step.layers[1].W_2, step.head)} == {"gemv"}


@pytest.mark.parametrize("batch", [1, 3])
def test_greedy_tokens_identical_to_hf_gpt2(batch):
    ours, hf = gpt2_pair()
    ids = torch.randint(1, VOCAB, (batch, 6))
    got = generate(ours, ids, max_new_tokens=40, eos_id=None)
    ref = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=40, do_sample=False, num_beams=1)
    assert Stepper(ours, True, 50).fast is not None  # the prepared step is what ran
    assert torch.equal(got, ref)


def fast_and_math(**variant):
    """A small decoder-only model of `variant` and the explicit-math model with the same weights."""
    fields = dict(arch="decoder", vocab_size=VOCAB, d_model=48, n_heads=4, d_ff=96, n_layers=2, max_len=64, **variant)
    fast = build_model(ModelConfig(**fields)).eval()
    math = build_model(ModelConfig(**fields, attn_impl="math")).eval()
    math.load_state_dict(fast.state_dict())
    return fast, math


@pytest.mark.parametrize("norm_position,pe,activation,tie", [("post", "sinusoidal", "relu", False),
                                                           ("pre", "learned", "gelu", True),
                                                           ("pre", "none", "silu", False),
                                                           ("pre", "rope", "swiglu", False),
                                                           ("post", "alibi", "reglu", True),
                                                           ("pre", "relative", "geglu", True)])
@pytest.mark.parametrize("own_attention", [True, False])
def test_step_equals_explicit_math_recomputation(norm_position, pe, activation, tie, own_attention, monkeypatch):
    """Variants GPT-2 lacks — every position scheme (absolute, RoPE, ALiBi, T5's relative buckets) and
    the gated FFNs: the step against the explicit-math path recomputing the prefix, its attention by
    glassformer's kernel (nn/attend.cpp, where built) and by torch's SDPA."""
    monkeypatch.setattr(decode_step, "OWN_ATTENTION", own_attention)
    fast, math = fast_and_math(norm_position=norm_position, pe=pe, activation=activation, tie_embeddings=tie)
    ids = torch.randint(1, VOCAB, (2, 4))
    with torch.inference_mode():
        cache = fast.new_cache(16)
        fast(ids, cache=cache)
        step, seq = DecodeStep(fast), ids
        for _ in range(5):
            token = torch.randint(1, VOCAB, (2,))
            seq = torch.cat([seq, token[:, None]], dim=1)
            ref = math(seq)[:, -1]
            assert (step(token, cache) - ref).abs().max() <= 1e-4 * ref.abs().max()


@pytest.mark.parametrize("norm_position,activation,residual", [("pre", "gelu", True), ("post", "relu", True),
                                                              ("pre", "gelu_tanh", True), ("pre", "silu", False),
                                                              ("post", "gelu", False)])
def test_gemv_epilogue_step_equals_explicit_math(norm_position, activation, residual, monkeypatch):
    """On the GEMV route the kernel applies the FFN's φ, each sublayer's residual Add and Post-LN's
    LayerNorm itself (decode_gemm.product): the step still equals the explicit-math model, Pre- and
    Post-LN, with and without the residual connection — and φ and Post-LN's norms never ran as
    separate operators."""
    monkeypatch.setattr(decode_gemm, "FORCE", "gemv")
    fast, math = fast_and_math(norm_position=norm_position, activation=activation, residual=residual)
    ids = torch.randint(1, VOCAB, (2, 4))
    with torch.inference_mode():
        cache = fast.new_cache(16)
        fast(ids, cache=cache)
        step, seq = DecodeStep(fast), ids
        calls = []
        real_attend = gemv.attend
        monkeypatch.setattr(gemv, "attend", lambda *a: calls.append(1) or real_attend(*a))
        if gemv.available():  # the kernel must apply φ: the in-place one is never called
            def outside_the_kernel(_t):
                raise AssertionError("φ or a Post-LN norm ran outside the kernel")
            for layer in step.layers:
                layer.phi = outside_the_kernel
                if norm_position == "post":  # and Post-LN's LayerNorms after the Adds
                    layer.norm_self.forward = layer.norm_ffn.forward = outside_the_kernel
        for _ in range(5):
            token = torch.randint(1, VOCAB, (2,))
            seq = torch.cat([seq, token[:, None]], dim=1)
            ref = math(seq)[:, -1]
            assert (step(token, cache) - ref).abs().max() <= 1e-4 * ref.abs().max()
    if gemv.available():
        assert {g.route for layer in step.layers for g in (layer.W_O, layer.W_1, layer.W_2)} == {"gemv"}
        assert len(calls) == 5 * 2  # attention by the kernel too: every step, every layer


def test_module_path_where_the_step_would_differ():
    """Hooks, the explicit-math attention, a concatenated position encoding and training mode keep
    the module path."""
    ours, _ = gpt2_pair(layers=1)
    cache = ours.new_cache(8)
    assert supports(ours, cache)
    with hooks(ours, {"dec.0.self_attn.out": lambda t, _name: t}):
        assert not supports(ours, cache)
    assert not supports(ours.train(), cache)
    for extra in (dict(attn_impl="math"), dict(pe_combine="concat", d_pos=8, tie_embeddings=False)):
        model = build_model(ModelConfig(arch="decoder", vocab_size=VOCAB, d_model=32, n_heads=2, n_layers=1,
                                        **extra)).eval()
        assert not supports(model, cache)


def test_python_work_per_step_does_not_grow_with_the_cache():
    """The same Python calls at cache length 6 as at 200: no loop over cached positions."""
    ours, _ = gpt2_pair(width=32, heads=2, layers=2)

    def calls_of_one_step(prompt_len: int) -> int:
        with torch.inference_mode():
            cache = ours.new_cache(256)
            ours(torch.randint(1, VOCAB, (1, prompt_len)), cache=cache)
            step = DecodeStep(ours)
            token = torch.tensor([5])
            step(token, cache)  # the first step resolves each GEMM's route
            count = [0]

            def tracer(frame, event, arg):
                count[0] += 1
            sys.setprofile(tracer)
            try:
                step(token, cache)
            finally:
                sys.setprofile(None)
        return count[0]

    assert calls_of_one_step(6) == calls_of_one_step(120)


@pytest.mark.parametrize("route", ["blas", "onednn_packed", "onednn_blocked", "gemv"])
def test_prepared_copies_follow_a_weight_changed_in_place(route, monkeypatch):
    """The copies the step keeps inside one `prepared` scope (the contiguous tied W_U, a packed W)
    are rebuilt when a weight changes in place there (a new version of the same storage): the next
    step matches HF again. (Across scopes nothing is kept: tests/test_prepared_weights.py.)"""
    monkeypatch.setattr(decode_gemm, "FORCE", route)
    decode_gemm._TABLE.clear()
    ours, hf = gpt2_pair(width=384, heads=6, layers=1)  # wide enough for the oneDNN routes
    ids = torch.randint(1, VOCAB, (1, 5))

    def step_logits():
        with torch.inference_mode():
            cache = ours.new_cache(16)
            ours(ids[:, :-1], cache=cache)
            return DecodeStep(ours)(ids[:, -1], cache)

    with prepared(ours):
        step_logits()  # builds and keeps the copies
        with torch.no_grad():  # in place under no_grad: same storage, a new version
            for mine, theirs in ((ours.embed.W_E, hf.transformer.wte.weight),
                                 (ours.dec[0].ffn.W_2, hf.transformer.h[0].mlp.c_proj.weight)):
                bump = torch.randn_like(mine) * 0.5
                mine.add_(bump)
                theirs.add_(bump)
            ref = hf(ids).logits[:, -1]
        got = step_logits()
        assert (got - ref).abs().max() <= 1e-4 * ref.abs().max()
        kept = ours.dec[0].ffn.__dict__["_prepared_store"]
        if route == "onednn_blocked" and decode_gemm._REORDER is not None and routes.onednn_available():
            assert [value.is_mkldnn for _, value in kept.values()] == [True, True]  # W_1, W_2
        assert ours.head.streamed_W_U().is_contiguous() and torch.equal(ours.head.streamed_W_U(), ours.embed.W_E.t())


def test_a_copy_of_W_is_made_only_where_the_generation_pays_it_back(monkeypatch):
    """A copying route (oneDNN over a packed or blocked copy of W) is chosen only where its faster
    calls, over the steps the generation can take, save more than the copy costs: seeded timings for
    every shape class (a copy 50× a call, saving a fifth of a call), then a short and a long run."""
    monkeypatch.setattr(decode_gemm, "FORCE", None)
    monkeypatch.delenv("GLASSFORMER_GEMM", raising=False)
    ours, hf = gpt2_pair(width=384, heads=6, layers=1)  # wide enough for the oneDNN routes to apply
    call = {"blas": 1.0, "onednn": 1.5, "onednn_packed": 0.8, "onednn_blocked": 0.79}
    build = {"onednn_packed": 50.0, "onednn_blocked": 60.0}
    assert decode_gemm.cheapest(call, build, None) == "onednn_blocked"  # unbounded: the fastest call
    assert decode_gemm.cheapest(call, build, 100) == "blas"  # 0.2 saved × 100 < 50
    assert decode_gemm.cheapest(call, build, 1000) == "onednn_packed"  # 0.8 + 0.05 < 0.79 + 0.06
    ids = torch.randint(1, VOCAB, (1, 5))
    for steps, route in ((8, "blas"), (1000, "onednn_packed")):
        with torch.inference_mode(), prepared(ours):
            cache = ours.new_cache(steps)
            ours(ids, cache=cache)
            step = DecodeStep(ours, steps=steps)
            for key in list(decode_gemm._TABLE):
                monkeypatch.delitem(decode_gemm._TABLE, key)
            # the timings every shape class of this model would measure, seeded: the choice is arithmetic
            for gemm in (step.layers[0].qkv, step.layers[0].W_O, step.layers[0].W_1, step.layers[0].W_2, step.head):
                key = (*shape_class(1, gemm.W), gemm.streams, gemv.usable(torch.zeros(1, gemm.W.shape[0]), gemm.W))
                monkeypatch.setitem(decode_gemm._TABLE, key, "onednn_blocked")
                monkeypatch.setitem(decode_gemm._TIMINGS, key, call)
                monkeypatch.setitem(decode_gemm._BUILDS, key, build)
            got = step(torch.tensor([7]), cache)
            ref = hf(torch.cat([ids, torch.tensor([[7]])], dim=1)).logits[:, -1]
            assert (got - ref).abs().max() <= 1e-4 * ref.abs().max()
            ffn = step.layers[0]
            # without oneDNN (GLASSFORMER_ONEDNN=0, the portability leg) nothing is copied: BLAS whatever the table
            expected = route if routes.onednn_available() else "blas"
            assert ffn.W_1.route == ffn.W_2.route == expected  # the FFN's (the products oneDNN takes here)
            kept = ours.dec[0].ffn.__dict__["_prepared_store"]
            assert sorted(kept) == ([] if expected == "blas" else ["packed 1 None", "packed 2 None"])


def test_step_writes_k_and_v_in_one_copy_into_the_module_paths_cache_layout():
    """The cache's K and V of a layer are the halves of one buffer (KVCache.allocate), which the step
    fills with one copy per layer: after the same tokens its keys and values equal those the module
    path cached (float32 rounding), and a beam reorder keeps both halves of one buffer."""
    ours, _ = gpt2_pair(width=64, heads=4, layers=2)
    ids = torch.randint(1, VOCAB, (2, 4))
    new = torch.randint(1, VOCAB, (3, 2))
    with torch.inference_mode():
        caches = [ours.new_cache(16), ours.new_cache(16)]
        for cache in caches:
            ours(ids, cache=cache)
        step = DecodeStep(ours)
        for token in new:
            step(token, caches[0])
            ours(token[:, None], cache=caches[1])
        for layer in range(2):
            joint = caches[0].joint_kv[layer]
            for half, (got, want) in enumerate(zip(caches[0].self_kv[layer], caches[1].self_kv[layer])):
                assert got.data_ptr() == joint[:, half].data_ptr()
                n = caches[0].length
                assert torch.allclose(got[:, :, :n], want[:, :, :n], atol=1e-5, rtol=1e-5)
        caches[0].reorder(torch.tensor([1, 1]))
        kb, vb = caches[0].self_kv[0]
        n = caches[0].length  # the cached positions (reorder moves only those)
        assert kb.data_ptr() == caches[0].joint_kv[0].data_ptr() and torch.equal(kb[0, :, :n], kb[1, :, :n])


def test_rows_that_end_early_keep_the_batch_on_the_prepared_step(monkeypatch):
    """A batch whose rows reach eos at different steps: the finished rows' pad fill is not padding
    any live row attends to, so every step stays prepared (before issue 29 the first finished row
    sent the batch to the module path) and the tokens are the module path's."""
    fields = dict(arch="decoder", vocab_size=VOCAB, d_model=48, n_heads=4, d_ff=96, n_layers=2, pad_id=0, eos_id=2,
                  head_bias=True, tie_embeddings=False)
    model = build_model(ModelConfig(**fields)).eval()
    with torch.no_grad():
        model.head.b_U[2] = 2.0  # eos likely, but not at the same step for every row
    ids = torch.randint(3, VOCAB, (6, 3))
    count = [0]
    call = DecodeStep.__call__

    def counted(step, *args):
        count[0] += 1
        return call(step, *args)
    monkeypatch.setattr(DecodeStep, "__call__", counted)
    got = generate(model, ids, max_new_tokens=12)
    ended = [row.index(2) for row in got[:, 3:].tolist() if 2 in row]
    assert len(set(ended)) > 1, got  # rows end at different steps: the others go on after the first
    assert count[0] == got.shape[1] - 3 - 1  # every step after the prompt's
    monkeypatch.setattr(decode_step, "prepared", lambda *args, **kwargs: None)
    assert torch.equal(got, generate(model, ids, max_new_tokens=12))


def left_padded(batch_lengths=(8, 5, 2), width=8, seed=3, vocab=VOCAB):
    """Prompts of these lengths, left-padded with 0 to `width`."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (len(batch_lengths), width), generator=g)
    return ids.masked_fill(torch.arange(width)[None, :] < width - torch.tensor(batch_lengths)[:, None], 0)


class Counted:
    """Calls into the prepared step and into the module path's forward (the prompt is one)."""

    def __init__(self, monkeypatch):
        from glassformer.nn.model import DecoderLM
        self.prepared = self.module = 0
        step, forward = DecodeStep.__call__, DecoderLM.forward

        def counted_step(step_self, *args):
            self.prepared += 1
            return step(step_self, *args)

        def counted_forward(model, *args, **kwargs):
            self.module += 1
            return forward(model, *args, **kwargs)
        monkeypatch.setattr(DecodeStep, "__call__", counted_step)
        monkeypatch.setattr(DecoderLM, "forward", counted_forward)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
@pytest.mark.parametrize("pe", ["learned", "rope", "alibi", "relative"])
def test_left_padded_prompts_take_the_prepared_step(pe, strategy, monkeypatch):
    """A batch of prompts of different lengths, left-padded, under every position scheme: after the
    prompt (the module path) every step is prepared — padded keys masked, positions counted per row —
    and the tokens are the explicit-math model's recomputing each prefix without a cache."""
    fields = dict(arch="decoder", vocab_size=VOCAB, d_model=48, n_heads=4, d_ff=96, n_layers=2, max_len=64, pe=pe,
                  pad_id=0, norm_position="pre")
    torch.manual_seed(1)
    fast = build_model(ModelConfig(**fields)).eval()
    math = build_model(ModelConfig(**fields, attn_impl="math")).eval()
    math.load_state_dict(fast.state_dict())
    ids = left_padded()
    options = dict(max_new_tokens=10, strategy=strategy, beam_size=3, eos_id=None)
    calls = Counted(monkeypatch)
    got = generate(fast, ids, **options)
    assert calls.module == 1 and calls.prepared == got.shape[1] - ids.shape[1] - 1
    assert torch.equal(got, generate(math, ids, use_cache=False, **options))
    assert len(set(got[:, 8:].flatten().tolist())) > 2  # not one token repeated


@pytest.mark.parametrize("beams", [1, 3])
def test_left_padded_llama_tokens_identical_to_hf(beams, monkeypatch):
    """HF LLaMA (RoPE, RMSNorm, SwiGLU, grouped K/V heads) on a left-padded prompt batch: HF's tokens,
    every step after the prompt on the prepared step."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from interop_helpers import perturb
    cfg = LlamaConfig(vocab_size=60, hidden_size=30, num_attention_heads=5, num_key_value_heads=1, num_hidden_layers=2,
                      intermediate_size=61, max_position_embeddings=64, rms_norm_eps=1e-5, attn_implementation="eager",
                      pad_token_id=0, bos_token_id=None, eos_token_id=None)
    hf = LlamaForCausalLM(cfg).eval()
    perturb(hf)
    ours = from_hf(hf)
    ids = left_padded(seed=1, vocab=60)
    ref = hf.generate(ids, attention_mask=(ids != 0).long(), max_new_tokens=10, do_sample=False, num_beams=beams,
                      length_penalty=1.0)
    calls = Counted(monkeypatch)
    got = ours.generate(ids, max_new_tokens=10, strategy="greedy" if beams == 1 else "beam", beam_size=beams,
                        padding_mask=ids == 0)
    assert calls.module == 1 and calls.prepared == got.shape[1] - ids.shape[1] - 1
    assert torch.equal(got, ref)


def test_a_model_that_outgrows_the_cache_times_its_routes_on_weights_from_memory(monkeypatch):
    """Where the weights outgrow the last-level cache (here: a cache said to be 256 KiB), each route
    is timed cycling over distinct copies of W in its layout, twice the cache's worth (`_time_cold`):
    every copy is read once, all routes are timed, and the step still gives HF GPT-2's logits."""
    monkeypatch.setattr(decode_gemm, "FORCE", None)
    monkeypatch.delenv("GLASSFORMER_GEMM", raising=False)
    monkeypatch.setattr(decode_gemm, "last_level_cache_bytes", lambda: 256 << 10)
    monkeypatch.setattr(decode_step, "last_level_cache_bytes", lambda: 256 << 10)
    for key in list(decode_gemm._TABLE):
        monkeypatch.delitem(decode_gemm._TABLE, key)
    ours, hf = gpt2_pair(width=384, heads=6, layers=1)
    read = []
    real_addmm = torch.addmm
    monkeypatch.setattr(torch, "addmm", lambda b, x, W, **kw: read.append(W.data_ptr()) or real_addmm(b, x, W, **kw))
    ids = torch.randint(1, VOCAB, (1, 5))
    with torch.inference_mode(), prepared(ours):
        cache = ours.new_cache(16)
        ours(ids, cache=cache)
        step = DecodeStep(ours, steps=16)
        assert all(g.streams for g in (step.layers[0].W_1, step.layers[0].W_2, step.head))
        read.clear()
        got = step(torch.tensor([7]), cache)
    W_1 = step.layers[0].W_1.W  # 384 × 1536 floats = 2.25 MiB: 2 × 256 KiB / 2.25 MiB + 1 → 2 copies, 3 calls
    ours_weights = {p.data_ptr() for p in ours.parameters()}
    copies = {p for p in read if p not in ours_weights}
    monkeypatch.setattr(torch, "addmm", real_addmm)
    ref = hf(torch.cat([ids, torch.tensor([[7]])], dim=1)).logits[:, -1]
    assert (got - ref).abs().max() <= 1e-4 * ref.abs().max()
    if not routes.onednn_available():  # GLASSFORMER_ONEDNN=0 (the portability leg): BLAS, nothing to time
        assert step.layers[0].W_1.route == "blas"
        return
    assert len(copies) >= 2  # the BLAS route's timings read distinct copies, not the model's W
    with torch.no_grad():  # glassformer's kernel is timed beside them where built
        own = gemv.usable(torch.zeros(1, W_1.shape[0]), W_1)
    key = (*shape_class(1, W_1), True, own)
    assert set(decode_gemm._TIMINGS[key]) == set(decode_gemm.DECODE_ROUTES) | ({"gemv"} if own else set())
    assert decode_gemm._TABLE[key]
