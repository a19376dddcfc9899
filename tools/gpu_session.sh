#!/usr/bin/env bash
# One visit to a GPU machine, run from the repository root: environment, the test suite
# (GPU tests included), the property-based verify run and the default bench.
# Logs and the bench JSON go to $OUT (default ./gpu-out). Extra arguments go to bench;
# they are checked before anything runs, and so is the GPU (one line and exit 2 if absent).
#   usage: tools/gpu_session.sh [--help] [bench arguments...]
set -uo pipefail
usage() {
    cat <<'USAGE'
usage: tools/gpu_session.sh [BENCH ARGUMENTS...]

One visit to a GPU machine, from the repository root: `gemm_driver info`, the whole test
suite (GPU tests included), `verify --examples 200` and `bench --json $OUT/bench.json`
with BENCH ARGUMENTS (e.g. --sizes 1024,4096 --dtype fp32). Logs and the JSON go to $OUT
(default ./gpu-out). Environment: OUT, PYTHON (default python3), PYTHONPATH (default .).
Exit 0 when every step passed, 1 when one failed, 2 for bad arguments or no GPU.
USAGE
}
for arg in "$@"; do
    case "$arg" in
        -h|--help) usage; exit 0 ;;
    esac
done
OUT=${OUT:-gpu-out}
export PYTHONPATH=${PYTHONPATH:-.} PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
# The bench arguments, parsed as bench will parse them: a typo fails now, not after the tests.
if ! why=$("$PY" -c 'import sys; from gemm_driver.cli import build_parser
build_parser().parse_args(["bench", *sys.argv[1:]])' "$@" 2>&1 >/dev/null); then
    echo "gpu_session.sh: error: bench arguments: ${why##*: error: }" >&2
    exit 2
fi
if ! why=$("$PY" -c 'import sys; from gemm_driver.cuda.driver import Device
try:
    Device.get(0)
except Exception as exc:
    sys.exit(str(exc).splitlines()[0])' 2>&1); then
    echo "gpu_session.sh: error: this script needs an NVIDIA GPU: ${why##*$'\n'}" >&2
    exit 2
fi
mkdir -p "$OUT"
status=0
"$PY" -m gemm_driver info 2>&1 | tee "$OUT/info.txt"
"$PY" -m pytest -q -p no:cacheprovider 2>&1 | tee "$OUT/pytest.txt" || status=1
"$PY" -m gemm_driver verify --examples 200 2>&1 | tee "$OUT/verify.txt" || status=1
"$PY" -m gemm_driver bench --json "$OUT/bench.json" "$@" 2>&1 | tee "$OUT/bench.txt" || status=1
exit $status
