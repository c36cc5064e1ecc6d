"""More ranks than cores must still make progress."""
import os

import pytest

from conftest import assert_ok, run


def test_eight_ranks_on_two_cores_ring_and_allreduce_finish_well_under_timeout(build, paths):
    timeout = 120
    res = run(8, build("ring"), 100, mpiexec_opts=paths, timeout=timeout)
    assert_ok(res)
    assert res.elapsed < timeout / 2, f"oversubscribed run took {res.elapsed:.1f}s ({os.cpu_count()} cpus)"
