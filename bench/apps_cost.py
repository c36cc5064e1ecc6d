#!/usr/bin/env python3
"""What the fault-tolerance modes cost real applications when nothing
fails (issue 12 item 8, issue 13 item 7).

Runs already-built HPCCG (`test_HPCCG NX NY NZ`: the problem per rank is
fixed, so it is a weak-scaling code) and NPB IS under resmpi's `mpiexec`
in each mode, interleaved, ROUNDS times, and prints the median of the
time each application reports itself (HPCCG's "Total" time, IS's "Time in
seconds"), with ratios to the run without fault tolerance. Replication is
also compared as the issue asks for HPCCG: R = 2 with N ranks against
R = 1 with 2N ranks (the same number of processes, so the same cores,
and the same work per process); IS has a fixed problem, so all its modes
are compared with N unreplicated ranks.

    bench/apps_cost.py --hpccg DIR/test_HPCCG --is DIR/is.A.x [--rounds 3] [--ranks 2] [--msglog-only]

`--msglog-only` runs only the modes without fault tolerance and with
`--msglog pessimistic` / `optimistic` (issue 13 item 7's comparison).

Nothing here builds the applications (see docs/compatibility.md)."""
import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MPIEXEC = ROOT / "build" / "bin" / "mpiexec"


def app_time(app, stdout, workdir):
    if app == "hpccg":
        for yaml in Path(workdir).glob("hpccg*.yaml"):
            match = re.search(r"Time Summary:\s*\n\s*Total\s*:\s*([0-9.eE+-]+)", yaml.read_text())
            yaml.unlink()
            if match:
                return float(match.group(1))
        return None
    match = re.search(r"Time in seconds =\s*([0-9.]+)", stdout)
    return float(match.group(1)) if match else None


def run(app, exe, args, ranks, options):
    with tempfile.TemporaryDirectory(prefix="resmpi-cost-") as workdir:
        extra = ["--ckpt-dir", f"{workdir}/ckpt"] if "--msglog" in options else []
        p = subprocess.run([str(MPIEXEC), "-n", str(ranks), *options, *extra, str(exe), *args],
                           cwd=workdir, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            sys.exit(f"{app} {options}: exit {p.returncode}\n{p.stderr}")
        return app_time(app, p.stdout, workdir)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hpccg")
    parser.add_argument("--is", dest="is_")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--msglog-only", action="store_true",
                        help="no fault tolerance and the two --msglog modes only")
    options = parser.parse_args()
    n = options.ranks
    modes = [
        ("no fault tolerance", n, []),
        ("--msglog pessimistic", n, ["--msglog", "pessimistic"]),
        ("--msglog optimistic", n, ["--msglog", "optimistic"]),
        ("--replicas 2", n, ["--replicas", "2"]),
        ("--replicas 2 --replica-masking process", n, ["--replicas", "2", "--replica-masking", "process"]),
        (f"no fault tolerance, {2 * n} ranks", 2 * n, []),
    ]
    if options.msglog_only:
        modes = modes[:3]
    apps = [("hpccg", options.hpccg, ["40", "40", "40"]), ("is", options.is_, [])]
    print(f"| app | mode | ranks x replicas | median s ({options.rounds} rounds) | ratio |")
    print("|---|---|---|---|---|")
    for app, exe, args in apps:
        if not exe:
            continue
        times = {label: [] for label, _, _ in modes}
        for _ in range(options.rounds):
            for label, ranks, flags in modes:
                times[label].append(run(app, exe, args, ranks, flags))
        base = statistics.median(times["no fault tolerance"])
        for label, ranks, flags in modes:
            median = statistics.median(times[label])
            replicas = flags[flags.index("--replicas") + 1] if "--replicas" in flags else "1"
            # HPCCG's replication at N ranks is compared with 2N
            # unreplicated ranks: the same processes, the same work per
            # process (weak scaling). IS's problem is fixed (strong
            # scaling), so everything of it is compared with N ranks.
            weak = "--replicas" in flags and app == "hpccg"
            reference = (statistics.median(times[f"no fault tolerance, {2 * n} ranks"])
                         if weak else base)
            against = f" (vs {2 * n} x 1)" if weak else ""
            print(f"| {app} | {label} | {ranks} x {replicas} | {median:.3f} | "
                  f"{median / reference:.2f}x{against} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
