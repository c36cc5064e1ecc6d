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
#   TARGET1, TARGET2 [IO_DIR/target1, IO_DIR/target2]  the replica targets
#                      (directories on other devices, e.g. /dev/shm/t1, to
#                      measure concurrent copies that do not share a disk)
#   DOCS_DIR [docs]    where benchmarks.md is
#   IOR [unset]        an IOR binary (github.com/hpc/ior, built against
#                      MPICH's ABI: resmpi's build/bin/mpicc or mpicc.mpich;
#                      never built or fetched here): adds IOR -a MPIIO rows,
#                      collective (-c) and independent, -W -R data checks,
#                      replication through IOR_HINT__MPI__ hints
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
mkdir -p "$IO_DIR"
IO_DIR=$(cd "$IO_DIR" && pwd)
TARGET1=${TARGET1:-$IO_DIR/target1}
TARGET2=${TARGET2:-$IO_DIR/target2}
rm -rf "$TARGET1" "$TARGET2"
mkdir -p "$TARGET1" "$TARGET2"
CONFIGS=(resmpi-R1 resmpi-R2 resmpi-R3 mpich)

# run_ior CFG IMPL FACTOR OUT: IOR collective and independent, write then
# read with both data checks (-W -R; a bad byte is "Incorrect data" in
# IOR's output and the phase is not counted), then for R >= 2 an
# independent read of the kept file after its primary copy is deleted.
# OUT gets "phase MB/s" lines (IOR's MiB/s times 1.048576).
run_ior() {
    local cfg=$1 impl=$2 factor=$3 out=$4 mode flag ior_log hints=()
    local file=$IO_DIR/ior.dat
    if ((factor > 1)); then
        hints=(IOR_HINT__MPI__replication_factor="$factor"
            IOR_HINT__MPI__resmpi_replica_targets="$TARGET1,$TARGET2")
    fi
    : > "$out"
    ior_once() { # PHASE-PREFIX IOR-ARGS...
        local prefix=$1 rc=0
        shift
        log "\$ ${hints[*]} ${CMD[*]} $*"
        env "${hints[@]}" timeout -k 10 600 "${CMD[@]}" "$@" > "$ior_log" 2>&1 < /dev/null || rc=$?
        if ((rc != 0)) || grep -q "Incorrect data" "$ior_log"; then
            say "$cfg IOR $prefix: exit $rc or data check failed (see $ior_log)"
            return
        fi
        awk -v p="$prefix" '($1 == "write" || $1 == "read") && NF > 20 { printf "%s_%s %.1f\n", p, $1, $2 * 1.048576 }' \
            "$ior_log" >> "$out"
    }
    launch_cmd "$impl" 2 "$IOR"
    for mode in collective independent; do
        flag=()
        [[ $mode == collective ]] && flag=(-c)
        ior_log=${out%.out}-$mode.log
        rm -rf "$file" "$IO_DIR"/.ior.dat.* "$TARGET1"/ior.dat.* "$TARGET2"/ior.dat.*
        ior_once "ior_$mode" -a MPIIO "${flag[@]}" -w -r -W -R -C -G 271828 -k -e \
            -b "${MIB_PER_RANK}m" -t 1m -s 1 -i 1 -o "$file"
    done
    if ((factor > 1)); then
        rm -f "$file"
        ior_log=${out%.out}-primary-lost.log
        ior_once "ior_primary_lost" -a MPIIO -r -R -C -G 271828 -k -E \
            -b "${MIB_PER_RANK}m" -t 1m -s 1 -i 1 -o "$file"
    fi
    rm -rf "$file" "$IO_DIR"/.ior.dat.* "$TARGET1"/ior.dat.* "$TARGET2"/ior.dat.*
}
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for ((rep = 1; rep <= REPEATS; rep++)); do
    for cfg in "${CONFIGS[@]}"; do
        impl=${cfg%%-*}
        [[ ${OK[$impl]} == 1 ]] || continue
        factor=1
        [[ $cfg == resmpi-R* ]] && factor=${cfg#resmpi-R}
        launch_cmd "$impl" 2 "$OUT/io-$impl"
        so=$RAW/$cfg-r$rep.out
        log "\$ ${CMD[*]} $IO_DIR $MIB_PER_RANK $factor $TARGET1 $TARGET2"
        rc=0
        timeout -k 10 600 "${CMD[@]}" "$IO_DIR" "$MIB_PER_RANK" "$factor" "$TARGET1" "$TARGET2" \
            > "$so" 2> "${so%.out}.err" < /dev/null || rc=$?
        say "$cfg rep $rep: exit $rc"
        if [[ -n ${IOR:-} ]]; then
            run_ior "$cfg" "$impl" "$factor" "$RAW/ior-$cfg-r$rep.out"
        fi
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$RAW" "$DOCS_DIR/benchmarks.md" "$MIB_PER_RANK" "$REPEATS" "$LOAD_BEFORE" "$LOAD_AFTER" \
    "$IO_DIR" "$TARGET1" "$TARGET2" "$(nproc)" <<'PY'
import glob, os, re, subprocess, sys
raw, docs, mib, repeats, load_before, load_after, io_dir, target1, target2, cores = sys.argv[1:]
def device(path):
    try:
        return subprocess.run(["df", "--output=source", path], capture_output=True, text=True).stdout.split()[-1]
    except Exception:
        return "?"
same = device(io_dir) == device(target1) == device(target2)
where = ("over two target directories on the same disk" if same else
         f"on {target1} and {target2} ({device(target1)}, {device(target2)}; the primary on {device(io_dir)})")
best = {}
for path in glob.glob(os.path.join(raw, "*.out")):
    cfg = re.sub(r"^ior-", "", re.sub(r"-r\d+\.out$", "", os.path.basename(path)))
    for line in open(path):
        parts = line.split()
        if len(parts) == 2:
            key = (cfg, parts[0])
            best[key] = max(best.get(key, 0.0), float(parts[1]))
configs = ["resmpi-R1", "resmpi-R2", "resmpi-R3", "mpich"]
phases = ["independent_write", "independent_read", "collective_write", "collective_read",
          "independent_read_target_lost", "independent_read_primary_lost",
          "ior_collective_write", "ior_collective_read", "ior_independent_write", "ior_independent_read",
          "ior_primary_lost_read"]
phases = [p for p in phases if not p.startswith("ior_") or any(k[1] == p for k in best)]
lines = ["<!-- io:begin -->", "## MPI-IO bandwidth: replication factor 1, 2, 3 and MPICH's ROMIO (issue 14)", "",
         f"`make bench-io` (bench/io.sh, bench/io.c): 2 ranks on this host, {mib} MiB per rank per phase, "
         f"best of {repeats} interleaved runs, aggregate MB/s, page cache not dropped (what the library adds: "
         f"copies, CRC32C, system calls, threads). Independent: each rank its own region in 1 MiB calls; "
         f"collective: an interleaved view of 64 KiB blocks, one call. R >= 2 puts copies 1..R-1 {where}. "
         f"Load average {load_before} before, {load_after} after ({cores} cores"
         + (", shared with other builds: expect noise)." if int(cores) <= 2 else ").")
         + (f" IOR rows: IOR -a MPIIO (collective -c, and independent), -b {mib}m -t 1m per rank, -W -R data "
            f"checks, replication through IOR_HINT__MPI__replication_factor and resmpi_replica_targets; "
            f"'primary lost read': -E -r of the kept R >= 2 file after its primary was deleted."
            if any(k[1].startswith("ior_") for k in best) else ""), "",
         "| phase | " + " | ".join(configs) + " |", "|---|" + "---|" * len(configs)]
for phase in phases:
    cells = [f"{best[(c, phase)]:.0f}" if (c, phase) in best else "–" for c in configs]
    lines.append(f"| {phase.replace('_', ' ')} | " + " | ".join(cells) + " |")
def ratio(a, b, phase):
    if (a, phase) in best and (b, phase) in best:
        return best[(a, phase)] / best[(b, phase)]
    return None
notes = []
for phase in ["independent_write", "collective_write", "ior_independent_write", "ior_collective_write"]:
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
rm -rf "$IO_DIR" "$TARGET1" "$TARGET2"
