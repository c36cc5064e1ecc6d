"""The direct path of one-sided communication on one host (issue 17 item
4): windows of MPI_Win_allocate and MPI_Win_allocate_shared whose members
all share this host move their bytes with loads and stores in a shared
segment; RESMPI_RMA_SHM=0 keeps them on the active messages. The same
programs (tests/c/rma_direct.c, self-checking: derived datatypes, fence,
PSCW with wait and test, exclusive-lock read-modify-write counters,
fetch_and_op and compare_and_swap counters, get_accumulate, request-based
operations, MAXLOC) must give the same window digest on both paths, and
tests/c/rma.c's subtests must pass on both."""
import re

import pytest

from conftest import assert_ok, run

pytestmark = pytest.mark.resmpi_only("RESMPI_RMA_SHM and --with-ft are resmpi's")

DIGEST = re.compile(r"digest ([0-9a-f]{16})")
PATHS = {"direct": {"RESMPI_RMA_SHM": "1"}, "messages": {"RESMPI_RMA_SHM": "0"}}


def _assert_not_all_served(res, total):
    """The negative control's end: rank 0 gave up having seen fewer than
    `total` accumulates (a few may be applied while it is still inside
    MPI, in the barrier before its loop)."""
    assert res.returncode != 0, res.describe()
    match = re.search(rf"target outside MPI saw (\d+) of {total}\b", res.output)
    assert match and int(match.group(1)) < total, res.describe()


def _digest(res):
    assert_ok(res)
    match = DIGEST.search(res.stdout)
    assert match, res.describe()
    return match.group(1)


@pytest.mark.parametrize("nprocs", [2, 4])
@pytest.mark.parametrize("flavor", ["allocate", "shared"])
def test_direct_and_message_paths_give_the_same_windows(build, flavor, nprocs):
    """Every operation and synchronisation mode, checked by the program on
    each path; the final windows of all ranks are byte-identical."""
    exe = build("rma_direct")
    direct = _digest(run(nprocs, exe, "compare", flavor, env=PATHS["direct"], timeout=120))
    messages = _digest(run(nprocs, exe, "compare", flavor, env=PATHS["messages"], timeout=120))
    assert direct == messages


@pytest.mark.parametrize("nprocs", [2, 4])
@pytest.mark.parametrize("flavor", ["allocate", "shared"])
@pytest.mark.parametrize("path", ["direct", "messages"])
def test_a_window_on_reversed_ranks(build, path, flavor, nprocs):
    """Window ranks are not world ranks: puts under fence and PSCW land at
    the right neighbour, exclusive-lock and fetch_and_op counters are
    exact."""
    assert_ok(run(nprocs, build("rma_direct"), "reversed", flavor, env=PATHS[path], timeout=120))


@pytest.mark.parametrize("nprocs", [2, 4])
@pytest.mark.parametrize("subtest", ["operations", "derived", "pscw", "contention", "passive", "large", "edges",
                                     "flavors", "self_order"])
def test_rma_subtests_pass_with_the_direct_path_off(build, subtest, nprocs):
    """tests/c/rma.c on the active messages (test_rma.py runs it with the
    direct path, the default, on shared memory)."""
    assert_ok(run(nprocs, build("rma"), subtest, env=PATHS["messages"], timeout=120))


def test_the_direct_path_needs_no_target_engine(build):
    """Proof that the path is taken: with the progress thread off, rank 0
    computes outside MPI while the others accumulate under
    lock_all(MPI_MODE_NOCHECK). Direct: rank 0 sees every accumulate.
    Active messages (the negative control): nobody applies them."""
    exe = build("rma_direct")
    quiet = {"RESMPI_PROGRESS_THREAD": "off", "RMA_WAIT_S": "5"}
    direct = run(3, exe, "no_target_engine", env={**quiet, **PATHS["direct"]}, timeout=60)
    assert_ok(direct)
    assert "target outside MPI saw all 100" in direct.stdout, direct.describe()
    messages = run(3, exe, "no_target_engine", env={**quiet, **PATHS["messages"]}, timeout=60)
    _assert_not_all_served(messages, 100)


def test_passive_target_locks_need_no_target_engine_on_the_direct_path(build):
    """tests/c/rma.c's passive subtest (exclusive and shared lock, accumulate,
    unlock from every other rank while rank 0 spins outside MPI) with the
    progress thread off: the locks are in shared memory, so rank 0 is
    served. (test_rma.py's negative control shows the active messages are
    not.)"""
    res = run(3, build("rma"), "passive", env={"RESMPI_PROGRESS_THREAD": "off", "RMA_PASSIVE_WAIT_S": "20",
                                               **PATHS["direct"]}, timeout=60)
    assert_ok(res)


def test_the_direct_path_is_not_taken_over_tcp(build):
    """A window whose members are reached over TCP keeps the active
    messages (same negative control, --paths tcp, direct path requested)."""
    res = run(2, build("rma_direct"), "no_target_engine", mpiexec_opts=("--paths", "tcp"),
              env={"RESMPI_PROGRESS_THREAD": "off", "RMA_WAIT_S": "5", **PATHS["direct"]}, timeout=60)
    _assert_not_all_served(res, 50)


def test_an_invalid_switch_fails_window_creation_clearly(build):
    res = run(2, build("rma_direct"), "compare", "allocate", env={"RESMPI_RMA_SHM": "yes"}, timeout=60)
    assert res.returncode != 0, res.describe()
    assert "RESMPI_RMA_SHM" in res.output and "expected 0 or 1" in res.output, res.describe()


@pytest.mark.parametrize("flavor", ["allocate", "shared"])
@pytest.mark.parametrize("path", ["direct", "messages"])
def test_a_dead_member_fails_fence_and_lock_with_proc_failed(build, flavor, path):
    """ULFM: the last rank dies between fences on a direct window; each
    survivor's next fence and a lock toward the dead rank end with
    MPIX_ERR_PROC_FAILED (101) within the program's 20 s bound and
    mpiexec's --timeout."""
    res = run(3, build("rma_direct"), "failure_fence", flavor, env=PATHS[path],
              mpiexec_opts=("--with-ft", "ulfm", "--timeout", "40"), timeout=60)
    for rank in (0, 1):
        assert f"rank {rank}: fence and lock failed with class 101" in res.stdout, res.describe()
    assert "FAIL" not in res.stderr, res.describe()


@pytest.mark.parametrize("flavor", ["allocate", "shared"])
@pytest.mark.parametrize("path", ["direct", "messages"])
def test_a_dead_shared_lock_holder_does_not_block_exclusive_locks(build, flavor, path):
    """ULFM: the last rank dies inside lock_all; the survivors' exclusive
    locks on every surviving member are granted once its death is known
    (on the direct path its shared-lock flags are dropped), within the
    program's 20 s bound and mpiexec's --timeout."""
    res = run(3, build("rma_direct"), "failure_shared_holder", flavor, env=PATHS[path],
              mpiexec_opts=("--with-ft", "ulfm", "--timeout", "40"), timeout=60)
    for rank in (0, 1):
        assert f"rank {rank}: locked every survivor exclusively after the shared holder died" in res.stdout, \
            res.describe()
    assert "FAIL" not in res.stderr, res.describe()


@pytest.mark.parametrize("subtest", ["failure", "failure_holder"])
@pytest.mark.parametrize("path", ["direct", "messages"])
def test_rma_failure_subtests_on_both_paths(build, subtest, path):
    """tests/c/rma.c's ULFM subtests (a dead target; a dead exclusive lock
    holder whose flushed accumulate was applied) on both paths."""
    res = run(3, build("rma"), subtest, env=PATHS[path], mpiexec_opts=("--with-ft", "ulfm", "--timeout", "40"),
              timeout=60)
    expected = "survived with class 101" if subtest == "failure" else "locked rank 0 after the holder died"
    for rank in (0, 1):
        assert f"rank {rank}: {expected}" in res.stdout, res.describe()
    assert "FAIL" not in res.stderr, res.describe()
