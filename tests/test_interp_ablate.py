"""ablate and delete against independent references.

- zero-ablating head h of layer l equals the Hugging Face model whose W_O rows for that head are zero;
- mean / resample ablation and position sets equal the same edit made inside HF's o_proj input;
- each deletion of seed 003 equals a glassformer model *built* without that component, same weights.
"""

import copy

import pytest
import torch

from glassformer.config import ModelConfig
from glassformer.errors import InputError
from glassformer.interop import from_hf
from glassformer.interp import ablate, delete, deletions
from glassformer.nn import build_model
from glassformer.trace import reference_path
from interp_helpers import edit_input, head_cols, max_abs, record_input
from test_interop_bert import make_bert
from test_interop_gpt2 import make_gpt2
from test_interop_llama import make_llama

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = 1e-4


def ids(vocab=50, shape=(3, 7), seed=5):
    return torch.randint(1, vocab, shape, generator=torch.Generator().manual_seed(seed))


def _out(hf, x):
    o = hf(x)
    return o.logits if hasattr(o, "logits") else o.last_hidden_state


CASES = {  # name: (builder, W_O module of layer l, how to zero head h's rows of W_O, d_k)
    "gpt2": (lambda: make_gpt2(30, 5, 2), lambda hf, l: hf.transformer.h[l].attn.c_proj,
             lambda W, s: W.weight[s, :].zero_(), 6),  # Conv1D stores (in, out): rows
    "bert": (lambda: make_bert(30, 5, 2), lambda hf, l: hf.encoder.layer[l].attention.output.dense,
             lambda W, s: W.weight[:, s].zero_(), 6),  # Linear stores (out, in): columns
    "llama_gqa": (lambda: make_llama(36, 6, 2), lambda hf, l: hf.model.layers[l].self_attn.o_proj,
                  lambda W, s: W.weight[:, s].zero_(), 6),
}


@pytest.mark.parametrize("case", CASES)
def test_zero_head_equals_hf_with_that_heads_W_O_rows_zeroed(case):
    build, w_o, zero_rows, dk = CASES[case]
    hf = build().eval()
    model, x = from_hf(hf), ids()
    got = ablate(model, x, heads=[(1, 2), (0, 4)])
    with torch.no_grad():
        zero_rows(w_o(hf, 1), head_cols(2, dk))
        zero_rows(w_o(hf, 0), head_cols(4, dk))
        ref = _out(hf, x)
    assert max_abs(got, ref) <= TOL
    assert max_abs(got, model(x)) > 1e-2  # the ablation changed something


def test_mean_resample_and_positions_equal_the_edit_inside_hf():
    hf = make_gpt2(30, 5, 2)
    model, x, ref_x = from_hf(hf), ids(), ids(seed=9)
    W_O, s = hf.transformer.h[1].attn.c_proj, head_cols(3, 6)
    seen = {}
    with torch.no_grad(), record_input(W_O, seen, "z"):
        hf(ref_x)
    mean = seen["z"][..., s].mean(dim=(0, 1))

    def put_mean(t):
        t[:, [1, 4], s] = mean
        return t
    with torch.no_grad(), edit_input(W_O, put_mean):
        ref = hf(x).logits
    got = ablate(model, x, heads=[(1, 3)], how="mean", reference=(ref_x,), positions=[1, 4])
    assert max_abs(got, ref) <= TOL

    one = ref_x[:1]  # one reference row: resampling can only pick it
    with torch.no_grad(), record_input(W_O, seen, "one"):
        hf(one)

    def put_row(t):
        t[..., s] = seen["one"][..., s]
        return t
    with torch.no_grad(), edit_input(W_O, put_row):
        ref = hf(x).logits
    assert max_abs(ablate(model, x, heads=[(1, 3)], how="resample", reference=(one,)), ref) <= TOL


def test_ffn_and_layer_ablation_equal_zeroed_weights():
    hf = make_gpt2(30, 5, 2)
    model, x = from_hf(hf), ids()
    got_ffn, got_layer = ablate(model, x, ffns=[0]), ablate(model, x, layers=[1])
    with torch.no_grad():
        for p in (hf.transformer.h[0].mlp.c_proj.weight, hf.transformer.h[0].mlp.c_proj.bias):
            p.zero_()
        assert max_abs(got_ffn, hf(x).logits) <= TOL
    hf2 = make_gpt2(30, 5, 2)
    with torch.no_grad():
        for m in (hf2.transformer.h[1].attn.c_proj, hf2.transformer.h[1].mlp.c_proj):
            m.weight.zero_(), m.bias.zero_()
        assert max_abs(got_layer, hf2(x).logits) <= TOL


BASE = dict(arch="encoder-decoder", vocab_size=40, d_model=16, n_heads=4, n_layers=2, d_ff=32)


@pytest.mark.parametrize("placement", ["post", "pre"])
@pytest.mark.parametrize("what,change", [("residual", {"residual": False}), ("norm", {"norm": "none"}),
                                         ("position", {"pe": "none"})])
def test_deletion_equals_a_model_built_without_it(placement, what, change):
    cfg = ModelConfig(**BASE, norm_position=placement, pe="learned", max_len=16)
    model = build_model(cfg).eval()
    with torch.no_grad():
        for n, p in model.named_parameters():  # norms and biases away from their defaults
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(len(n))))
    without = build_model(cfg.replace(**change)).eval()
    without.load_state_dict(model.state_dict(), strict=False)
    src, tgt = ids(40, (2, 6)), ids(40, (2, 5), seed=6)
    with torch.no_grad(), reference_path(without):  # the math path, as under hooks: no norm means large values
        ref = without(src, tgt)
    assert max_abs(delete(model, src, tgt, what=what), ref) <= 1e-5 * max(1.0, float(ref.abs().max()))
    assert max_abs(ref, model(src, tgt)) > 1e-2


@pytest.mark.parametrize("what,weights", [("ffn", (".ffn.W_2", ".ffn.b_2")), ("attention", ("attn.W_O", "attn.b_O"))])
def test_ffn_and_attention_deletions_equal_zeroed_weights(what, weights):
    model = build_model(ModelConfig(**BASE, norm_position="pre")).eval()
    src, tgt = ids(40, (2, 6)), ids(40, (2, 5), seed=6)
    got = delete(model, src, tgt, what=what)
    zeroed = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in zeroed.named_parameters():
            if name.endswith(weights):
                p.zero_()
        assert max_abs(got, zeroed(src, tgt)) <= 1e-5 and max_abs(got, model(src, tgt)) > 1e-2


def test_deletions_table_on_a_model():
    model = from_hf(make_gpt2(30, 5, 2))
    rows = deletions(model, ids())
    assert [r["what"] for r in rows] == ["residual", "norm", "ffn", "attention", "position"]
    assert all(-1 <= r["cosine"] <= 1 and 0 <= r["top1_agreement"] <= 1 for r in rows)


def test_ablation_mistakes():
    model = from_hf(make_gpt2(30, 5, 2))
    x = ids()
    for kwargs, msg in [({"heads": [(2, 0)]}, "layer 2 is outside"), ({"heads": [(0, 5)]}, "head 5 of layer 0"),
                        ({"heads": [(0, 1)], "how": "median"}, "how='median'"), ({}, "nothing to ablate"),
                        ({"heads": [(0, 1)], "positions": [9]}, "positions"),
                        ({"heads": [0]}, "pair"), ({"heads": [(0, 1)], "attn": "cross_attn"}, "no 'cross_attn'"),
                        ({"heads": [(0, 1)], "how": "resample", "reference": (ids(shape=(2, 4)),)}, "same length")]:
        with pytest.raises(InputError, match=msg):
            ablate(model, x, **kwargs)
    with pytest.raises(InputError, match="position deletion"):
        delete(from_hf(make_llama(30, 5, 5)), ids(), what="position")
