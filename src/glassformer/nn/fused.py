"""The training step's fused elementwise work: RMSNorm, SwiGLU, the rotary rotation (nn/fused.cpp).

The explicit math stays the reference path — `RMSNorm.forward`'s composite in nn/norms.py,
`φ(gate) * pre` in nn/feedforward.py, `apply_rotary` in nn/positional.py — and autograd
differentiates it. These autograd Functions compute the same formulas forward and backward in one
pass each over memory, where the composites cost several operators apiece: on the recipe's
d_model-128 LM in LLaMA's form, each (tokens, d_ff) operand is 4 MB, so the step was bound by memory
traffic between operators rather than by arithmetic (docs/real-data.md, "Where the LLaMA step's time
goes"). tests/test_fused.py holds each to the composite's values and gradients.

They are taken only where the kernels are built (`make setup`; GLASSFORMER_GEMV=off turns them off
with the decode kernels) and nothing asks for torch's own operators: float32 CPU tensors, no
torch.compile, no torch.func transform. Under bf16 autocast SwiGLU takes its bf16 operands and the
rotation its bf16 Q and K (computed in float, as the float32 kernels; the rotation returns float32, as
the composite's promotion does); RMSNorm sees the float32 residual stream either way. Their backward is
not itself differentiable (`once_differentiable`): a second-order gradient (create_graph=True) needs
the composites — run it inside `trace.reference_path(model)`.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from . import gemv


FLOAT32 = (torch.float32,)
WITH_BF16 = (torch.float32, torch.bfloat16)  # SwiGLU's operands and the rotation's Q, K (bf16 under autocast)


def usable(*tensors: torch.Tensor, dtypes: tuple = FLOAT32) -> bool:
    """Whether these operands can take the fused kernels (each of one of `dtypes`, all on the CPU)."""
    return (gemv.available() and all(t.dtype in dtypes and t.device.type == "cpu" for t in tensors)
            and not torch.compiler.is_compiling() and not torch._C._are_functorch_transforms_active())


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, gamma: torch.Tensor, eps: float) -> torch.Tensor:
        x = x.contiguous()
        y, rstd = gemv.kernel().rms_norm_forward(x, gamma.contiguous(), eps)
        ctx.save_for_backward(x, rstd, gamma)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy: torch.Tensor):
        x, rstd, gamma = ctx.saved_tensors
        dx, dgamma = gemv.kernel().rms_norm_backward(dy.contiguous(), x, rstd, gamma.contiguous())
        return dx, dgamma if ctx.needs_input_grad[1] else None, None


def rms_norm(x: torch.Tensor, gamma: torch.Tensor, eps: float) -> torch.Tensor:
    """gamma · x / sqrt(mean(x²) + eps) over the last dimension, in one pass each way."""
    return _RMSNorm.apply(x, gamma, eps)


class _SwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate: torch.Tensor, pre: torch.Tensor) -> torch.Tensor:
        gate, pre = gate.contiguous(), pre.contiguous()
        ctx.save_for_backward(gate, pre)
        return gemv.kernel().swiglu_forward(gate, pre)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_act: torch.Tensor):
        gate, pre = ctx.saved_tensors
        d_gate, d_pre = gemv.kernel().swiglu_backward(d_act.to(gate.dtype).contiguous(), gate, pre)
        return d_gate, d_pre


def swiglu(gate: torch.Tensor, pre: torch.Tensor) -> torch.Tensor:
    """SiLU(gate) ⊙ pre, in one pass each way (σ recomputed in backward rather than stored)."""
    return _SwiGLU.apply(gate, pre)


class _Rotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        cos, sin = cos.contiguous(), sin.contiguous()
        ctx.save_for_backward(cos, sin)
        ctx.dtypes = q.dtype, k.dtype  # bf16 under autocast: the outputs are float32, the gradients go back in bf16
        kernel = gemv.kernel()
        return kernel.rotary(q, cos, sin, 1.0), kernel.rotary(k, cos, sin, 1.0)

    @staticmethod
    @once_differentiable
    def backward(ctx, dq: torch.Tensor, dk: torch.Tensor):
        cos, sin = ctx.saved_tensors
        kernel = gemv.kernel()
        # a rotation's gradient is the rotation back: the same kernel with the angle negated
        dq = kernel.rotary(_last_contiguous(dq), cos, sin, -1.0).to(ctx.dtypes[0]) if ctx.needs_input_grad[0] else None
        dk = kernel.rotary(_last_contiguous(dk), cos, sin, -1.0).to(ctx.dtypes[1]) if ctx.needs_input_grad[1] else None
        return dq, dk, None, None


def _last_contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def rotary_ok(x: torch.Tensor, cos: torch.Tensor) -> bool:
    """The shapes the kernel takes: x (B, H, S, d) with a contiguous last dimension; cos (B or 1, 1, S, d)."""
    return (x.dim() == 4 and x.stride(-1) == 1 and cos.dim() == 4 and cos.shape[1] == 1
            and cos.shape[0] in (1, x.shape[0]) and cos.shape[2:] == x.shape[2:] and x.shape[-1] % 2 == 0)


def rotate_qk(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """(q, k) each turned pairwise by the rotary angles: `apply_rotary` on both, one pass each way."""
    return _Rotary.apply(q, k, cos, sin)
