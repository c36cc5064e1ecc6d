#!/usr/bin/env bash
# The cost of message logging (issue 13 item 7): the
# fixed-count calls of bench/replication_cost.c (a replayed rank must make
# the same calls, so no clock-chosen counts) without logging, with
# `--msglog pessimistic` (the log in memory), with the log spilled to
# disk (`--msglog-mem 1M`: every payload past the first MiB goes to the
# spill file) and with `--msglog optimistic`, interleaved rounds; and the
# O2P paper's ping-pong with every receive ANY_SOURCE
# (bench/msglog_anysource.c: a determinant per reception, a send right
# after it) without logging, pessimistic and optimistic. No fault is
# injected: this is what protection costs when nothing fails.
#
#   RANKS ["2 4"]   rank counts
#   ROUNDS [3]      interleaved rounds
#   ITERATIONS [2000]
#
# Output: build/bench-msglog/results.txt, lines
# "cost MODE RANKS ROUND CALL BYTES MICROSECONDS" and
# "anysource MODE 2 ROUND pingpong BYTES MICROSECONDS", then tables of
# medians over rounds and their ratios to no logging.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RANKS=${RANKS:-2 4}
ROUNDS=${ROUNDS:-3}
ITERATIONS=${ITERATIONS:-2000}
OUT=build/bench-msglog
mkdir -p "$OUT"
[[ -x build/bin/mpicc && -x build/lib/msglog/libmpi.so.12 ]] || make >/dev/null
build/bin/mpicc -O2 -o "$OUT/cost" bench/replication_cost.c
build/bin/mpicc -O2 -o "$OUT/anysource" bench/msglog_anysource.c
RESULTS=$OUT/results.txt
echo "machine: $(nproc) cpus; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)" > "$RESULTS"
for round in $(seq "$ROUNDS"); do
    for ranks in $RANKS; do
        for mode in plain msglog msglog-spill optimistic; do
            case $mode in
                plain) opts=() ;;
                msglog) opts=(--msglog pessimistic) ;;
                msglog-spill) opts=(--msglog pessimistic --msglog-mem 1M --msglog-spill-dir "$OUT") ;;
                optimistic) opts=(--msglog optimistic) ;;
            esac
            timeout 600 build/bin/mpiexec "${opts[@]}" -n "$ranks" "$OUT/cost" "$ITERATIONS" 2>/dev/null |
                sed "s/^/cost $mode $ranks $round /" >> "$RESULTS"
        done
    done
    for mode in plain msglog optimistic; do
        case $mode in
            plain) opts=() ;;
            msglog) opts=(--msglog pessimistic) ;;
            optimistic) opts=(--msglog optimistic) ;;
        esac
        timeout 600 build/bin/mpiexec "${opts[@]}" -n 2 "$OUT/anysource" "$ITERATIONS" 2>/dev/null |
            awk -v mode="$mode" -v round="$round" '{print "anysource", mode, 2, round, "pingpong", $2, $3}' >> "$RESULTS"
    done
done
python3 - "$RESULTS" <<'PY'
import statistics, sys
samples = {}
for line in open(sys.argv[1]):
    words = line.split()
    if len(words) == 7 and words[0] in ("cost", "anysource"):
        kind, mode, ranks, _, call, size, us = words
        call = call if kind == "cost" else "anysource-pingpong"
        samples.setdefault((int(ranks), call, int(size), mode), []).append(float(us))
print("| ranks | call | bytes | no logging µs | pessimistic µs | ratio | pessimistic, spilled µs | ratio | optimistic µs | ratio |")
print("|---|---|---|---|---|---|---|---|---|---|")
for key in sorted({k[:3] for k in samples}, key=lambda k: (k[0], k[1] != "pingpong", k[1], k[2])):
    median = lambda mode: statistics.median(samples.get(key + (mode,), [float("nan")]))
    plain, logged, spilled = median("plain"), median("msglog"), median("msglog-spill")
    optimistic = median("optimistic")
    print(f"| {key[0]} | {key[1]} | {key[2]} | {plain:.3f} | {logged:.3f} | {logged / plain:.2f}× "
          f"| {spilled:.3f} | {spilled / plain:.2f}× | {optimistic:.3f} | {optimistic / plain:.2f}× |")
PY
echo "results in $RESULTS"
