"""patch and attribution_patch against independent references.

- patching the whole clean activation of a layer's output (a translator: the encoder memory)
  restores the clean logits exactly;
- per-head patching equals the same patch made inside Hugging Face: at o_proj's input for query
  heads, at k_proj's output for grouped-query K heads (LLaMA), at encoder_attn for cross-attention;
- attribution patching equals activation patching where the metric is linear in the patched value.
"""

import pytest
import torch

from glassformer.config import ModelConfig
from glassformer.errors import InputError
from glassformer.interop import from_hf
from glassformer.interp import agreement, attribution_patch, patch, run_patched
from glassformer.nn import build_model
from glassformer.trace import run_with_trace
from interp_helpers import edit_input, edit_output, head_cols, record_input, record_output
from test_interop_gpt2 import make_gpt2
from test_interop_llama import make_llama
from test_interop_marian import CASES, make as make_marian

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = 1e-4


def pair(vocab=50, shape=(2, 7), at=(2,)):
    clean = torch.randint(1, vocab, shape, generator=torch.Generator().manual_seed(7))
    corrupted = clean.clone()
    for p in at:
        corrupted[:, p] = (corrupted[:, p] + 5) % (vocab - 1) + 1
    return clean, corrupted


def test_whole_clean_activation_restores_clean_logits_exactly():
    model = from_hf(make_gpt2(30, 5, 3))
    clean, corrupted = pair()
    out, tr = run_with_trace(model, clean)
    for l in range(3):
        got = run_patched(model, (corrupted,), {f"dec.{l}.out": ((...,), tr[f"dec.{l}.out"])})
        assert torch.equal(got, out)
    r = patch(model, clean, corrupted, hook="dec.*.out", per="all")
    assert torch.allclose(r.effects, torch.ones(3, 1), atol=1e-6)
    # a translator: the clean encoder memory restores the clean logits of a corrupted source
    mt = from_hf(make_marian(*CASES["3heads_gelu_unscaled"]).eval())
    src, bad = pair(30, (2, 6))
    tgt = torch.randint(1, 30, (2, 4), generator=torch.Generator().manual_seed(8))
    out, tr = run_with_trace(mt, src, tgt)
    got = run_patched(mt, (bad, tgt), {"enc.0.out": ((...,), tr["enc.0.out"])})
    assert torch.equal(got, out)
    # by default a translator is patched along its decoder stream, one row per decoder layer
    assert patch(mt, (src, tgt), (bad, tgt)).hooks == ["dec.0.out"]


def test_position_patching_of_the_stream_localises_the_change():
    model = from_hf(make_gpt2(30, 5, 2))
    clean, corrupted = pair(at=(2,))
    r = patch(model, clean, corrupted, hook="dec.0.resid_post")
    # only the corrupted position (and, causally, the last one) can restore anything at layer 0
    assert r.labels == [f"pos{p}" for p in range(7)]
    assert r.effects[0, [0, 1]].abs().max() <= 1e-5 and r.effects[0, 2].abs() > 1e-3


def _hf_query_head_patch(hf, w_o, clean, corrupted, h, dk):
    seen = {}
    with torch.no_grad(), record_input(w_o, seen, "z"):
        hf(clean)

    def put(t):
        t[..., head_cols(h, dk)] = seen["z"][..., head_cols(h, dk)]
        return t
    with torch.no_grad(), edit_input(w_o, put):
        return hf(corrupted).logits


def test_gqa_heads_patch_like_llama_k_proj_and_o_proj_slices():
    hf = make_llama(36, 6, 2, layers=2)  # 3 query heads per K/V head, d_k = 6
    model = from_hf(hf)
    clean, corrupted = pair(60)
    out, tr = run_with_trace(model, clean, names=["dec.1.self_attn.k", "dec.0.self_attn.z"])
    with torch.no_grad():
        clean_logits = model(clean)
    k_proj = hf.model.layers[1].self_attn.k_proj
    r = patch(model, clean, corrupted, hook="dec.1.self_attn.k", per="head")
    assert r.labels == ["head0+1+2", "head3+4+5"]
    seen = {}
    with torch.no_grad(), record_output(k_proj, seen, "k"):
        hf(clean)
    for g, label in enumerate(r.labels):
        heads = [int(h) for h in label[4:].split("+")]
        got = run_patched(model, (corrupted,), {"dec.1.self_attn.k": ((slice(None), heads), tr["dec.1.self_attn.k"])})

        def put(t, g=g):
            t[..., head_cols(g, 6)] = seen["k"][..., head_cols(g, 6)]
            return t
        with torch.no_grad(), edit_output(k_proj, put):
            ref = hf(corrupted).logits
        assert float((got - ref).abs().max()) <= TOL
        # and the effect patch() reported is the normalised logit difference of that run
        good, bad = clean_logits[:, -1].argmax(-1), model(corrupted)[:, -1].argmax(-1)
        rows = torch.arange(2)
        m = lambda o: float((o[:, -1][rows, good] - o[:, -1][rows, bad]).mean())  # noqa: E731
        expect = (m(ref) - r.corrupted_metric) / (r.clean_metric - r.corrupted_metric)
        assert abs(float(r.effects[0, g]) - expect) <= 1e-3
    rz = patch(model, clean, corrupted, hook="dec.0.self_attn.z", per="head")
    for h in (0, 4):
        got = run_patched(model, (corrupted,), {"dec.0.self_attn.z": ((slice(None), [h]), tr["dec.0.self_attn.z"])})
        ref = _hf_query_head_patch(hf, hf.model.layers[0].self_attn.o_proj, clean, corrupted, h, 6)
        assert float((got - ref).abs().max()) <= TOL
    assert len(rz.labels) == 6


def test_cross_attention_heads_and_source_positions_patch_like_marian():
    hf = make_marian(*CASES["opus_like_5heads"]).eval()
    model = from_hf(hf)
    src, bad = pair(30, (2, 6), at=(1, 4))
    tgt = torch.randint(1, 30, (2, 4), generator=torch.Generator().manual_seed(9))
    attn = hf.model.decoder.layers[2].encoder_attn
    r = patch(model, (src, tgt), (bad, tgt), hook="dec.2.cross_attn.z", per="head")
    _, tr = run_with_trace(model, src, tgt, names=["dec.2.cross_attn.z", "dec.2.cross_attn.v"])
    seen = {}
    with torch.no_grad(), record_input(attn.out_proj, seen, "z"), record_output(attn.v_proj, seen, "v"):
        hf(input_ids=src, decoder_input_ids=tgt)
    for h in range(5):
        def put(t, h=h):
            t[..., head_cols(h, 6)] = seen["z"][..., head_cols(h, 6)]
            return t
        with torch.no_grad(), edit_input(attn.out_proj, put):
            ref = hf(input_ids=bad, decoder_input_ids=tgt).logits
        got = run_patched(model, (bad, tgt), {"dec.2.cross_attn.z": ((slice(None), [h]), tr["dec.2.cross_attn.z"])})
        assert float((got - ref).abs().max()) <= TOL
    assert r.effects.shape == (1, 5)
    # values of source position 4, every head: HF's v_proj output at that source row
    rv = patch(model, (src, tgt), (bad, tgt), hook="dec.2.cross_attn.v", per="position")
    assert rv.labels == [f"pos{p}" for p in range(6)]

    def put_v(t):
        t[:, 4] = seen["v"][:, 4]
        return t
    with torch.no_grad(), edit_output(attn.v_proj, put_v):
        ref = hf(input_ids=bad, decoder_input_ids=tgt).logits
    got = run_patched(model, (bad, tgt), {"dec.2.cross_attn.v": ((slice(None), slice(None), 4), tr["dec.2.cross_attn.v"])})
    assert float((got - ref).abs().max()) <= TOL


def test_attribution_equals_patching_where_the_metric_is_linear():
    """No final norm and a logit-difference metric: the logits are linear in the last stream, so the
    first-order estimate is exact there; earlier layers agree less, and `agreement` says how much."""
    cfg = ModelConfig(arch="decoder", vocab_size=50, d_model=24, n_heads=4, n_layers=2, d_ff=48,
                      norm="none", norm_position="pre", pe="learned", max_len=16)
    torch.manual_seed(1)  # weights whose answer the corruption changes (where none does, every effect is 0)
    model = build_model(cfg).eval()
    clean, corrupted = pair()
    with torch.no_grad():
        assert (model(clean)[:, -1].argmax(-1) != model(corrupted)[:, -1].argmax(-1)).any()
    exact = patch(model, clean, corrupted, hook="dec.1.out")
    approx = attribution_patch(model, clean, corrupted, hook="dec.1.out")
    assert torch.allclose(exact.effects, approx.effects, atol=1e-4)
    a = agreement(patch(model, clean, corrupted, hook="dec.*.resid_mid"),
                  attribution_patch(model, clean, corrupted, hook="dec.*.resid_mid"))
    assert a["pearson"] > 0.9 and a["same_top"] and a["max_abs_diff"] > 0  # close, not exact, before the last


def test_patch_mistakes():
    model = from_hf(make_gpt2(30, 5, 2))
    clean, corrupted = pair()
    with pytest.raises(InputError, match="same shapes"):
        patch(model, clean, corrupted[:, :5])
    with pytest.raises(InputError, match="no hook point matches"):
        patch(model, clean, corrupted, hook="dec.*.attn.z")
    with pytest.raises(InputError, match="per='head' needs a per-head hook"):
        patch(model, clean, corrupted, hook="dec.0.resid_mid", per="head")
    with pytest.raises(InputError, match="per='token'"):
        patch(model, clean, corrupted, per="token")
