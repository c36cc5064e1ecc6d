#!/usr/bin/env bash
# MPI-IO bandwidth (bench/io.c) of resmpi with replication factor 1, 2 and
# 3, and of Debian's MPICH (ROMIO) on the same files, 2 ranks on this host:
# independent and collective, write and read, and for R >= 2 reads after a
# replica target and after the primary copy were lost. Invoked by
# `make bench-io`; writes the io:begin..io:end section of docs/benchmarks.md.
#
# Environment (defaults in brackets):
#   REPEATS [3]        interleaved runs per configuration; the best of each kept
#   MIB_PER_RANK [64]  bytes each rank writes and reads per phase
#   IO_DIR [build/bench-io/files]  where the files go (the primary's disk)
#   DOCS_DIR [docs]    where benchmarks.md is
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPEATS=${REPEATS:-3}
MIB_PER_RANK=${MIB_PER_RANK:-64}
DOCS_DIR=${DOCS_DIR:-docs}
OUT=build/bench-io
IO_DIR=${IO_DIR:-$OUT/files}
NAME=bench-io
# shellcheck source=bench/common.sh
source "$(dirname "$0")/common.sh"
IMPLS=(resmpi mpich)
build_each io

rm -rf "$IO_DIR"
mkdir -p "$IO_DIR/target1" "$IO_DIR/target2"
IO_DIR=$(cd "$IO_DIR" && pwd)
CONFIGS=(resmpi-R1 resmpi-R2 resmpi-R3 mpich)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for ((rep = 1; rep <= REPEATS; rep++)); do
    for cfg in "${CONFIGS[@]}"; do
        impl=${cfg%%-*}
        [[ ${OK[$impl]} == 1 ]] || continue
        factor=1
        [[ $cfg == resmpi-R* ]] && factor=${cfg#resmpi-R}
        launch_cmd "$impl" 2 "$OUT/io-$impl"
        so=$RAW/$cfg-r$rep.out
        log "\$ ${CMD[*]} $IO_DIR $MIB_PER_RANK $factor $IO_DIR/target1 $IO_DIR/target2"
        rc=0
        timeout -k 10 600 "${CMD[@]}" "$IO_DIR" "$MIB_PER_RANK" "$factor" "$IO_DIR/target1" "$IO_DIR/target2" \
            > "$so" 2> "${so%.out}.err" < /dev/null || rc=$?
        say "$cfg rep $rep: exit $rc"
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$RAW" "$DOCS_DIR/benchmarks.md" "$MIB_PER_RANK" "$REPEATS" "$LOAD_BEFORE" "$LOAD_AFTER" <<'PY'
import glob, os, re, sys
raw, docs, mib, repeats, load_before, load_after = sys.argv[1:]
best = {}
for path in glob.glob(os.path.join(raw, "*.out")):
    cfg = re.sub(r"-r\d+\.out$", "", os.path.basename(path))
    for line in open(path):
        parts = line.split()
        if len(parts) == 2:
            key = (cfg, parts[0])
            best[key] = max(best.get(key, 0.0), float(parts[1]))
configs = ["resmpi-R1", "resmpi-R2", "resmpi-R3", "mpich"]
phases = ["independent_write", "independent_read", "collective_write", "collective_read",
          "independent_read_target_lost", "independent_read_primary_lost"]
lines = ["<!-- io:begin -->", "## MPI-IO bandwidth: replication factor 1, 2, 3 and MPICH's ROMIO (issue 14)", "",
         f"`make bench-io` (bench/io.sh, bench/io.c): 2 ranks on this host, {mib} MiB per rank per phase, "
         f"best of {repeats} interleaved runs, aggregate MB/s, page cache not dropped (what the library adds: "
         f"copies, CRC32C, system calls, threads). Independent: each rank its own region in 1 MiB calls; "
         f"collective: an interleaved view of 64 KiB blocks, one call. R >= 2 puts copies 1..R-1 over two "
         f"target directories on the same disk. Load average {load_before} before, {load_after} after "
         f"(2 cores, shared with other builds: expect noise).", "",
         "| phase | " + " | ".join(configs) + " |", "|---|" + "---|" * len(configs)]
for phase in phases:
    cells = [f"{best[(c, phase)]:.0f}" if (c, phase) in best else "–" for c in configs]
    lines.append(f"| {phase.replace('_', ' ')} | " + " | ".join(cells) + " |")
def ratio(a, b, phase):
    if (a, phase) in best and (b, phase) in best:
        return best[(a, phase)] / best[(b, phase)]
    return None
notes = []
for phase in ["independent_write", "collective_write"]:
    r = ratio("resmpi-R1", "resmpi-R3", phase)
    if r:
        notes.append(f"R = 3 {phase.replace('_', ' ')} takes {r:.2f}x the time of R = 1 (target <= 1.5x)")
    r = ratio("resmpi-R1", "mpich", phase)
    if r:
        notes.append(f"unreplicated resmpi {phase.replace('_', ' ')} is {r:.2f}x ROMIO's bandwidth (target >= 1.0x)")
for cfg in ["resmpi-R2", "resmpi-R3"]:
    for lost in ["independent_read_target_lost", "independent_read_primary_lost"]:
        r = ratio(cfg, cfg, "independent_read") and best.get((cfg, lost), 0) / best[(cfg, "independent_read")]
        if r:
            notes.append(f"{cfg} {lost.replace('_', ' ')}: {r:.2f}x of the read with nothing lost (target >= 0.8x)")
lines += [""] + [f"- {n}" for n in notes] + ["<!-- io:end -->"]
section = "\n".join(lines) + "\n"
text = open(docs).read() if os.path.exists(docs) else ""
if "<!-- io:begin -->" in text:
    text = re.sub(r"<!-- io:begin -->.*?<!-- io:end -->\n?", lambda _: section, text, flags=re.S)
else:
    text = text.rstrip("\n") + "\n\n" + section
open(docs, "w").write(text)
print(section)
PY
rm -rf "$IO_DIR"
