#!/usr/bin/env bash
# OSU-style collective sweeps of resmpi, Debian's MPICH and Open MPI in one
# interleaved run on this host (shared memory): every collective of
# bench/coll_sweep.c, 1 B .. MAX_BYTES, at each communicator size of RANKS.
# Also checks that time grows with size (issue #10, item 5): a size that is
# markedly faster than the next smaller one is listed as a violation.
# Invoked by `make bench-coll-sweep` from the repo root.
#
#   build/bench-coll-sweep/coll_sweep-{resmpi,mpich,openmpi}   the benchmark
#   build/bench-coll-sweep/raw/           every run's stdout/stderr
#   build/bench-coll-sweep/results.json   every number, and the violations
#   docs/benchmarks.md                    only the coll-sweep:begin..end section
#
# Environment (defaults in brackets):
#   REPEATS [1]          interleaved runs per configuration (each size is already 5 timed batches)
#   MAX_BYTES [1048576]  largest size
#   MIN_SECONDS [0.05]   timed seconds per size (split over the batches)
#   RANKS ["2 4 8"]      communicator sizes (above `nproc` the cores are oversubscribed)
#   OPS [all]            comma-separated subset, e.g. allreduce,alltoall
#   IMPLS ["resmpi mpich openmpi"]
#   MPICH_MAX_RANKS [4]  MPICH is not run above this many ranks: its ch4 device
#                        busy-polls, so with 4x more ranks than this VM's 2 cores a
#                        call takes milliseconds and the sweep would not end
#   RUN_TIMEOUT [600]    seconds before one run is killed and counted as failed
#   DOCS_DIR [docs]      where benchmarks.md is
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPEATS=${REPEATS:-1}
MAX_BYTES=${MAX_BYTES:-1048576}
MIN_SECONDS=${MIN_SECONDS:-0.05}
RANKS=${RANKS:-2 4 8}
OPS=${OPS:-all}
SELECTED_IMPLS=${IMPLS:-resmpi mpich openmpi}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
MPICH_MAX_RANKS=${MPICH_MAX_RANKS:-4}
DOCS_DIR=${DOCS_DIR:-docs}
OUT=build/bench-coll-sweep

[[ $REPEATS =~ ^[1-9][0-9]*$ ]] || { echo "bench-coll-sweep: REPEATS must be a positive integer" >&2; exit 2; }
[[ $MAX_BYTES =~ ^[1-9][0-9]*$ ]] || { echo "bench-coll-sweep: MAX_BYTES must be a positive integer" >&2; exit 2; }

NAME=bench-coll-sweep
# shellcheck source=bench/common.sh
source "$(dirname "$0")/common.sh"
read -r -a IMPLS <<< "$SELECTED_IMPLS"

build_each coll_sweep

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
: > "$OUT/runs.tsv"
for ((rep = 1; rep <= REPEATS; rep++)); do
    for ranks in $RANKS; do
        for ((i = 0; i < ${#IMPLS[@]}; i++)); do
            impl=${IMPLS[$(( (i + rep - 1) % ${#IMPLS[@]} ))]}
            [[ ${OK[$impl]} == 1 ]] || continue
            if [[ $impl == mpich && $ranks -gt $MPICH_MAX_RANKS ]]; then
                say "mpich n=$ranks: not run (MPICH_MAX_RANKS=$MPICH_MAX_RANKS)"
                continue
            fi
            launch_cmd "$impl" "$ranks" "$OUT/coll_sweep-$impl"
            so=$RAW/$impl-n$ranks-r$rep.out
            log "\$ timeout -k 10 $RUN_TIMEOUT ${CMD[*]} $MAX_BYTES $MIN_SECONDS $OPS"
            rc=0
            timeout -k 10 "$RUN_TIMEOUT" "${CMD[@]}" "$MAX_BYTES" "$MIN_SECONDS" "$OPS" > "$so" 2> "${so%.out}.err" < /dev/null || rc=$?
            log "  exit $rc"
            say "$impl n=$ranks rep $rep: exit $rc"
            printf '%s\t%s\t%s\t%s\n' "$impl" "$ranks" "$rc" "$so" >> "$OUT/runs.tsv"
        done
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

python3 bench/coll_sweep.py "$OUT/runs.tsv" "$DOCS_DIR/benchmarks.md" "$OUT/results.json" \
    "meta=$(date -u '+%Y-%m-%d %H:%M UTC'), resmpi $(git describe --always --dirty 2>/dev/null || echo unknown), $(nproc) cores, shared memory on one host, $REPEATS interleaved run(s) of 5 timed batches per size, ~$MIN_SECONDS s per size; load average $LOAD_BEFORE before, $LOAD_AFTER after"
say "raw log: $LOG"
