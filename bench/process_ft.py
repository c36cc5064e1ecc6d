#!/usr/bin/env python3
"""Process-failure work, measured (issue 9, part 8). Invoked by
`make bench-process-ft` from the repo root.

1. The engine before and after: 8 B ping-pong latency and 4 MiB bandwidth
   over shared memory and over TCP, resmpi at BEFORE (a commit, built in
   build/bench-process-ft/before-src with its own target/) and at this
   tree, interleaved run by run in one session, with Debian's MPICH and
   Open MPI on shared memory in the same session for scale. Medians of
   REPEATS runs; ratios after/before.
2. Death-to-error latency (bench/detect.c): a rank is killed right after
   its first send; the survivor's pending receive from it fails with
   MPIX_ERR_PROC_FAILED. Measured on one host (shm and TCP) and, when
   network namespaces can be made (root), across two namespace hosts.

Environment: BEFORE [d2ed599], REPEATS [5], DETECT_RUNS [10].
Results: build/bench-process-ft/results.json and a table on stdout (the
docs/benchmarks.md section is written from it by hand).
"""
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "bench-process-ft"
BEFORE = os.environ.get("BEFORE", "d2ed599")
REPEATS = int(os.environ.get("REPEATS", "5"))
DETECT_RUNS = int(os.environ.get("DETECT_RUNS", "10"))
OMPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def run(cmd, timeout=300, env=None, cwd=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("RESMPI_", "OMPI_", "MPIR_"))}
    full_env.update(env or {})
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                          env=full_env, cwd=cwd)


def checked(cmd, **kw):
    res = run(cmd, **kw)
    if res.returncode != 0:
        sys.exit(f"process_ft: {' '.join(map(str, cmd))} failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return res


def build_before():
    src = OUT / "before-src"
    if not (src / "build" / "bin" / "mpiexec").exists():
        if src.exists():
            checked(["git", "worktree", "remove", "--force", src], cwd=ROOT)
        checked(["git", "worktree", "add", "--detach", src, BEFORE], cwd=ROOT)
        print(f"process_ft: building resmpi at {BEFORE} (a few minutes)", flush=True)
        checked(["make", "all"], cwd=src, timeout=3600)
    return src / "build"


def pingpong(cmd):
    """(8 B latency µs, 4 MiB bandwidth MB/s) of one pingpong run."""
    res = checked(cmd, timeout=300, env=OMPI_ENV)
    rows = {int(m[1]): (float(m[2]), float(m[3]))
            for m in re.finditer(r"^(\d+)\s+([\d.]+)\s+([\d.]+)\s*$", res.stdout, re.M)}
    return rows[8][0], rows[4 << 20][1]


def engine_before_after():
    before = build_before()
    after = ROOT / "build"
    exes = {}
    for name, cc in (("resmpi", after / "bin" / "mpicc"), ("mpich", "mpicc.mpich"),
                     ("openmpi", "mpicc.openmpi")):
        exe = OUT / f"pingpong-{name}"
        checked([cc, "-O2", "-o", exe, ROOT / "bench" / "pingpong.c"])
        exes[name] = exe
    configs = {
        "before-shm": [before / "bin" / "mpiexec", "-n", 2, exes["resmpi"]],
        "after-shm": [after / "bin" / "mpiexec", "-n", 2, exes["resmpi"]],
        "before-tcp": [before / "bin" / "mpiexec", "-n", 2, "--paths", "tcp", exes["resmpi"]],
        "after-tcp": [after / "bin" / "mpiexec", "-n", 2, "--paths", "tcp", exes["resmpi"]],
        "mpich-shm": ["mpiexec.mpich", "-n", 2, exes["mpich"]],
        "openmpi-shm": ["mpiexec.openmpi", "--allow-run-as-root", "-n", 2, exes["openmpi"]],
    }
    samples = {name: [] for name in configs}
    for repeat in range(REPEATS):
        for name, cmd in configs.items():
            samples[name].append(pingpong([*cmd, 4 << 20, 0.2]))
        print(f"process_ft: ping-pong round {repeat + 1}/{REPEATS} done", flush=True)
    medians = {name: (statistics.median(s[0] for s in runs), statistics.median(s[1] for s in runs))
               for name, runs in samples.items()}
    return samples, medians


def detect_runs(mpiexec_prefix, options, wrap=lambda cmd: cmd):
    exe = OUT / "detect"
    values = []
    for _ in range(DETECT_RUNS):
        cmd = wrap([*mpiexec_prefix, "--failure-policy", "continue", "--inject", "kill:1@sends=1",
                    "--timeout", "30", *options, "-n", 2, exe])
        res = run(cmd, timeout=60)
        match = re.search(r"detect_us ([\d.]+) class 101", res.stdout)
        if not match:
            sys.exit(f"process_ft: detect run failed:\n{' '.join(map(str, cmd))}\n{res.stdout}{res.stderr}")
        values.append(float(match[1]))
    return values


def detection():
    checked([ROOT / "build" / "bin" / "mpicc", "-O2", "-o", OUT / "detect", ROOT / "bench" / "detect.c"])
    mpiexec = [ROOT / "build" / "bin" / "mpiexec"]
    results = {
        "one host, shm": detect_runs(mpiexec, []),
        "one host, tcp": detect_runs(mpiexec, ["--paths", "tcp"]),
    }
    sys.path.insert(0, str(ROOT / "tests"))
    import netns  # noqa: E402  (tests/netns.py: two namespace hosts)
    try:
        hosts = netns.create()
    except Exception as error:  # no root or no ip netns: say so, measure the rest
        print(f"process_ft: no namespace hosts ({error}); cross-host latency not measured", flush=True)
        return results
    try:
        results["two namespace hosts, tcp"] = detect_runs(
            mpiexec, [*map(str, hosts.mpiexec_opts()), "-ppn", "1"], wrap=hosts.run_in_a)
    finally:
        netns.destroy(hosts)
    return results


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    samples, medians = engine_before_after()
    latencies = detection()
    print(f"\nEngine before ({BEFORE}) and after, medians of {REPEATS} runs, 2 ranks:")
    print(f"{'config':14} {'8 B latency us':>15} {'4 MiB MB/s':>12}")
    for name, (latency, bandwidth) in medians.items():
        print(f"{name:14} {latency:15.3f} {bandwidth:12.0f}")
    for path in ("shm", "tcp"):
        b, a = medians[f"before-{path}"], medians[f"after-{path}"]
        print(f"{path}: latency after/before {a[0] / b[0]:.3f}, bandwidth after/before {a[1] / b[1]:.3f}")
    a = medians["after-shm"]
    for other in ("mpich", "openmpi"):
        o = medians[f"{other}-shm"]
        print(f"shm: latency resmpi/{other} {a[0] / o[0]:.2f}, bandwidth resmpi/{other} {a[1] / o[1]:.2f}")
    print(f"\nDeath-to-error latency ({DETECT_RUNS} runs each), ms:")
    for name, values in latencies.items():
        ms = sorted(v / 1000 for v in values)
        print(f"{name:26} median {statistics.median(ms):7.2f}  min {ms[0]:7.2f}  max {ms[-1]:7.2f}")
    (OUT / "results.json").write_text(json.dumps(
        {"before": BEFORE, "samples": samples, "medians": medians, "detect_us": latencies}, indent=1))


if __name__ == "__main__":
    main()
