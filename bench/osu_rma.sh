#!/usr/bin/env bash
# OSU's one-sided micro-benchmarks (osu_put_latency, osu_acc_latency,
# osu_get_bw, osu_put_bw) for resmpi, Debian's MPICH and Open MPI in one
# interleaved run on this host (2 ranks, shared memory). Invoked by
# `make bench-osu-rma` from the repo root.
#
# OSU's code is fetched, never committed: point OSU_SRC at an unpacked
# OSU Micro-Benchmarks tree (5.x layout: mpi/one-sided/osu_1sc.c), or
# OSU_GIT at a git directory of one (e.g. a mirror of the 5.3 import,
# forresti/osu-micro-benchmarks), from which mpi/one-sided is extracted.
#
#   build/bench-osu-rma/osu/                        the extracted sources
#   build/bench-osu-rma/<bench>-{resmpi,mpich,openmpi}   one binary per MPI
#   build/bench-osu-rma/raw/                        every run's stdout/stderr
#   build/bench-osu-rma/raw.log                     commands, exit codes
#   docs/benchmarks.md                              only the osu-rma:begin..end section
#
# Environment (defaults in brackets):
#   OSU_SRC / OSU_GIT    where OSU's sources are (one of them is required)
#   REPEATS [5]          interleaved runs per benchmark; best and median per size are reported
#   BENCHES ["osu_put_latency osu_acc_latency osu_get_bw osu_put_bw"]
#   SIZES ["8 4096 65536 1048576 4194304"]   sizes (bytes) reported in the table
#   ITERATIONS [1000]    OSU's -i: timed iterations up to 8 KiB (OSU's own 10000 takes
#                        minutes on a loaded 2-core host; above 8 KiB OSU uses 100, bw 30)
#   RUN_TIMEOUT [300]    seconds before one run is killed and counted as failed
#   WINDOW [allocate]    OSU's -w: allocate (resmpi's direct path on one host), create or
#                        dynamic (application memory: resmpi's single copy for large puts and
#                        gets); other than allocate, the section is osu-rma-WINDOW
#   DOCS_DIR [docs]      where benchmarks.md is
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPEATS=${REPEATS:-5}
BENCHES=${BENCHES:-osu_put_latency osu_acc_latency osu_get_bw osu_put_bw}
SIZES=${SIZES:-8 4096 65536 1048576 4194304}
ITERATIONS=${ITERATIONS:-1000}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
DOCS_DIR=${DOCS_DIR:-docs}
WINDOW=${WINDOW:-allocate}
OUT=build/bench-osu-rma

[[ $REPEATS =~ ^[1-9][0-9]*$ ]] || { echo "bench-osu-rma: REPEATS must be a positive integer" >&2; exit 2; }
[[ $ITERATIONS =~ ^[1-9][0-9]*$ ]] || { echo "bench-osu-rma: ITERATIONS must be a positive integer" >&2; exit 2; }
[[ $WINDOW =~ ^(allocate|create|dynamic)$ ]] || { echo "bench-osu-rma: WINDOW must be allocate, create or dynamic" >&2; exit 2; }
OSU_SRC_GIVEN=${OSU_SRC:-}
OSU_GIT_GIVEN=${OSU_GIT:-}

NAME=bench-osu-rma
# shellcheck source=bench/common.sh
source "$(dirname "$0")/common.sh"

OSU=$OUT/osu
rm -rf "$OSU"
mkdir -p "$OSU"
if [[ -n $OSU_SRC_GIVEN ]]; then
    [[ -f $OSU_SRC_GIVEN/mpi/one-sided/osu_1sc.c ]] || { say "OSU_SRC=$OSU_SRC_GIVEN has no mpi/one-sided/osu_1sc.c"; exit 2; }
    cp -r "$OSU_SRC_GIVEN/mpi/one-sided" "$OSU/"
elif [[ -n $OSU_GIT_GIVEN ]]; then
    git --git-dir="$OSU_GIT_GIVEN" archive HEAD mpi/one-sided | tar -x -C "$OSU" --strip-components=1
else
    say "set OSU_SRC (an unpacked OSU Micro-Benchmarks 5.x tree) or OSU_GIT (a git directory of one)"
    exit 2
fi
VERSION=$(sed -n 's/^AC_INIT(\[OSU-Micro-Benchmarks\], \[\([^]]*\)\].*/\1/p' \
    "${OSU_SRC_GIVEN:-/nonexistent}/configure.ac" 2>/dev/null || true)
[[ -n $VERSION ]] || VERSION=$(git --git-dir="${OSU_GIT_GIVEN:-/nonexistent}" show HEAD:configure.ac 2>/dev/null |
    sed -n 's/^AC_INIT(\[OSU-Micro-Benchmarks\], \[\([^]]*\)\].*/\1/p' || true)
VERSION=${VERSION:-unknown}

if [[ ! -x build/bin/mpicc || ! -x build/bin/mpiexec ]]; then
    say "building resmpi (make all)"
    make all >> "$LOG" 2>&1 || say "WARNING: make all failed (see $LOG)"
fi
declare -A BUILT=()
for bench in $BENCHES; do
    for impl in "${IMPLS[@]}"; do
        exe=$OUT/$bench-$impl
        cmd=("${CC[$impl]}" -O2 -w -DPACKAGE_VERSION="\"$VERSION\"" -I"$OSU/one-sided"
             -o "$exe" "$OSU/one-sided/osu_1sc.c" "$OSU/one-sided/$bench.c")
        log "\$ ${cmd[*]}"
        if command -v "${CC[$impl]}" >/dev/null 2>&1 && "${cmd[@]}" >> "$LOG" 2>&1; then
            BUILT[$bench-$impl]=1
        else
            BUILT[$bench-$impl]=0
            say "$impl: $bench did not build or ${CC[$impl]} is missing; not measured"
        fi
    done
done

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
: > "$OUT/runs.tsv"
for ((rep = 1; rep <= REPEATS; rep++)); do
    for bench in $BENCHES; do
        options=(-i "$ITERATIONS" -w "$WINDOW")
        # Rotate which MPI goes first, so none always runs first or last.
        for ((i = 0; i < ${#IMPLS[@]}; i++)); do
            impl=${IMPLS[$(( (i + rep - 1) % ${#IMPLS[@]} ))]}
            [[ ${BUILT[$bench-$impl]} == 1 ]] || continue
            launch_cmd "$impl" 2 "$OUT/$bench-$impl"
            so=$RAW/$bench-$impl-r$rep.out
            log "\$ timeout -k 10 $RUN_TIMEOUT ${CMD[*]} ${options[*]}"
            rc=0
            timeout -k 10 "$RUN_TIMEOUT" "${CMD[@]}" "${options[@]}" > "$so" 2> "${so%.out}.err" < /dev/null || rc=$?
            log "  exit $rc"
            say "$bench $impl rep $rep: exit $rc ($(awk '$1 == 4194304 { print "4 MiB: " $2 }' "$so" 2>/dev/null))"
            printf '%s\t%s\t%s\t%s\n' "$bench" "$impl" "$rc" "$so" >> "$OUT/runs.tsv"
        done
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$OUT/runs.tsv" "$DOCS_DIR/benchmarks.md" "$REPEATS" "$SIZES" "$ITERATIONS" "$VERSION" \
    "$LOAD_BEFORE" "$LOAD_AFTER" "$(git describe --always --dirty 2>/dev/null || echo unknown)" "$(nproc)" "$WINDOW" <<'PY'
import sys, collections, datetime, json, re, statistics
(runs, docs, repeats, sizes, iterations, version, load_before, load_after, commit, cores, window) = sys.argv[1:]
marker = "osu-rma" if window == "allocate" else f"osu-rma-{window}"
window_text = {
    "allocate": "window from MPI_Win_allocate",
    "create": "`-w create`: window from MPI_Win_create over the application's memory",
    "dynamic": "`-w dynamic`: MPI_Win_create_dynamic with attached memory",
}[window]
sizes = [int(size) for size in sizes.split()]
values = collections.defaultdict(list)   # (bench, size, impl) -> one value per run
failed = collections.Counter()
benches = []
for line in open(runs):
    bench, impl, rc, out = line.rstrip("\n").split("\t")
    if bench not in benches:
        benches.append(bench)
    rows = {}
    for text in open(out):
        parts = text.split()
        if len(parts) == 2 and not text.startswith("#"):
            try:
                rows[int(parts[0])] = float(parts[1])
            except ValueError:
                pass
    if rc != "0" or not rows:
        failed[(bench, impl)] += 1
        continue
    for size, value in rows.items():
        values[(bench, size, impl)].append(value)
json.dump({f"{b} {s} {i}": v for (b, s, i), v in values.items()},
          open(runs.rsplit("/", 1)[0] + "/results.json", "w"), indent=1)
impls = ["resmpi", "mpich", "openmpi"]
def best_of(bench):
    # Latency: lower is better; bandwidth: higher is better.
    return min if "latency" in bench else max
def cell(bench, size, impl, pick):
    got = values.get((bench, size, impl))
    return f"{pick(got):.2f}" if got else "—"
def ratio(bench, size, impl):
    pick = best_of(bench)
    mine, theirs = values.get((bench, size, "resmpi")), values.get((bench, size, impl))
    if not mine or not theirs:
        return "—"
    # Above 1: resmpi is better (faster or more bandwidth).
    return f"{pick(theirs) / pick(mine):.2f}" if "latency" in bench else f"{pick(mine) / pick(theirs):.2f}"
def human(size):
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB" if size >= 1 << 10 else f"{size} B"
lines = [
    f"<!-- {marker}:begin -->",
    f"<!-- Generated by bench/osu_rma.sh (`make bench-osu-rma`, WINDOW={window}); everything between the {marker} markers is rewritten on each run. -->",
    "## One-sided: OSU's " + ", ".join(benches) + f" (issue 17, {window})",
    "",
    f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}, resmpi {commit}, {cores} cores, "
    f"OSU Micro-Benchmarks {version} (fetched, not in this repository) built with each MPI's mpicc, 2 ranks on one "
    f"host (shared memory), OSU's defaults ({window_text}, passive target: lock once, then each "
    f"operation followed by MPI_Win_flush; bandwidth tests: windows of 32 operations, then a flush); "
    f"`-i {iterations}` timed iterations up to 8 KiB (OSU's default 10000 takes minutes here), OSU's own 100 "
    f"(latency) and 30 (bandwidth) above. {repeats} interleaved runs per benchmark (the "
    f"first MPI rotates each round); this is a loaded 2-core VM shared with other builds, so the best run "
    f"(lowest latency, highest bandwidth) and the median are both shown. Load average {load_before} before, "
    f"{load_after} after. Latency in µs, bandwidth in MB/s; the ratio columns are taken on the best runs and "
    "read above 1 as resmpi better (MPICH latency / resmpi latency; resmpi bandwidth / MPICH bandwidth).",
    "",
]
for bench in benches:
    unit = "µs" if "latency" in bench else "MB/s"
    pick = best_of(bench)
    lines += [
        f"### {bench} ({unit})",
        "",
        "| size | resmpi best | MPICH best | Open MPI best | resmpi median | MPICH median | Open MPI median | vs MPICH | vs Open MPI |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size in sizes:
        if not any(values.get((bench, size, impl)) for impl in impls):
            continue
        lines.append(
            f"| {human(size)} | "
            + " | ".join(cell(bench, size, impl, pick) for impl in impls) + " | "
            + " | ".join(cell(bench, size, impl, statistics.median) for impl in impls)
            + f" | {ratio(bench, size, 'mpich')} | {ratio(bench, size, 'openmpi')} |")
    lines.append("")
if failed:
    lines += ["Failed runs: " + ", ".join(f"{b} {i}: {c}" for (b, i), c in sorted(failed.items())) + ".", ""]
lines.append(f"Re-take: `OSU_GIT=<git dir of OSU 5.x> make bench-osu-rma` (or `OSU_SRC=<tree> REPEATS={repeats} "
             f"ITERATIONS={iterations} bench/osu_rma.sh`); every size OSU prints is in `build/bench-osu-rma/results.json`.")
lines.append(f"<!-- {marker}:end -->")
section = "\n".join(lines)
text = open(docs).read()
pattern = re.compile(rf"<!-- {marker}:begin -->.*?<!-- {marker}:end -->", re.S)
text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section + "\n"
open(docs, "w").write(text)
print(section)
PY
say "raw log: $LOG"
