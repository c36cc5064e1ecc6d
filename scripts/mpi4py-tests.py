#!/usr/bin/env python3
"""Build mpi4py from PyPI against resmpi and run mpi4py's own test suite.

    scripts/mpi4py-tests.py setup [--dir D]
        venv in D/venv (default build/mpi4py), mpi4py==VERSION built from its
        sdist with MPICC=<prefix>/bin/mpicc, and the same sdist unpacked in D
        (its test/ directory is the suite).  Idempotent: does nothing when D
        already holds that version built against the same libmpi.

    scripts/mpi4py-tests.py run [--dir D] [-n 1,2,4] [--timeout S] [--json F]
                                [MODULE ...]
        every test module (or the MODULEs named, e.g. test_p2p_obj) in its
        own `mpiexec -n N` job with a per-job timeout; prints one line per
        (N, module) with ran/ok/fail/error/skip counts, the failing tests,
        and writes everything to F as JSON.  Exit status 1 if any module
        failed, errored or timed out.

A module runs as its own job so that one hang or abort costs one module, not
the whole suite.  Each rank writes its unittest result to a JSON file (the
hidden `rank` subcommand, run under mpiexec with the venv's python); a test
counts as failed when it failed on any rank.

No third-party code is kept in the repository: mpi4py comes from PyPI at run
time, the way a user gets it.
"""

import argparse
import hashlib
import json
import re
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

MPI4PY_VERSION = "4.1.2"
REPO = Path(__file__).resolve().parent.parent
PREFIX = Path(os.environ.get("RESMPI_PREFIX", REPO / "build"))
DEFAULT_DIR = REPO / "build" / "mpi4py"


# ------------------------------------------------------------------ setup

def _stamp(prefix):
    """What the cached build depends on: mpi4py version and the mpi.h it saw."""
    header = prefix / "include" / "mpi.h"
    # The content, not the time: `make` rewrites an identical mpi.h.
    digest = hashlib.sha256(header.read_bytes()).hexdigest()[:16]
    return f"mpi4py=={MPI4PY_VERSION} mpi.h={digest}"


def setup(work, prefix, quiet=False):
    """Create work/venv with mpi4py built from source against prefix/bin/mpicc."""
    work.mkdir(parents=True, exist_ok=True)
    stamp_file = work / "stamp"
    want = _stamp(prefix)
    venv = work / "venv"
    python = venv / "bin" / "python"
    testdir = work / f"mpi4py-{MPI4PY_VERSION}" / "test"
    if stamp_file.exists() and stamp_file.read_text() == want and python.exists() and testdir.is_dir():
        return python, testdir
    out = subprocess.DEVNULL if quiet else None
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    dl = work / "dl"
    dl.mkdir(exist_ok=True)
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "--no-input"]
    subprocess.run(pip + ["download", "--no-binary", ":all:", "--no-deps", "-d", str(dl),
                          f"mpi4py=={MPI4PY_VERSION}"], check=True, stdout=out)
    sdist = dl / f"mpi4py-{MPI4PY_VERSION}.tar.gz"
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    env = dict(os.environ, MPICC=str(prefix / "bin" / "mpicc"),
               # -O1 and no debug info: the generated MPI.c is huge and this
               # halves the build on a small machine; speed is not under test.
               CFLAGS="-O1 -g0")
    # --no-cache-dir: a wheel cached from another MPI must never be reused.
    subprocess.run(pip + ["install", "--no-cache-dir", "--no-binary", "mpi4py", str(sdist)],
                   check=True, env=env, stdout=out)
    stamp_file.write_text(want)
    return python, testdir


# ------------------------------------------------------------------ rank

def rank_main(testdir, outdir, modules):
    """Runs inside every rank: mpi4py's test/main.py, result dumped as JSON."""
    import unittest

    sys.path.insert(0, str(testdir))
    sys.dont_write_bytecode = True
    import main as mpi4py_main  # mpi4py's test/main.py

    class Program(mpi4py_main.TestProgram):
        def runTests(self):
            mpi4py_main.print_banner(self)

            def ids(suite):
                for t in suite:
                    if isinstance(t, unittest.TestSuite):
                        yield from ids(t)
                    elif t is not None:
                        yield t.id()

            # before the run: a suite drops each test once it has run
            all_ids = sorted(ids(self.test))
            try:
                unittest.TestProgram.runTests(self)
            except SystemExit:
                pass
            from mpi4py import MPI

            rank = MPI.COMM_WORLD.Get_rank()
            res = self.result

            def first_line(text):
                """The exception line, prefixed with the last MPI call in the
                traceback (`CHKERR( MPI_X(...) )` where the Cython source is
                shown, else the mpi4py method), so that "Other MPI error"
                says which function raised it."""
                lines = [ln for ln in text.strip().splitlines() if ln.strip()]
                if not lines:
                    return ""
                calls = re.findall(r"\b(P?MPI_[A-Z][A-Za-z0-9_]*)\s*\(|in mpi4py\.(MPI\.[\w.]+)", text)
                calls = [c or m for c, m in calls]
                where = f"{calls[-1]}: " if calls else ""
                return (where + lines[-1].strip())[:300]

            data = {
                "ran": res.testsRun,
                "tests": all_ids,
                "failures": {t.id(): first_line(tb) for t, tb in res.failures},
                "errors": {t.id(): first_line(tb) for t, tb in res.errors},
                "skipped": {t.id(): str(why)[:200] for t, why in res.skipped},
                "unexpected_successes": [t.id() for t in res.unexpectedSuccesses],
            }
            (Path(outdir) / f"rank{rank}.json").write_text(json.dumps(data))
            sys.exit(not res.wasSuccessful())

    Program(module=None, argv=["main.py", *modules])


# ------------------------------------------------------------------ run

def list_modules(testdir):
    return sorted(p.stem for p in Path(testdir).glob("test_*.py"))


def run_module(python, testdir, module, nprocs, timeout_s, prefix, scratch):
    """One mpiexec job for one module (or a list of unittest names run
    together); returns a summary dict."""
    names = module if isinstance(module, list) else [module]
    module = names[0] if len(names) == 1 else f"{len(names)}-names"
    outdir = scratch / f"n{nprocs}-{module}"
    if outdir.exists():
        shutil.rmtree(outdir)
    outdir.mkdir(parents=True)
    cmd = [str(prefix / "bin" / "mpiexec"), "-n", str(nprocs), str(python), str(Path(__file__).resolve()),
           "rank", str(testdir), str(outdir), *names]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         errors="replace", start_new_session=True, cwd=str(testdir))
    timed_out = False
    try:
        output, _ = p.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(p.pid, 9)
        output, _ = p.communicate()
    summary = {"module": module, "nprocs": nprocs, "seconds": round(time.monotonic() - t0, 1),
               "exit": None if timed_out else p.returncode, "timed_out": timed_out,
               "ran": 0, "tests": [], "failures": {}, "errors": {}, "skipped": {}, "missing_ranks": []}
    for r in range(nprocs):
        f = outdir / f"rank{r}.json"
        if not f.exists():
            summary["missing_ranks"].append(r)
            continue
        d = json.loads(f.read_text())
        summary["ran"] = max(summary["ran"], d["ran"])
        summary["tests"] = d.get("tests", [])
        for key in ("failures", "errors", "skipped"):
            for test, why in d[key].items():
                summary[key].setdefault(test, f"rank {r}: {why}")
    # a test that failed or errored on some rank is not also a skip
    for test in list(summary["skipped"]):
        if test in summary["failures"] or test in summary["errors"]:
            del summary["skipped"][test]
    summary["tail"] = output[-3000:]
    summary["abort"] = ""
    if summary["missing_ranks"] or timed_out:
        # why a rank wrote no result: usually the module's import raised
        calls = re.findall(r"\b(MPI_[A-Z][A-Za-z0-9_]*)\s*\(|in mpi4py\.(MPI\.[\w.]+)", output)
        calls = [c or m for c, m in calls]
        errors = [ln.strip() for ln in output.splitlines() if re.match(r"\s*[\w.]+(Error|Exception)\b", ln)]
        summary["abort"] = ((calls[-1] + ": ") if calls else "") + (errors[-1] if errors else "")
    return summary


def module_ok(s):
    return (not s["timed_out"] and s["exit"] == 0 and not s["missing_ranks"]
            and not s["failures"] and not s["errors"])


def run(args):
    prefix = PREFIX
    python, testdir = setup(args.dir, prefix, quiet=args.quiet_setup)
    modules = args.modules or list_modules(testdir)
    sizes = [int(x) for x in args.nprocs.split(",")]
    scratch = args.dir / "results"
    results = []
    jobs = [modules] if args.one_job else modules
    for n in sizes:
        for m in jobs:
            s = run_module(python, testdir, m, n, args.timeout, prefix, scratch)
            results.append(s)
            status = "ok" if module_ok(s) else ("TIMEOUT" if s["timed_out"] else "FAIL")
            print(f"-n {n} {s['module']:28s} {status:7s} ran={s['ran']:4d} fail={len(s['failures']):3d} "
                  f"error={len(s['errors']):3d} skip={len(s['skipped']):3d} exit={s['exit']} "
                  f"{s['seconds']}s" + (f" missing ranks {s['missing_ranks']}" if s["missing_ranks"] else "")
                  + (f" [{s['abort']}]" if s["abort"] else ""),
                  flush=True)
            if args.verbose:
                for key in ("failures", "errors"):
                    for test, why in s[key].items():
                        print(f"    {key[:-1] if key == 'errors' else 'failure'}: {test}: {why}")
                if s["timed_out"] or s["missing_ranks"] or (s["exit"] and not s["failures"] and not s["errors"]):
                    print("    --- output tail ---\n    " + s["tail"][-1500:].replace("\n", "\n    "))
    for n in sizes:
        rs = [s for s in results if s["nprocs"] == n]
        print(f"TOTAL -n {n}: modules={len(rs)} ok={sum(module_ok(s) for s in rs)} "
              f"timed_out={sum(s['timed_out'] for s in rs)} ran={sum(s['ran'] for s in rs)} "
              f"failures={sum(len(s['failures']) for s in rs)} errors={sum(len(s['errors']) for s in rs)} "
              f"skipped={sum(len(s['skipped']) for s in rs)}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0 if all(module_ok(s) for s in results) else 1


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "rank":
        testdir, outdir, *modules = sys.argv[2:]
        rank_main(testdir, outdir, modules)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["setup", "run"])
    ap.add_argument("modules", nargs="*", help="test modules (default: all of test/test_*.py)")
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="work directory (venv, sdist, results)")
    ap.add_argument("-n", "--nprocs", default="1,2,4", help="comma-separated rank counts")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per (module, nprocs) job")
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--one-job", action="store_true",
                    help="run all the names given in one mpiexec job per rank count")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each failing test")
    ap.add_argument("--quiet-setup", action="store_true")
    args = ap.parse_intermixed_args()
    args.dir = args.dir.resolve()
    if args.command == "setup":
        python, testdir = setup(args.dir, PREFIX, quiet=args.quiet_setup)
        print(f"python: {python}\ntests: {testdir}")
        return
    sys.exit(run(args))


if __name__ == "__main__":
    main()
