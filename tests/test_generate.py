"""Decoding: greedy, beam search, sampling, the KV cache — against recomputation, NumPy, brute force and HF."""

import itertools

import numpy as np
import pytest
import torch

from glassformer.config import POSITIONAL, ModelConfig
from glassformer.errors import InputError
from glassformer.generate import sample_next, top_p_filter
from glassformer.nn.model import build_model
from glassformer.trace import run_with_trace

pytestmark = pytest.mark.usefixtures("one_thread")



def _model(arch, pe="sinusoidal", vocab=17, seed=0, **kw):
    torch.manual_seed(seed)
    kw = {"pad_id": 0, "bos_id": 1, "eos_id": 2, **kw}
    cfg = ModelConfig(arch=arch, vocab_size=vocab, d_model=16, n_heads=2, n_layers=2, d_ff=32, pe=pe, **kw)
    model = build_model(cfg).eval()
    with torch.no_grad():  # a wider spread of logits than the default init: varied, non-repeating output
        for p in model.parameters():
            p.mul_(2.0)
    return model


def _log_prob(model, src_or_prompt, seq, start):
    """Sum of log p(token) of seq[start:] by one full forward pass (no cache), <pad> excluded as in decoding."""
    x = seq.unsqueeze(0)
    with torch.no_grad():
        if model.config.arch == "encoder-decoder":
            logits = model(src_or_prompt.unsqueeze(0), x[:, :-1])[0]
        else:
            logits = model(x[:, :-1])[0]
    logits = logits.float()
    if model.config.pad_id is not None:
        logits[:, model.config.pad_id] = float("-inf")
    logp = torch.log_softmax(logits, -1)
    return sum(float(logp[i - 1, seq[i]]) for i in range(start, len(seq)))


@pytest.mark.parametrize("pe", POSITIONAL)
def test_cached_decoding_equals_full_recomputation(pe):
    for arch in ("decoder", "encoder-decoder"):
        model = _model(arch, pe)
        ids = torch.randint(3, 17, (3, 5))
        cached = model.generate(ids, max_new_tokens=14)
        full = model.generate(ids, max_new_tokens=14, use_cache=False)
        assert torch.equal(cached, full), (arch, pe)
        assert cached.shape[1] > (6 if arch == "decoder" else 1)
        sampled = [model.generate(ids, max_new_tokens=8, strategy="sample", use_cache=c,
                                  generator=torch.Generator().manual_seed(5)) for c in (True, False)]
        assert torch.equal(*sampled)
        beams = [model.generate(ids, max_new_tokens=8, strategy="beam", beam_size=3, use_cache=c)
                 for c in (True, False)]
        assert torch.equal(*beams)


def test_decoder_only_returns_prompt_then_greedy_argmax():
    model = _model("decoder")
    prompt = torch.randint(3, 17, (2, 4))
    out = model.generate(prompt, max_new_tokens=6, eos_id=-1)  # an eos that never comes
    assert out.shape == (2, 10) and torch.equal(out[:, :4], prompt)
    for i in range(4, 10):  # each new token is the argmax of a full forward pass over what precedes it
        logits = model(out[:, :i])[:, -1]
        logits[:, 0] = float("-inf")
        assert torch.equal(out[:, i], logits.argmax(-1))


def test_encoder_decoder_starts_with_bos_and_stops_at_eos():
    model = _model("encoder-decoder", vocab=8)
    src = torch.randint(3, 8, (6, 4))
    free = model.generate(src, max_new_tokens=10, eos_id=-1)  # an eos that never comes
    assert (free[:, 0] == 1).all() and free.shape == (6, 11) and not (free == 0).any()  # <pad> never generated
    eos = int(free[0, 3])  # make a token the model does produce the end marker
    out = model.generate(src, max_new_tokens=10, eos_id=eos)
    for row, full in zip(out.tolist(), free.tolist()):
        n = full.index(eos, 1) + 1 if eos in full[1:] else len(full)
        assert row[:n] == full[:n] and all(t == 0 for t in row[n:])  # stop at eos, then <pad>
    assert out.shape[1] == max(full.index(eos, 1) + 1 if eos in full[1:] else 11 for full in free.tolist())


def test_left_padded_batch_equals_each_prompt_alone():
    model = _model("decoder", "rope")
    prompts = [[5, 6, 7, 8, 9], [11, 12], [3, 14, 15]]
    batch = torch.tensor([[0] * (5 - len(p)) + p for p in prompts])
    together = model.generate(batch, max_new_tokens=7, eos_id=-1)
    for row, p in enumerate(prompts):
        alone = model.generate(torch.tensor([p]), max_new_tokens=7, eos_id=-1)
        assert together[row, 5 - len(p):].tolist() == alone[0].tolist()


def test_padded_source_batch_equals_each_source_alone():
    model = _model("encoder-decoder", "relative")
    sources = [[5, 6, 7, 8, 9], [11, 12], [3, 14, 15]]
    batch = torch.tensor([s + [0] * (5 - len(s)) for s in sources])
    for strategy in ("greedy", "beam"):
        together = model.generate(batch, max_new_tokens=7, strategy=strategy, beam_size=3)
        for row, s in enumerate(sources):
            alone = model.generate(torch.tensor([s]), max_new_tokens=7, strategy=strategy, beam_size=3)[0]
            assert together[row, :len(alone)].tolist() == alone.tolist()
            assert (together[row, len(alone):] == 0).all()


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_beam_size_one_is_greedy(arch):
    model = _model(arch)
    ids = torch.randint(3, 17, (4, 5))
    assert torch.equal(model.generate(ids, max_new_tokens=10, strategy="beam", beam_size=1),
                       model.generate(ids, max_new_tokens=10))


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.5])
def test_wide_beam_finds_the_brute_force_optimum(arch, alpha):
    """With beam_size = V^2 and 3 steps, beam search sees every sequence: it must return the best."""
    V, steps, eos = 5, 3, 1
    model = _model(arch, vocab=V, seed=3, pad_id=None, bos_id=0, eos_id=eos)
    src = torch.tensor([2, 3, 4, 2])
    start = 1 if arch == "encoder-decoder" else len(src)
    prefix = [0] if arch == "encoder-decoder" else src.tolist()
    best, best_seq = -float("inf"), None
    for n in range(1, steps + 1):
        for tail in itertools.product(range(V), repeat=n):
            if eos in tail[:-1] or (n < steps and tail[-1] != eos):
                continue  # eos ends a sequence; shorter sequences must end with it
            seq = torch.tensor(prefix + list(tail))
            score = _log_prob(model, src, seq, start) / n ** alpha
            if score > best:
                best, best_seq = score, seq
    out = model.generate(src.unsqueeze(0), max_new_tokens=steps, strategy="beam", beam_size=V * V,
                         length_penalty=alpha)[0]
    assert out.tolist() == best_seq.tolist()


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_beam_scores_at_least_greedy(arch):
    for seed in range(3):
        model = _model(arch, vocab=9, seed=seed)
        src = torch.randint(3, 9, (5,))
        start = 1 if arch == "encoder-decoder" else 5
        greedy = model.generate(src, max_new_tokens=8)[0]
        beam = model.generate(src, max_new_tokens=8, strategy="beam", beam_size=4, length_penalty=0.0)[0]
        g = _log_prob(model, src, greedy[greedy != 0], start)
        b = _log_prob(model, src, beam[beam != 0], start)
        assert b >= g - 1e-5


def test_top_k_one_sampling_is_greedy():
    for arch in ("decoder", "encoder-decoder"):
        model = _model(arch)
        ids = torch.randint(3, 17, (3, 5))
        sampled = model.generate(ids, max_new_tokens=10, strategy="sample", top_k=1, temperature=1.7,
                                 generator=torch.Generator().manual_seed(0))
        assert torch.equal(sampled, model.generate(ids, max_new_tokens=10))


def _np_nucleus(p, top_p):
    """Indices kept by nucleus sampling: most probable first until their sum reaches top_p."""
    order = np.argsort(-p, kind="stable")
    kept, total = [], 0.0
    for i in order:
        kept.append(int(i))
        total += p[i]
        if total >= top_p:
            break
    return sorted(kept)


def test_top_p_filter_matches_numpy():
    logits = np.log(np.array([0.05, 0.30, 0.10, 0.25, 0.02, 0.18, 0.10], dtype=np.float64))
    probs = np.exp(logits) / np.exp(logits).sum()
    for top_p in (0.01, 0.29, 0.31, 0.5, 0.56, 0.8, 0.9, 0.99, 1.0):
        out = top_p_filter(torch.tensor(logits).unsqueeze(0), top_p)[0].numpy()
        assert sorted(np.flatnonzero(np.isfinite(out)).tolist()) == _np_nucleus(probs, top_p), top_p
        assert np.allclose(out[np.isfinite(out)], logits[np.isfinite(out)])


def test_sampling_frequencies_follow_temperature_top_k_top_p():
    logits = torch.tensor([1.0, 0.2, -0.5, 2.0, 0.0, -1.0])
    n = 60_000
    g = torch.Generator().manual_seed(0)
    batch = logits.expand(n, -1)

    def freq(**kw):
        return np.bincount(sample_next(batch, generator=g, **kw).numpy(), minlength=6) / n

    def softmax(x):
        e = np.exp(x - x.max())
        return e / e.sum()

    x = logits.numpy().astype(np.float64)
    assert np.abs(freq(temperature=0.7) - softmax(x / 0.7)).max() < 0.01
    top3 = np.argsort(-x)[:3]
    want = np.zeros(6)
    want[top3] = softmax(x[top3])
    assert np.abs(freq(top_k=3) - want).max() < 0.01
    p = softmax(x)
    keep = _np_nucleus(p, 0.8)
    want = np.zeros(6)
    want[keep] = p[keep] / p[keep].sum()
    assert np.abs(freq(top_p=0.8) - want).max() < 0.01


@pytest.mark.parametrize("temperature", [1e-300, 5e-324, 1e-45])
@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_a_temperature_whose_quotient_overflows_samples_the_argmax(arch, temperature):
    """logits / 1e-300 is ±inf in float32 and softmax(inf) is NaN (torch.multinomial then raised); the
    limit of softmax(logits / T) as T -> 0 is all mass on the maximum: greedy's tokens, computed by the
    argmax path, are the reference."""
    model = _model(arch, eos_id=None)
    prompt = torch.randint(3, 17, (3, 4))
    greedy = model.generate(prompt, max_new_tokens=6)
    sampled = model.generate(prompt, max_new_tokens=6, strategy="sample", temperature=temperature)
    assert torch.equal(sampled, greedy)
    row = torch.tensor([[3.0, 1.0, -2.0], [float("-inf"), 0.5, 0.25]])
    assert torch.equal(sample_next(row, temperature=temperature), torch.tensor([0, 1]))


def test_cross_attention_pattern_matches_a_traced_forward():
    model = _model("encoder-decoder", eos_id=None)
    src = torch.randint(3, 17, (2, 6))
    out, attn = model.generate(src, max_new_tokens=5, return_cross_attention=True)
    assert attn.shape == (2, 5, 6)
    assert torch.allclose(attn.sum(-1), torch.ones(2, 5), atol=1e-5)
    last = model.config.dec_layers - 1
    _, trace = run_with_trace(model, src, out[:, :-1], names=[f"dec.{last}.cross_attn.pattern"])
    assert torch.allclose(attn, trace[f"dec.{last}.cross_attn.pattern"].mean(1), atol=1e-5)
    assert torch.equal(out, model.generate(src, max_new_tokens=5))  # recording does not change the output


def test_matches_hugging_face_gpt2_generate():
    transformers = pytest.importorskip("transformers")
    from glassformer.interop import from_hf
    for seed in range(3):
        torch.manual_seed(seed)
        cfg = transformers.GPT2Config(vocab_size=12, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                                      bos_token_id=11, eos_token_id=2, pad_token_id=2, initializer_range=0.3)
        hf = transformers.GPT2LMHeadModel(cfg).eval()
        ours = from_hf(hf)
        ids = torch.randint(3, 11, (4, 5))
        mask = torch.ones_like(ids)
        with torch.no_grad():
            want = hf.generate(ids, attention_mask=mask, max_new_tokens=15, do_sample=False)
            want_beam = hf.generate(ids, attention_mask=mask, max_new_tokens=10, do_sample=False, num_beams=3,
                                    length_penalty=1.0)
        assert torch.equal(ours.generate(ids, max_new_tokens=15), want)
        assert torch.equal(ours.generate(ids, max_new_tokens=10, strategy="beam", beam_size=3), want_beam)


def test_bad_options_are_one_line():
    dec = _model("decoder")
    ids = torch.tensor([[3, 4]])
    with pytest.raises(InputError, match="strategy='nucleus' is not one of greedy, beam, sample"):
        dec.generate(ids, strategy="nucleus")
    with pytest.raises(InputError, match="max_new_tokens=0 must be a positive integer"):
        dec.generate(ids, max_new_tokens=0)
    with pytest.raises(InputError, match=r"top_p=1.5 must be in \(0, 1\]"):
        dec.generate(ids, strategy="sample", top_p=1.5)
    for bad in (0, -1.0, float("nan"), float("inf"), True, "1"):  # every kind of bad number, not one
        with pytest.raises(InputError, match=r"temperature=.* must be a finite number > 0"):
            dec.generate(ids, strategy="sample", temperature=bad)
    for bad in (float("nan"), float("inf"), -float("inf"), None):
        with pytest.raises(InputError, match=r"length_penalty=.* must be a finite number"):
            dec.generate(ids, strategy="beam", length_penalty=bad)
    for bad in (float("nan"), 0, -0.5, 1.01, "0.9", True):
        with pytest.raises(InputError, match=r"top_p=.* must be in \(0, 1\]"):
            dec.generate(ids, strategy="sample", top_p=bad)
    with pytest.raises(InputError, match="return_cross_attention needs an encoder-decoder model"):
        dec.generate(ids, return_cross_attention=True)
    with pytest.raises(InputError, match=r"token id 40 in ids is outside the vocabulary \[0, 17\)"):
        dec.generate(torch.tensor([[40]]))
    from glassformer.generate import generate
    with pytest.raises(InputError, match="an encoder-only model cannot generate"):
        generate(build_model(ModelConfig(arch="encoder", vocab_size=9, d_model=8, n_heads=2, n_layers=1, d_ff=8)), ids)

