#!/usr/bin/env bash
# 8 B shared-memory ping-pong, one fixed loop (bench/fixed_latency.c: a
# number of round trips timed with MPI_Wtime, the loop of
# bench/p2p_profile.sh), run interleaved: every round runs each resmpi
# build given, then MPICH and Open MPI, so all see the same machine load.
# Prints each one's one-way time (best and median over the rounds) and the
# ratios to MPICH and Open MPI.
#
#   bench/pingpong_ab.sh [rounds (7)] [round_trips (100000)] [LABEL=LIBDIR ...]
#
# LIBDIR is a directory holding a libmpi.so.12 (e.g. another checkout's
# build/lib); without any, this checkout's build/lib is measured as
# "resmpi". The same binary runs on every resmpi build (LD_LIBRARY_PATH).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS=${1:-7}
ROUND_TRIPS=${2:-100000}
shift $(( $# >= 2 ? 2 : $# ))
BUILDS=("$@")
[[ ${#BUILDS[@]} -gt 0 ]] || BUILDS=("resmpi=$PWD/build/lib")
OUT=build/pingpong-ab
NAME=pingpong_ab
source bench/common.sh
[[ -x build/bin/mpicc && -x build/bin/mpiexec ]] || make all >> "$LOG" 2>&1
build_each fixed_latency
declare -A TIMES=()
labels=()
for build in "${BUILDS[@]}"; do labels+=("${build%%=*}"); done
for impl in mpich openmpi; do [[ ${OK[$impl]} == 1 ]] && labels+=("$impl"); done
say "$(date -u '+%Y-%m-%d %H:%M UTC'), $ROUNDS rounds of $ROUND_TRIPS round trips; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for ((round = 1; round <= ROUNDS; round++)); do
    for build in "${BUILDS[@]}"; do
        label=${build%%=*}
        launch_cmd resmpi 2 "$OUT/fixed_latency-resmpi"
        TIMES[$label]+=" $(env LD_LIBRARY_PATH="${build#*=}" "${CMD[@]}" "$ROUND_TRIPS" 2>>"$LOG")"
    done
    for impl in mpich openmpi; do
        [[ ${OK[$impl]} == 1 ]] || continue
        launch_cmd "$impl" 2 "$OUT/fixed_latency-$impl"
        TIMES[$impl]+=" $("${CMD[@]}" "$ROUND_TRIPS" 2>>"$LOG")"
    done
done
for label in "${labels[@]}"; do log "$label:${TIMES[$label]}"; done
python3 - "${labels[@]}" <<EOF
import statistics, sys
times = {$(for label in "${labels[@]}"; do printf "'%s': [%s], " "$label" "$(echo ${TIMES[$label]} | tr ' ' ',')"; done)}
best = {label: min(values) for label, values in times.items()}
median = {label: statistics.median(values) for label, values in times.items()}
print("| | best µs | median µs | vs MPICH (best / median) | vs Open MPI (best / median) |")
print("|---|---|---|---|---|")
for label in sys.argv[1:]:
    cells = []
    for other in ("mpich", "openmpi"):
        if other in best and label not in ("mpich", "openmpi"):
            cells.append(f"{best[label] / best[other]:.2f} / {median[label] / median[other]:.2f}")
        else:
            cells.append("")
    print(f"| {label} | {best[label]:.3f} | {median[label]:.3f} | {cells[0]} | {cells[1]} |")
EOF
say "load average after: $(cut -d' ' -f1-3 /proc/loadavg); raw times in $LOG"
