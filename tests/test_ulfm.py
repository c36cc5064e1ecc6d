"""ULFM (revoke, shrink, agree, failure_ack) on real processes, with the
faults injected (mpiexec --with-ft ulfm --inject kill:..., and a rank
that SIGKILLs itself). The program is tests/c/ulfm.c; each mode checks
its own invariants (exit 3 with a FAIL line otherwise) and prints one
line per survivor, which the tests compare across survivors and against
a fault-free run. Every run is bounded (mpiexec --timeout).
"""
import random
import re

import pytest

from conftest import run

pytestmark = pytest.mark.resmpi_only("MPIX_ ULFM functions, --with-ft and --inject kill: are resmpi's here")

ULFM = ("--with-ft", "ulfm")
BOUND_SECONDS = 20
JACOBI_LINE = re.compile(r"^rank (\d+): jacobi ([0-9a-f]{16}) u\[1\] (\S+), gather (\S+)$", re.M)
AGREE_LINE = re.compile(
    r"^rank (\d+): digest ([0-9a-f]{16}), failures reported (\d), shrunk size (\d+) allreduce (\S+) (\d+)$", re.M)
REVOKE_LINE = re.compile(
    r"^rank (\d+): revoked, agree class (\d+) flag (\d+), shrunk size (\d+) rank (\d+) sum (\d+)$", re.M)


@pytest.fixture(scope="module")
def ulfm_exe(build):
    return build("ulfm")


def run_ulfm(exe, nprocs, mode, *mpiexec_opts):
    return run(nprocs, exe, mode,
               mpiexec_opts=(*ULFM, "--timeout", str(BOUND_SECONDS), *mpiexec_opts),
               timeout=BOUND_SECONDS + 30)


def finished(res, expected_exit):
    assert res.returncode == expected_exit, f"exit {res.returncode}, expected {expected_exit}\n{res.describe()}"
    assert "FAIL" not in res.stderr, res.describe()
    assert "MPI_Finalize returned" not in res.stderr, res.describe()


@pytest.mark.parametrize("paths", ["auto", "tcp"])
def test_revoke_wakes_every_blocked_rank_and_shrink_gives_a_working_communicator(ulfm_exe, paths):
    res = run_ulfm(ulfm_exe, 4, "revoke", "--paths", paths)
    finished(res, 0)
    lines = {int(m[1]): m.groups()[1:] for m in REVOKE_LINE.finditer(res.stdout)}
    assert sorted(lines) == [0, 1, 2, 3], res.describe()
    for rank, (agree_class, flag, size, new_rank, total) in lines.items():
        # agree on a revoked communicator: AND of 7,5,7,7; nothing failed
        assert (agree_class, flag, size, new_rank, total) == ("0", "5", "4", str(rank), "6"), res.describe()


def test_revoke_reaches_every_rank_when_the_revoker_dies_right_after(ulfm_exe):
    """Rank 0 revokes and dies: the others are blocked on receives from
    live ranks, so only the flood (rank 1 forwarding) can wake them."""
    res = run_ulfm(ulfm_exe, 4, "revoke-die")
    finished(res, 137)
    lines = {int(m[1]): m.groups()[1:] for m in REVOKE_LINE.finditer(res.stdout)}
    assert sorted(lines) == [1, 2, 3], res.describe()
    agreed = {(agree_class, flag) for agree_class, flag, *_ in lines.values()}
    assert len(agreed) == 1, f"agree differs between survivors: {agreed}\n{res.describe()}"
    for rank, (_agree_class, _flag, size, new_rank, total) in lines.items():
        assert (size, new_rank, total) == ("3", str(rank - 1), "6"), res.describe()


def test_agree_revoke_and_shrink_on_an_inter_communicator(ulfm_exe):
    """Agree gives each group the other group's AND, uniformly; shrink gives
    an inter-communicator of the survivors of both groups."""
    res = run_ulfm(ulfm_exe, 6, "inter-agree")
    finished(res, 137)
    ranks = sorted(re.findall(r"^rank (\d+): inter-communicator agree, revoke and shrink ok$", res.stdout, re.M))
    assert ranks == ["0", "1", "2", "3", "4"], res.describe()


@pytest.mark.parametrize("paths", ["auto", "tcp"])
def test_iagree_does_not_block_and_ishrink_gives_a_working_communicator(ulfm_exe, paths):
    res = run_ulfm(ulfm_exe, 4, "nonblocking", "--paths", paths)
    finished(res, 137)
    ranks = sorted(re.findall(r"^rank (\d+): iagree and ishrink ok$", res.stdout, re.M))
    assert ranks == ["0", "1", "2"], res.describe()


def test_initial_errhandler_is_set_by_mpiexec_and_visible_in_mpi_info_env(ulfm_exe):
    res = run(2, ulfm_exe, "initial-errhandler",
              mpiexec_opts=("--initial-errhandler", "mpi_errors_return", "--timeout", str(BOUND_SECONDS)),
              timeout=BOUND_SECONDS + 30)
    finished(res, 0)
    assert res.stdout.count("initial errhandler returns") == 2, res.describe()
    refused = run(2, ulfm_exe, "initial-errhandler", mpiexec_opts=("--initial-errhandler", "sometimes"))
    assert refused.returncode == 2 and "--initial-errhandler 'sometimes'" in refused.stderr, refused.describe()


@pytest.mark.parametrize("paths", ["auto", "tcp"])
def test_finalize_returns_at_every_survivor_after_a_death_and_a_revoked_world(ulfm_exe, paths):
    res = run_ulfm(ulfm_exe, 4, "finalize-revoked", "--paths", paths)
    finished(res, 137)
    ranks = sorted(re.findall(r"^rank (\d+): world revoked, finalizing$", res.stdout, re.M))
    assert ranks == ["0", "1", "2"], res.describe()


def test_wildcard_receive_is_proc_failed_pending_until_failure_ack(ulfm_exe):
    res = run_ulfm(ulfm_exe, 4, "pending")
    finished(res, 137)
    lines = re.findall(r"^rank (\d+): pending then acknowledged, MPIX_FT (\d)$", res.stdout, re.M)
    assert sorted(lines) == [("0", "1"), ("1", "1"), ("2", "1")], res.describe()


@pytest.mark.parametrize("paths", ["auto", "tcp"])
def test_wildcard_receives_posted_before_a_death_stay_pending_in_every_wait_and_test(ulfm_exe, paths):
    """ULFM: a nonblocking wildcard receive pending when a member dies is
    not ended; every completion call reports MPIX_ERR_PROC_FAILED_PENDING
    and leaves it active until the failure is acknowledged, then it
    receives. A blocking one waiting at the death fails."""
    res = run_ulfm(ulfm_exe, 4, "pending-at-death", "--paths", paths)
    finished(res, 137)
    lines = re.findall(r"^rank (\d+): pending at the death, then acknowledged$", res.stdout, re.M)
    assert sorted(lines) == ["0", "1", "2"], res.describe()


@pytest.mark.parametrize("seed", range(3))
def test_agree_is_uniform_when_two_processes_die_during_the_agreements(ulfm_exe, seed):
    """400 agreements back to back while two ranks are killed at seeded
    moments: every survivor saw the same sequence of (flag, error)."""
    rng = random.Random(seed)
    first = rng.randint(50, 250)
    second = first + rng.randint(0, 120)
    res = run_ulfm(ulfm_exe, 5, "agree", "--inject", f"kill:1@{first}ms,kill:3@{second}ms")
    finished(res, 137)
    lines = {int(m[1]): m.groups()[1:] for m in AGREE_LINE.finditer(res.stdout)}
    assert sorted(lines) == [0, 2, 4], res.describe()
    digests = {digest for digest, *_ in lines.values()}
    assert len(digests) == 1, f"survivors disagree: {lines}\n{res.describe()}"
    for _digest, failures, size, allreduce, count in lines.values():
        assert (failures, size, allreduce, count) == ("1", "3", "ok", "3"), res.describe()


@pytest.fixture(scope="module")
def jacobi_reference(ulfm_exe):
    res = run_ulfm(ulfm_exe, 4, "jacobi")
    finished(res, 0)
    answers = {m[2] for m in JACOBI_LINE.finditer(res.stdout)}
    assert len(answers) == 1, res.describe()
    return answers.pop()


@pytest.mark.parametrize("seed", range(20))
def test_resilient_jacobi_revokes_shrinks_and_finishes_with_the_fault_free_answer(
        ulfm_exe, jacobi_reference, seed):
    """A rank killed after a seeded number of sends, 20 seeds (from seed 6 a
    second rank soon after, often during the recovery; every 4th seed from
    seed 3 over TCP)."""
    rng = random.Random(seed)
    victim = rng.randint(0, 3)
    sends = rng.randint(1, 700)  # every rank sends at least 800 times
    inject = f"kill:{victim}@sends={sends}"
    survivors = 3
    if seed >= 6:
        second = (victim + 1 + rng.randint(0, 2)) % 4
        inject += f",kill:{second}@sends={sends + rng.randint(0, 40)}"
        survivors = 2
    opts = ("--inject", inject) + (("--paths", "tcp") if seed % 4 == 3 else ())
    res = run_ulfm(ulfm_exe, 4, "jacobi", *opts)
    finished(res, 137)
    answers = {int(m[1]): (m[2], m[4]) for m in JACOBI_LINE.finditer(res.stdout)}
    assert len(answers) == survivors, res.describe()
    assert all(answer == (jacobi_reference, "ok") for answer in answers.values()), \
        f"expected {jacobi_reference} everywhere: {answers}\n{res.describe()}"
