#!/usr/bin/env bash
# The portability leg of `make test` (issue 11): the numerical tests and `glassformer bench --quick`
# again with the CPU capability capped and with the oneDNN route switched off, so that a machine
# unlike the developer's (AVX2 without AVX-512 or bf16; a torch build without oneDNN, and no compiler
# for glassformer's own GEMV kernel, nn/gemv.py) cannot break
# the suite unseen. Numerical subset: GEMM routes vs float64, components vs torch, whole models vs
# Hugging Face GPT-2, BERT and LLaMA (LLaMA's norms, gated FFN and rotations through nn/fused.cpp in the
# capped leg, through their composites with the kernels off), cached decoding vs recomputation, the
# prepared decode step vs HF.
set -euo pipefail
BIN=${BIN:-.venv/bin}
TESTS="tests/test_precision.py tests/test_fast_gemm.py tests/test_decode_step.py tests/test_components.py tests/test_torch_layers.py tests/test_interop_gpt2.py tests/test_interop_bert.py tests/test_interop_llama.py tests/test_generate.py"
start=$(date +%s)
for caps in "ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2" "GLASSFORMER_ONEDNN=0 GLASSFORMER_GEMV=off"; do
  echo "portability: $caps" >&2
  env $caps "$BIN/python" -m pytest -n 2 -q -p no:cacheprovider $TESTS
  env $caps "$BIN/glassformer" bench --quick > /dev/null
done
echo "portability leg: $(( $(date +%s) - start )) s" >&2
