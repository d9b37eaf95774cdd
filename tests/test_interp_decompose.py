"""decompose: the parts sum to the residual stream, and each part equals what the Hugging Face model computes.

Oracles: HF's own attention / MLP outputs (read by hooks on its modules), its embeddings, its
final hidden states and its logits. Pre-LN and norm-free: exact (≤ 1e-5); Post-LN: linearised
(σ frozen), with the measured error reported and bounded.
"""

import pytest
import torch

from glassformer.config import ModelConfig
from glassformer.errors import InputError
from glassformer.interop import from_hf
from glassformer.interp import decompose
from glassformer.nn import build_model
from interp_helpers import max_abs, record_output
from test_interop_bert import make_bert
from test_interop_gpt2 import make_gpt2
from test_interop_llama import make_llama
from test_interop_marian import CASES, make as make_marian

pytestmark = pytest.mark.usefixtures("one_thread")
EXACT = 1e-5


def ids(vocab=50, shape=(2, 7), seed=3):
    return torch.randint(1, vocab, shape, generator=torch.Generator().manual_seed(seed))


def test_gpt2_parts_are_hf_attention_and_mlp_outputs_and_sum_exactly():
    hf = make_gpt2(30, 5, 2)
    model, x = from_hf(hf), ids()
    d = decompose(model, x)
    assert d.exact and d.error <= EXACT
    seen = {}
    with torch.no_grad(), record_output(hf.transformer.h[1].attn, seen, "attn"), \
            record_output(hf.transformer.h[1].mlp, seen, "mlp"):
        hf(x)
    heads = sum(d.components[f"dec.1.self_attn.head{h}"] for h in range(5)) + d.components["dec.1.self_attn.b_O"]
    assert max_abs(heads, seen["attn"]) <= EXACT
    assert max_abs(d.components["dec.1.ffn"] + d.components["dec.1.ffn.b_2"], seen["mlp"]) <= EXACT
    assert max_abs(d.components["embed"], hf.transformer.wte(x)) <= EXACT
    assert max_abs(d.components["pos"][0], hf.transformer.wpe.weight[:7]) <= EXACT
    # the residual is the stream entering ln_f: HF's ln_f of it is HF's last hidden state
    with torch.no_grad():
        last = hf(x, output_hidden_states=True).hidden_states[-1]
        assert max_abs(hf.transformer.ln_f(d.residual), last) <= 1e-4


def test_gpt2_direct_logit_attribution_sums_to_hf_logit_difference():
    hf = make_gpt2(32, 4, 3, act="relu", inner=70)
    model, x = from_hf(hf), ids()
    dla = decompose(model, x).logit_attribution(7, minus=11)
    with torch.no_grad():
        logits = hf(x).logits
    total = torch.stack(list(dla.parts.values())).sum(0)
    assert max_abs(total, logits[..., 7] - logits[..., 11]) <= 1e-4
    assert dla.error <= EXACT
    assert "final_norm.beta" in dla.parts and len(dla.ranked()) == len(dla.parts)


def test_llama_gqa_rmsnorm_sum_is_exact():
    model = from_hf(make_llama(36, 6, 2, layers=2, attn_bias=True, mlp_bias=True))
    d = decompose(model, ids(60))
    assert d.exact and d.error <= EXACT
    assert len([k for k in d.components if ".head" in k]) == 2 * 6
    assert d.logit_attribution(5).error <= EXACT


def test_norm_free_model_is_exact():
    cfg = ModelConfig(arch="decoder", vocab_size=60, d_model=16, n_heads=4, n_layers=3, d_ff=32, norm="none",
                      pe="learned", max_len=16)
    d = decompose(build_model(cfg).eval(), ids(60))
    assert d.exact and d.error <= EXACT


def test_post_ln_bert_is_linearised_with_its_error_reported():
    hf = make_bert(30, 5, 2, types=2)
    model, x = from_hf(hf), ids()
    d = decompose(model, x)
    assert not d.exact and "σ" in d.note
    with torch.no_grad():
        last = hf(x).last_hidden_state
    assert max_abs(d.residual, last) <= 1e-4
    assert 0 <= d.error <= EXACT  # σ frozen at this input: the split is linear and lands on the stream
    assert {"embed", "pos", "segment", "embed_norm.beta", "enc.1.norm2.beta"} <= set(d.components)


def test_translator_decoder_stream_with_cross_attention_heads():
    hf = make_marian(*CASES["3heads_gelu_unscaled"]).eval()
    model = from_hf(hf)
    src, tgt = ids(30, (2, 6)), ids(30, (2, 5), seed=4)
    d = decompose(model, src, tgt)
    assert "dec.0.cross_attn.head2" in d.components and d.error <= EXACT
    with torch.no_grad():
        logits = hf(input_ids=src, decoder_input_ids=tgt).logits
    dla = d.logit_attribution(3, minus=4)
    assert max_abs(torch.stack(list(dla.parts.values())).sum(0), logits[..., 3] - logits[..., 4]) <= 1e-4
    enc = decompose(model, src, tgt, stack="enc")
    assert enc.error <= EXACT and "enc.0.attn.head0" in enc.components


def test_grouped_sums_keep_the_total():
    d = decompose(from_hf(make_gpt2(30, 5, 2)), ids())
    for by in ("layer", "sublayer"):
        g = d.grouped(by)
        assert max_abs(sum(g.values()), d.total()) <= 1e-9
    assert set(d.grouped("layer")) >= {"embed", "pos", "dec.0", "dec.1"}


def test_mistakes_are_one_line_errors():
    model = from_hf(make_bert(30, 5, 1))
    with pytest.raises(InputError, match="no output head"):
        decompose(model, ids()).logit_attribution(3)
    with pytest.raises(InputError, match="stack='dec' is not in this encoder"):
        decompose(model, ids(), stack="dec")
    gpt = from_hf(make_gpt2(30, 5, 1))
    with pytest.raises(InputError, match="outside the vocabulary"):
        decompose(gpt, ids()).logit_attribution(999)
    with pytest.raises(InputError, match="model.eval"):
        decompose(gpt.train(), ids())


@pytest.mark.parametrize("family", ["t5", "bart"])
def test_t5_and_bart_attribution_sums_to_hf_logit_difference(family):
    """T5: relative bias, RMSNorm, Pre-LN, tied head scaled by d_model^-0.5; BART: Post-LN with embedding norm."""
    if family == "t5":
        from test_interop_t5 import CASES as T5, make
        hf, vocab = make(*T5["relu_3heads_dkv6"]).eval(), 30
    else:
        from test_interop_bart import CASES as BART, make
        hf, vocab = make(*BART["3heads_dk5_scaled"]).eval(), 30
    model = from_hf(hf)
    src, tgt = ids(vocab, (2, 6)), ids(vocab, (2, 4), seed=4)
    d = decompose(model, src, tgt)
    assert d.error <= EXACT and d.exact == (family == "t5")
    dla = d.logit_attribution(3, minus=5)
    with torch.no_grad():
        logits = hf(input_ids=src, decoder_input_ids=tgt).logits
    assert max_abs(torch.stack(list(dla.parts.values())).sum(0), logits[..., 3] - logits[..., 5]) <= 1e-4
