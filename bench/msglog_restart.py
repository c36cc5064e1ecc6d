#!/usr/bin/env python3
"""What one rank's failure costs under message logging against a whole-job
restart from checkpoints, and the sender log's memory per rank (issue 13
item 7).

Runs VeloC's own example heatdis_mem (fetched and built by hand, see
docs/compatibility.md; nothing here builds it), which checkpoints every
200 of its 600 steps, ROUNDS times, each run in fresh directories:

  logged     mpiexec --msglog MODE --ckpt-dir D -n N heatdis_mem MB cfg
             (fault-free: T0)
  logged+k   the same with --inject kill:RANK@Xms, X = KILL_AT x T0: the
             rank alone is started again, loads its last checkpoint and
             replays; the others keep running (T1)
  plain      mpiexec -n N heatdis_mem MB cfg (no fault tolerance: P0)
  plain+k    mpiexec --inject kill:RANK@Xms, X = KILL_AT x P0: the job
             fails; then the same command again, which restarts every
             rank from the checkpoints (P1: both runs, end to end)

and prints the medians: T1 - T0 is what the failure cost with logging
(one rank restarted), P1 - P0 what it cost with a whole-job restart. The
log's memory per rank comes from mpiexec's --report-json of the logged
runs (msglog_memory_bytes_max: payload and index bytes charged against
the bound, the largest rank's; msglog_mapped_bytes_max: what the arena
mapped for them).

    bench/msglog_restart.py --heatdis DIR/heatdis_mem [--mb 16] [--ranks 2]
        [--rounds 3] [--kill-rank 1] [--kill-at 0.6] [--mode pessimistic]

Times are wall-clock seconds of mpiexec, start to end (so they include
launching the job)."""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MPIEXEC = ROOT / "build" / "bin" / "mpiexec"
CFG = ("scratch = s\npersistent = p\nmeta = m\nmax_versions = 2\nscratch_versions = 1\n"
       "mode = async\nchksum = true\n")


def timed(cmd, workdir, expect_success=True):
    start = time.monotonic()
    p = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - start
    if expect_success and p.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))}: exit {p.returncode}\n{p.stderr}")
    return elapsed, p


def fresh(parent, name):
    workdir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=parent))
    (workdir / "heatdis.cfg").write_text(CFG)
    return workdir


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heatdis", required=True)
    parser.add_argument("--mb", default="16", help="heatdis_mem's memory per process, MB")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kill-rank", type=int, default=1)
    parser.add_argument("--kill-at", type=float, default=0.6,
                        help="the kill's time as a fraction of the fault-free run")
    parser.add_argument("--mode", default="pessimistic", choices=["pessimistic", "optimistic"])
    options = parser.parse_args()
    app = [str(Path(options.heatdis).resolve()), options.mb, "heatdis.cfg"]
    n = ["-n", str(options.ranks)]
    samples = {key: [] for key in ("T0", "T1", "P0", "P1", "P1 failed run", "P1 rerun")}
    reports = []
    with tempfile.TemporaryDirectory(prefix="resmpi-restart-") as scratch:
        for _ in range(options.rounds):
            # Message logging, fault-free, then one rank killed.
            workdir = fresh(scratch, "logged")
            logged = [str(MPIEXEC), "--msglog", options.mode, "--ckpt-dir", str(workdir / "ckpt"),
                      "--report-json", str(workdir / "report.json"), *n]
            t0, _ = timed([*logged, *app], workdir)
            reports.append(json.loads((workdir / "report.json").read_text())["counters"])
            workdir = fresh(scratch, "logged-kill")
            logged[logged.index("--ckpt-dir") + 1] = str(workdir / "ckpt")
            logged[logged.index("--report-json") + 1] = str(workdir / "report.json")
            kill = f"kill:{options.kill_rank}@{int(options.kill_at * t0 * 1000)}ms"
            t1, p = timed([*logged[:2], *logged[2:], "--inject", kill, *app], workdir)
            if "processes lost 1" not in p.stderr and "processes_lost" not in p.stderr:
                print(f"note: the kill {kill} may not have landed:\n{p.stderr}", file=sys.stderr)
            samples["T0"].append(t0)
            samples["T1"].append(t1)
            # No fault tolerance: fault-free, then killed and run again.
            workdir = fresh(scratch, "plain")
            p0, _ = timed([str(MPIEXEC), *n, *app], workdir)
            workdir = fresh(scratch, "plain-kill")
            kill = f"kill:{options.kill_rank}@{int(options.kill_at * p0 * 1000)}ms"
            failed, p = timed([str(MPIEXEC), "--inject", kill, *n, *app], workdir,
                              expect_success=False)
            if p.returncode == 0:
                sys.exit(f"the kill {kill} did not end the plain run:\n{p.stderr}")
            rerun, p = timed([str(MPIEXEC), *n, *app], workdir)
            if "initiating restart" not in p.stdout:
                sys.exit(f"the rerun did not restart from a checkpoint:\n{p.stdout}")
            samples["P0"].append(p0)
            samples["P1"].append(failed + rerun)
            samples["P1 failed run"].append(failed)
            samples["P1 rerun"].append(rerun)
    median = {key: statistics.median(values) for key, values in samples.items()}
    print(f"heatdis_mem {options.mb} MB x {options.ranks} ranks, rank {options.kill_rank} "
          f"killed at {options.kill_at:.0%} of the fault-free run, medians of {options.rounds}:")
    print("| restart | fault-free s | with one kill s | the kill cost s |")
    print("|---|---|---|---|")
    print(f"| one rank (--msglog {options.mode}) | {median['T0']:.3f} | {median['T1']:.3f} | "
          f"{median['T1'] - median['T0']:.3f} |")
    print(f"| whole job from its checkpoints (no fault tolerance) | {median['P0']:.3f} | "
          f"{median['P1']:.3f} ({median['P1 failed run']:.3f} until it failed + "
          f"{median['P1 rerun']:.3f} rerun) | {median['P1'] - median['P0']:.3f} |")
    memory = max(report.get("msglog_memory_bytes_max", 0) for report in reports)
    mapped = max(report.get("msglog_mapped_bytes_max", 0) for report in reports)
    logged_bytes = statistics.median(report.get("msglog_logged_bytes", 0) for report in reports)
    print(f"sender log per rank (fault-free logged runs): at most {memory} bytes held "
          f"({mapped} mapped); {logged_bytes / options.ranks:.0f} bytes logged per rank "
          f"({logged_bytes:.0f} in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
