"""Markdown tables from bench/scaling.sh's results.txt (see its header for
the line formats): ping-pong medians per failure policy, the collective
sweeps per rank count with Open MPI's and MPICH's time over resmpi's, the
message rate and the ULFM latencies. Usage: scaling_table.py RESULTS."""
import collections
import statistics
import sys

OPS = ["barrier", "bcast", "reduce", "allreduce", "scan", "gather", "scatter",
       "allgather", "alltoall", "reduce_scatter_block"]
SIZES = [0, 1, 8, 64, 512, 4096]


def main(path):
    sweep = collections.defaultdict(dict)
    latency = collections.defaultdict(list)
    rate = {}
    ulfm = collections.defaultdict(dict)
    for line in open(path):
        part = line.split()
        if not part:
            continue
        if part[0] == "machine:":
            print(f"Machine: {line.strip()[9:]}\n")
        elif part[0] == "sweep" and len(part) == 7:
            sweep[(int(part[2]), part[3], int(part[4]))][part[1]] = float(part[5])
        elif part[0] == "lat" and len(part) == 4:
            latency[(part[1], part[2])].append(float(part[3]))
        elif part[0] == "msgrate" and len(part) == 7:
            rate[(part[1], int(part[2]))] = float(part[6])
        elif part[0] == "ulfm" and len(part) == 5:
            ulfm[int(part[1])][part[2]] = float(part[4])
    if latency:
        print("8 B ping-pong, one-way µs, median of the interleaved rounds (all rounds in brackets):\n")
        print("| MPI | policy | median | rounds |\n|---|---|---|---|")
        for (impl, policy), values in sorted(latency.items()):
            rounds = " ".join(f"{v:.3f}" for v in values)
            print(f"| {impl} | {policy} | {statistics.median(values):.3f} | {rounds} |")
        print()
    # Other resmpi builds of the same run ("resmpi-NAME"): a column each.
    others = sorted({impl for row in sweep.values() for impl in row if impl.startswith("resmpi-")})
    for ranks in sorted({key[0] for key in sweep}):
        print(f"Collectives at {ranks} ranks, best µs per call; `OMPI/r`, `MPICH/r` (and each "
              "`NAME/r` of another resmpi build): their time over resmpi's (above 1: resmpi faster):\n")
        columns = ["openmpi", "mpich", *others]
        names = ["OMPI/r", "MPICH/r", *(f"{impl[len('resmpi-'):]}/r" for impl in others)]
        header = "| op | bytes | resmpi | " + " | ".join(names) + " |"
        print(header + "\n" + "|---" * (header.count("|") - 1) + "|")
        for op in OPS:
            for size in SIZES:
                row = sweep.get((ranks, op, size))
                if not row or "resmpi" not in row:
                    continue
                ours = row["resmpi"]
                cells = [f"{row[other] / ours:.2f}" if other in row else "-" for other in columns]
                print(f"| {op} | {size} | {ours:.2f} | " + " | ".join(cells) + " |")
        print()
    if rate:
        print("8 B message rate (window of 64), million messages/s, pairs = ranks / 2:\n")
        print("| ranks | resmpi | MPICH | Open MPI |\n|---|---|---|---|")
        for ranks in sorted({key[1] for key in rate}):
            cells = [f"{rate[(impl, ranks)] / 1e6:.1f}" if (impl, ranks) in rate else "-"
                     for impl in ("resmpi", "mpich", "openmpi")]
            print(f"| {ranks} | " + " | ".join(cells) + " |")
        print()
    if ulfm:
        names = ["agree", "shrink", "revoke", "agree_fail", "shrink_fail"]
        print("ULFM, µs (bench/ulfm.c under --with-ft ulfm):\n")
        print("| ranks | " + " | ".join(names) + " |\n|---" + "|---" * len(names) + "|")
        for ranks in sorted(ulfm):
            print(f"| {ranks} | " + " | ".join(f"{ulfm[ranks].get(n, float('nan')):.1f}" for n in names) + " |")
        print()


if __name__ == "__main__":
    main(sys.argv[1])
