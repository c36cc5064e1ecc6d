#!/usr/bin/env bash
# Scaling run for a machine with many cores (issue 10, item 7): resmpi,
# MPICH and Open MPI side by side, in one run, at 2..16 ranks on one host:
# OSU-style collective sweeps (bench/coll_sweep.c, 1 B - 4 KiB), the 8 B
# ping-pong under each failure policy (abort, continue, --with-ft ulfm),
# the message rate (bench/msgrate.c) and the ULFM latencies (bench/ulfm.c).
# Rounds are interleaved so that drift hits every configuration alike.
#
#   RANKS ["2 4 8 16"]   rank counts of the sweeps, the message rate and ULFM
#   ROUNDS [5]           interleaved ping-pong rounds
#   MAX_BYTES [4096]     largest collective size
#   MIN_SECONDS [0.04]   timed seconds per collective size
#
# Output: build/bench-scaling/results.txt (one line per measurement:
# "sweep IMPL RANKS OP BYTES BEST_US MEDIAN_US", "lat IMPL POLICY US",
# "msgrate IMPL RANKS PAIRS BYTES WINDOW MSGS_PER_S", "ulfm RANKS NAME N US"),
# and bench/scaling_table.py renders it as the tables of docs/benchmarks.md.
# The 2026-11-27 numbers there came from this sequence on a lent 16-core
# machine (the binaries built here, carried there).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RANKS=${RANKS:-2 4 8 16}
ROUNDS=${ROUNDS:-5}
MAX_BYTES=${MAX_BYTES:-4096}
MIN_SECONDS=${MIN_SECONDS:-0.04}
OUT=build/bench-scaling
NAME=bench-scaling
# shellcheck source=bench/common.sh
source bench/common.sh
for source in coll_sweep pingpong msgrate; do build_each "$source"; done
build/bin/mpicc -O2 -o "$OUT/ulfm-resmpi" bench/ulfm.c >> "$LOG" 2>&1
RESULTS=$OUT/results.txt
: > "$RESULTS"
echo "machine: $(nproc) cpus; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); $(uname -r)" >> "$RESULTS"
run_one() { # IMPL RANKS EXE ARGS... [-- resmpi options]
    local impl=$1 ranks=$2 exe=$3; shift 3
    local args=() extra=()
    while (($#)); do [[ $1 == -- ]] && { shift; extra=("$@"); break; }; args+=("$1"); shift; done
    launch_cmd "$impl" "$ranks" "$exe" "${extra[@]}"
    log "\$ ${CMD[*]} ${args[*]}"
    timeout 300 "${CMD[@]}" "${args[@]}" 2>> "$LOG"
}
for round in $(seq "$ROUNDS"); do
    for policy in abort continue ulfm; do
        case $policy in ulfm) opts=(--with-ft ulfm) ;; *) opts=(--failure-policy "$policy") ;; esac
        us=$(run_one resmpi 2 "$OUT/pingpong-resmpi" 8 0.2 -- "${opts[@]}" | awk '$1 == 8 { print $2 }')
        echo "lat resmpi $policy $us" >> "$RESULTS"
    done
    for impl in mpich openmpi; do
        [[ ${OK[$impl]} == 1 ]] || continue
        us=$(run_one "$impl" 2 "$OUT/pingpong-$impl" 8 0.2 | awk '$1 == 8 { print $2 }')
        echo "lat $impl - $us" >> "$RESULTS"
    done
done
for ranks in $RANKS; do
    for impl in "${IMPLS[@]}"; do
        [[ ${OK[$impl]} == 1 ]] || continue
        run_one "$impl" "$ranks" "$OUT/coll_sweep-$impl" "$MAX_BYTES" "$MIN_SECONDS" | grep -v '^#' |
            sed "s/^/sweep $impl $ranks /" >> "$RESULTS"
        echo "msgrate $impl $ranks $(run_one "$impl" "$ranks" "$OUT/msgrate-$impl" 8 0.3 | tail -1)" >> "$RESULTS"
    done
    run_one resmpi "$ranks" "$OUT/ulfm-resmpi" 100 -- --with-ft ulfm | sed "s/^/ulfm $ranks /" >> "$RESULTS"
done
say "results in $RESULTS; tables: python3 bench/scaling_table.py $RESULTS"
