#!/usr/bin/env bash
# Regenerate docs/benchmarks.md, docs/benchmarks.png and docs/benchmarks.json in one run (~10 min on 2 cores).
# bench/notes.md (the hand-written reading of the numbers) is appended to the report.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/glassformer bench --json docs/benchmarks.json --md docs/benchmarks.md --notes bench/notes.md "$@"
