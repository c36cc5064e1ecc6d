#!/usr/bin/env bash
# Loss recovery (issue 10, item 3): time lost per dropped frame, and
# bandwidth under drop:1e-3, resmpi built here against another build
# (BASE, e.g. a build of the branch point), interleaved.
#
#   BASE=/path/to/other/repo ROUNDS=4 bench/loss_recovery.sh
#
# Each round runs, for this build and BASE (if given): 4 MiB x 150 round
# trips with no faults and with --inject drop:1e-3,seed:ROUND, and 64 KiB x
# 2000 (every loss a tail loss) with drop:1e-2 and without. One line per
# run: round, build, faults, bytes, "MB/s seconds", and the FT report's
# retransmitted / duplicates / probes / spurious / dropped counters.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS=${ROUNDS:-4}
OUT=build/bench-loss
mkdir -p "$OUT"
builds=("$PWD")
labels=(this)
if [[ -n ${BASE:-} ]]; then builds+=("$BASE"); labels+=(base); fi
for index in "${!builds[@]}"; do
    "${builds[$index]}/build/bin/mpicc" -O2 -o "$OUT/fixed_pingpong-${labels[$index]}" bench/fixed_pingpong.c
done
for round in $(seq 1 "$ROUNDS"); do
    for index in "${!builds[@]}"; do
        dir=${builds[$index]}
        exe=$OUT/fixed_pingpong-${labels[$index]}
        for config in "none 150 4194304" "drop:1e-3,seed:$round 150 4194304" \
                      "drop:1e-2,seed:$round 2000 65536" "none 2000 65536"; do
            read -r faults iterations bytes <<<"$config"
            inject=()
            [[ $faults != none ]] && inject=(--inject "$faults")
            result=$(timeout 300 "$dir/build/bin/mpiexec" -n 2 --paths tcp "${inject[@]}" \
                "$exe" "$iterations" "$bytes" 2>"$OUT/err.txt" | tail -1) || result=failed
            counters=$(grep -o "retransmitted [0-9]*\|duplicates dropped [0-9]*\|probes [0-9]*\|spurious retransmissions [0-9]*\|injected: dropped [0-9]*" \
                "$OUT/err.txt" | tr '\n' ' ' || true)
            echo "$round ${labels[$index]} $faults $bytes $result | $counters"
        done
    done
done
