#!/bin/sh
# Run every benchmark (one process each) and print a summary; see docs/benchmarks.md.
#   bench/run.sh            full size
#   bench/run.sh --quick    a smoke test
#   bench/run.sh --only sampled,cache
cd "$(dirname "$0")/.." && exec python -m bench "$@"
