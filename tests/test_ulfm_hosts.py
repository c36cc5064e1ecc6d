"""ULFM across two hosts (network namespaces, two ranks on each): host B
goes down (mpiexec --inject host-down:B@T) during the resilient Jacobi of
tests/c/ulfm.c; the survivors on host A detect it, revoke, shrink,
redistribute and finish with the fault-free answer, in bounded time.
Several kill times. Needs root for the namespaces (tests/netns.py: it
fails, not skips, where they cannot be made)."""
import re

import pytest

from conftest import mpiexec_cmd, run_cmd
from netns import two_hosts  # noqa: F401  (pytest fixture)

pytestmark = pytest.mark.resmpi_only("--with-ft ulfm and --inject host-down are resmpi's")

BOUND_SECONDS = 30
JACOBI_LINE = re.compile(r"^rank (\d+): jacobi ([0-9a-f]{16}) u\[1\] (\S+), gather (\S+)$", re.M)


@pytest.fixture(scope="module")
def ulfm_exe(build):
    return build("ulfm")


def jacobi(h, exe, *extra):
    opts = [*h.mpiexec_opts(), "-ppn", "2", "--with-ft", "ulfm", "--timeout", str(BOUND_SECONDS), *extra]
    return run_cmd(h.run_in_a(mpiexec_cmd(4, exe, ["jacobi"], mpiexec_opts=opts)), timeout=BOUND_SECONDS + 30)


def test_a_host_going_down_during_a_resilient_jacobi_leaves_the_fault_free_answer(ulfm_exe, two_hosts):
    h = two_hosts
    reference = jacobi(h, ulfm_exe)
    assert reference.returncode == 0, reference.describe()
    answers = {m[2] for m in JACOBI_LINE.finditer(reference.stdout)}
    assert len(answers) == 1 and len(JACOBI_LINE.findall(reference.stdout)) == 4, reference.describe()
    expected = answers.pop()
    # The solver runs for about 0.2 s after start-up on this host: kill
    # times across it (one that comes after the end is the fault-free case;
    # before MPI_Init has finished, a death is not ULFM's to handle).
    for when_ms in (20, 60, 100, 150):
        res = jacobi(h, ulfm_exe, "--inject", f"host-down:{h.b}@{when_ms}ms")
        found = {int(m[1]): (m[2], m[4]) for m in JACOBI_LINE.finditer(res.stdout)}
        if res.returncode == 0:
            # The host went down after the job ended.
            assert sorted(found) == [0, 1, 2, 3], res.describe()
        elif "during MPI_Init" in res.stderr or "PMI barrier (MPI_Init)" in res.stderr:
            # The host went down while the survivors were still wiring up
            # (start-up is slower on a busy host): a death there cannot be
            # survived, and mpiexec ends the job, in bounded time.
            assert res.returncode == 137, res.describe()
            assert not found, res.describe()
            assert res.elapsed < BOUND_SECONDS, res.describe()
            continue
        else:
            assert res.returncode == 137, res.describe()
            assert sorted(found) == [0, 1], res.describe()
        assert all(answer == (expected, "ok") for answer in found.values()), \
            f"expected {expected} everywhere: {found}\n{res.describe()}"
        assert "FAIL" not in res.stderr, res.describe()
