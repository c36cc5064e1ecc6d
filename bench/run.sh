#!/usr/bin/env bash
# Ping-pong comparison of resmpi, MPICH and Open MPI on this host: 2 ranks,
# over shared memory and over TCP. Invoked by `make bench` from the repo root.
#
#   build/bench/pingpong-{resmpi,mpich,openmpi}   the benchmark, one per MPI
#   build/bench/raw/                              every run's stdout/stderr
#   build/bench/raw.log                           commands, exit codes, errors
#   build/bench/results.json                      raw + best-of-REPEATS data
#   docs/benchmarks-pingpong.png, docs/benchmarks.md (generated section only)
#
# Environment (defaults in brackets):
#   REPEATS [3]          runs per configuration; best latency / bandwidth per size
#   MAX_BYTES [4194304]  largest message (the table wants 8 B and 4 MiB)
#   MIN_SECONDS [0.2]    timed seconds per message size (pingpong's 2nd argument)
#   RUN_TIMEOUT [180]    seconds before one run is killed and counted as failed
#   RESMPI_BUILD [auto]  auto: `make all` only if build/bin/mpicc|mpiexec is missing;
#                        always: run `make all` first
#   PYTHON               interpreter with matplotlib (else python3, /usr/bin/python3)
#   DOCS_DIR [docs]      where benchmarks.md and the png go
# See bench/README.md.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

REPEATS=${REPEATS:-3}
MAX_BYTES=${MAX_BYTES:-4194304}
MIN_SECONDS=${MIN_SECONDS:-0.2}
RUN_TIMEOUT=${RUN_TIMEOUT:-180}
RESMPI_BUILD=${RESMPI_BUILD:-auto}
DOCS_DIR=${DOCS_DIR:-docs}
OUT=build/bench

[[ $REPEATS =~ ^[1-9][0-9]*$ ]] || { echo "bench: REPEATS must be a positive integer" >&2; exit 2; }
[[ $MAX_BYTES =~ ^[1-9][0-9]*$ ]] || { echo "bench: MAX_BYTES must be a positive integer" >&2; exit 2; }
[[ $RUN_TIMEOUT =~ ^[1-9][0-9]*$ ]] || { echo "bench: RUN_TIMEOUT must be a positive integer" >&2; exit 2; }

NAME=bench
# shellcheck source=bench/common.sh
source "$(dirname "$0")/common.sh"
# TCP segments sent by this network namespace: the path check (shared memory
# sends none between the ranks, TCP sends at least one per message).
tcp_out_segs() {
    awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) c[$i] = i; h = 1 } else print $c["OutSegs"] }' /proc/net/snmp 2>/dev/null || echo 0
}
now() { date +%s.%N; }
tsv() { local IFS=$'\t'; printf '%s\n' "$*"; }
# Shell-quote a command for the log and the docs (plain words stay plain).
quote() {
    local w out=() re="^[A-Za-z0-9_./=:,@%+-]+\$"
    for w in "$@"; do
        if [[ $w =~ $re ]]; then out+=("$w"); else out+=("'${w//\'/\'\\\'\'}'"); fi
    done
    local IFS=' '; printf '%s' "${out[*]}"
}

# ---------------------------------------------------------------- python ----
PY=
find_python() {
    local c
    for c in ${PYTHON:-} python3 /usr/bin/python3; do
        if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import matplotlib' >/dev/null 2>&1; then
            PY=$(command -v "$c"); return 0
        fi
    done
    return 1
}
if ! find_python; then
    say "matplotlib not found; trying apt-get install -y python3-matplotlib"
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        apt-get install -y python3-matplotlib >> "$LOG" 2>&1 \
            || { apt-get update >> "$LOG" 2>&1 && apt-get install -y python3-matplotlib >> "$LOG" 2>&1; } || true
    elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then
        sudo -n apt-get install -y python3-matplotlib >> "$LOG" 2>&1 || true
    fi
    if ! find_python; then
        PY=$(command -v python3 || command -v /usr/bin/python3 || true)
        [[ -n $PY ]] || { echo "bench: no python3" >&2; exit 1; }
        say "WARNING: no python with matplotlib; results and tables only, no plot"
    fi
fi

# ----------------------------------------------------------------- build ----
if [[ $RESMPI_BUILD == always || ! -x build/bin/mpicc || ! -x build/bin/mpiexec ]]; then
    say "building resmpi (make all)"
    make all >> "$LOG" 2>&1 || say "WARNING: make all failed (see $LOG)"
fi

IMPLS=(resmpi mpich openmpi)
declare -A CC=([resmpi]=build/bin/mpicc [mpich]=mpicc.mpich [openmpi]=mpicc.openmpi)
declare -A LAUNCHER=([resmpi]=build/bin/mpiexec [mpich]=mpiexec.mpich [openmpi]=mpiexec.openmpi)
declare -A BUILD_ERR=()
for impl in "${IMPLS[@]}"; do
    exe=$OUT/pingpong-$impl
    rm -f "$exe"
    cmd=("${CC[$impl]}" -O2 -o "$exe" bench/pingpong.c)
    log "\$ $(quote "${cmd[@]}")"
    if ! command -v "${CC[$impl]}" >/dev/null 2>&1; then
        BUILD_ERR[$impl]="${CC[$impl]} not found"
    elif ! command -v "${LAUNCHER[$impl]}" >/dev/null 2>&1; then
        BUILD_ERR[$impl]="${LAUNCHER[$impl]} not found"
    elif ! "${cmd[@]}" >> "$LOG" 2>&1; then
        BUILD_ERR[$impl]="build failed: $(quote "${cmd[@]}")"
    fi
    if [[ -n ${BUILD_ERR[$impl]:-} ]]; then say "$impl: ${BUILD_ERR[$impl]}"; else say "built $exe"; fi
done

# ------------------------------------------------------- configurations ----
# MPICH over TCP: which knob forces it depends on the ch4 netmod.
MPICH_DEVICE=$(mpichversion 2>/dev/null | sed -n 's/^MPICH Device:[[:space:]]*//p' | head -n 1 || true)
case ${MPICH_DEVICE:-} in
    *ucx*) MPICH_TCP_CANDIDATES=("-genv MPIR_CVAR_NOLOCAL 1 -genv UCX_TLS tcp") ;;
    *ofi*) MPICH_TCP_CANDIDATES=("-genv MPIR_CVAR_NOLOCAL 1 -genv FI_PROVIDER tcp"
                                 "-genv MPIR_CVAR_NOLOCAL 1 -genv FI_PROVIDER tcp;ofi_rxm"
                                 "-genv MPIR_CVAR_NOLOCAL 1 -genv FI_PROVIDER sockets") ;;
    *)     MPICH_TCP_CANDIDATES=("-genv MPIR_CVAR_NOLOCAL 1") ;;
esac
read -r -a MPICH_TCP_OPTS <<< "${MPICH_TCP_CANDIDATES[0]}"

# Open MPI 4 calls its shared-memory BTL vader, Open MPI 5 calls it sm.
OMPI_SHM_BTL=vader
if command -v ompi_info >/dev/null 2>&1; then
    btls=$(ompi_info 2>/dev/null | awk -F'[: ]+' '/MCA btl:/ { print $4 }' || true)
    if ! grep -qx vader <<< "$btls" && grep -qx sm <<< "$btls"; then OMPI_SHM_BTL=sm; fi
fi
OMPI_ENV=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)

CONFIGS=(resmpi-shm mpich-shm openmpi-shm resmpi-tcp mpich-tcp openmpi-tcp)
set_cmd() {  # config id -> CMD (launcher, options, executable; no benchmark arguments)
    case $1 in
        resmpi-shm)  CMD=(build/bin/mpiexec -n 2 "$OUT/pingpong-resmpi") ;;
        resmpi-tcp)  CMD=(build/bin/mpiexec -n 2 --paths tcp "$OUT/pingpong-resmpi") ;;
        mpich-shm)   CMD=(mpiexec.mpich -n 2 "$OUT/pingpong-mpich") ;;
        mpich-tcp)   CMD=(mpiexec.mpich -n 2 "${MPICH_TCP_OPTS[@]}" "$OUT/pingpong-mpich") ;;
        openmpi-shm) CMD=(env "${OMPI_ENV[@]}" mpiexec.openmpi --allow-run-as-root --oversubscribe -n 2
                          --mca btl "self,$OMPI_SHM_BTL" "$OUT/pingpong-openmpi") ;;
        openmpi-tcp) CMD=(env "${OMPI_ENV[@]}" mpiexec.openmpi --allow-run-as-root -n 2
                          --mca pml ob1 --mca btl tcp,self "$OUT/pingpong-openmpi") ;;
    esac
}

# Run CMD + args under a timeout. Sets RUN_RC, RUN_SECONDS, RUN_SEGS. The
# process group is killed on timeout (coreutils timeout signals its group).
run_one() {  # stdout-file stderr-file args...
    local so=$1 se=$2; shift 2
    local t0 s0 t1 s1
    log "\$ $(quote timeout -k 10 "$RUN_TIMEOUT" "${CMD[@]}" "$@")"
    s0=$(tcp_out_segs); t0=$(now)
    RUN_RC=0
    timeout -k 10 "$RUN_TIMEOUT" "${CMD[@]}" "$@" > "$so" 2> "$se" < /dev/null || RUN_RC=$?
    t1=$(now); s1=$(tcp_out_segs)
    RUN_SECONDS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    RUN_SEGS=$(( s1 - s0 ))
    log "  exit $RUN_RC after ${RUN_SECONDS}s, $RUN_SEGS TCP segments sent on this host"
    if [[ $RUN_RC != 0 ]]; then
        [[ $RUN_RC == 124 || $RUN_RC == 137 ]] && log "  TIMEOUT after ${RUN_TIMEOUT}s"
        log "  --- stderr (last 20 lines) ---"
        tail -n 20 "$se" | sed 's/^/  | /' >> "$LOG"
        log "  --- stdout (last 5 lines) ---"
        tail -n 5 "$so" | sed 's/^/  | /' >> "$LOG"
    fi
}
# Lines of pingpong's output ("bytes latency_us MBps").
data_lines() { grep -cE '^[0-9]+ [0-9.]+ [0-9.]+$' "$1" || true; }
expected_lines() { local n=0 b=1; while (( b <= MAX_BYTES )); do n=$((n + 1)); b=$((b * 2)); done; echo $n; }
EXPECTED=$(expected_lines)

# Path check: a short run (1..8 bytes, CHECK_SECONDS per size) with the
# benchmark's own command, counting the host's TCP segments per message sent.
# The message count is estimated from the measured latency (each size runs
# about CHECK_SECONDS/latency messages after 20 warm-up ones; pingpong sizes
# its loop from the slower warm-up, so this overestimates up to ~2x). TCP
# sends about one segment per message (0.5-1 measured); shared memory none
# (only the launcher's chatter and other users' traffic, spread over
# hundreds of thousands of messages: < 0.001 measured).
# For MPICH the check also logs UCX's endpoint transports (UCX logs to stdout).
CHECK_SECONDS=0.2
TCP_MIN_PER_MSG=0.3    # at least this many segments per message: TCP
SHM_MAX_PER_MSG=0.05   # below this: shared memory
: > "$OUT/configs.tsv"
declare -A CHECK_OK=()
check_config() {  # config -> CHECK_STATUS, CHECK_REASON, CHECK_SEGS, CHECK_NOTE
    local cfg=$1 impl=${1%-*} path=${1#*-} base=$RAW/$1-check
    CHECK_NOTE=
    set_cmd "$cfg"
    if [[ $impl == mpich ]]; then CMD=(env UCX_LOG_LEVEL=info "${CMD[@]}"); fi
    run_one "$base.out" "$base.err" 8 "$CHECK_SECONDS"
    CHECK_SEGS=$RUN_SEGS
    local msgs per_msg
    msgs=$(awk -v s="$CHECK_SECONDS" '/^[0-9]+ [0-9.]+ [0-9.]+$/ && $2 > 0 { n += s * 1e6 / $2 + 20 } END { printf "%d", n }' "$base.out")
    per_msg=$(awk -v a="$CHECK_SEGS" -v m="$msgs" 'BEGIN { if (m > 0) printf "%.3f", a / m; else print "nan" }')
    local what="$CHECK_SEGS TCP segments for ~$msgs messages = $per_msg per message"
    if [[ $impl == mpich ]]; then
        CHECK_NOTE=$(cat "$base.out" "$base.err" | grep -oE 'ep_cfg\[[0-9]+\]: .*' | sort -u | head -n 3 | paste -sd ';' - || true)
        [[ -n $CHECK_NOTE ]] && log "  UCX: $CHECK_NOTE"
    fi
    if [[ $RUN_RC != 0 ]]; then
        CHECK_STATUS=failed
        CHECK_REASON="exit $RUN_RC: $(grep -v -E '^\[[0-9.]+\] \[' "$base.err" | grep -m1 -iE 'error|fail|abort|not found|denied|unable|cannot' || tail -n 1 "$base.err")"
        [[ $RUN_RC == 124 || $RUN_RC == 137 ]] && CHECK_REASON="timeout after ${RUN_TIMEOUT}s"
    elif [[ $(data_lines "$base.out") -lt 4 ]]; then
        CHECK_STATUS=failed; CHECK_REASON="no benchmark output"
    elif awk -v p="$per_msg" -v path="$path" -v lo="$SHM_MAX_PER_MSG" -v hi="$TCP_MIN_PER_MSG" \
            'BEGIN { exit !((path == "tcp" && p >= hi) || (path == "shm" && p < lo)) }'; then
        CHECK_STATUS=verified; CHECK_REASON=$what
    else
        CHECK_STATUS=mismatch
        CHECK_REASON="$what: does not look like $path (TCP >= $TCP_MIN_PER_MSG, shm < $SHM_MAX_PER_MSG; heavy TCP traffic from other users?)"
    fi
    CHECK_REASON=${CHECK_REASON//$'\t'/ }
    CHECK_NOTE=${CHECK_NOTE//$'\t'/ }
}

say "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for cfg in "${CONFIGS[@]}"; do
    impl=${cfg%-*}
    set_cmd "$cfg"
    if [[ -n ${BUILD_ERR[$impl]:-} ]]; then
        CHECK_STATUS=failed CHECK_REASON=${BUILD_ERR[$impl]} CHECK_SEGS=0 CHECK_NOTE=
    elif [[ $cfg == mpich-tcp ]]; then
        chosen=
        for cand in "${MPICH_TCP_CANDIDATES[@]}"; do
            read -r -a MPICH_TCP_OPTS <<< "$cand"
            say "mpich-tcp: trying $cand"
            check_config "$cfg"
            if [[ $CHECK_STATUS == verified ]]; then chosen=$cand; break; fi
            say "mpich-tcp: $cand -> $CHECK_STATUS ($CHECK_REASON)"
        done
        if [[ -z $chosen ]]; then  # keep the first one that at least runs
            for cand in "${MPICH_TCP_CANDIDATES[@]}"; do
                read -r -a MPICH_TCP_OPTS <<< "$cand"
                check_config "$cfg"
                [[ $CHECK_STATUS != failed ]] && break
            done
            [[ $CHECK_STATUS == failed ]] && read -r -a MPICH_TCP_OPTS <<< "${MPICH_TCP_CANDIDATES[0]}"
        fi
    else
        check_config "$cfg"
    fi
    set_cmd "$cfg"
    CHECK_OK[$cfg]=$([[ $CHECK_STATUS == failed ]] && echo 0 || echo 1)
    say "$cfg: path check $CHECK_STATUS ($CHECK_REASON)"
    tsv "$cfg" "${cfg%-*}" "${cfg#*-}" "$(quote "${CMD[@]}" "$MAX_BYTES" "$MIN_SECONDS")" \
        "$CHECK_STATUS" "$CHECK_REASON" "$CHECK_SEGS" "$CHECK_NOTE" >> "$OUT/configs.tsv"
done

# ------------------------------------------------------------- measure ----
# Interleaved: each repeat runs every configuration once, and the starting
# configuration rotates so no implementation always runs first or last.
: > "$OUT/runs.tsv"
n=${#CONFIGS[@]}
total=$((REPEATS * n)); k=0
for ((rep = 1; rep <= REPEATS; rep++)); do
    for ((i = 0; i < n; i++)); do
        cfg=${CONFIGS[$(( (i + rep - 1) % n ))]}
        k=$((k + 1))
        if [[ ${CHECK_OK[$cfg]} != 1 ]]; then
            say "[$k/$total] $cfg rep $rep: skipped (path check failed)"
            continue
        fi
        set_cmd "$cfg"
        so=$RAW/$cfg-r$rep.out se=$RAW/$cfg-r$rep.err
        run_one "$so" "$se" "$MAX_BYTES" "$MIN_SECONDS"
        lines=$(data_lines "$so")
        summary=$(awk '$1 == 8 { l = $2 } { b = $3 } END { printf "8 B %s us, last size %s MB/s", l, b }' "$so" 2>/dev/null || true)
        status=ok
        if [[ $RUN_RC != 0 ]]; then status=failed
        elif [[ $lines -lt $EXPECTED ]]; then status=failed; log "  incomplete output: $lines of $EXPECTED sizes"; fi
        say "[$k/$total] $cfg rep $rep: $status in ${RUN_SECONDS}s (exit $RUN_RC; $summary)"
        tsv "$cfg" "$rep" "$RUN_RC" "$RUN_SECONDS" "$RUN_SEGS" "$status" "$so" "$se" >> "$OUT/runs.tsv"
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
say "load average after: $LOAD_AFTER"

# ------------------------------------------------------------ metadata ----
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
[[ -n $cpu_model ]] || cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
{
    tsv date "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    tsv hostname "$(hostname 2>/dev/null || echo unknown)"
    tsv nproc "$(nproc)"
    tsv cpu_model "${cpu_model:-unknown}"
    tsv kernel "$(uname -srm)"
    tsv os "$(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-}")"
    tsv cc "$(cc --version 2>/dev/null | head -n 1)"
    tsv resmpi "$(git describe --always --dirty 2>/dev/null || echo unknown)$(git log -1 --format=' (%cs: %s)' 2>/dev/null || true)"
    tsv mpich "$(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p' | head -n 1) device ${MPICH_DEVICE:-unknown}"
    tsv mpich_tcp_setting "$(quote "${MPICH_TCP_OPTS[@]}")"
    tsv openmpi "$(ompi_info --version 2>/dev/null | head -n 1 || true)"
    tsv openmpi_shm_btl "$OMPI_SHM_BTL"
    tsv repeats "$REPEATS"
    tsv max_bytes "$MAX_BYTES"
    tsv min_seconds "$MIN_SECONDS"
    tsv run_timeout "$RUN_TIMEOUT"
    tsv check_seconds "$CHECK_SECONDS"
    tsv tcp_min_per_msg "$TCP_MIN_PER_MSG"
    tsv shm_max_per_msg "$SHM_MAX_PER_MSG"
    lib=$(readlink -f build/lib/libmpi.so.12 2>/dev/null || true)
    if [[ -f $lib ]]; then
        tsv resmpi_lib "${lib#"$ROOT"/} sha256 $(sha256sum "$lib" | cut -c1-12), built $(date -u -r "$lib" '+%Y-%m-%d %H:%M:%S UTC')"
    fi
    tsv load_before "$LOAD_BEFORE"
    tsv load_after "$LOAD_AFTER"
    for impl in "${IMPLS[@]}"; do
        tsv "build_$impl" "$(quote "${CC[$impl]}" -O2 -o "$OUT/pingpong-$impl" bench/pingpong.c)"
    done
} > "$OUT/meta.tsv"

# --------------------------------------------------------------- report ----
"$PY" bench/plot.py --bench-dir "$OUT" --docs-dir "$DOCS_DIR"
say "raw log: $LOG; results: $OUT/results.json"
