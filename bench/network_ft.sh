#!/usr/bin/env bash
# Network fault-tolerance benchmarks of resmpi (issue #3, item 8), all in one
# run, interleaved: invoked by `make bench-ft` from the repository root.
#
#   1. TCP on this host, 2 ranks, bench/pingpong.c: 8 B latency and 4 MiB
#      bandwidth with --reliable off, reliable + --checksum none, reliable +
#      crc32c (the default).
#   2. 4 MiB bandwidth under --inject drop:1e-3 (reliable + crc32c).
#   3. One rail vs two rails between two network-namespace "hosts" (1 rank
#      each, veth rails), pingpong.
#   4. Rail-down to resumed traffic: bench/stream_gaps.c (tests/c/stream.c
#      with per-iteration timing) over two rails, --inject rail-down:1@1s,
#      with the default rail timeout (100 ms) and RESMPI_RAIL_TIMEOUT_MS=1000
#      (the previous default, for comparison);
#      failover counters from --report-json, stall from the application.
#
#   build/bench-ft/{pingpong,stream_gaps}   the programs
#   build/bench-ft/raw/                     every run's stdout/stderr/report
#   build/bench-ft/raw.log                  commands, exit codes, errors
#   build/bench-ft/results.json             everything parsed + summaries
#   docs/benchmarks.md                      only between the network-ft markers
#
# Environment (defaults in brackets):
#   REPEATS [3]              rounds; each runs every configuration once, rotating
#   MAX_BYTES [4194304]      largest pingpong message
#   MIN_SECONDS [0.2]        timed seconds per size (pingpong's 2nd argument)
#   STREAM_ITERATIONS [4000] stream_gaps iterations (~6-8 s on 2 cores)
#   RAIL_DOWN_AT [1s]        when rail 1 goes down (--inject rail-down:1@TIME)
#   OTHER_RAIL_TIMEOUT_MS [1000] the second RESMPI_RAIL_TIMEOUT_MS measured
#   RUN_TIMEOUT [180]        seconds before one run is killed and counted as failed
#   RESMPI_BUILD [auto]      auto: `make all` only if build/bin/mpicc|mpiexec is missing
#   PYTHON [python3]         interpreter for bench/network_ft_plot.py (stdlib only)
#   DOCS_DIR [docs]          where benchmarks.md is
# Namespace configurations need root (ip netns); without it they are skipped
# and the docs say so. The namespaces are deleted at exit, whatever happens.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

REPEATS=${REPEATS:-3}
MAX_BYTES=${MAX_BYTES:-4194304}
MIN_SECONDS=${MIN_SECONDS:-0.2}
STREAM_ITERATIONS=${STREAM_ITERATIONS:-4000}
RAIL_DOWN_AT=${RAIL_DOWN_AT:-1s}
OTHER_RAIL_TIMEOUT_MS=${OTHER_RAIL_TIMEOUT_MS:-1000}
RUN_TIMEOUT=${RUN_TIMEOUT:-180}
RESMPI_BUILD=${RESMPI_BUILD:-auto}
DOCS_DIR=${DOCS_DIR:-docs}
OUT=build/bench-ft

for v in REPEATS MAX_BYTES STREAM_ITERATIONS OTHER_RAIL_TIMEOUT_MS RUN_TIMEOUT; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "bench-ft: $v must be a positive integer" >&2; exit 2; }
done

NAME=bench-ft
# shellcheck source=bench/common.sh
source "$(dirname "$0")/common.sh"
now() { date +%s.%N; }
tsv() { local IFS=$'\t'; printf '%s\n' "$*"; }
quote() {
    local w out=() re="^[A-Za-z0-9_./=:,@%+-]+\$"
    for w in "$@"; do
        if [[ $w =~ $re ]]; then out+=("$w"); else out+=("'${w//\'/\'\\\'\'}'"); fi
    done
    local IFS=' '; printf '%s' "${out[*]}"
}
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || PY=/usr/bin/python3

# ----------------------------------------------------------------- build ----
if [[ $RESMPI_BUILD == always || ! -x build/bin/mpicc || ! -x build/bin/mpiexec ]]; then
    say "building resmpi (make all)"
    make all >> "$LOG" 2>&1 || say "WARNING: make all failed (see $LOG)"
fi
PP=$OUT/pingpong
SG=$OUT/stream_gaps
BUILD_PP=(build/bin/mpicc -O2 -o "$PP" bench/pingpong.c)
BUILD_SG=(build/bin/mpicc -O2 -o "$SG" bench/stream_gaps.c)
for b in BUILD_PP BUILD_SG; do
    declare -n cmd=$b
    log "\$ $(quote "${cmd[@]}")"
    "${cmd[@]}" >> "$LOG" 2>&1 || { say "build failed: $(quote "${cmd[@]}") (see $LOG)"; exit 1; }
    unset -n cmd
done
say "built $PP $SG"

# ------------------------------------------------------------ namespaces ----
# Two "hosts" as in tests/netns.py: mgmt 10.77.0.0/24 (control), rail0
# 10.77.1.0/24, rail1 10.77.2.0/24, one veth pair each; mpiexec runs in A.
NS_A=rftb-a-$$
NS_B=rftb-b-$$
NS_OK=0
NS_REASON=
NS_CREATED=()
ns_destroy() {
    local ns pid i
    for ns in "${NS_CREATED[@]}"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    done
    for ns in "${NS_CREATED[@]}"; do
        for ((i = 0; i < 50; i++)); do
            [[ -z $(ip netns pids "$ns" 2>/dev/null) ]] && break
            sleep 0.1
        done
        ip netns del "$ns" 2>/dev/null || true
    done
    NS_CREATED=()
}
trap ns_destroy EXIT
trap 'exit 130' INT TERM
NS_SETUP=()   # the commands, for the docs
ns_create() {
    local ns dev idx=0
    NS_SETUP=()
    for ns in "$NS_A" "$NS_B"; do
        NS_SETUP+=("ip netns add $ns" "ip -n $ns link set lo up")
    done
    for dev in mgmt rail0 rail1; do
        NS_SETUP+=("ip -n $NS_A link add $dev type veth peer name $dev netns $NS_B"
                   "ip -n $NS_A addr add 10.77.$idx.1/24 dev $dev" "ip -n $NS_A link set $dev up"
                   "ip -n $NS_B addr add 10.77.$idx.2/24 dev $dev" "ip -n $NS_B link set $dev up")
        idx=$((idx + 1))
    done
    local c
    for c in "${NS_SETUP[@]}"; do
        log "\$ $c"
        # shellcheck disable=SC2086
        if ! ip ${c#ip } >> "$LOG" 2>&1; then NS_REASON="'$c' failed (see $LOG)"; return 1; fi
        [[ $c == "ip netns add "* ]] && NS_CREATED+=("${c#ip netns add }")
    done
    return 0
}
if [[ $(id -u) != 0 ]]; then
    NS_REASON="not root: ip netns needs root"
elif ! command -v ip >/dev/null 2>&1; then
    NS_REASON="no ip(8)"
elif ns_create; then
    NS_OK=1
fi
if [[ $NS_OK == 1 ]]; then say "namespaces $NS_A, $NS_B created"; else ns_destroy; say "namespace configurations skipped: $NS_REASON"; fi
rail_tx() {  # tx_bytes of rail0 and rail1 in namespace A
    local d out=()
    for d in rail0 rail1; do
        out+=("$(ip netns exec "$NS_A" cat "/sys/class/net/$d/statistics/tx_bytes" 2>/dev/null || echo 0)")
    done
    echo "${out[*]}"
}

# ------------------------------------------------------- configurations ----
RAILS1=tcp:10.77.1.0/24
RAILS2=tcp:10.77.1.0/24,tcp:10.77.2.0/24
NS_OPTS=(--hosts "$NS_A,$NS_B" --launcher-exec scripts/netns-exec --control-addr 10.77.0.1)
CONFIGS=(tcp-off tcp-nocrc tcp-crc tcp-drop ns-1rail ns-2rail stream-clean stream-down stream-down-other)
set_cmd() {  # config rep report-file -> CMD (full command), KIND (pingpong|stream), NEEDS_NS
    local cfg=$1 rep=$2 rep_json=$3
    local MX=(build/bin/mpiexec -n 2)
    NEEDS_NS=0
    case $cfg in
        tcp-off)   CMD=("${MX[@]}" --paths tcp --reliable off --report-json "$rep_json" "$PP" "$MAX_BYTES" "$MIN_SECONDS") ;;
        tcp-nocrc) CMD=("${MX[@]}" --paths tcp --reliable on --checksum none --report-json "$rep_json" "$PP" "$MAX_BYTES" "$MIN_SECONDS") ;;
        tcp-crc)   CMD=("${MX[@]}" --paths tcp --reliable on --checksum crc32c --report-json "$rep_json" "$PP" "$MAX_BYTES" "$MIN_SECONDS") ;;
        tcp-drop)  CMD=("${MX[@]}" --paths tcp --reliable on --checksum crc32c --inject "drop:1e-3,seed:$rep"
                        --report-json "$rep_json" "$PP" "$MAX_BYTES" "$MIN_SECONDS") ;;
        ns-1rail)  NEEDS_NS=1; CMD=(ip netns exec "$NS_A" "${MX[@]}" "${NS_OPTS[@]}" --rails "$RAILS1"
                        --report-json "$rep_json" "$PP" "$MAX_BYTES" "$MIN_SECONDS") ;;
        ns-2rail)  NEEDS_NS=1; CMD=(ip netns exec "$NS_A" "${MX[@]}" "${NS_OPTS[@]}" --rails "$RAILS2"
                        --report-json "$rep_json" "$PP" "$MAX_BYTES" "$MIN_SECONDS") ;;
        stream-clean) NEEDS_NS=1; CMD=(ip netns exec "$NS_A" "${MX[@]}" "${NS_OPTS[@]}" --rails "$RAILS2"
                        --report-json "$rep_json" "$SG" "$STREAM_ITERATIONS") ;;
        stream-down) NEEDS_NS=1; CMD=(ip netns exec "$NS_A" "${MX[@]}" "${NS_OPTS[@]}" --rails "$RAILS2"
                        --inject "rail-down:1@$RAIL_DOWN_AT" --report-json "$rep_json" "$SG" "$STREAM_ITERATIONS") ;;
        stream-down-other) NEEDS_NS=1; CMD=(ip netns exec "$NS_A" "${MX[@]}" "${NS_OPTS[@]}" --rails "$RAILS2"
                        -x "RESMPI_RAIL_TIMEOUT_MS=$OTHER_RAIL_TIMEOUT_MS"
                        --inject "rail-down:1@$RAIL_DOWN_AT" --report-json "$rep_json" "$SG" "$STREAM_ITERATIONS") ;;
    esac
}

run_one() {  # stdout stderr -> RUN_RC RUN_SECONDS RUN_RAILTX (rail0/rail1 bytes sent by A, or "")
    local so=$1 se=$2 t0 t1 tx0= tx1=
    log "\$ $(quote timeout -k 10 "$RUN_TIMEOUT" "${CMD[@]}")"
    [[ $NEEDS_NS == 1 ]] && tx0=$(rail_tx)
    t0=$(now)
    RUN_RC=0
    timeout -k 10 "$RUN_TIMEOUT" "${CMD[@]}" > "$so" 2> "$se" < /dev/null || RUN_RC=$?
    t1=$(now)
    RUN_RAILTX=
    if [[ $NEEDS_NS == 1 ]]; then
        tx1=$(rail_tx)
        RUN_RAILTX=$(awk -v a="$tx0" -v b="$tx1" 'BEGIN { split(a, x, " "); split(b, y, " "); printf "%d %d", y[1] - x[1], y[2] - x[2] }')
    fi
    RUN_SECONDS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    log "  exit $RUN_RC after ${RUN_SECONDS}s${RUN_RAILTX:+, rail0/rail1 bytes sent by A: $RUN_RAILTX}"
    if [[ $RUN_RC != 0 ]]; then
        [[ $RUN_RC == 124 || $RUN_RC == 137 ]] && log "  TIMEOUT after ${RUN_TIMEOUT}s"
        log "  --- stderr (last 20 lines) ---"; tail -n 20 "$se" | sed 's/^/  | /' >> "$LOG"
        log "  --- stdout (last 5 lines) ---"; tail -n 5 "$so" | sed 's/^/  | /' >> "$LOG"
    fi
}

# ------------------------------------------------------------- measure ----
: > "$OUT/configs.tsv"
for cfg in "${CONFIGS[@]}"; do
    set_cmd "$cfg" REP "$RAW/$cfg-rREP.json"
    tsv "$cfg" "$(quote "${CMD[@]}")" "$NEEDS_NS" >> "$OUT/configs.tsv"
done
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
say "load average before: $LOAD_BEFORE"
: > "$OUT/runs.tsv"
n=${#CONFIGS[@]}
total=$((REPEATS * n)); k=0
for ((rep = 1; rep <= REPEATS; rep++)); do
    for ((i = 0; i < n; i++)); do
        cfg=${CONFIGS[$(( (i + rep - 1) % n ))]}
        k=$((k + 1))
        base=$RAW/$cfg-r$rep
        set_cmd "$cfg" "$rep" "$base.json"
        if [[ $NEEDS_NS == 1 && $NS_OK != 1 ]]; then
            tsv "$cfg" "$rep" skipped 0 "" "" "" "" >> "$OUT/runs.tsv"
            continue
        fi
        rm -f "$base.json"
        run_one "$base.out" "$base.err"
        status=ok
        [[ $RUN_RC == 0 ]] || status=failed
        say "[$k/$total] $cfg rep $rep: $status in ${RUN_SECONDS}s (exit $RUN_RC)$( [[ -n $RUN_RAILTX ]] && echo "; rail0/rail1 bytes from A: $RUN_RAILTX")"
        tsv "$cfg" "$rep" "$status" "$RUN_RC" "$RUN_SECONDS" "$base.out" "$base.json" "$RUN_RAILTX" >> "$OUT/runs.tsv"
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
say "load average after: $LOAD_AFTER"
ns_destroy

# ------------------------------------------------------------ metadata ----
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
[[ -n $cpu_model ]] || cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
{
    tsv date "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    tsv nproc "$(nproc)"
    tsv cpu_model "${cpu_model:-unknown}"
    tsv kernel "$(uname -srm)"
    tsv os "$(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-}")"
    tsv cc "$(cc --version 2>/dev/null | head -n 1)"
    tsv resmpi "$(git describe --always --dirty 2>/dev/null || echo unknown)$(git log -1 --format=' (%cs: %s)' 2>/dev/null || true)"
    lib=$(readlink -f build/lib/libmpi.so.12 2>/dev/null || true)
    if [[ -f $lib ]]; then
        tsv resmpi_lib "${lib#"$ROOT"/} sha256 $(sha256sum "$lib" | cut -c1-12), built $(date -u -r "$lib" '+%Y-%m-%d %H:%M:%S UTC')"
    fi
    tsv repeats "$REPEATS"
    tsv max_bytes "$MAX_BYTES"
    tsv min_seconds "$MIN_SECONDS"
    tsv stream_iterations "$STREAM_ITERATIONS"
    tsv rail_down_at "$RAIL_DOWN_AT"
    tsv other_rail_timeout_ms "$OTHER_RAIL_TIMEOUT_MS"
    tsv run_timeout "$RUN_TIMEOUT"
    tsv load_before "$LOAD_BEFORE"
    tsv load_after "$LOAD_AFTER"
    tsv ns_a "$NS_A"
    tsv ns_b "$NS_B"
    tsv ns_ok "$NS_OK"
    tsv ns_reason "$NS_REASON"
    tsv build_pingpong "$(quote "${BUILD_PP[@]}")"
    tsv build_stream_gaps "$(quote "${BUILD_SG[@]}")"
    for c in "${NS_SETUP[@]}"; do tsv ns_setup "$c"; done
} > "$OUT/meta.tsv"

# --------------------------------------------------------------- report ----
"$PY" bench/network_ft_plot.py --bench-dir "$OUT" --docs-dir "$DOCS_DIR"
say "raw log: $LOG; results: $OUT/results.json"
