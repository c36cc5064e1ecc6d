"""One-sided communication (issue 17): windows of every flavor, every
operation and synchronisation mode, derived datatypes, accumulate
atomicity under contention, passive target progress while the target
computes outside MPI, and clear errors for bad calls; on shared memory and
TCP, and under injected loss, corruption and duplication with exact
results. Every program checks its own results (tests/c/rma.c)."""
import re

import pytest

from conftest import IS_RESMPI, assert_ok, mpiexec_cmd, run, run_cmd
from netns import two_hosts  # noqa: F401  (pytest fixture)
from test_rails import NAMESPACE_RAILS, _run_breaking_links

SUBTESTS = ["flavors", "operations", "derived", "pscw", "contention", "passive", "large", "errors", "edges", "large_count", "single_copy",
            "zero_copy", "rput_reuse"]


@pytest.mark.parametrize("nprocs", [1, 2, 4])
@pytest.mark.parametrize("subtest", SUBTESTS)
def test_rma_results_are_exact(build, paths, subtest, nprocs):
    """Each subtest at 1, 2 and 4 ranks, on the default paths and on TCP."""
    assert_ok(run(nprocs, build("rma"), subtest, mpiexec_opts=paths, timeout=120))


FAULTS = [
    "drop:0.02,corrupt:0.01,seed:9",
    "duplicate:0.05,seed:3",
    "drop:0.02,corrupt:0.01,duplicate:0.02,delay:1ms,seed:4",
]


@pytest.mark.resmpi_only("--inject is resmpi's")
@pytest.mark.parametrize("spec", FAULTS)
@pytest.mark.parametrize("subtest", ["operations", "derived", "pscw", "contention", "passive", "large", "zero_copy", "rput_reuse"])
def test_rma_under_injected_faults_gives_the_fault_free_results(build, subtest, spec):
    """RMA traffic is control frames on the reliable links: lost, corrupted
    and duplicated fragments are recovered, and no accumulate is applied
    twice or lost (the counters under contention are exact)."""
    res = run(3, build("rma"), subtest, mpiexec_opts=("--paths", "tcp", "--inject", spec), timeout=180)
    assert_ok(res)


DIGEST = re.compile(r"digest ([0-9a-f]+) after (\d+) iterations")


def _rma_on_two_hosts(exe, hosts, iterations):
    """`rma rails ITERATIONS` on two namespace hosts, one rank each, over
    both rails (mpiexec's own --timeout bounds a hang)."""
    opts = [*hosts.mpiexec_opts(), *NAMESPACE_RAILS, "--timeout", "120"]
    return hosts.run_in_a(mpiexec_cmd(2, exe, ["rails", str(iterations)], mpiexec_opts=opts))


@pytest.mark.resmpi_only("rails are resmpi's")
def test_rma_between_hosts_with_a_rail_taken_down_gives_the_fault_free_results(build, two_hosts):
    """Fence and passive epochs (put, get, accumulate, fetch_and_op, each
    checked by the program) between two namespace hosts while rail1's link
    goes down in host B: the job ends normally with the window digest of a
    fault-free run, and the FT report shows the rail failed (so the outage
    really happened during RMA traffic)."""
    exe = build("rma")
    clean = run_cmd(_rma_on_two_hosts(exe, two_hosts, 15000), timeout=150)
    assert_ok(clean)
    expected = DIGEST.search(clean.stdout)
    assert expected, clean.describe()
    code, stdout, stderr, _ = _run_breaking_links(_rma_on_two_hosts(exe, two_hosts, 15000), two_hosts, ["rail1"],
                                                  timeout=150)
    assert code == 0, f"exit {code}\n{stdout}\n{stderr}"
    assert "FAIL" not in stderr, stderr
    got = DIGEST.search(stdout)
    assert got and got.group(1) == expected.group(1), f"{stdout}\n{stderr}"
    assert re.search(r"rails failed [1-9]", stderr), stderr


@pytest.mark.resmpi_only("rails are resmpi's")
def test_rma_between_hosts_with_every_rail_down_ends_naming_the_unreachable_peer(build, two_hosts):
    """Negative control of the rail test: with both rails down no epoch can
    complete; the job ends (no hang) naming the peer it lost, not with a
    digest."""
    exe = build("rma")
    code, stdout, stderr, _ = _run_breaking_links(_rma_on_two_hosts(exe, two_hosts, 100000), two_hosts,
                                                  ["rail0", "rail1"], timeout=150)
    assert code != 0, f"{stdout}\n{stderr}"
    assert not DIGEST.search(stdout), stdout
    assert re.search(r"rank [01] is unreachable", stderr), stderr


@pytest.mark.resmpi_only("RESMPI_PROGRESS_THREAD is resmpi's")
def test_passive_target_outside_mpi_needs_the_progress_thread(build):
    """Negative control for the passive subtest: with the background
    progress thread off, a target that computes outside MPI serves nothing,
    and the program's own check says so (rather than hanging). On the
    active messages (RESMPI_RMA_SHM=0): on the direct path, the default on
    one host, locks and operations need nothing from the target
    (test_rma_direct.py checks that it is served there)."""
    res = run(2, build("rma"), "passive",
              env={"RESMPI_PROGRESS_THREAD": "off", "RMA_PASSIVE_WAIT_S": "3", "RESMPI_RMA_SHM": "0"}, timeout=60)
    assert res.returncode != 0, res.describe()
    assert "target outside MPI served 0 of 50" in res.output, res.describe()


@pytest.mark.skipif(not IS_RESMPI, reason="resmpi's error texts")
def test_an_operation_outside_an_epoch_is_a_clear_fatal_error(build):
    """Under the default MPI_ERRORS_ARE_FATAL, a put with no epoch ends the
    job with the class and the reason, not a crash or a hang."""
    res = run(2, build("rma"), "fatal", timeout=60)
    assert res.returncode != 0, res.describe()
    assert "MPI_Put" in res.output and "no access epoch toward rank" in res.output, res.describe()


@pytest.mark.resmpi_only("ULFM's failure policy is resmpi's mpiexec option")
def test_an_epoch_toward_a_dead_rank_fails_with_proc_failed_instead_of_hanging(build):
    """Under ULFM the last rank SIGKILLs itself: each survivor's lock,
    accumulate and unlock toward it end with MPIX_ERR_PROC_FAILED (101), in
    bounded time, and the survivor's own window still works."""
    res = run(3, build("rma"), "failure", mpiexec_opts=("--with-ft", "ulfm", "--timeout", "30"), timeout=60)
    for rank in (0, 1):
        assert f"rank {rank}: survived with class 101" in res.stdout, res.describe()
    assert "FAIL" not in res.stderr, res.describe()


@pytest.mark.resmpi_only("ULFM's failure policy is resmpi's mpiexec option")
def test_a_lock_held_by_a_dead_rank_is_released_for_the_survivors(build):
    """Under ULFM the last rank dies holding an exclusive lock on rank 0's
    window (its flushed accumulate applied): the survivors' exclusive
    epochs on rank 0 complete, each fetch_and_op counted once, rather than
    waiting for an unlock that never comes (mpiexec's --timeout ends a
    hang, which fails the test)."""
    res = run(3, build("rma"), "failure_holder", mpiexec_opts=("--with-ft", "ulfm", "--timeout", "40"), timeout=60)
    for rank in (0, 1):
        assert f"rank {rank}: locked rank 0 after the holder died" in res.stdout, res.describe()
    assert "FAIL" not in res.stderr, res.describe()



def _rails_digest(res):
    match = DIGEST.search(res.stdout)
    assert match, res.describe()
    return match.group(1)


@pytest.mark.resmpi_only("--replicas is resmpi's")
@pytest.mark.parametrize("victim", ["1.1", "0.0"])
def test_replicas_finish_rma_with_the_unreplicated_results_when_a_replica_dies(build, victim):
    """--replicas 2 (default --replica-masking replica): each replica set
    runs its own windows, so a death mid-run (fence and passive epochs)
    gives up that replica set and the other one finishes with the window
    digest of the unreplicated run."""
    exe = build("rma")
    # 30000 iterations: about 2.7 s under --replicas 2 on an idle 2-core
    # host (3000 took 0.3 s there and ended before the kill at 0.3 s).
    plain = run(2, exe, "rails", "30000", timeout=120)
    assert_ok(plain)
    res = run(2, exe, "rails", "30000", timeout=120,
              mpiexec_opts=("--replicas", "2", "--timeout", "90", "--inject", f"kill:{victim}@0.3s"))
    assert res.returncode == 0, res.describe()
    assert "is given up" in res.stderr, res.describe()
    assert _rails_digest(res) == _rails_digest(plain), res.describe()


@pytest.mark.resmpi_only("--replica-masking is resmpi's")
def test_process_masking_ends_an_rma_job_with_a_clear_error_when_a_replica_dies(build):
    """--replica-masking process does not mask RMA (a substitute takes over
    point-to-point traffic, not window state): the replica whose epochs
    target the dead one gets its lock back (the dead one held it) and then
    an error naming the cause, instead of waiting until --timeout."""
    res = run(2, build("rma"), "rails", "30000", timeout=120,
              mpiexec_opts=("--replicas", "2", "--replica-masking", "process", "--timeout", "90",
                            "--inject", "kill:1.1@0.3s"))
    assert res.returncode not in (0, 124), res.describe()
    assert "job timed out" not in res.stderr, res.describe()
    assert "replication does not mask RMA" in res.stderr, res.describe()


@pytest.mark.parametrize("progress_thread", ["on", "off"])
def test_an_operation_on_the_own_window_is_applied_before_what_follows_it(build, progress_thread):
    """Rank 0 resets its own slot, then tells rank 1, which writes it: the
    slot ends with rank 1's value. (Frames to itself went through the
    loopback queue, drained after the other paths in a progress round, so
    rank 1's later write was applied first and then erased by the reset:
    mpi4py's MCS mutex in test_util_sync hung at -n 4 under load.)"""
    env = {} if progress_thread == "on" or not IS_RESMPI else {"RESMPI_PROGRESS_THREAD": "off"}
    assert_ok(run(2, build("rma"), "self_order", env=env, timeout=60))



def test_large_puts_and_gets_are_exact_without_single_copy_too(build):
    """RESMPI_RMA_CMA=0 sends the large operations of `single_copy` as
    frames (the path a kernel that refuses cross-memory attach takes): the
    same results."""
    env = {"RESMPI_RMA_CMA": "0"} if IS_RESMPI else {}
    assert_ok(run(3, build("rma"), "single_copy", env=env, timeout=120))


def _zero_copy_counters(build, tmp_path, spec=None, env=None, subtest="zero_copy"):
    """Run `subtest` on 3 ranks over TCP (with `--inject spec`); the FT
    report's counters."""
    import json

    report = tmp_path / "report.json"
    opts = ["--paths", "tcp", "--report-json", str(report)]
    if spec:
        opts += ["--inject", spec]
    assert_ok(run(3, build("rma"), subtest, mpiexec_opts=opts, env=env, timeout=180))
    return json.loads(report.read_text())["counters"]


@pytest.mark.resmpi_only("the FT report and --inject are resmpi's")
@pytest.mark.parametrize("spec", [None, "drop:0.05,seed:41"])
def test_a_large_rput_goes_lent_and_its_buffer_is_free_when_its_request_completes(
        build, tmp_path, spec):
    """MPI_Rput's data goes as data frames lent from its buffer (placed at
    the target), and its request completes only when the links let go of
    the buffer: the program overwrites and frees it right after MPI_Wait,
    and with frames dropped (retransmissions) the window still gets the
    original bytes."""
    counters = _zero_copy_counters(build, tmp_path, spec=spec, subtest="rput_reuse")
    assert counters["frames_placed"] > 0, counters
    off = _zero_copy_counters(build, tmp_path, spec=spec, subtest="rput_reuse",
                              env={"RESMPI_RMA_ZERO_COPY": "0"})
    assert off["frames_placed"] == 0, off


@pytest.mark.resmpi_only("the FT report and RESMPI_RMA_ZERO_COPY are resmpi's")
def test_large_rma_over_tcp_is_placed_straight_into_memory_and_the_switch_turns_it_off(build, tmp_path):
    """Over TCP the payloads of large puts and get replies are read from the
    socket straight into the window or the origin's buffer (issue 17 item
    4): the report counts placed frames (`zero_copy` sends nothing large
    two-sided, so they are RMA's). RESMPI_RMA_ZERO_COPY=0 sends the same
    operations as copied request frames: the same results, none placed."""
    assert _zero_copy_counters(build, tmp_path)["frames_placed"] > 0
    off = _zero_copy_counters(build, tmp_path, env={"RESMPI_RMA_ZERO_COPY": "0"})
    assert off["frames_placed"] == 0, off


@pytest.mark.resmpi_only("--inject is resmpi's")
@pytest.mark.parametrize("seed", [31, 32])
def test_corrupt_rma_payload_placed_in_the_window_is_caught_and_resent(build, tmp_path, seed):
    """A corrupted put or reply payload has already landed in the window or
    the origin's buffer when its CRC is checked: it must be caught, never
    acknowledged, and overwritten by its retransmission (the program checks
    every byte and the sentinels around each range)."""
    counters = _zero_copy_counters(build, tmp_path, spec=f"corrupt:0.2,seed:{seed}")
    assert counters["frames_placed"] > 0, counters
    assert counters["placed_corrupt_caught"] > 0, counters
