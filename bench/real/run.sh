#!/usr/bin/env bash
# The real-data benchmark (issue 10): every arm at the same wall-clock budget, run at the same
# time so that all see the same contention, one CPU thread each.
#   bash bench/real/run.sh [MINUTES] [OUT]      (default 20 minutes, runs/real)
# Then: python bench/real/report.py OUT  ->  docs/real-data.md's table and docs/figures/real-*.png
set -euo pipefail
MIN=${1:-20}
OUT=${2:-runs/real}
PY=${PY:-.venv/bin/python}
GF=${GF:-.venv/bin/glassformer}
$PY bench/real/prepare.py "$OUT/data"
D="$OUT/data"
pids=()
for t in g2p lm-en lm-zh; do
  case $t in
    g2p) args=(--task tsv --data "$D/g2p-train.tsv") ;;
    lm-en) args=(--task lm --data "$D/en-train.txt") ;;
    lm-zh) args=(--task lm --data "$D/zh-train.txt") ;;
  esac
  rm -rf "$OUT/ours-$t"
  nice -n 5 $GF train "${args[@]}" --out "$OUT/ours-$t" --max-minutes "$MIN" --quiet > "$OUT/ours-$t.log" 2>&1 &
  pids+=($!)
  nice -n 5 $PY bench/real/plain_torch.py "$t" "$D" "$OUT/plain-$t.jsonl" "$MIN" > "$OUT/plain-$t.log" 2>&1 &
  pids+=($!)
done
nice -n 5 $PY bench/real/simple.py "$D" "$OUT/simple.json" > "$OUT/simple.log" 2>&1 &
pids+=($!)
wait "${pids[@]}"
$GF eval --ckpt "$OUT/ours-g2p" --data "$D/g2p-test.tsv" --json > "$OUT/ours-g2p-test.json"
$GF eval --ckpt "$OUT/ours-lm-en" --data "$D/en-test.txt" --json > "$OUT/ours-lm-en-test.json"
$GF eval --ckpt "$OUT/ours-lm-zh" --data "$D/zh-test.txt" --json > "$OUT/ours-lm-zh-test.json"
echo "done: $OUT"
