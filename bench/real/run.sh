#!/usr/bin/env bash
# The real-data benchmark (issue 10): for each task, our defaults and the plain PyTorch recipe run
# at the same time for the same wall-clock budget, one CPU thread each, so both see the same
# machine; tasks run one after the other.
#   SEQUENTIAL=1: the "2 CPU cores, defaults only" instead — each arm alone on the machine
#   for the budget, ours with no --threads (the recipe picks them from the free cores), the plain
#   recipe with every core (PLAIN_THREADS = nproc); twice the wall time.
#   bash bench/real/run.sh [MINUTES] [OUT]      (default 30 minutes per task, runs/real)
#   TASKS="g2p pinyin lm-en lm-zh" (default all four); SIMPLE=0 skips the n-gram / majority baselines.
# Then: python bench/real/report.py OUT  ->  docs/real-data.md's table and docs/figures/real-*.png
# The time-to-quality suite of issue 32 (ten datasets, development and evaluation, 2 5 10 30 minutes):
#   python bench/real/curves.py   (see its docstring; this script stays the issue-10 protocol)
set -euo pipefail
MIN=${1:-30}
OUT=${2:-runs/real}
PY=${PY:-.venv/bin/python}
GF=${GF:-.venv/bin/glassformer}
TASKS=${TASKS:-g2p pinyin lm-en lm-zh}
D="$OUT/data"
test -f "$D/pinyin-test.tsv" || $PY bench/real/prepare.py "$D"  # seeded: the same files every time
if [ "${SIMPLE:-1}" = 1 ]; then
  $PY bench/real/simple.py "$D" "$OUT/simple.json" > "$OUT/simple.log" 2>&1
fi
for t in $TASKS; do
  case $t in
    g2p) args=(--task tsv --data "$D/g2p-train.tsv"); test_file="$D/g2p-test.tsv" ;;
    pinyin) args=(--task tsv --data "$D/pinyin-train.tsv"); test_file="$D/pinyin-test.tsv" ;;
    lm-en) args=(--task lm --data "$D/en-train.txt"); test_file="$D/en-test.txt" ;;
    lm-zh) args=(--task lm --data "$D/zh-train.txt"); test_file="$D/zh-test.txt" ;;
    *) echo "error: unknown task '$t' in TASKS (use g2p, pinyin, lm-en, lm-zh)" >&2; exit 2 ;;
  esac
  rm -rf "$OUT/ours-$t"
  if [ "${SEQUENTIAL:-0}" = 1 ]; then
    echo "each arm alone on $(nproc) cores, one after the other" > "$OUT/protocol-$t.txt"
    $GF train "${args[@]}" --out "$OUT/ours-$t" --max-minutes "$MIN" --quiet > "$OUT/ours-$t.log" 2>&1
    PLAIN_THREADS=$(nproc) $PY bench/real/plain_torch.py "$t" "$D" "$OUT/plain-$t.jsonl" "$MIN" > "$OUT/plain-$t.log" 2>&1
  else
    echo "one thread each, run side by side" > "$OUT/protocol-$t.txt"
    $GF train "${args[@]}" --out "$OUT/ours-$t" --max-minutes "$MIN" --threads 1 --quiet > "$OUT/ours-$t.log" 2>&1 &
    ours=$!
    $PY bench/real/plain_torch.py "$t" "$D" "$OUT/plain-$t.jsonl" "$MIN" > "$OUT/plain-$t.log" 2>&1 &
    plain=$!
    wait $ours $plain
  fi
  $GF eval --ckpt "$OUT/ours-$t" --data "$test_file" --json > "$OUT/ours-$t-test.json"
done
echo "done: $OUT"
