"""glassformer's matrix-vector kernel (nn/gemv.cpp, issue 29) against torch.addmm: built by `make
setup` wherever a compiler is, equal to BLAS to float32 rounding on every shape a decode step makes
(odd sizes, a bias or none, an output buffer, one and two threads), refusing what it cannot take."""

import ast
import shutil

import pytest
import torch
from hypothesis import given, settings, strategies as st

from glassformer.nn import gemv


def test_make_setup_built_the_kernel_where_a_compiler_is():
    """The setup built it (`python -m glassformer.nn.gemv`): on a machine with g++ and ninja and an
    AVX2 CPU the decode step must have the route, not silently fall back to BLAS."""
    if shutil.which("g++") and shutil.which("ninja") and gemv._cpu_ok():
        assert gemv.available(), f"not built at {gemv.build_dir()} (make setup runs python -m glassformer.nn.gemv)"
    else:
        assert not gemv.available()


SHAPES = [(1, 384, 1152), (1, 1536, 384), (1, 384, 8000), (1, 7, 5), (3, 37, 33), (8, 384, 384), (2, 4, 17),
          (1, 1, 1), (5, 129, 1000), (16, 64, 48)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m,K,N", SHAPES)
def test_equals_addmm(m, K, N, threads):
    """x·W + b as torch computes it (BLAS), to float32 rounding: the sums differ only in order, so
    the difference is bounded by K ulps of Σ|x_i W_ij| per output."""
    if not gemv.available():
        pytest.fail("the kernel is not built here (test_make_setup_built_the_kernel_where_a_compiler_is)")
    g = torch.Generator().manual_seed(m * 1000 + K + N)
    x, W, b = torch.randn(m, K, generator=g), torch.randn(K, N, generator=g), torch.randn(N, generator=g)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        scale = (x.abs() @ W.abs() + b.abs()) * K * torch.finfo(torch.float32).eps
        assert ((gemv.gemv(x, W, b) - torch.addmm(b, x, W)).abs() <= scale).all()
        assert ((gemv.gemv(x, W) - x @ W).abs() <= scale).all()
        out = torch.full((m, N), float("nan"))  # written whole, never read
        got = gemv.gemv(x, W, b, out)
        assert got.data_ptr() == out.data_ptr() and ((out - torch.addmm(b, x, W)).abs() <= scale).all()
    finally:
        torch.set_num_threads(before)


@settings(max_examples=100, deadline=None)
@given(m=st.integers(1, 6), K=st.integers(1, 70), N=st.integers(1, 300), bias=st.booleans(),
       threads=st.sampled_from([1, 2]), seed=st.integers(0, 2 ** 16))
def test_any_shape_equals_addmm(m, K, N, bias, threads, seed):
    """Every shape, not only the grid above: K not a multiple of the 16 rows a pass takes (the 4-row
    and 1-row tails), N not a multiple of a vector, products big enough to split between threads."""
    if not gemv.available():
        pytest.fail("the kernel is not built here")
    g = torch.Generator().manual_seed(seed)
    x, W = torch.randn(m, K, generator=g), torch.randn(K, N, generator=g) * 3
    b = torch.randn(N, generator=g) if bias else None
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        want = torch.addmm(b, x, W) if bias else x @ W
        scale = (x.abs() @ W.abs() + (b.abs() if bias else 0)) * K * torch.finfo(torch.float32).eps
        assert ((gemv.gemv(x, W, b) - want).abs() <= scale).all()
    finally:
        torch.set_num_threads(before)


PHI = {"relu": torch.relu, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
       "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"), None: lambda t: t}


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 4), K=st.integers(1, 600), N=st.integers(1, 1100), act=st.sampled_from(sorted(PHI, key=str)),
       residual=st.booleans(), threads=st.sampled_from([1, 2]), seed=st.integers(0, 2 ** 16))
def test_epilogue_equals_torchs_activation_and_add(m, K, N, act, residual, threads, seed):
    """φ(x·W + b) + r in one call (the epilogue: gemv.cpp applies φ and adds r while y is hot) against
    torch's own F.relu / F.gelu (erf and tanh) / F.silu and `+` after torch.addmm: the sum's rounding
    (as above; every φ here has slope ≤ 1.13) plus a few ulps of φ and of the add. Products small and
    large enough to split between threads, N not a multiple of a vector (the epilogue's tail)."""
    if not gemv.available():
        pytest.fail("the kernel is not built here")
    g = torch.Generator().manual_seed(seed)
    x, W, b = torch.randn(m, K, generator=g), torch.randn(K, N, generator=g) / K ** 0.5, torch.randn(N, generator=g)
    r = torch.randn(m, N, generator=g) * 4 if residual else None
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        pre = torch.addmm(b, x, W)
        want = PHI[act](pre) + (r if residual else 0)
        got = gemv.gemv(x, W, b, None, act, r)
        eps = torch.finfo(torch.float32).eps
        bound = 1.13 * (x.abs() @ W.abs() + b.abs()) * K * eps + 4 * eps * (want.abs() + pre.abs() + 1e-30)
        assert ((got - want).abs() <= bound + 1e-7).all(), (got - want).abs().max()
    finally:
        torch.set_num_threads(before)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 4), K=st.integers(1, 300), N=st.integers(2, 1100), beta=st.booleans(),
       threads=st.sampled_from([1, 2]), seed=st.integers(0, 2 ** 16))
def test_epilogue_layer_norm_equals_torchs(m, K, N, beta, threads, seed):
    """Post-LN's Add & Norm in the epilogue, LayerNorm(x·W + b + r) per row with gamma (and beta), against
    torch's F.layer_norm after addmm and `+`, computed in float64 from the same float32 operands:
    within what the sum's rounding moves a normalised value (the row's error over its standard
    deviation, times gamma), plus a few ulps."""
    if not gemv.available():
        pytest.fail("the kernel is not built here")
    g = torch.Generator().manual_seed(seed)
    x, W, b = torch.randn(m, K, generator=g), torch.randn(K, N, generator=g) / K ** 0.5, torch.randn(N, generator=g)
    r = torch.randn(m, N, generator=g)
    gamma, shift = 1 + torch.randn(N, generator=g) * 0.3, torch.randn(N, generator=g) if beta else None
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = gemv.gemv(x, W, b, None, None, r, (gamma, shift, 1e-5))
    finally:
        torch.set_num_threads(before)
    pre = torch.addmm(b.double(), x.double(), W.double()) + r.double()
    want = torch.nn.functional.layer_norm(pre, (N,), gamma.double(), None if shift is None else shift.double(), 1e-5)
    eps = torch.finfo(torch.float32).eps
    sum_error = ((x.abs() @ W.abs() + b.abs()) * K * eps + r.abs() * eps).double().max(dim=1, keepdim=True).values
    std = pre.std(dim=1, unbiased=False, keepdim=True)
    bound = 2 * sum_error / (std + 1e-5) * gamma.abs().double() + 8 * eps * (want.abs() + 1)
    assert ((got.double() - want).abs() <= bound).all(), (got.double() - want).abs().max()


def test_epilogue_refuses_what_would_be_read_after_it_is_written():
    """The output sharing memory with x or with the residual would be read after being written: an
    error, never a wrong sum; an unknown activation code too."""
    if not gemv.available():
        pytest.fail("the kernel is not built here")
    x, W, r = torch.randn(1, 8), torch.randn(8, 8), torch.randn(1, 8)
    for out, residual in ((x, None), (r, r)):
        with pytest.raises(RuntimeError, match="overlap"):
            gemv.kernel().gemv(x, W, None, out, 0, residual)
    with pytest.raises(RuntimeError, match="act must be"):
        gemv.kernel().gemv(x, W, None, None, 9, None)
    with pytest.raises(RuntimeError, match="residual must be"):
        gemv.gemv(x, W, None, None, None, torch.randn(2, 8))


def explicit_attention(q, k, v, length, scale, bias):
    """softmax(q·Kᵀ·scale + bias)·V written out in float64 (seed 000 §2.3–2.4), heads side by side."""
    scores = (q.double() @ k[:, :, :length].double().transpose(-1, -2)) * scale
    if bias is not None:
        scores = scores + bias.double()
    return (torch.softmax(scores, dim=-1) @ v[:, :, :length].double()).transpose(1, 2)  # (B, M, H, d)


@settings(max_examples=60, deadline=None)
@given(B=st.integers(1, 4), H=st.integers(1, 8), M=st.integers(1, 4), length=st.integers(1, 70),
       spare=st.integers(0, 5), d=st.integers(1, 80), bias=st.sampled_from(["none", "keys", "heads", "full"]),
       write=st.booleans(), threads=st.sampled_from([1, 2]), seed=st.integers(0, 2 ** 16))
def test_attend_equals_explicit_softmax_attention(B, H, M, length, spare, d, bias, write, threads, seed):
    """The decode step's attention (attend.cpp) against the explicit math in float64: the cache read in
    place up to `length` of its capacity (views with strides, as the step passes them: q a slice of
    the fused QKV buffer, K and V the halves of one buffer), any d_k (the vector tail), a bias broadcast
    over heads and queries or not, masked keys at the most negative number, one and two threads; with
    one query per row, the step's own key and value written into the cache's row length − 1 first
    (and nothing else of the cache touched)."""
    if not gemv.available():
        pytest.fail("the kernel is not built here")
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(B, 3, H, M, d, generator=g)
    q = qkv[:, 0]  # strided over the batch, as the step's view of its QKV buffer
    joint = torch.randn(B, 2, H, length + spare, d, generator=g)
    k, v = joint.unbind(1)
    shapes = {"none": None, "keys": (B, 1, 1, length), "heads": (B, H, 1, length), "full": (B, H, M, length)}
    mask = None if shapes[bias] is None else torch.randn(shapes[bias], generator=g) * 3
    if mask is not None and length > 1:  # a padded key, as the module path masks it
        mask[..., 0] = torch.finfo(torch.float32).min
    new_k = new_v = None
    if write and M == 1:  # the step's own key and value: views of the QKV buffer, like q
        new_k, new_v = qkv[:, 1], qkv[:, 2]
    untouched = joint.clone()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = gemv.attend(q, k, v, length, d ** -0.5, mask, new_k, new_v)
    finally:
        torch.set_num_threads(before)
    if new_k is not None:
        untouched[:, 0, :, length - 1], untouched[:, 1, :, length - 1] = new_k[:, :, 0], new_v[:, :, 0]
    assert torch.equal(joint, untouched)
    want = explicit_attention(q, k, v, length, d ** -0.5, mask)
    assert got.shape == (B, M, H, d) and got.is_contiguous()
    assert (got.double() - want).abs().max() <= 1e-5 * (1 + want.abs().max())


def test_attend_refuses_what_it_cannot_take():
    """A longer `length` than the cache holds, a non-contiguous d_k, float64, a bias of the wrong
    shape: an error naming attend, never a read past the cache."""
    if not gemv.available():
        pytest.fail("the kernel is not built here")
    q, k = torch.randn(1, 2, 1, 8), torch.randn(1, 2, 5, 8)
    for args in [(q, k, k, 6, 1.0, None), (q, k, k, 0, 1.0, None), (q.transpose(2, 3), k, k, 5, 1.0, None),
                 (q.double(), k.double(), k.double(), 5, 1.0, None), (q, k, k, 5, 1.0, torch.zeros(1, 3, 1, 5)),
                 (q, k.transpose(2, 3).contiguous().transpose(2, 3), k, 5, 1.0, None)]:
        with pytest.raises(RuntimeError, match="attend"):
            gemv.kernel().attend(*args)
    new = torch.randn(1, 2, 1, 8)  # a step's own key and value: both, of its shape, one query per row
    for args in [(q, k, k, 5, 1.0, None, new, None), (q, k, k, 5, 1.0, None, new[..., :4], new[..., :4]),
                 (torch.randn(1, 2, 3, 8), k, k, 5, 1.0, None, new, new)]:
        with pytest.raises(RuntimeError, match="attend"):
            gemv.kernel().attend(*args)


def test_refuses_what_it_cannot_take():
    """Non-contiguous W, float64, mismatched shapes or a wrong buffer: an error, never a wrong sum;
    and `usable` keeps such products (and any that autograd must see) on PyTorch's routes."""
    if not gemv.available():
        pytest.fail("the kernel is not built here")
    x, W = torch.randn(1, 8), torch.randn(8, 4)
    for args in [(x, W.t().contiguous().t()), (x.double(), W.double()), (x, torch.randn(7, 4)),
                 (x, W, None, torch.empty(2, 4))]:
        with pytest.raises(RuntimeError, match="gemv"):
            gemv.gemv(*args)
    assert not gemv.usable(x, W.t().contiguous().t())
    assert not gemv.usable(x.double(), W.double())
    with torch.enable_grad():
        assert not gemv.usable(x, W.requires_grad_())
    with torch.no_grad():
        assert gemv.usable(x, W)


def test_off_switch_and_a_changed_source_are_not_the_built_kernel(monkeypatch, tmp_path):
    """GLASSFORMER_GEMV=off keeps PyTorch's GEMMs; a build folder without this source's binary (a new
    source hashes to a new name) has no kernel — nothing is compiled while decoding."""
    monkeypatch.setenv("GLASSFORMER_GEMV", "off")
    gemv.kernel.cache_clear()
    try:
        assert not gemv.available()
        monkeypatch.setenv("GLASSFORMER_GEMV", "auto")
        monkeypatch.setenv("GLASSFORMER_EXT_DIR", str(tmp_path))
        gemv.kernel.cache_clear()
        assert not gemv.available() and not any(tmp_path.iterdir())
    finally:
        monkeypatch.undo()
        gemv.kernel.cache_clear()


def test_one_openmp_runtime_in_the_process():
    """The kernel's threads are OpenMP's (at::parallel_for): it must use the libgomp torch has loaded,
    not bring a second one (two runtimes halved torch's speed beside CTranslate2, docs/benchmarks.md).
    In a fresh interpreter: torch, then the kernel, then every OpenMP runtime mapped is counted."""
    import subprocess
    import sys
    code = ("import torch\nfrom glassformer.nn import gemv\nassert gemv.kernel() is not None\n"
            "x = torch.randn(1, 512); W = torch.randn(512, 4096)\n"
            "torch.testing.assert_close(gemv.gemv(x, W), x @ W, rtol=1e-4, atol=1e-3)\n"
            "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libgomp' in l or 'libiomp' in l}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    mapped = ast.literal_eval(out.strip().splitlines()[-1])
    assert len(mapped) == 1 and "torch" in mapped[0], mapped


def test_the_profiler_sees_the_kernel():
    """bench/decode_overhead.py counts the GEMMs' time from torch.profiler's events: the kernel's
    call must be one (`glassformer::gemv`), or its time would land outside the GEMMs."""
    if not gemv.available():
        pytest.fail("the kernel is not built here")
    x, W = torch.randn(1, 256), torch.randn(256, 512)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        gemv.gemv(x, W)
    assert [e.count for e in prof.key_averages() if e.key == gemv.PROFILE_NAME] == [1]


def test_autocast_and_transforms_keep_torchs_operators():
    """Under CPU autocast (bf16 products asked for) or a torch.func transform the decode GEMM is not
    ours: the products must stay the operators those modes know."""
    x, W = torch.randn(1, 64), torch.randn(64, 32)
    with torch.no_grad():
        assert gemv.usable(x, W) == gemv.available()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert not gemv.usable(x, W)
    seen = []
    torch.func.vmap(lambda row: seen.append(gemv.usable(row[None], W)) or row)(x)
    assert seen == [False]
