"""The shared-memory fast path of small blocking collectives
(crates/core/src/coll/shared_memory.rs): results against references at 1-4
ranks (and 2-8 with the reduce tree and the scan chain), on sub-communicators, interleaved with nonblocking collectives and
point-to-point, in place, with a non-commutative op, bit-identical
floating point; the same program through the schedules (RESMPI_COLL_SHM=0,
TCP); a rank killed while the others are in a fast-path collective.

The program is tests/c/coll_shm.c.
"""
import re

import pytest

from conftest import assert_ok, run

pytestmark = pytest.mark.resmpi_only("RESMPI_COLL_SHM and --failure-policy are resmpi's")

BOUND_SECONDS = 30


@pytest.fixture(scope="module")
def coll_shm(build):
    return build("coll_shm")


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_every_fast_path_collective_matches_its_reference(coll_shm, nprocs):
    assert_ok(run(nprocs, coll_shm, timeout=180))


@pytest.mark.parametrize("nprocs", [2, 3, 5, 8])
def test_reduce_trees_and_scan_chains_match_the_references(coll_shm, nprocs):
    """Reduce along a binomial tree and scan/exscan along a chain (used
    from 5 and 4 members by default, from RESMPI_COLL_SHM_TREE when set):
    every root, in place,
    the non-commutative op, sub-communicators of every size."""
    env = {} if nprocs in (5, 8) else {"RESMPI_COLL_SHM_TREE": "2"}
    assert_ok(run(nprocs, coll_shm, env=env, timeout=300))


@pytest.mark.parametrize("how", ["RESMPI_COLL_SHM=0", "--paths tcp"])
def test_the_same_checks_pass_through_the_schedules(coll_shm, how):
    """The reference program is the same with the fast path off (by the
    variable, or because no member is reached over shared memory)."""
    if how.startswith("--"):
        res = run(3, coll_shm, mpiexec_opts=how.split(), timeout=300)
    else:
        res = run(3, coll_shm, env=dict([how.split("=")]), timeout=300)
    assert_ok(res)


def test_a_bad_resmpi_coll_shm_value_is_a_clear_init_error(coll_shm):
    res = run(2, coll_shm, env={"RESMPI_COLL_SHM": "yes"}, timeout=60)
    assert res.returncode != 0, res.describe()
    assert "RESMPI_COLL_SHM" in res.stderr and "expected 0 or 1" in res.stderr, res.describe()
    res = run(2, coll_shm, env={"RESMPI_COLL_SHM_TREE": "0"}, timeout=60)
    assert res.returncode != 0, res.describe()
    assert "RESMPI_COLL_SHM_TREE" in res.stderr and "positive" in res.stderr, res.describe()


@pytest.mark.parametrize("how", ["raise", "inject", "raise-trees"])
@pytest.mark.parametrize("nprocs", [2, 3, 4, 5])
def test_a_rank_killed_during_fast_path_allreduces_fails_them_and_survivors_go_on(coll_shm, nprocs, how):
    """The last rank dies in a loop of allreduces, reduces and scans on
    MPI_COMM_WORLD (along trees and chains in `raise-trees`): every
    survivor's collective ends with MPIX_ERR_PROC_FAILED in bounded time
    (none waits for ever on the dead contribution), then the survivors run
    hundreds of collectives on their own communicator, reusing slots the
    others gave up on (reclaimed, not waited for). The death comes from
    the victim itself (raise), or from --inject kill:V@sends=N, which must
    count fast-path publications (the victim's loop has no other send)."""
    opts = ["--failure-policy", "continue", "--timeout", str(BOUND_SECONDS)]
    args = ["kill"]
    env = {}
    if how == "inject":
        opts += ["--inject", f"kill:{nprocs - 1}@sends=300"]
        args.append("inject")
    elif how == "raise-trees":
        # Reduce trees and scan chains from 2 members: a death under them.
        env["RESMPI_COLL_SHM_TREE"] = "2"
    res = run(nprocs, coll_shm, *args, mpiexec_opts=opts, env=env, timeout=BOUND_SECONDS + 30)
    assert res.returncode == 137, res.describe()
    assert res.elapsed < BOUND_SECONDS, res.describe()
    done = sorted(int(m[1]) for m in re.finditer(r"^rank (\d+): world proc_failed, survivors ok$",
                                                 res.stdout, re.M))
    assert done == list(range(nprocs - 1)), res.describe()
    assert "FAIL" not in res.output, res.describe()
