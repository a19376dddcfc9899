#!/usr/bin/env bash
# Shared-memory bank conflicts of the ladder rungs, counted by Nsight Compute (needs a GPU
# and ncu on PATH). Each kernel is launched once on 1024^3 (aligned: the float4 path of
# vectorized and later rungs) and once on 1023^3 (odd leading dimensions: the scalar path);
# ncu reads the conflict and instruction counters of every launch. Run from the repo root:
#   tools/bank_conflicts.sh [OUTPUT]   (default results/h100-80gb-hbm3/bank-conflicts.txt)
# Bad arguments, a missing ncu or no GPU: one line on stderr and exit 2, before any work.
set -euo pipefail
USAGE="usage: tools/bank_conflicts.sh [--help] [OUTPUT]"
fail() { echo "bank_conflicts.sh: error: $*" >&2; exit 2; }
case "${1:-}" in
    -h|--help)
        echo "$USAGE"
        echo
        echo "Shared-memory bank conflicts of the ladder rungs, counted by Nsight Compute (ncu) on"
        echo "1024^3 and 1023^3; the table goes to OUTPUT (default"
        echo "results/h100-80gb-hbm3/bank-conflicts.txt). Needs a GPU and ncu on PATH. Environment:"
        echo "KERNELS (space-separated NAME[:TUNABLE=V,...]), PYTHON (default python3)."
        exit 0 ;;
    --) shift ;;
    -*) fail "unknown option ${1} ($USAGE)" ;;
esac
[ $# -le 1 ] || fail "one OUTPUT path at most, got $# arguments ($USAGE)"
OUTPUT=${1:-results/h100-80gb-hbm3/bank-conflicts.txt}
[ -n "$OUTPUT" ] || fail "OUTPUT is empty ($USAGE)"
[ ! -d "$OUTPUT" ] || fail "OUTPUT $OUTPUT is a directory; give a file path"
PY=${PYTHON:-python3}
command -v ncu >/dev/null || fail "needs Nsight Compute: no ncu on PATH"
if ! why=$(PYTHONPATH=${PYTHONPATH:-.} "$PY" -c 'import sys; from gemm_driver.cuda.driver import Device
try:
    Device.get(0)
except Exception as exc:
    sys.exit(str(exc).splitlines()[0])' 2>&1); then
    fail "this script needs an NVIDIA GPU: ${why##*$'\n'}"
fi
export PYTHONPATH=${PYTHONPATH:-.}
KERNELS=${KERNELS:-blocktile_2d vectorized bank_conflict_free:BK=8 bank_conflict_free double_buffered double_buffered:ASYNC=1,STAGES=3}
METRICS=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One launch per (kernel, shape), in the order the legend lists them.
cat > "$work/launch.py" <<'EOF'
import sys
import numpy as np
import gemm_driver
from gemm_driver import kernels
legend = open(sys.argv[1], "w")
for size in (1024, 1023):
    rng = np.random.default_rng(size)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    for item in sys.argv[2:]:
        name, _, sets = item.partition(":")
        tunables = {k: int(v) for k, v in (kv.split("=") for kv in sets.split(",") if kv)}
        out = gemm_driver.gemm(a, b, kernel=name, **tunables)
        err = np.abs(out - a.astype(np.float64) @ b).max()
        assert err < 1e-2, f"{item} at {size}: max error {err}"
        resolved = kernels.KERNELS[name].resolve(tunables)
        label = name + " " + " ".join(f"{k}={v}" for k, v in resolved.items())
        legend.write(f"{label}\t{size}^3\n")
EOF

# shellcheck disable=SC2086
ncu --clock-control none --metrics "$METRICS" -k regex:sgemm --csv --log-file "$work/ncu.csv" \
    "$PY" "$work/launch.py" "$work/legend.tsv" $KERNELS

mkdir -p "$(dirname "$OUTPUT")"
"$PY" - "$work/ncu.csv" "$work/legend.tsv" "$METRICS" > "$OUTPUT" <<'EOF'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
header, rows = rows[0], rows[1:]
col = {name: i for i, name in enumerate(header)}
legend = [line.rstrip("\n").split("\t") for line in open(sys.argv[2])]
metrics = sys.argv[3].split(",")
launches = {}
for r in rows:
    launches.setdefault(r[col["ID"]], {})[r[col["Metric Name"]]] = float(r[col["Metric Value"]].replace(",", ""))
print("Shared-memory bank conflicts per launch (Nsight Compute; produced by tools/bank_conflicts.sh).")
print("conflicts = extra shared-memory wavefronts caused by bank conflicts; inst = warp-level")
print("shared load/store instructions executed. 1024^3: aligned operands (float4 paths);")
print("1023^3: odd leading dimensions (scalar paths).\n")
short = ["ld conflicts", "st conflicts", "ld inst", "st inst"]
print(f"{'kernel (tunables)':72} {'shape':8} " + " ".join(f"{s:>13}" for s in short) + f" {'ld c/inst':>9} {'st c/inst':>9}")
ids = sorted(launches, key=int)
assert len(ids) == len(legend), f"{len(ids)} profiled launches, {len(legend)} expected"
for (item, shape), launch_id in zip(legend, ids):
    v = [launches[launch_id][m] for m in metrics]
    ld = v[0] / v[2] if v[2] else 0.0
    st = v[1] / v[3] if v[3] else 0.0
    print(f"{item:72} {shape:8} " + " ".join(f"{x:13.0f}" for x in v) + f" {ld:9.3f} {st:9.3f}")
EOF
cat "$OUTPUT"
