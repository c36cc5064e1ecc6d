"""More ranks than cores must still make progress."""
import os

import pytest

from conftest import assert_ok, run


def test_eight_ranks_on_two_cores_ring_and_allreduce_finish_well_under_timeout(build, paths):
    timeout = 120
    res = run(8, build("ring"), 100, mpiexec_opts=paths, timeout=timeout)
    assert_ok(res)
    assert res.elapsed < timeout / 2, f"oversubscribed run took {res.elapsed:.1f}s ({os.cpu_count()} cpus)"


@pytest.mark.resmpi_only("rails and the FT report are resmpi's")
def test_eight_ranks_on_two_cores_over_two_rails_never_lose_a_peer(build, tmp_path):
    """Descheduled ranks go silent on every rail at once: with the default
    100 ms rail timeout that must not cost a peer (a rail taken down while
    its peer answers late on the other is harmless: it is probed back up)."""
    import json

    report = tmp_path / "report.json"
    opts = ("--paths", "tcp", "--rails", "tcp:lo,tcp:127.0.0.0/8", "--report-json", str(report))
    res = run(8, build("stream"), "300", mpiexec_opts=opts, timeout=240)
    assert_ok(res)
    assert "unreachable" not in res.stderr, res.describe()
    counters = json.loads(report.read_text())["counters"]
    assert counters["frames_sent"] > 0, counters
