"""The per-host proxy (`mpiexec --proxy`, hydra's hydra_pmi_proxy model) on
two network-namespace hosts (tests/netns.py): mpiexec runs in namespace A and
starts one proxy per host through scripts/netns-exec; each proxy starts its
host's ranks, carries their PMI and stdio, reports their exits, and kills or
respawns them when mpiexec says so.

What must hold:
- exactly one proxy per host, and nothing else of the job there but its ranks;
- remote stdout/stderr arrive whole, with the right --tag-output prefix;
- teardown reaches every remote rank: a rank blocked forever is gone after
  --timeout ends the job;
- kill:RANK@T of a remote rank under continue gives the same line and the same
  failure events as a local kill (the survivors finish with the fault-free
  ring and MPIX_ERR_PROC_FAILED wherever the victim was needed);
- a proxy killed with SIGKILL is the loss of every rank on its host: under
  continue the survivors on the other host finish, under abort the job ends
  with a message naming the host and nothing of it is left; a host whose
  control link goes down is lost the same way (and its proxy kills its
  ranks);
- neither the job secret nor the proxy token is on any command line;
- --respawn starts a remote rank again, and it re-joins the job.
A fault test that cannot run fails (netns.py skips only without root)."""
import os
import queue
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import MPIEXEC, assert_ok, launch, mpiexec_cmd, run_cmd
from netns import two_hosts  # noqa: F401  (pytest fixture)
from test_process_failure import check_survivors, reference_rings

pytestmark = pytest.mark.resmpi_only("the per-host proxy is resmpi's mpiexec")

BOUND_SECONDS = 30
CONTINUE = ("--failure-policy", "continue")
HEX_WORD = re.compile(r"[0-9a-fA-F]{32,}")


def netns_pids(ns):
    """Pids of every process inside network namespace `ns`."""
    p = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    return {int(word) for word in p.stdout.split()}


def cmdline(pid):
    """The words of /proc/PID/cmdline, None when the process is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [w.decode(errors="replace") for w in f.read().split(b"\0")[:-1]]
    except OSError:
        return None


def environment(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [w.decode(errors="replace") for w in f.read().split(b"\0") if b"=" in w]
    return dict(pair.split("=", 1) for pair in pairs)


def is_proxy(pid):
    words = cmdline(pid)
    return bool(words) and words[1:] == ["--proxy"] and \
        os.path.realpath(words[0]) == os.path.realpath(MPIEXEC)


def gone(pid):
    """The process no longer runs (absent or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def wait_gone(pids, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not all(gone(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if not gone(pid)]


def _pump(stream, sink):
    for line in iter(stream.readline, ""):
        sink.put(line)
    sink.put(None)


class Job:
    """A job started in namespace A whose output is read as it comes."""

    def __init__(self, command):
        self.process = launch(command)
        self.stdout, self.stderr = queue.Queue(), queue.Queue()
        threading.Thread(target=_pump, args=(self.process.stdout, self.stdout), daemon=True).start()
        threading.Thread(target=_pump, args=(self.process.stderr, self.stderr), daemon=True).start()
        self.seen = []

    def rank_pids(self, count, seconds=20):
        """rank -> pid from hosts.c's "PID rank pid" lines (block mode)."""
        pids = {}
        deadline = time.monotonic() + seconds
        while len(pids) < count and time.monotonic() < deadline:
            try:
                line = self.stdout.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
            m = re.match(r"PID (\d+) (\d+)", line)
            if m:
                pids[int(m[1])] = int(m[2])
        assert len(pids) == count, f"ranks did not all report: {pids}\n{''.join(self.seen)}"
        return pids

    def wait(self, seconds):
        try:
            return self.process.wait(timeout=seconds)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def drain(self, sink):
        lines = []
        while True:
            try:
                line = sink.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            lines.append(line)
        return "".join(lines)

    def kill(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def blocking_job(build, h, *options):
    exe = build("hosts")
    return Job(h.run_in_a(mpiexec_cmd(4, exe, ["block"], mpiexec_opts=[*h.mpiexec_opts(), "-ppn", "2", *options])))


def test_one_proxy_per_host_and_no_secret_on_any_command_line(build, two_hosts):
    """Ranks 0, 1 on A and 2, 3 on B, all blocked: host B holds exactly its
    proxy and ranks 2 and 3; host A mpiexec, its proxy and ranks 0 and 1. The
    job secret (read from a rank's environment) and any 32-hex-digit word
    (the proxy token, the secret) are on no command line."""
    h = two_hosts
    job = blocking_job(build, h, "--timeout", str(BOUND_SECONDS))
    try:
        pids = job.rank_pids(4)
        on_b = netns_pids(h.b)
        proxies_b = [pid for pid in on_b if is_proxy(pid)]
        assert len(proxies_b) == 1, {pid: cmdline(pid) for pid in on_b}
        assert on_b == {proxies_b[0], pids[2], pids[3]}, {pid: cmdline(pid) for pid in on_b}
        on_a = netns_pids(h.a)
        proxies_a = [pid for pid in on_a if is_proxy(pid)]
        assert len(proxies_a) == 1, {pid: cmdline(pid) for pid in on_a}
        assert on_a == {job.process.pid, proxies_a[0], pids[0], pids[1]}, {pid: cmdline(pid) for pid in on_a}
        # The ranks are the proxy's children, not mpiexec's.
        for rank, proxy in ((0, proxies_a[0]), (3, proxies_b[0])):
            with open(f"/proc/{pids[rank]}/stat") as f:
                assert int(f.read().rsplit(")", 1)[1].split()[1]) == proxy
        secret = environment(pids[2])["RESMPI_JOB_SECRET"]
        assert len(secret) == 64, secret
        assert "RESMPI_PMI_TOKEN" not in environment(pids[2])
        for entry in os.listdir("/proc"):
            words = cmdline(entry) if entry.isdigit() else None
            if words:
                assert secret not in " ".join(words), f"pid {entry}: {words}"
        for pid in on_a | on_b:
            words = cmdline(pid) or []
            assert not any(HEX_WORD.search(word) for word in words), f"pid {pid}: {words}"
    finally:
        job.kill()


def test_teardown_kills_every_remote_rank_and_proxy(build, two_hosts):
    """--timeout ends a job whose ranks block forever: exit 124, and every
    rank on both hosts and both proxies are gone; nothing is left in B."""
    h = two_hosts
    job = blocking_job(build, h, "--timeout", "6")
    try:
        pids = job.rank_pids(4)
        proxies = [pid for pid in netns_pids(h.a) | netns_pids(h.b) if is_proxy(pid)]
        assert len(proxies) == 2, proxies
        code = job.wait(BOUND_SECONDS)
    finally:
        job.kill()
    stderr = job.drain(job.stderr)
    assert code == 124, stderr
    assert "job timed out after 6 s" in stderr, stderr
    left = wait_gone([*pids.values(), *proxies], seconds=5)
    assert not left, f"outlived the job: {left} ({ {pid: cmdline(pid) for pid in left} })"
    assert not netns_pids(h.b), {pid: cmdline(pid) for pid in netns_pids(h.b)}


def test_when_mpiexec_is_killed_every_proxy_and_remote_rank_dies_with_it(build, two_hosts):
    """SIGKILL to mpiexec (no teardown at all): its launchers die with it
    (PR_SET_PDEATHSIG), so do the proxies, and their ranks with them."""
    h = two_hosts
    job = blocking_job(build, h, "--timeout", str(BOUND_SECONDS))
    try:
        pids = job.rank_pids(4)
        proxies = [pid for pid in netns_pids(h.a) | netns_pids(h.b) if is_proxy(pid)]
        assert len(proxies) == 2, proxies
        os.kill(job.process.pid, signal.SIGKILL)
        job.wait(10)
    finally:
        job.kill()
    left = wait_gone([*pids.values(), *proxies], seconds=5)
    assert not left, f"outlived mpiexec: { {pid: cmdline(pid) for pid in left} }"


def test_remote_stdout_and_stderr_arrive_whole_with_their_rank_tag(two_hosts):
    """Lines cut across writes (and so across frames) come out whole, each
    with its own rank's tag, on the stream the rank used."""
    h = two_hosts
    script = ('printf "out %s par" "$PMI_RANK"; sleep 0.2; printf "tial\\n"; '
              'echo "err $PMI_RANK" >&2; printf "last %s" "$PMI_RANK"')
    res = run_cmd(h.run_in_a([MPIEXEC, *h.mpiexec_opts(), "-ppn", "2", "--tag-output", "-n", "4",
                              "bash", "-c", script]), timeout=BOUND_SECONDS)
    assert res.returncode == 0, res.describe()
    assert sorted(res.stdout.splitlines()) == sorted(
        [f"[{r}] out {r} partial" for r in range(4)] + [f"[{r}] last {r}" for r in range(4)]), res.describe()
    assert sorted(line for line in res.stderr.splitlines() if " err " in line) == [
        f"[{r}] err {r}" for r in range(4)], res.describe()
    untagged = run_cmd(h.run_in_a([MPIEXEC, *h.mpiexec_opts(), "-n", "2", "bash", "-c", "echo hi $PMI_RANK"]),
                       timeout=BOUND_SECONDS)
    assert sorted(untagged.stdout.splitlines()) == ["hi 0", "hi 1"], untagged.describe()


def test_mpi_output_from_remote_ranks_is_tagged(build, two_hosts):
    exe = build("hosts")
    h = two_hosts
    res = run_cmd(h.run_in_a(mpiexec_cmd(4, exe, mpiexec_opts=[*h.mpiexec_opts(), "-ppn", "2", "-l"])),
                  timeout=BOUND_SECONDS)
    assert_ok(res)
    for line in res.stdout.splitlines():
        m = re.match(r"^\[(\d)\] (HOST (\d) .*|OK)$", line)
        assert m, f"untagged or torn line {line!r}\n{res.describe()}"
        if m[3] is not None:
            assert m[1] == m[3], f"rank {m[3]}'s line tagged [{m[1]}]\n{res.describe()}"


def test_a_remote_rank_killed_under_continue_is_the_same_event_as_a_local_one(build, two_hosts):
    """kill:3@1s of a rank on host B through its proxy: the same stderr line
    as a local kill (with host B), exit 137, and the survivors, two of them
    on the other host, finish with the fault-free ring."""
    exe = build("survivors")
    rings = reference_rings(exe, 4, 3)
    h = two_hosts
    res = run_cmd(h.run_in_a(mpiexec_cmd(4, exe, mpiexec_opts=[
        *h.mpiexec_opts(), "-ppn", "2", *CONTINUE, "--inject", "kill:3@1s", "--timeout", str(BOUND_SECONDS)])),
        timeout=BOUND_SECONDS + 30)
    check_survivors(res, rings)
    line = (f"WARNING: mpiexec: rank 3 (host {h.b}) killed by signal 9 (SIGKILL) \u2014 the job continues "
            "(failure policy continue)")
    assert res.stderr.splitlines().count(line) == 1, res.describe()
    report = [line for line in res.stderr.splitlines() if "FT report" in line]
    assert len(report) == 1 and "processes lost 1" in report[0], res.describe()


def test_a_proxy_killed_under_continue_loses_its_host_and_the_others_finish(build, two_hosts):
    """SIGKILL to host B's proxy while rank 3 streams to rank 0: ranks 2 and
    3 are lost (named, notices sent), the survivors on A finish with the
    fault-free ring and errors for everything that needs B."""
    h = two_hosts

    def kill_proxy(on_b):
        os.kill(next(pid for pid in on_b if is_proxy(pid)), signal.SIGKILL)
    res, rings, on_b = _survivors_losing_host_b(build, h, kill_proxy)
    check_survivors(res, rings)
    lost = re.findall(rf"^WARNING: mpiexec: rank (\d) \(host {re.escape(h.b)}\) was lost with its host's proxy",
                      res.stderr, re.M)
    assert sorted(lost) == ["2", "3"], res.describe()
    assert not wait_gone(on_b, seconds=5), {pid: cmdline(pid) for pid in on_b}


def _survivors_losing_host_b(build, h, fault):
    """survivors.c on 4 ranks (0, 1 on A; 2, 3 on B) under continue;
    `fault(on_b)` is applied past MPI_Init, with the pids in B. Returns the
    result (for check_survivors) and the pids that were in B."""
    exe = build("survivors")
    rings = reference_rings(exe, 4, 2)
    started = time.monotonic()
    job = Job(h.run_in_a(mpiexec_cmd(4, exe, [2], mpiexec_opts=[
        *h.mpiexec_opts(), "-ppn", "2", *CONTINUE, "--timeout", str(BOUND_SECONDS)])))
    try:
        deadline = time.monotonic() + 20
        while len(netns_pids(h.b)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        on_b = netns_pids(h.b)
        assert len([pid for pid in on_b if is_proxy(pid)]) == 1 and len(on_b) == 3, \
            {pid: cmdline(pid) for pid in on_b}
        time.sleep(1.5)  # past MPI_Init: rank 3 streams to rank 0
        fault(on_b)
        code = job.wait(BOUND_SECONDS + 10)
    finally:
        job.kill()

    class Result:
        pass
    res = Result()
    res.returncode, res.elapsed = code, time.monotonic() - started
    res.stdout, res.stderr = job.drain(job.stdout), job.drain(job.stderr)
    res.describe = lambda: f"exit {code}\n--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    return res, rings, on_b


def test_a_host_cut_off_from_mpiexec_is_lost_and_its_ranks_die(build, two_hosts):
    """Host B's control link goes down (the connection is not closed, it
    goes silent): keepalive makes each side give the other up within
    seconds; mpiexec loses ranks 2 and 3, B's proxy kills them, and the
    survivors on A finish."""
    h = two_hosts
    res, rings, on_b = _survivors_losing_host_b(build, h, lambda on_b: h.link(h.b, "mgmt", up=False))
    check_survivors(res, rings)
    lost = re.findall(rf"^WARNING: mpiexec: rank (\d) \(host {re.escape(h.b)}\) was lost with its host's proxy",
                      res.stderr, re.M)
    assert sorted(lost) == ["2", "3"], res.describe()
    assert not wait_gone(on_b, seconds=10), {pid: cmdline(pid) for pid in on_b}


def test_a_proxy_killed_under_abort_ends_the_job_naming_the_host(build, two_hosts):
    h = two_hosts
    job = blocking_job(build, h, "--timeout", str(BOUND_SECONDS))
    try:
        pids = job.rank_pids(4)
        proxies = [pid for pid in netns_pids(h.b) if is_proxy(pid)]
        assert len(proxies) == 1
        t0 = time.monotonic()
        os.kill(proxies[0], signal.SIGKILL)
        code = job.wait(BOUND_SECONDS)
        elapsed = time.monotonic() - t0
    finally:
        job.kill()
    stderr = job.drain(job.stderr)
    assert code == 137, stderr
    assert re.search(rf"^mpiexec: lost the proxy of host {re.escape(h.b)} \(launcher pid \d+\): its ranks 2, 3 "
                     r"are gone", stderr, re.M), stderr
    assert elapsed < 10, f"{elapsed:.1f} s\n{stderr}"
    assert not wait_gone(pids.values(), seconds=5), stderr


@pytest.mark.parametrize("paths", ["auto", "tcp"])
def test_a_remote_rank_is_respawned_by_its_proxy_and_rejoins(build, two_hosts, paths):
    """tests/c/rejoin.c as tests/test_rejoin.py runs it, with the victim
    (rank 3) on host B: its proxy starts incarnation 1, which joins and
    exchanges every round with each survivor."""
    exe = build("rejoin")
    h = two_hosts
    rounds = 5
    res = run_cmd(h.run_in_a(mpiexec_cmd(4, exe, mpiexec_opts=[
        *h.mpiexec_opts(), "-ppn", "2", *CONTINUE, "--inject", "kill:3@sends=40", "--paths", paths,
        "--respawn", "1", "--timeout", "40"])), timeout=70)
    assert "FAIL" not in res.stderr, res.describe()
    assert res.returncode == 137, res.describe()
    old = {int(m[1]) for m in re.finditer(
        r"^rank (\d+): (\d+) messages from incarnation 0 in order, then proc_failed$", res.stdout, re.M)}
    assert old == {0, 1, 2}, res.describe()
    assert "rank 3: incarnation 1 joined" in res.stdout, res.describe()
    assert f"rank 3: exchanged {rounds} rounds with 3 survivors" in res.stdout, res.describe()
    done = {int(m[1]): int(m[2]) for m in re.finditer(
        r"^rank (\d+): exchanged (\d+) rounds with incarnation 1 ", res.stdout, re.M)}
    assert done == {0: rounds, 1: rounds, 2: rounds}, res.describe()
    assert re.search(r"^mpiexec: rank 3 started again as incarnation 1 \(pid \d+, --respawn\)$",
                     res.stderr, re.M), res.describe()
