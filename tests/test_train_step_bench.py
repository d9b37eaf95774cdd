"""bench/train_step.py (issue 32 §3): FLOPs counted from the profiled shapes, the operator groups of
the time table, and the padding shares of the trainer's batches on a small pair task."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import train_step  # noqa: E402


def test_gemm_flops_read_each_operators_operand_order():
    assert train_step.gemm_flops("aten::mm", [[64, 128], [128, 512]]) == (2.0 * 64 * 128 * 512, (64, 128, 512))
    assert train_step.gemm_flops("aten::addmm", [[512], [64, 128], [128, 512]])[1] == (64, 128, 512)
    # oneDNN's linear takes W stored (out, in)
    assert train_step.gemm_flops("mkldnn::_linear_pointwise", [[64, 128], [512, 128], [512]])[1] == (64, 128, 512)
    assert train_step.gemm_flops("aten::bmm", [[8, 10, 32], [8, 32, 12]])[0] == 2.0 * 8 * 10 * 32 * 12
    assert train_step.gemm_flops("aten::add", [[64, 128], [64, 128]]) == (0.0, None)


def test_attention_flops_forward_two_products_backward_five():
    q = [2, 4, 10, 32]
    k = [2, 4, 12, 32]
    fwd = train_step.attention_flops("aten::_scaled_dot_product_flash_attention_for_cpu", [q, k, k])
    bwd = train_step.attention_flops("aten::_scaled_dot_product_flash_attention_for_cpu_backward", [q, q, k, k])
    assert fwd == 4.0 * 2 * 4 * 10 * 12 * 32
    assert bwd == 2.5 * fwd  # (grad_out, q, k, v, …): the keys are its third operand


@pytest.mark.parametrize("name, group", [
    ("aten::mm", "gemm"), ("mkldnn::_linear_pointwise", "gemm"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "attention"),
    ("aten::_fused_adamw_", "optimizer+clip"),
    ("aten::native_layer_norm_backward", "elementwise (norm, act, loss, masks)"),
    ("autograd::engine::evaluate_function: AddmmBackward0", "autograd nodes"), ("aten::as_strided", "other operators"),
])
def test_operators_fall_in_their_group(name, group):
    assert train_step.category(name) == group
