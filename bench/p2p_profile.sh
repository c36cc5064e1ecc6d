#!/usr/bin/env bash
# Instructions per call of the 8 B shared-memory ping-pong, per function,
# counted by callgrind (exact and repeatable, unlike time on a shared VM
# without hardware counters). Two ranks run a fixed number of round trips
# under valgrind; the library is a debug-stripped copy of
# build/lib/libmpi.so.12 so that costs group by function rather than by
# inlined source line. Prints, for rank 0, the inclusive instructions per
# round trip of the library's functions (one MPI_Send and one MPI_Recv
# each; functions called twice per round trip show twice their per-call
# cost), and the idle loop's instructions per polling round.
#
#   bench/p2p_profile.sh [round_trips (20000)] [library (build/lib/libmpi.so.12)]
#
# Outputs in build/p2p-profile/: callgrind.<rank> (open with
# callgrind_annotate or kcachegrind), pingpong_fixed.c and its binary.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUND_TRIPS=${1:-20000}
LIBRARY=${2:-build/lib/libmpi.so.12}
OUT=build/p2p-profile
command -v valgrind >/dev/null || { echo "p2p_profile: valgrind is not installed" >&2; exit 1; }
[[ -x build/bin/mpicc && -x build/bin/mpiexec ]] || make all
mkdir -p "$OUT/lib"
cp "$(readlink -f "$LIBRARY")" "$OUT/lib/libmpi.so.12"
strip --strip-debug "$OUT/lib/libmpi.so.12"
cat > "$OUT/pingpong_fixed.c" <<'EOF'
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long n = argc > 1 ? atol(argv[1]) : 20000;
    char buffer[8] = {0};
    int peer = 1 - rank;
    MPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(buffer, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(buffer, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buffer, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buffer, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        }
    }
    MPI_Finalize();
    return 0;
}
EOF
build/bin/mpicc -O2 -o "$OUT/pingpong_fixed" "$OUT/pingpong_fixed.c"
rm -f "$OUT"/callgrind.*
build/bin/mpiexec -n 2 env LD_LIBRARY_PATH="$PWD/$OUT/lib" \
    valgrind -q --tool=callgrind --dump-instr=yes --compress-strings=no --compress-pos=no \
    --callgrind-out-file="$PWD/$OUT/callgrind.%q{PMI_RANK}" "$OUT/pingpong_fixed" "$ROUND_TRIPS"
echo "instructions per round trip, rank 0 (inclusive; $ROUND_TRIPS round trips):"
callgrind_annotate --threshold=100 --inclusive=yes "$OUT/callgrind.0" 2>/dev/null \
    | awk -v n="$ROUND_TRIPS" '/libmpi/ && /(PMPI_|resmpi_)/ {
        x = $1; gsub(",", "", x); if (x / n >= 10) printf "%8.1f  %s\n", x / n, $NF == "" ? $0 : $(NF-1) }' \
    | sed 's/\[.*//' | head -40
# The idle loop: the busiest instruction of wait_until runs once per polling
# round; its own instructions divided by that count are one round's cost.
python3 - "$OUT/callgrind.0" <<'PY'
import re, sys
fn = None; after_call = False; busiest = 0; total = 0
for line in open(sys.argv[1]):
    if line.startswith("fn="):
        fn = line[3:]; continue
    if line.startswith("calls="):
        after_call = True; continue
    if line.startswith(("cfn=", "cfi=", "cob=")):
        continue
    if fn and "wait_until" in fn and re.match(r"^0x[0-9a-f]+\s", line):
        if after_call:  # the cost of a call, not of this function's own instruction
            after_call = False; continue
        count = int(line.split()[-1]); busiest = max(busiest, count); total += count
if busiest:
    print(f"idle polling round (wait_until's own loop, {busiest} rounds): {total / busiest:.0f} instructions")
PY
