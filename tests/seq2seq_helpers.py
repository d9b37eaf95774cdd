"""Shared by test_interop_{marian,bart,t5}.py: random HF weights, padded inputs, three ways to run ours."""

from __future__ import annotations

import torch

from glassformer.interop import from_hf


def perturb(hf_model, skip: tuple[str, ...] = (), seed: int = 1) -> int:
    """Overwrite every parameter and buffer with random values (norm gains away from 1, biases away
    from 0, final_logits_bias and relative-bias tables non-zero), so no wrong mapping can hide
    behind a default initialisation. Returns how many tensors were changed."""
    g = torch.Generator().manual_seed(seed)
    tensors = dict(hf_model.named_parameters(remove_duplicate=True))
    tensors.update(dict(hf_model.named_buffers()))
    n = 0
    with torch.no_grad():
        for name, t in tensors.items():
            if any(s in name for s in skip) or not t.is_floating_point():
                continue
            r = torch.randn(t.shape, generator=g)
            if t.dim() == 1 and name.endswith("weight"):
                t.copy_(1 + 0.3 * r)  # norm gain
            elif t.dim() == 1 or "final_logits_bias" in name:
                t.copy_(0.3 * r)  # biases
            elif "relative_attention_bias" in name:
                t.copy_(r)
            else:
                t.copy_(r * t.shape[-1] ** -0.5)
            n += 1
    return n


def padded_batch(vocab: int, pad: int, start: int, src_len: int = 11, tgt_len: int = 7,
                 lengths: tuple[int, ...] = (11, 8, 3), seed: int = 2):
    """Right-padded source ids + HF attention mask, and decoder inputs beginning with `start`."""
    g = torch.Generator().manual_seed(seed)
    batch = len(lengths)
    src = torch.randint(0, vocab, (batch, src_len), generator=g)
    src[src == pad] = (pad + 1) % vocab
    mask = (torch.arange(src_len)[None, :] < torch.tensor(lengths)[:, None]).long()
    src = src.masked_fill(mask == 0, pad)
    tgt = torch.randint(0, vocab, (batch, tgt_len), generator=g)
    tgt[tgt == pad] = (pad + 1) % vocab
    tgt[:, 0] = start
    return src, mask, tgt


def compare(hf_model, src, mask, tgt) -> dict[str, float]:
    """Max |ours − HF| of the logits: fast path (mask derived from pad_id), explicit mask,
    explicit-math path (tracing forces it), and incremental decoding with the KV cache."""
    hf_model.eval()
    with torch.no_grad():
        ref = hf_model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        ours = from_hf(hf_model)
        assert not ours.training
        out = {
            "fast": ours(src, tgt),
            "mask": ours(src, tgt, src_padding_mask=mask == 0),
            "math": ours.run_with_trace(src, tgt, names=["logits"])[0],
        }
        memory, src_pad = ours.encode(src)
        cache = ours.new_cache()
        steps = [ours.decode(tgt[:, i:i + 1], memory, src_pad, cache=cache) for i in range(tgt.shape[1])]
        out["cache"] = torch.cat(steps, dim=1)
    assert ref.abs().max() > 0.5  # the logits carry signal: a 1e-4 match is not trivial
    return {k: (v - ref).abs().max().item() for k, v in out.items()}


def generations(hf_model, src, mask, pad: int, beams: int, new_tokens: int = 8):
    """(HF ids, our ids) from greedy (beams=1) or beam search, pad banned on both sides as
    glassformer's generate does; HF's extra constraints (forced eos, min length) switched off."""
    hf_model.eval()
    ref = hf_model.generate(input_ids=src, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False,
                            num_beams=beams, bad_words_ids=[[pad]], min_length=0, length_penalty=1.0,
                            forced_eos_token_id=None, forced_bos_token_id=None, no_repeat_ngram_size=0)
    ours = from_hf(hf_model)
    got = ours.generate(src, max_new_tokens=new_tokens, strategy="greedy" if beams == 1 else "beam",
                        beam_size=beams)
    return ref, got
