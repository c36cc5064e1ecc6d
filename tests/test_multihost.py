"""mpiexec across hosts: --hosts/--hostfile/-ppn, --launcher-exec, --control-addr.

The two "hosts" are network namespaces (tests/netns.py) joined by a
management link and two rails; mpiexec runs in namespace A and starts one
proxy per namespace through scripts/netns-exec (so all ranks are remote to
it); each proxy starts its host's ranks and reaches mpiexec over TCP on the
management link (tests/test_proxy.py tests the proxy itself).  Each test is bounded well under
30 s in total."""
import os
import queue
import re
import signal
import threading
import time

import pytest

from conftest import MPIEXEC, assert_ok, launch, mpiexec_cmd, run_cmd
from netns import two_hosts  # noqa: F401  (pytest fixture)

pytestmark = pytest.mark.resmpi_only("--hosts with --launcher-exec is resmpi's mpiexec")

HOST_LINE = re.compile(r"^HOST (\d+) (\d+) (\S+) net:\[(\d+)\] (\S+)$", re.M)


def host_lines(res):
    """rank -> (size, processor name, netns inode, host key) from hosts.c output."""
    return {int(m[1]): (int(m[2]), m[3], int(m[4]), m[5]) for m in HOST_LINE.finditer(res.stdout)}


@pytest.mark.parametrize("paths", ["auto", "tcp"])
def test_four_ranks_on_two_namespace_hosts(build, two_hosts, paths):
    """2 ranks per host: every rank runs in the namespace it was placed on,
    knows its host key, and the ring + allreduce results are right (shm
    inside a host and TCP between hosts with auto; TCP everywhere with tcp)."""
    exe = build("hosts")
    h = two_hosts
    cmd = h.run_in_a(mpiexec_cmd(4, exe, mpiexec_opts=[*h.mpiexec_opts(), "-ppn", "2",
                                                       "--paths", paths, "--timeout", "20"]))
    res = run_cmd(cmd, timeout=25)
    assert_ok(res)
    lines = host_lines(res)
    assert sorted(lines) == [0, 1, 2, 3], res.describe()
    for rank, (size, _name, inode, key) in lines.items():
        ns = h.a if rank < 2 else h.b
        assert size == 4, res.describe()
        assert inode == h.netns_inode(ns), f"rank {rank} is not in {ns}\n{res.describe()}"
        assert key == ns, f"rank {rank}: RESMPI_HOST_KEY={key}, want {ns}\n{res.describe()}"


def test_default_placement_is_one_rank_per_host_in_turn(build, two_hosts):
    """Without slots or -ppn each host has one slot: ranks alternate A, B, A, B."""
    exe = build("hosts")
    h = two_hosts
    res = run_cmd(h.run_in_a(mpiexec_cmd(4, exe, mpiexec_opts=h.mpiexec_opts())), timeout=25)
    assert_ok(res)
    lines = host_lines(res)
    want = [h.a, h.b, h.a, h.b]
    assert [lines[r][3] for r in range(4)] == want, res.describe()


def test_hostfile_slots_place_the_ranks(build, two_hosts, tmp_path):
    """host:N and host slots=N lines, comments and blank lines; no -n: one
    rank per slot."""
    exe = build("hosts")
    h = two_hosts
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"# two namespace hosts\n{h.a}:1   # one slot\n\n{h.b} slots=3\n")
    opts = ["--hostfile", hostfile, "--launcher-exec", h.mpiexec_opts()[3],
            "--control-addr", h.control_addr]
    res = run_cmd(h.run_in_a([MPIEXEC, *opts, exe]), timeout=25)
    assert_ok(res)
    lines = host_lines(res)
    assert [lines[r][3] for r in range(4)] == [h.a, h.b, h.b, h.b], res.describe()


def _pump(stream, sink):
    for line in iter(stream.readline, ""):
        sink.put(line)
    sink.put(None)


def test_a_rail_missing_on_a_remote_host_is_a_usage_error(build, two_hosts):
    """Every rank is remote (a proxy per namespace host): the proxy checks
    the rails against its own host before it starts a rank, so a rail no
    host has is exit 2 with the host and the rail named, before any rank
    runs, as mpiexec's own check does for a job on one host.  The same
    job with rails both hosts have runs."""
    exe = build("hosts")
    h = two_hosts
    opts = [*h.mpiexec_opts(), "--timeout", "20"]
    res = run_cmd(h.run_in_a(mpiexec_cmd(2, exe, mpiexec_opts=[*opts, "--rails", "tcp:rail0,tcp:nosuchif0"])),
                  timeout=25)
    assert res.returncode == 2, res.describe()
    assert re.search(r"on host \S+: --rails item 2 'tcp:nosuchif0'", res.stderr), res.describe()
    assert "HOST " not in res.stdout, res.describe()
    res = run_cmd(h.run_in_a(mpiexec_cmd(2, exe, mpiexec_opts=[*opts, "--rails", "tcp:rail0,tcp:rail1"])),
                  timeout=25)
    assert_ok(res)
    assert sorted(host_lines(res)) == [0, 1], res.describe()


def test_killing_a_remote_rank_ends_the_job_naming_rank_and_host(build, two_hosts):
    """kill -9 of rank 3 (in namespace B) ends the job: exit 137, a message
    naming rank 3 and its host, and nothing of the job left running."""
    exe = build("hosts")
    h = two_hosts
    p = launch(h.run_in_a(mpiexec_cmd(4, exe, ["block"], mpiexec_opts=[*h.mpiexec_opts(), "-ppn", "2"])))
    out, err = queue.Queue(), queue.Queue()
    threading.Thread(target=_pump, args=(p.stdout, out), daemon=True).start()
    threading.Thread(target=_pump, args=(p.stderr, err), daemon=True).start()
    pids, seen = {}, []
    try:
        deadline = time.monotonic() + 20
        while len(pids) < 4 and time.monotonic() < deadline:
            try:
                line = out.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            seen.append(line)
            m = re.match(r"PID (\d+) (\d+)", line)
            if m:
                pids[int(m[1])] = int(m[2])
        assert len(pids) == 4, f"ranks did not all report: {pids}\n{''.join(seen)}"
        t0 = time.monotonic()
        os.kill(pids[3], signal.SIGKILL)
        code = p.wait(timeout=15)
        elapsed = time.monotonic() - t0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    stderr = []
    while True:
        try:
            line = err.get(timeout=5)
        except queue.Empty:
            break
        if line is None:
            break
        stderr.append(line)
    stderr = "".join(stderr)
    assert code == 128 + signal.SIGKILL, stderr
    assert f"rank 3 on host {h.b}" in stderr, stderr
    assert "killed by signal 9" in stderr, stderr
    assert elapsed < 10, f"took {elapsed:.1f}s to end the job\n{stderr}"
    for rank, pid in pids.items():
        deadline = time.monotonic() + 5
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    break
            time.sleep(0.05)
        else:
            if os.path.exists(f"/proc/{pid}"):
                pytest.fail(f"rank {rank} (pid {pid}) outlived the job")


def test_local_hosts_in_a_hostfile_run_here(build, tmp_path):
    """localhost in a hostfile needs no launcher and no namespaces: fork/exec
    as without --hosts (the launcher named here does not even exist)."""
    exe = build("hosts")
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=3\n")
    res = run_cmd([MPIEXEC, "--hostfile", hostfile, "--launcher-exec", "/nonexistent/launcher", exe],
                  timeout=25)
    assert_ok(res)
    assert sorted(host_lines(res)) == [0, 1, 2], res.describe()


def test_bad_hostfile_is_a_clear_error(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node1\nnode2 cores=4\n")
    res = run_cmd([MPIEXEC, "--hostfile", hostfile, "true"], timeout=10)
    assert res.returncode == 2, res.describe()
    assert f"{hostfile}:2" in res.stderr, res.describe()
