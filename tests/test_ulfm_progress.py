"""ULFM: an operation that fails at once (a member is known dead) still
lets news in, so a loop of such calls sees a revoke and ends
(tests/c/revoke_loop.c; ulfm-testing's api/revoke spun for ever here)."""
import re

import pytest

from conftest import run

pytestmark = pytest.mark.resmpi_only("MPIX_ ULFM functions and --with-ft are resmpi's here")

BOUND_SECONDS = 20


@pytest.mark.parametrize("paths", ["auto", "tcp"])
def test_a_loop_of_failing_barriers_sees_the_revoke_and_ends(build, paths):
    exe = build("revoke_loop")
    for _ in range(3):
        res = run(4, exe, mpiexec_opts=("--with-ft", "ulfm", "--paths", paths, "--timeout", str(BOUND_SECONDS)),
                  timeout=BOUND_SECONDS + 30)
        assert res.returncode == 137, res.describe()
        ranks = sorted(int(m[1]) for m in re.finditer(r"^rank (\d+): revoked after \w+ failed barriers$",
                                                       res.stdout, re.M))
        assert ranks == [0, 1, 3], res.describe()
