#!/usr/bin/env bash
# The cost of process replication (issue 12): bench/replication_cost.c
# (fixed iteration counts, which replication needs: every replica must make
# the same calls) without replicas, with `--replicas 2` (replica masking)
# and with `--replicas 2 --replica-masking process`, interleaved rounds.
#
#   RANKS ["2 8"]   rank counts (each replica is a process: 2x as many run)
#   ROUNDS [3]      interleaved rounds
#   ITERATIONS [2000]
#
# Output: build/bench-replication/results.txt, lines
# "cost MODE RANKS ROUND CALL BYTES MICROSECONDS"; the table in
# docs/benchmarks.md is the median over rounds.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RANKS=${RANKS:-2 8}
ROUNDS=${ROUNDS:-3}
ITERATIONS=${ITERATIONS:-2000}
OUT=build/bench-replication
mkdir -p "$OUT"
[[ -x build/bin/mpicc && -x build/lib/replication/libmpi.so.12 ]] || make >/dev/null
build/bin/mpicc -O2 -o "$OUT/replication_cost" bench/replication_cost.c
RESULTS=$OUT/results.txt
echo "machine: $(nproc) cpus; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); $(uname -r)" > "$RESULTS"
for round in $(seq "$ROUNDS"); do
    for ranks in $RANKS; do
        for mode in plain repl-replica repl-process; do
            case $mode in
                plain) opts=() ;;
                repl-replica) opts=(--replicas 2) ;;
                repl-process) opts=(--replicas 2 --replica-masking process) ;;
            esac
            timeout 300 build/bin/mpiexec "${opts[@]}" -n "$ranks" "$OUT/replication_cost" "$ITERATIONS" |
                sed "s/^/cost $mode $ranks $round /" >> "$RESULTS"
        done
    done
done
echo "results in $RESULTS"
