#!/usr/bin/env bash
# One full benchmark run on this machine (~10–15 min on 2 cores): docs/benchmarks-KIND.md/.json/.png,
# KIND = avx512, avx2 (a CPU without AVX-512) or avx2cap (an AVX-512 CPU capped to AVX2 by
# ATEN_CPU_CAPABILITY=avx2 and the other caps of docs/benchmarks.md; KIND=... overrides), then the per-machine targets tables at the top of docs/benchmarks.md from every
# docs/benchmarks-*.json there is (bench/machines.py). docs/benchmarks.md's hand-written sections
# are not touched. bench/notes.md (the reading of the numbers) is appended to the run's report.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${KIND:-}" ]; then
  if ! grep -qw avx512f /proc/cpuinfo; then KIND=avx2
  elif [ "${ATEN_CPU_CAPABILITY:-}" = "avx2" ]; then KIND=avx2cap
  else KIND=avx512; fi
fi
.venv/bin/glassformer bench --json "docs/benchmarks-$KIND.json" --md "docs/benchmarks-$KIND.md" --notes bench/notes.md "$@"
runs=()
[ -f docs/benchmarks-avx512.json ] && runs+=(docs/benchmarks-avx512.json=AVX-512)
[ -f docs/benchmarks-avx2cap.json ] && runs+=("docs/benchmarks-avx2cap.json=AVX2 (an AVX-512 CPU capped)")
[ -f docs/benchmarks-avx2.json ] && runs+=(docs/benchmarks-avx2.json=AVX2)
.venv/bin/python bench/machines.py "${runs[@]}" --into docs/benchmarks.md
