"""No derived weight copy outlives an update of the weights (nn/prepared.py, issue 27).

The state a user reaches: a model that was evaluated and generated with (which is when copies are
made: the fused W_QKV, the decode step's layouts, the tied head's W_Eᵀ), then updated — by a fused,
foreach or for-loop optimizer, `load_state_dict`, an in-place edit under `no_grad`, a user's own
rule through `.data`, a `torch.func` update — then evaluated again. Reference: a freshly built
model given the same `state_dict`, which has never made a copy. Eval-mode forward, greedy
generation (the prepared decode step), sampling and beam search must equal
it bit for bit. Before the fix, a fused AdamW step left the evaluated model 0.06–0.35 away.
DDP's broadcast and FSDP run in tests/test_prepared_distributed.py.
"""

from __future__ import annotations

import pytest
import torch

from glassformer.config import ModelConfig
from glassformer.generate import generate
from glassformer.nn import build_model, decode_gemm, decode_step
from glassformer.nn.prepared import prepared

pytestmark = pytest.mark.usefixtures("one_thread")
VOCAB = 40

ARCHS = {
    "encoder": dict(arch="encoder"),
    "decoder": dict(arch="decoder"),  # the prepared decode step; tied head (W_U = W_Eᵀ copy)
    "decoder-untied-post-ln": dict(arch="decoder", tie_embeddings=False, norm_position="post", pe="sinusoidal"),
    "decoder-rope": dict(arch="decoder", pe="rope"),
    "encoder-decoder": dict(arch="encoder-decoder"),
    "encoder-decoder-relative": dict(arch="encoder-decoder", pe="relative"),
    # the shapes of the families from_hf reads (interop/): BERT, LLaMA, Marian, T5
    "bert-like": dict(arch="encoder", pe="learned", embed_norm=True, activation="gelu", n_segments=2),
    "llama-like": dict(arch="decoder", pe="rope", norm="rmsnorm", norm_position="pre", activation="swiglu",
                       attn_bias=False, ffn_bias=False, tie_embeddings=False),
    "marian-like": dict(arch="encoder-decoder", pe="sinusoidal_half", embed_scale=True, head_bias=True),
    "t5-like": dict(arch="encoder-decoder", pe="relative", norm="rmsnorm", norm_position="pre", scale_scores=False,
                    attn_bias=False, ffn_bias=False, activation="gelu", tied_head_rescale=True),
}


def make(arch: str) -> torch.nn.Module:
    cfg = ModelConfig(vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0, max_len=64,
                      pad_id=0, bos_id=1, eos_id=2, **ARCHS[arch])
    return build_model(cfg)


def inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randint(3, VOCAB, (3, 7), generator=g), torch.randint(3, VOCAB, (3, 6), generator=g)


def outputs(model) -> dict[str, torch.Tensor]:
    """Everything a user reads from a model: eval forward, greedy, sampled and beam outputs."""
    src, tgt = inputs()
    model.eval()
    arch = model.config.arch
    with torch.no_grad():
        out = {"forward": model(src, tgt) if arch == "encoder-decoder" else model(src)}
    if arch != "encoder":
        prompt = src[:1] if arch == "decoder" else src
        out["greedy"] = generate(model, prompt, max_new_tokens=8, eos_id=-1)
        out["sample"] = generate(model, prompt, max_new_tokens=8, strategy="sample", eos_id=-1,
                                 generator=torch.Generator().manual_seed(3))
        out["beam"] = generate(model, prompt, max_new_tokens=6, strategy="beam", beam_size=3)
        with torch.inference_mode():  # the greedy step's logits, not only their argmax
            cache = model.new_cache(32)
            if arch == "decoder":
                model(src[:1], cache=cache)
                step, tokens = decode_step.prepared(model, cache, None), [torch.tensor([t]) for t in (5, 6, 7)]
            else:  # the translator's step from the start token, its memory's K/V made at the first
                step = decode_step.prepared(model, cache, None, *model.encode(src))
                tokens = [torch.full((3,), t) for t in (model.config.start_id, 5, 6)]
            if step is not None:  # None where it does not apply (none of ARCHS now)
                with prepared(model):
                    out["decode_step"] = torch.stack([step(t, cache) for t in tokens])
    return out


def training_loss(model) -> torch.Tensor:
    src, tgt = inputs()
    model.train()
    return _loss(model, None, src, tgt)


def _loss(model, params, src, tgt) -> torch.Tensor:
    """The model's own cross-entropy; an encoder's hidden states pulled towards 0 (any loss moves them)."""
    arch = model.config.arch
    args, kwargs = ((src, tgt), {"targets": tgt}) if arch == "encoder-decoder" else ((src,), {"targets": src})
    if arch == "encoder":
        kwargs = {}
    out = model(*args, **kwargs) if params is None else torch.func.functional_call(model, params, args, kwargs)
    return out.pow(2).mean() if arch == "encoder" else out


def fresh_copy(model) -> torch.nn.Module:
    twin = build_model(model.config)
    twin.load_state_dict(model.state_dict())
    return twin


def assert_same(model) -> None:
    got, want = outputs(model), outputs(fresh_copy(model))
    assert got.keys() == want.keys()
    for name in got:
        assert torch.equal(got[name], want[name]), f"{name}: max |Δ| {(got[name] - want[name]).abs().max()}"


def step_with(optimizer_factory):
    def update(model):
        opt = optimizer_factory(model.parameters())
        for _ in range(3):
            opt.zero_grad()
            training_loss(model).backward()
            opt.step()
    return update


def load_other(model):
    torch.manual_seed(123)
    model.load_state_dict(build_model(model.config).state_dict())


def no_grad_edit(model):
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.5).add_(0.01)


def data_edit(model):  # a user's own update rule through .data: no version counter moves
    training_loss(model).backward()
    for p in model.parameters():
        if p.grad is not None:
            p.data.add_(p.grad, alpha=-0.5)


def func_update(model):  # gradients from torch.func, written back with a foreach op
    params = {k: v.detach() for k, v in model.named_parameters()}
    src, tgt = inputs()

    def loss(p):
        return _loss(model, p, src, tgt)
    model.train()
    grads = torch.func.grad(loss)(params)
    with torch.no_grad():
        names = list(params)
        torch._foreach_add_([dict(model.named_parameters())[n] for n in names], [grads[n] for n in names],
                            alpha=-0.5)


UPDATES = {
    "adamw-fused": step_with(lambda ps: torch.optim.AdamW(ps, lr=0.05, fused=True)),
    "adam-fused": step_with(lambda ps: torch.optim.Adam(ps, lr=0.05, fused=True)),
    "adamw-foreach": step_with(lambda ps: torch.optim.AdamW(ps, lr=0.05, foreach=True)),
    "adamw-for-loop": step_with(lambda ps: torch.optim.AdamW(ps, lr=0.05, foreach=False)),
    "sgd": step_with(lambda ps: torch.optim.SGD(ps, lr=0.5, momentum=0.9)),
    "load_state_dict": load_other,
    "no_grad-in-place": no_grad_edit,
    "data-update": data_edit,
    "torch.func": func_update,
}


@pytest.mark.parametrize("update", list(UPDATES))
@pytest.mark.parametrize("arch", list(ARCHS))
def test_outputs_after_an_update_equal_a_fresh_model(arch, update):
    model = make(arch)
    before = outputs(model)  # fills whatever a generation keeps
    UPDATES[update](model)
    after = outputs(model)
    assert not torch.equal(before["forward"], after["forward"])  # the update changed the function
    assert ("decode_step" in after) == (model.config.arch != "encoder")
    assert_same(model)


@pytest.mark.parametrize("route", decode_gemm.DECODE_ROUTES + ("gemv",))
def test_decode_routes_keep_no_copy_across_training(route, monkeypatch):
    """The routes that keep a (out, in) copy or oneDNN's blocked layout of W: generate, train with
    fused AdamW, generate again — every copy is of the weights as they are now."""
    monkeypatch.setattr(decode_gemm, "FORCE", route)
    model = build_model(ModelConfig(arch="decoder", vocab_size=VOCAB, d_model=384, n_heads=6, n_layers=1,
                                    d_ff=768, dropout=0.0, max_len=64))  # wide enough for oneDNN to apply
    outputs(model)
    UPDATES["adamw-fused"](model)
    assert_same(model)


def test_evaluating_inside_a_scope_sees_every_optimizer_step():
    """Inside a scope copies are kept; an optimizer step there still drops them (the global step hook)
    and load_state_dict or an in-place edit is seen by the version counter."""
    model = make("decoder")
    opt = torch.optim.AdamW(model.parameters(), lr=0.05, fused=True)
    with prepared(model):
        for update in (lambda: (training_loss(model).backward(), opt.step(), opt.zero_grad()),
                       lambda: load_other(model), lambda: no_grad_edit(model)):
            outputs(model)
            update()
            got = outputs(model)
            want = outputs(fresh_copy(model))
            for name in got:
                assert torch.equal(got[name], want[name]), name


def test_nothing_is_kept_outside_a_scope():
    model = make("encoder-decoder")
    outputs(model)
    kept = [m for m in model.modules() if m.__dict__.get("_prepared_store") is not None]
    assert kept == []
    with prepared(model), prepared(model):  # nested scopes: kept until the outer one ends
        outputs(model)
        assert any(m.__dict__.get("_prepared_store") for m in model.modules())
    assert all(m.__dict__.get("_prepared_store") is None for m in model.modules())
