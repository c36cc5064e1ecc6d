#!/usr/bin/env bash
# ULFM, measured (issue 11, item 6): agree, shrink and revoke propagation
# at 2, 4 and 8 ranks, without and with a failure during the call
# (bench/ulfm.c), and the failure-free cost of `--with-ft ulfm` on the 8 B
# ping-pong latency (bench/pingpong.c with and without it, interleaved).
# resmpi only: Debian's Open MPI (4.1) predates ULFM in Open MPI (5.0) and
# MPICH's ch4 ULFM functions are stubs, so the figures are absolute, with
# the machine named. Invoked by `make bench-ulfm` from the repo root.
#
#   build/bench-ulfm/{ulfm,pingpong}-resmpi   the benchmarks
#   build/bench-ulfm/raw/                     every run's stdout/stderr
#   docs/benchmarks.md                        only the ulfm:begin..end section
#
# Environment (defaults in brackets):
#   REPEATS [5]          runs per job size (each prints one figure per measurement)
#   CALLS [200]          agree/shrink calls averaged per run (revoke: up to 50)
#   RANKS ["2 4 8"]      job sizes (above `nproc` the cores are oversubscribed)
#   LATENCY_REPEATS [5]  interleaved ping-pong runs with and without --with-ft ulfm
#   RUN_TIMEOUT [120]    seconds before one run is killed and counted as failed
#   DOCS_DIR [docs]      where benchmarks.md is
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPEATS=${REPEATS:-5}
CALLS=${CALLS:-200}
RANKS=${RANKS:-2 4 8}
LATENCY_REPEATS=${LATENCY_REPEATS:-5}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
DOCS_DIR=${DOCS_DIR:-docs}
OUT=build/bench-ulfm

for value in "$REPEATS" "$CALLS" "$LATENCY_REPEATS"; do
    [[ $value =~ ^[1-9][0-9]*$ ]] || { echo "bench-ulfm: REPEATS, CALLS and LATENCY_REPEATS must be positive integers" >&2; exit 2; }
done

NAME=bench-ulfm
# shellcheck source=bench/common.sh
source "$(dirname "$0")/common.sh"
IMPLS=(resmpi)

build_each ulfm
build_each pingpong
[[ ${OK[resmpi]} == 1 ]] || { say "resmpi did not build"; exit 1; }

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
: > "$OUT/runs.tsv"
for ((rep = 1; rep <= REPEATS; rep++)); do
    for ranks in $RANKS; do
        so=$RAW/ulfm-n$ranks-r$rep.out
        launch_cmd resmpi "$ranks" "$OUT/ulfm-resmpi" --with-ft ulfm
        log "\$ timeout -k 10 $RUN_TIMEOUT ${CMD[*]} $CALLS"
        rc=0
        timeout -k 10 "$RUN_TIMEOUT" "${CMD[@]}" "$CALLS" > "$so" 2> "${so%.out}.err" < /dev/null || rc=$?
        log "  exit $rc: $(tr '\n' ' ' < "$so")"
        # The last rank dies on purpose: mpiexec exits 137.
        say "n=$ranks rep $rep: exit $rc"
        printf 'ulfm\t%s\t%s\t%s\n' "$ranks" "$rc" "$so" >> "$OUT/runs.tsv"
    done
done
for ((rep = 1; rep <= LATENCY_REPEATS; rep++)); do
    for mode in plain ulfm; do
        so=$RAW/pingpong-$mode-r$rep.out
        if [[ $mode == ulfm ]]; then
            launch_cmd resmpi 2 "$OUT/pingpong-resmpi" --with-ft ulfm
        else
            launch_cmd resmpi 2 "$OUT/pingpong-resmpi"
        fi
        log "\$ ${CMD[*]} 8 0.3"
        rc=0
        timeout -k 10 "$RUN_TIMEOUT" "${CMD[@]}" 8 0.3 > "$so" 2> "${so%.out}.err" < /dev/null || rc=$?
        log "  exit $rc: $(tr '\n' ' ' < "$so")"
        printf 'pingpong-%s\t2\t%s\t%s\n' "$mode" "$rc" "$so" >> "$OUT/runs.tsv"
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$OUT/runs.tsv" "$DOCS_DIR/benchmarks.md" "$REPEATS" "$CALLS" "$LOAD_BEFORE" "$LOAD_AFTER" \
    "$(git describe --always --dirty 2>/dev/null || echo unknown)" "$(nproc)" \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)" <<'PY'
import sys, collections, datetime, re, statistics
runs, docs, repeats, calls, load_before, load_after, commit, cores, cpu = sys.argv[1:]
figures = collections.defaultdict(list)   # (name, ranks) -> microseconds of each run
latency = collections.defaultdict(list)   # mode -> one-way 8 B latency (us) of each run
failed = collections.Counter()
for line in open(runs):
    kind, ranks, rc, out = line.rstrip("\n").split("\t")
    text = open(out).read()
    if kind == "ulfm":
        found = re.findall(r"^(\w+) (\d+) ([0-9.]+)$", text, re.M)
        names = {name for name, _, _ in found}
        # 137: the last rank's death on purpose; anything else, or a
        # missing figure, is a failed run.
        if rc not in ("0", "137") or not {"agree", "shrink", "revoke", "agree_fail", "shrink_fail"} <= names:
            failed[("ulfm", ranks)] += 1
        for name, n, value in found:
            figures[(name, int(n))].append(float(value))
    else:
        mode = kind.split("-", 1)[1]
        sizes = re.findall(r"^\s*8\s+([0-9.]+)", text, re.M)
        if rc != "0" or not sizes:
            failed[(kind, ranks)] += 1
            continue
        latency[mode].append(float(sizes[0]))
names = [("agree", "agree"), ("shrink", "shrink (and free)"), ("revoke", "revoke, to the last rank's failed wildcard receive"),
         ("agree_fail", "agree while the last rank dies"), ("shrink_fail", "shrink after that failure (acknowledged)")]
job_sizes = sorted({n for _, n in figures})
def cell(values):
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})" if values else "—"
lines = [
    "<!-- ulfm:begin -->",
    "<!-- Generated by bench/ulfm.sh (`make bench-ulfm`); everything between the ulfm markers is rewritten on each run. -->",
    "## ULFM: agree, shrink, revoke; the cost of `--with-ft ulfm`",
    "",
    f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}, resmpi {commit}, {cores} cores ({cpu}), "
    f"shared memory on one host, load average {load_before} before, {load_after} after. `bench/ulfm.c` under "
    f"`mpiexec --with-ft ulfm`, {repeats} runs per job size; agree and shrink are means of {calls} calls on "
    "MPI_COMM_WORLD per run, revoke the mean over up to 50 fresh duplicates of the time from rank 0's "
    "MPIX_Comm_revoke to the last rank's blocked MPI_ANY_SOURCE receive failing with MPIX_ERR_REVOKED "
    "(CLOCK_MONOTONIC); the failure rows are one call per run, the last rank killing itself right after a barrier "
    "the others leave into the call (so they include detecting the death through the launcher's notice). "
    "Microseconds, median (min–max) over the runs. Not compared: Debian's Open MPI (4.1) has no ULFM (Open MPI 5 "
    "does) and MPICH 4.0's ch4 ULFM functions are stubs. Above 2 ranks this 2-core host is oversubscribed.",
    "",
    "| measurement | " + " | ".join(f"{n} ranks" for n in job_sizes) + " |",
    "|---|" + "---|" * len(job_sizes),
]
for key, label in names:
    lines.append(f"| {label} | " + " | ".join(cell(figures.get((key, n))) for n in job_sizes) + " |")
if latency:
    plain, ulfm = latency.get("plain"), latency.get("ulfm")
    ratio = f"{statistics.median(ulfm) / statistics.median(plain):.2f}" if plain and ulfm else "—"
    lines += ["", f"Failure-free cost: 8 B ping-pong one-way latency (bench/pingpong.c, 2 ranks, shared memory, "
              f"interleaved runs): without `--with-ft ulfm` {cell(plain)} µs, with it {cell(ulfm)} µs; "
              f"median ratio {ratio}."]
if failed:
    lines += ["", "Failed runs: " + ", ".join(f"{k} n={r}: {c}" for (k, r), c in sorted(failed.items())) + "."]
lines.append("")
lines.append(f"Re-take: `make bench-ulfm` (or `REPEATS={repeats} CALLS={calls} bench/ulfm.sh`).")
lines.append("<!-- ulfm:end -->")
section = "\n".join(lines)
text = open(docs).read()
pattern = re.compile(r"<!-- ulfm:begin -->.*?<!-- ulfm:end -->", re.S)
text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section + "\n"
open(docs, "w").write(text)
print(section)
PY
say "raw log: $LOG"
