#!/usr/bin/env python3
"""Collect bench/run.sh's raw ping-pong runs into results.json, plot them and
write the generated section of docs/benchmarks.md.

    bench/plot.py --bench-dir build/bench --docs-dir docs    # what run.sh does
    bench/plot.py --from-json build/bench/results.json        # re-render docs only

Inputs in --bench-dir (written by run.sh): meta.tsv (key, value),
configs.tsv (id, impl, path, command, check status, check detail, TCP
segments, note), runs.tsv (id, repeat, exit code, seconds, TCP segments,
status, stdout file, stderr file) and the run outputs, one
"size_bytes latency_us bandwidth_MBps" line per size.
"""
import argparse
import json
import os
import re
import sys

BEGIN = "<!-- pingpong:begin -->"
END = "<!-- pingpong:end -->"
IMPL_NAMES = {"resmpi": "resmpi", "mpich": "MPICH", "openmpi": "Open MPI"}
PATH_NAMES = {"shm": "shared memory", "tcp": "TCP"}
IMPL_ORDER = ["resmpi", "mpich", "openmpi"]
PATH_ORDER = ["shm", "tcp"]
COLORS = {"resmpi": "tab:blue", "mpich": "tab:orange", "openmpi": "tab:green"}
STYLES = {"shm": ("-", "o"), "tcp": ("--", "s")}
LINE = re.compile(r"^(\d+) ([0-9.]+) ([0-9.]+)$")
LATENCY_SIZE = 8
BANDWIDTH_SIZE = 4 << 20


def read_tsv(path):
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def parse_output(path):
    data = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.match(line.strip())
                if m:
                    data.append([int(m.group(1)), float(m.group(2)), float(m.group(3))])
    except OSError:
        pass
    return data


def failure_reason(run):
    """A one-line reason for a failed run, from its stderr."""
    if run["exit_code"] in (124, 137):
        return "timeout"
    try:
        with open(run["stderr_file"], errors="replace") as f:
            lines = [l.strip() for l in f if l.strip() and not re.match(r"^\[[0-9.]+\] \[", l)]
    except OSError:
        lines = []
    for l in lines:
        if re.search(r"error|fail|abort|not found|denied|unable|cannot|killed|signal", l, re.I):
            return f"exit {run['exit_code']}: {l[:160]}"
    if run["exit_code"] != 0:
        return f"exit {run['exit_code']}" + (f": {lines[-1][:160]}" if lines else "")
    return "incomplete output"


def collect(bench_dir):
    meta = {k: (v[0] if v else "") for k, *v in read_tsv(os.path.join(bench_dir, "meta.tsv"))}
    for key in ("repeats", "max_bytes", "nproc"):
        if meta.get(key, "").isdigit():
            meta[key] = int(meta[key])
    configs = []
    for row in read_tsv(os.path.join(bench_dir, "configs.tsv")):
        row += [""] * (8 - len(row))
        cid, impl, path, command, check, check_detail, segs, note = row[:8]
        configs.append({
            "id": cid, "impl": impl, "path": path, "command": command,
            "check": {"status": check, "detail": check_detail,
                      "tcp_segments": int(segs) if segs.lstrip("-").isdigit() else None,
                      "note": note},
            "runs": [],
        })
    by_id = {c["id"]: c for c in configs}
    runs_tsv = os.path.join(bench_dir, "runs.tsv")
    for row in read_tsv(runs_tsv) if os.path.exists(runs_tsv) else []:
        cid, rep, rc, secs, segs, status, out, err = row[:8]
        run = {"repeat": int(rep), "exit_code": int(rc), "seconds": float(secs),
               "tcp_segments": int(segs), "status": status,
               "stdout_file": out, "stderr_file": err, "data": parse_output(out)}
        try:
            min_s = float(meta.get("min_seconds", "0"))
        except ValueError:
            min_s = 0.0
        msgs = sum(min_s * 1e6 / lat + 20 for _, lat, _ in run["data"] if lat > 0)
        run["approx_messages"] = int(msgs)
        if status != "ok":
            run["reason"] = failure_reason(run)
        by_id[cid]["runs"].append(run)
    for c in configs:
        ok = [r for r in c["runs"] if r["status"] == "ok"]
        best = {}
        for r in ok:
            for size, lat, bw in r["data"]:
                b = best.setdefault(size, [size, lat, bw])
                b[1] = min(b[1], lat)
                b[2] = max(b[2], bw)
        c["best"] = [best[s] for s in sorted(best)]  # [size, min latency us, max MB/s]
        if c["check"]["status"] == "failed":
            c["status"], c["reason"] = "failed", c["check"]["detail"]
        elif not ok:
            c["status"] = "failed"
            c["reason"] = "; ".join(sorted({r.get("reason", "?") for r in c["runs"]})) or "no runs"
        elif len(ok) < len(c["runs"]):
            c["status"] = "partial"
            c["reason"] = f"{len(c['runs']) - len(ok)} of {len(c['runs'])} runs failed: " + \
                "; ".join(sorted({r.get("reason", "?") for r in c["runs"] if r["status"] != "ok"}))
        else:
            c["status"] = "ok"
    return {"meta": meta, "units": {"size": "bytes", "latency": "one-way microseconds",
                                    "bandwidth": "MB/s (10^6 bytes/s)"},
            "configs": configs}


def value_at(config, size, column):
    for row in config.get("best", []):
        if row[0] == size:
            return row[column]
    return None


def bandwidth_size(results):
    max_bytes = results["meta"].get("max_bytes") or BANDWIDTH_SIZE
    size = BANDWIDTH_SIZE
    while size > max_bytes and size > 1:
        size //= 2
    return size


def human_size(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def plot(results, png):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py: matplotlib missing, no plot", file=sys.stderr)
        return False
    meta = results["meta"]
    fig, (ax_lat, ax_bw) = plt.subplots(1, 2, figsize=(13, 5.2))
    for c in sorted(results["configs"], key=order_key):
        if not c["best"]:
            continue
        sizes = [r[0] for r in c["best"]]
        style, marker = STYLES.get(c["path"], ("-", "o"))
        label = f"{IMPL_NAMES.get(c['impl'], c['impl'])}, {PATH_NAMES.get(c['path'], c['path'])}"
        if c["status"] == "partial":
            label += " (some runs failed)"
        kw = dict(color=COLORS.get(c["impl"]), linestyle=style, marker=marker, markersize=3.5,
                  linewidth=1.6, label=label)
        ax_lat.plot(sizes, [r[1] for r in c["best"]], **kw)
        ax_bw.plot(sizes, [r[2] for r in c["best"]], **kw)
    failed = [c for c in results["configs"] if c["status"] == "failed"]
    ax_lat.set_xscale("log", base=2)
    ax_lat.set_yscale("log")
    ax_lat.set_title("One-way latency (lower is better)")
    ax_lat.set_ylabel("latency (µs)")
    ax_bw.set_xscale("log", base=2)
    ax_bw.set_title("Bandwidth (higher is better)")
    ax_bw.set_ylabel("bandwidth (MB/s)")
    for ax in (ax_lat, ax_bw):
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
    ax_lat.legend(fontsize=8, loc="upper left")
    note = f"2 ranks, one host ({meta.get('nproc', '?')} cores, {meta.get('cpu_model', '?')}); " \
           f"best of {meta.get('repeats', '?')} runs per size; {meta.get('date', '')}"
    if failed:
        note += "; failed: " + ", ".join(c["id"] for c in failed)
    fig.suptitle("MPI ping-pong: resmpi vs MPICH vs Open MPI", fontsize=12)
    fig.text(0.5, 0.01, note, ha="center", fontsize=8, color="0.35")
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    os.makedirs(os.path.dirname(png) or ".", exist_ok=True)
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return True


def order_key(c):
    return (PATH_ORDER.index(c["path"]) if c["path"] in PATH_ORDER else 9,
            IMPL_ORDER.index(c["impl"]) if c["impl"] in IMPL_ORDER else 9)


def fmt(v, digits):
    return "n/a" if v is None else f"{v:,.{digits}f}"


def ratio(v, ref):
    return "n/a" if v is None or not ref else f"{v / ref:.2f}"


def section(results, png_name, have_png):
    meta = results["meta"]
    configs = sorted(results["configs"], key=order_key)
    bw_size = bandwidth_size(results)
    out = [BEGIN,
           "<!-- Generated by bench/run.sh (`make bench`); everything between the pingpong "
           "markers is rewritten on each run. -->",
           "",
           "## Ping-pong: resmpi vs MPICH vs Open MPI",
           "",
           f"Two ranks on one host, `bench/pingpong.c` (blocking `MPI_Send`/`MPI_Recv` "
           f"ping-pong, message sizes 1 B to {human_size(meta.get('max_bytes', 0))} in powers of two, "
           f"about {meta.get('min_seconds', '?')} s timed per size after a warm-up), each "
           f"configuration run {meta.get('repeats', '?')} times, interleaved across "
           "implementations; the figures are the best latency and best bandwidth per size "
           "over the runs. One-way latency is half the round trip; bandwidth is size / "
           "one-way latency (MB/s = 10^6 bytes/s).",
           "",
           "**Machine**",
           "",
           f"- date: {meta.get('date', '?')}",
           f"- CPU: {meta.get('cpu_model', '?')}, `nproc` = {meta.get('nproc', '?')}",
           f"- kernel: {meta.get('kernel', '?')}; OS: {meta.get('os', '?')}; compiler: {meta.get('cc', '?')}",
           f"- load average (1/5/15 min) before: {meta.get('load_before', '?')}, after: {meta.get('load_after', '?')}",
           f"- resmpi {meta.get('resmpi', '?')}, library `{meta.get('resmpi_lib', '?')}`",
           f"- MPICH {meta.get('mpich', '?')}; {meta.get('openmpi', 'Open MPI ?')}",
           "",
           f"**Results** (8 B latency, {human_size(bw_size)} bandwidth; \"vs MPICH\" is this "
           "implementation / MPICH on the same path: ≤ 1 is better for latency, ≥ 1 is better for bandwidth)",
           "",
           f"| MPI | path | 8 B latency (µs) | vs MPICH | {human_size(bw_size)} bandwidth (MB/s) | vs MPICH |",
           "|---|---|---:|---:|---:|---:|"]
    ref = {c["path"]: c for c in configs if c["impl"] == "mpich" and c["status"] != "failed"}
    notes = []
    for c in configs:
        name = IMPL_NAMES.get(c["impl"], c["impl"])
        pname = PATH_NAMES.get(c["path"], c["path"])
        if c["status"] == "failed":
            out.append(f"| {name} | {pname} | failed | | failed | |")
            notes.append(f"- {name}, {pname}: **failed**: {c.get('reason', '?')} "
                         "(details in `build/bench/raw.log`)")
            continue
        lat, bw = value_at(c, LATENCY_SIZE, 1), value_at(c, bw_size, 2)
        r = ref.get(c["path"])
        if c["impl"] == "mpich":
            lat_r = bw_r = "1 (ref)"
        else:
            lat_r = ratio(lat, value_at(r, LATENCY_SIZE, 1) if r else None)
            bw_r = ratio(bw, value_at(r, bw_size, 2) if r else None)
        mark = " ¹" if c["status"] == "partial" else ""
        out.append(f"| {name}{mark} | {pname} | {fmt(lat, 2)} | {lat_r} | {fmt(bw, 0)} | {bw_r} |")
        if c["status"] == "partial":
            notes.append(f"- ¹ {name}, {pname}: {c.get('reason', '')}; figures are from the runs that succeeded.")
    out.append("")
    if notes:
        out += notes + [""]
    if have_png:
        out += [f"![ping-pong latency and bandwidth]({png_name})", ""]
    else:
        out += ["(No plot: matplotlib was not available.)", ""]
    out += ["**How it was run** (from the repository root; `REPEATS`, `MAX_BYTES`, "
            "`MIN_SECONDS`, `RUN_TIMEOUT` are environment overrides of `bench/run.sh`)",
            "",
            "```sh",
            f"REPEATS={meta.get('repeats', '?')} MAX_BYTES={meta.get('max_bytes', '?')} "
            f"MIN_SECONDS={meta.get('min_seconds', '?')} make bench   # runs all of the below",
            "",
            "# build"]
    for impl in IMPL_ORDER:
        if meta.get(f"build_{impl}"):
            out.append(meta[f"build_{impl}"])
    out += ["", f"# run (each {meta.get('repeats', '?')}x, interleaved)"]
    for c in configs:
        out.append(c["command"])
    out += ["```",
            "",
            f"Every run is wrapped in `timeout -k 10 {meta.get('run_timeout', '?')}`. "
            "Open MPI gets `OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1` "
            "(harmless when not root); the caller's `RESMPI_*`, `UCX_*`, `MPIR_CVAR_*`, "
            "`MPICH_*`, `HYDRA_*`, `FI_*`, `OMPI_*` variables are cleared first.",
            "",
            "**Path check.** Before measuring, each configuration runs once with its own command "
            f"for sizes 1–8 B ({meta.get('check_seconds', '?')} s per size) while the host's TCP "
            "`OutSegs` counter (`/proc/net/snmp`) is sampled; the message count is estimated from the "
            "measured latency. TCP must send at least "
            f"{meta.get('tcp_min_per_msg', '?')} segments per message, shared memory fewer than "
            f"{meta.get('shm_max_per_msg', '?')} (other users' traffic only).",
            ""]
    for c in configs:
        chk = c["check"]
        line = (f"- {IMPL_NAMES.get(c['impl'], c['impl'])}, {PATH_NAMES.get(c['path'], c['path'])}: "
                f"{chk['status']} ({chk['detail']})")
        if chk.get("note"):
            line += f"; UCX endpoint transports: `{chk['note']}`"
        out.append(line)
    out += ["",
            f"MPICH is built with the `{meta.get('mpich', '?').split('device ')[-1]}` device; its TCP "
            f"configuration uses `{meta.get('mpich_tcp_setting', '?')}`.",
            "",
            END]
    return "\n".join(out) + "\n"


def write_markdown(md_path, text):
    if os.path.exists(md_path):
        with open(md_path) as f:
            old = f.read()
        b, e = old.find(BEGIN), old.find(END)
        if b >= 0 and e > b:
            new = old[:b] + text.rstrip("\n") + old[e + len(END):]
        elif b < 0 and e < 0:
            new = old.rstrip("\n") + "\n\n" + text
        else:
            sys.exit(f"plot.py: {md_path} has a broken {BEGIN} / {END} pair; not touching it")
    else:
        new = ("# Benchmarks\n\n"
               "Hand-written notes can go anywhere outside the `pingpong` markers: `make bench` "
               "(bench/run.sh) only rewrites the section between them.\n\n" + text)
    tmp = md_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, md_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-dir", default="build/bench")
    ap.add_argument("--docs-dir", default="docs")
    ap.add_argument("--from-json", help="skip collection; render from this results.json")
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            results = json.load(f)
    else:
        results = collect(args.bench_dir)
        path = os.path.join(args.bench_dir, "results.json")
        with open(path, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
        print(f"plot.py: wrote {path}")
    if not any(c["status"] != "failed" for c in results["configs"]):
        sys.exit("plot.py: every configuration failed; docs left unchanged (see build/bench/raw.log)")
    os.makedirs(args.docs_dir, exist_ok=True)
    png_name = "benchmarks-pingpong.png"
    png = os.path.join(args.docs_dir, png_name)
    have_png = plot(results, png)
    if have_png:
        print(f"plot.py: wrote {png}")
    md = os.path.join(args.docs_dir, "benchmarks.md")
    write_markdown(md, section(results, png_name, have_png))
    print(f"plot.py: wrote {md}")
    # Table to the terminal too.
    text = section(results, png_name, have_png)
    print("\n".join(l for l in text.splitlines() if l.startswith("|")))


if __name__ == "__main__":
    main()
