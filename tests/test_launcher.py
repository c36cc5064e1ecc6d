"""mpiexec behaviour: exit codes, abort, failures, timeouts, stdio, env.

Where MPICH's hydra behaves differently, the resmpi-specific part is either
a resmpi_only test or an assertion guarded by IS_RESMPI."""
import glob
import os
import queue
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import (IS_RESMPI, MPIEXEC, assert_ok, kill_group, launch, mpiexec_cmd, pids_running,
                      reap_strays, run, run_cmd)


def shm_files():
    return set(glob.glob("/dev/shm/resmpi-*"))


def wait_gone(exe, seconds=10):
    deadline = time.monotonic() + seconds
    while pids_running(exe) and time.monotonic() < deadline:
        time.sleep(0.1)
    return pids_running(exe)


def test_all_ranks_exiting_zero_gives_exit_zero(build):
    res = run(3, build("launcher"), "exit", 0, 0)
    assert res.returncode == 0, res.describe()


@pytest.mark.parametrize("code,rank", [(7, 1), (3, 0), (99, 3)])
def test_nonzero_rank_exit_code_is_propagated(build, code, rank):
    res = run(4, build("launcher"), "exit", code, rank)
    assert res.returncode == code, res.describe()


@pytest.mark.parametrize("code,rank", [(42, 2), (1, 0)])
def test_mpi_abort_ends_job_with_its_code_and_names_the_rank(build, code, rank):
    exe = build("launcher")
    res = run(4, exe, "abort", code, rank, timeout=60)
    assert res.returncode == code, res.describe()
    assert re.search(rf"rank {rank}\b", res.output), f"abort message does not name rank {rank}\n{res.describe()}"
    assert "FAIL" not in res.output, res.describe()
    assert res.elapsed < 30, res.describe()
    assert not wait_gone(exe), "ranks left behind after MPI_Abort"


def _pump(stream, sink):
    for line in iter(stream.readline, ""):
        sink.put(line)
    sink.put(None)


def test_kill_9_of_one_rank_ends_job_naming_rank_and_signal_without_orphans(build):
    exe = build("launcher")
    before = shm_files()
    p = launch(mpiexec_cmd(4, exe, ["block"]))
    outq, errq = queue.Queue(), queue.Queue()
    threading.Thread(target=_pump, args=(p.stdout, outq), daemon=True).start()
    threading.Thread(target=_pump, args=(p.stderr, errq), daemon=True).start()
    pids, lines = {}, []
    try:
        deadline = time.monotonic() + 60
        while len(pids) < 4 and time.monotonic() < deadline:
            try:
                line = outq.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            lines.append(line)
            m = re.search(r"PID (\d+) (\d+)", line)
            if m:
                pids[int(m.group(1))] = int(m.group(2))
        assert len(pids) == 4, f"ranks did not all report their pid: {pids}\n{''.join(lines)}"
        time.sleep(0.3)  # let everybody enter MPI_Recv
        os.kill(pids[2], signal.SIGKILL)
        t_kill = time.monotonic()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("hung: job did not end within 30 s after kill -9 of rank 2", pytrace=False)
        took = time.monotonic() - t_kill
    finally:
        kill_group(p)
        reap_strays()
    time.sleep(0.2)
    for q in (outq, errq):
        while True:
            try:
                item = q.get(timeout=2)
            except queue.Empty:
                break
            if item is None:
                break
            lines.append(item)
    text = "".join(lines)
    assert p.returncode != 0, text
    assert took < 20, f"job took {took:.1f}s to end after a rank died"
    if IS_RESMPI:
        assert re.search(r"rank 2\b.*killed by signal 9", text), f"no 'rank 2 ... killed by signal 9':\n{text}"
    else:
        assert re.search(r"signal:? *9|SIGNAL: 9", text, re.I), text
    left = wait_gone(exe)
    assert not left, f"orphan ranks left: {left}"
    if IS_RESMPI:
        assert shm_files() - before == set(), f"shm segments left: {shm_files() - before}"


def test_rank_killed_by_segfault_is_reported_with_signal_number(build):
    exe = build("launcher")
    res = run(3, exe, "crash", 1, timeout=60)
    assert res.returncode not in (0, None), res.describe()
    if IS_RESMPI:
        assert re.search(r"rank 1\b.*killed by signal 11", res.output), res.describe()
    else:
        assert "signal 11" in res.output, res.describe()
    assert not wait_gone(exe), "ranks left behind after a crash"


@pytest.mark.resmpi_only("no /dev/shm/resmpi-* segments to check under MPICH")
def test_normal_and_aborted_jobs_leave_no_shared_memory_segments(build):
    before = shm_files()
    assert_ok(run(4, build("p2p_sizes"), "sizes"))
    run(3, build("launcher"), "abort", 5, 1)
    time.sleep(0.5)
    assert shm_files() - before == set(), f"left behind: {shm_files() - before}"


@pytest.mark.resmpi_only("--timeout S (exit 124) is resmpi's option")
def test_timeout_option_kills_a_hung_job_with_exit_124(build):
    exe = build("launcher")
    res = run(3, exe, "hang", mpiexec_opts=["--timeout", "3"], timeout=60)
    assert res.returncode == 124, res.describe()
    assert 2.5 < res.elapsed < 20, res.describe()
    assert not wait_gone(exe), "ranks left after --timeout"


def test_tag_output_prefixes_every_line_with_its_rank(build):
    opt = ["--tag-output"] if IS_RESMPI else ["-prepend-rank"]
    res = run(3, build("launcher"), "hello", mpiexec_opts=opt)
    assert res.returncode == 0, res.describe()
    lines = [l for l in res.stdout.splitlines() if "hello" in l]
    assert sorted(lines) == [f"[{r}] hello from {r} of 3" for r in range(3)], res.describe()


def test_output_of_every_rank_reaches_stdout_untagged_by_default(build):
    res = run(4, build("launcher"), "hello")
    assert res.returncode == 0, res.describe()
    assert sorted(l for l in res.stdout.splitlines() if "hello" in l) == [f"hello from {r} of 4" for r in range(4)]


def test_stdin_is_delivered_to_rank_0(build):
    data = "".join(f"line {i}\n" for i in range(1000))
    res = run(3, build("launcher"), "stdin", input=data)
    assert res.returncode == 0, res.describe()
    assert f"lines=1000 bytes={len(data)}" in res.stdout, res.describe()


def test_genv_and_inherited_environment_reach_every_rank(build):
    res = run(3, build("launcher"), "env", "RESMPI_T_INHERIT", "RESMPI_T_GENV",
              mpiexec_opts=["-genv", "RESMPI_T_GENV", "g v"], env={"RESMPI_T_INHERIT": "inh"})
    assert res.returncode == 0, res.describe()
    for r in range(3):
        assert f"{r} RESMPI_T_INHERIT=inh" in res.stdout, res.describe()
        assert f"{r} RESMPI_T_GENV=g v" in res.stdout, res.describe()


@pytest.mark.resmpi_only("-x VAR[=VAL] is resmpi's (Open MPI style) option; hydra has -genvlist")
def test_x_option_exports_named_and_assigned_variables(build):
    res = run(2, build("launcher"), "env", "RESMPI_T_X1", "RESMPI_T_X2",
              mpiexec_opts=["-x", "RESMPI_T_X1", "-x", "RESMPI_T_X2=two"], env={"RESMPI_T_X1": "one"})
    assert res.returncode == 0, res.describe()
    for r in range(2):
        assert f"{r} RESMPI_T_X1=one" in res.stdout and f"{r} RESMPI_T_X2=two" in res.stdout, res.describe()


@pytest.mark.parametrize("flag", ["-n", "-np"])
def test_n_and_np_both_set_the_number_of_ranks(build, flag):
    exe = build("launcher")
    res = run_cmd([MPIEXEC, flag, "2", str(exe), "hello"], timeout=60)
    assert res.returncode == 0, res.describe()
    assert res.stdout.count("hello from") == 2, res.describe()


def _allowed_cpus(res):
    """rank -> the Cpus_allowed_list each rank printed."""
    found = dict(re.findall(r"^(\d+) cpus=(\S+)$", res.stdout, re.M))
    return {int(rank): cpus for rank, cpus in found.items()}


CPUS_OF_RANK = 'echo "$PMI_RANK cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2)"'


@pytest.mark.resmpi_only("--bind-to core|none with RESMPI_BIND_TO is resmpi's spelling of the binding")
def test_bind_to_core_gives_each_rank_its_own_cpu_and_none_is_the_default():
    cpus = sorted(os.sched_getaffinity(0))
    assert len(cpus) >= 2, "this test needs two CPUs (the machines it runs on have them)"
    bound = run_cmd([MPIEXEC, "--bind-to", "core", "-n", "2", "sh", "-c", CPUS_OF_RANK])
    assert bound.returncode == 0, bound.describe()
    assert _allowed_cpus(bound) == {0: str(cpus[0]), 1: str(cpus[1])}, bound.describe()
    # The same through the environment variable that mirrors the option.
    mirrored = run_cmd([MPIEXEC, "-n", "2", "sh", "-c", CPUS_OF_RANK], env={"RESMPI_BIND_TO": "core"})
    assert _allowed_cpus(mirrored) == _allowed_cpus(bound), mirrored.describe()
    # Unbound (the default, and more ranks than CPUs): every rank keeps mpiexec's whole mask.
    for options, count in (([], 2), (["--bind-to", "none"], 2), (["--bind-to", "core"], len(cpus) + 1)):
        free = run_cmd([MPIEXEC, *options, "-n", str(count), "sh", "-c", CPUS_OF_RANK])
        assert free.returncode == 0, free.describe()
        seen = _allowed_cpus(free)
        assert len(seen) == count and len(set(seen.values())) == 1, free.describe()
        assert seen[0] != str(cpus[0]) or len(cpus) == 1, free.describe()
    bad = run_cmd([MPIEXEC, "--bind-to", "socket", "-n", "1", "true"])
    assert bad.returncode != 0 and "expected core or none" in bad.output, bad.describe()


@pytest.mark.resmpi_only("how resmpi's mpiexec finds a program")
def test_a_program_named_without_a_path_runs_from_the_working_directory(build):
    """As hydra and Open MPI do (CTest runs `mpiexec -n N prog` from the
    test's build directory): a bare name not on PATH but in the working
    directory runs from there; a bare name found nowhere is exit 127."""
    exe = build("basic")
    res = run_cmd([MPIEXEC, "-n", "2", exe.name], cwd=str(exe.parent), timeout=60)
    assert_ok(res)
    res = run_cmd([MPIEXEC, "-n", "1", "no-such-program-here"], cwd=str(exe.parent), timeout=60)
    assert res.returncode == 127, res.describe()


def _listening_tcp_ports(pid):
    """Ports of the TCP sockets process pid listens on (from /proc)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
        ports = set()
        for table in ("tcp", "tcp6"):
            with open(f"/proc/{pid}/net/{table}") as rows:
                for row in list(rows)[1:]:
                    fields = row.split()
                    if fields[3] == "0A" and fields[9] in inodes:
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        return ports
    except OSError:
        return set()


@pytest.mark.resmpi_only("rank 0's TCP wire-up listener is resmpi's")
def test_idle_connections_to_rank_0_while_a_rank_is_late_do_not_stop_wire_up(build, tmp_path):
    """Issue 16: rank 0 handled wire-up handshakes one at a time, 5 s each,
    and a connecting rank gave up after its own 5 s: three silent
    connections to rank 0's listener while rank 2 was late in MPI_Init
    failed the job. They must now cost it nothing."""
    exe = build("basic")
    go = tmp_path / "go"
    script = (f'echo $$ > {tmp_path}/pid-$PMI_RANK; '
              f'if [ "$PMI_RANK" = 2 ]; then while [ ! -e {go} ]; do sleep 0.02; done; fi; '
              f'exec {exe}')
    proc = launch([MPIEXEC, "--paths", "tcp", "-n", "3", "--timeout", "100", "sh", "-c", script],
                  env={"EXPECT_SIZE": "3"})
    strangers = []
    try:
        deadline = time.monotonic() + 30
        ports = set()
        pid_file = tmp_path / "pid-0"
        while time.monotonic() < deadline and not ports:
            if pid_file.exists() and pid_file.read_text().strip():
                ports = _listening_tcp_ports(int(pid_file.read_text()))
            time.sleep(0.02)
        assert ports, "rank 0 never listened"
        import socket
        for port in ports:
            for _ in range(5):
                strangers.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    finally:
        go.write_text("")
    try:
        out, err = proc.communicate(timeout=110)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        pytest.fail(f"hung\n{out}\n{err}")
    finally:
        for stranger in strangers:
            stranger.close()
    assert proc.returncode == 0, f"{proc.returncode}\n{out}\n{err}"
    assert "OK" in out and "FAIL" not in out + err, f"{out}\n{err}"
