"""logit_lens: every layer's stream read through the final norm and head, against Hugging Face's hidden states."""

import pytest
import torch

from glassformer.errors import InputError
from glassformer.interop import from_hf
from glassformer.interp import logit_lens
from interp_helpers import max_abs
from test_interop_bert import make_bert
from test_interop_gpt2 import make_gpt2
from test_interop_marian import CASES, make as make_marian

pytestmark = pytest.mark.usefixtures("one_thread")


def test_gpt2_lens_equals_hf_hidden_states_through_ln_f_and_lm_head():
    hf = make_gpt2(30, 5, 3)
    x = torch.randint(1, 50, (2, 6), generator=torch.Generator().manual_seed(0))
    lens = logit_lens(from_hf(hf), x)
    with torch.no_grad():
        out = hf(x, output_hidden_states=True)
        # HF's last hidden state already went through ln_f; the others did not
        ref = [hf.lm_head(hf.transformer.ln_f(h)) for h in out.hidden_states[:-1]] + [out.logits]
    assert lens.labels == ["x0", "dec.0", "dec.1", "dec.2"]
    assert max_abs(lens.logits, torch.stack(ref)) <= 1e-4
    assert lens.top(3).shape == (4, 6, 3)
    assert torch.equal(lens.top(1)[-1, :, 0], out.logits[0].argmax(-1))
    assert max_abs(lens.prob_of(5, batch=1)[-1], torch.softmax(out.logits[1], -1)[:, 5]) <= 1e-5


def test_translator_decoder_lens_equals_hf_decoder_hidden_states():
    hf = make_marian(*CASES["untied_head"]).eval()
    src = torch.randint(1, 30, (2, 6), generator=torch.Generator().manual_seed(1))
    tgt = torch.randint(1, 30, (2, 4), generator=torch.Generator().manual_seed(2))
    lens = logit_lens(from_hf(hf), src, tgt)
    with torch.no_grad():
        out = hf(input_ids=src, decoder_input_ids=tgt, output_hidden_states=True)
        ref = torch.stack([hf.lm_head(h) + hf.final_logits_bias for h in out.decoder_hidden_states])
    assert max_abs(lens.logits, ref) <= 1e-4


def test_encoder_lens_reads_through_the_embedding():
    hf = make_bert(30, 5, 2)
    x = torch.randint(1, 50, (1, 5), generator=torch.Generator().manual_seed(3))
    lens = logit_lens(from_hf(hf), x)
    with torch.no_grad():
        hs = hf(x, output_hidden_states=True).hidden_states
        ref = torch.stack([h @ hf.embeddings.word_embeddings.weight.t() for h in hs])
    assert lens.unembedding.startswith("embedding") and max_abs(lens.logits, ref) <= 1e-4


def test_lens_mistakes():
    gpt = from_hf(make_gpt2(30, 5, 1))
    with pytest.raises(InputError, match="outside the vocabulary"):
        logit_lens(gpt, torch.tensor([[1, 2]])).prob_of(10_000)
    hf = make_marian(*CASES["untied_head"]).eval()
    with pytest.raises(InputError, match="stack='dec'"):
        logit_lens(from_hf(hf), torch.tensor([[1, 2]]), torch.tensor([[1]]), stack="enc")
