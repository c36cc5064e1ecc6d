#!/usr/bin/env python3
"""Real applications under process faults (issue 12 item 7, issue 13 item 6).

Runs already-built application binaries (Mantevo HPCCG, NPB IS, VeloC's
heatdis_mem: fetched and built by hand outside this tree, see
docs/compatibility.md) under resmpi's `mpiexec` in each fault-tolerance
mode, once fault-free and then with one process killed at each of N
seeded points, and checks that every faulty run exits 0 within a bound
and prints what the fault-free run printed (timing lines removed). Prints
one line per run and a summary table (Markdown) per application and mode.

    bench/apps_under_faults.py --hpccg DIR/test_HPCCG --is DIR/is.A.x \\
        --heatdis DIR/heatdis_mem [--seeds 20] [--modes pessimistic,...]

Modes: pessimistic, optimistic (`--msglog`, the kill is a timed SIGKILL
or a send count of one rank, which is restarted and replays), replicas2,
replicas3 (`--replicas R --replica-masking process`, a send count of one
replica), recovery2, recovery3 (the same with `--replica-recovery now`: one
replica of a rank killed, then a sibling of it later, after the first was
forked back). Nothing here builds the applications."""
import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MPIEXEC = ROOT / "build" / "bin" / "mpiexec"
RANKS = 4
BOUND_S = 120


def hpccg_output(text):
    """Everything before the performance summary (residuals, iterations)."""
    return text.split("#********** Performance Summary")[0]


def is_output(text):
    drop = re.compile(r"Time in seconds|Mop/s|Compile date|Run on|CC |CLINK|CMPI|CFLAGS|CLINKFLAGS|RAND")
    return "\n".join(line for line in text.splitlines() if not drop.search(line))


def heatdis_output(text):
    return "\n".join(line for line in text.splitlines() if not line.startswith("Execution finished"))


# name: (arguments, output filter, sends range for a kill by send count)
APPS = {
    "hpccg": (["40", "40", "40"], hpccg_output, (20, 700)),
    "is": ([], is_output, (5, 60)),
    "heatdis": (["8", "heatdis.cfg"], heatdis_output, (20, 1000)),
}

MODES = {
    "pessimistic": ["--msglog", "pessimistic"],
    "optimistic": ["--msglog", "optimistic"],
    "replicas2": ["--replicas", "2", "--replica-masking", "process"],
    "replicas3": ["--replicas", "3", "--replica-masking", "process"],
    "recovery2": ["--replicas", "2", "--replica-masking", "process", "--replica-recovery", "now"],
    "recovery3": ["--replicas", "3", "--replica-masking", "process", "--replica-recovery", "now"],
}

HEATDIS_CFG = "scratch = s\npersistent = p\nmeta = m\nmax_versions = 2\nscratch_versions = 1\nmode = sync\n"


def run(app, exe, mode, inject, workdir):
    args, keep, _ = APPS[app]
    workdir.mkdir(parents=True)
    if app == "heatdis":
        (workdir / "heatdis.cfg").write_text(HEATDIS_CFG)
    cmd = [str(MPIEXEC), "-n", str(RANKS), "--timeout", str(BOUND_S), *MODES[mode]]
    if mode in ("pessimistic", "optimistic"):
        cmd += ["--ckpt-dir", str(workdir / "ckpt")]
    if inject:
        cmd += ["--inject", inject]
    cmd += [str(exe), *args]
    start = time.monotonic()
    p = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=BOUND_S + 30)
    return p, keep(p.stdout), time.monotonic() - start


def kill_point(app, mode, seed, reference_s):
    draw = random.Random(f"{app}-{mode}-{seed}")
    rank = draw.randrange(RANKS)
    low, high = APPS[app][2]
    if mode.startswith("recovery"):
        replicas = int(mode[-1])
        first = draw.randrange(replicas)
        second = (first + 1 + draw.randrange(replicas - 1)) % replicas
        middle = (low + high) // 2
        return (f"kill:{rank}.{first}@sends={draw.randrange(low, middle)},"
                f"kill:{rank}.{second}@sends={draw.randrange(middle, high)}")
    if mode.startswith("replicas"):
        replica = draw.randrange(int(mode[-1]))
        return f"kill:{rank}.{replica}@sends={draw.randrange(low, high)}"
    if seed % 2 == 0:
        return f"kill:{rank}@{int(draw.uniform(0.1, 0.8) * reference_s * 1000)}ms"
    return f"kill:{rank}@sends={draw.randrange(low, high)}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hpccg")
    parser.add_argument("--is", dest="is_")
    parser.add_argument("--heatdis")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--modes", default=",".join(MODES))
    options = parser.parse_args()
    exes = {"hpccg": options.hpccg, "is": options.is_, "heatdis": options.heatdis}
    scratch = Path(tempfile.mkdtemp(prefix="resmpi-apps-"))
    summary = []
    failures = 0
    try:
        for app, exe in exes.items():
            if not exe:
                continue
            exe = Path(exe).resolve()
            for mode in options.modes.split(","):
                reference, expected, reference_s = run(app, exe, mode, None, scratch / f"{app}-{mode}-ref")
                if reference.returncode != 0:
                    print(f"{app} {mode}: the fault-free run failed:\n{reference.stderr}", file=sys.stderr)
                    failures += 1
                    continue
                landed = same = recovered = 0
                worst_s = 0.0
                for seed in range(options.seeds):
                    inject = kill_point(app, mode, seed, reference_s)
                    p, output, elapsed = run(app, exe, mode, inject, scratch / f"{app}-{mode}-{seed}")
                    hit = "killed by signal 9" in p.stderr
                    recovered += p.stderr.count("recovered: a sibling forked it")
                    ok = p.returncode == 0 and output == expected
                    landed += hit
                    same += ok
                    worst_s = max(worst_s, elapsed)
                    print(f"{app} {mode} seed {seed} {inject}: {'same output' if ok else 'DIFFERENT'}"
                          f"{'' if hit else ' (the kill did not land)'}, rc {p.returncode}, {elapsed:.2f} s",
                          flush=True)
                    if not ok:
                        failures += 1
                        print(p.stderr[-3000:], file=sys.stderr)
                summary.append(f"| {app} | {mode} | {reference_s:.2f} | {options.seeds} | {landed} | "
                               f"{recovered} | {same} | {worst_s:.2f} |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("\n| app | mode | fault-free s | runs | kills landed | replicas recovered | same output, rc 0 "
          "| slowest s |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(summary))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
