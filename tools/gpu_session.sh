#!/usr/bin/env bash
# One visit to a GPU machine, run from the repository root: environment, the test suite
# (GPU tests included), the property-based verify run and the default bench.
# Logs and the bench JSON go to $OUT (default ./gpu-out). Extra arguments go to bench.
#   usage: tools/gpu_session.sh [bench arguments...]
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-.} PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
status=0
"$PY" -m gemm_driver info 2>&1 | tee "$OUT/info.txt"
"$PY" -m pytest -q -p no:cacheprovider 2>&1 | tee "$OUT/pytest.txt" || status=1
"$PY" -m gemm_driver verify --examples 200 2>&1 | tee "$OUT/verify.txt" || status=1
"$PY" -m gemm_driver bench --json "$OUT/bench.json" "$@" 2>&1 | tee "$OUT/bench.txt" || status=1
exit $status
