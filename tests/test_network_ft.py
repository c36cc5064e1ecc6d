"""Network fault tolerance on real processes over TCP: injected loss,
corruption, duplication and delay must leave results identical to a
fault-free run, in bounded time, and the negative controls show that the
reliability layer and the checksums are what make that true.

Faults come from `mpiexec --inject` (a path wrapper inside each rank).
Rail failures on two real links are in test_multihost_rails.py."""
import pytest

from conftest import assert_ok, run

pytestmark = pytest.mark.resmpi_only("--inject and the reliability layer are resmpi's")

TCP = ("--paths", "tcp")

# (program, arguments) whose output is deterministic, so a faulty run must
# print exactly what a fault-free run prints.
WORKLOADS = [
    ("p2p_sizes", ()),
    ("coll", ("bcast", "reduce", "large")),
    # Non-contiguous types are gathered into frames and scattered out of
    # them with the checksum computed during that copy.
    ("dtype_p2p", ("kinds", "nonblocking", "large", "partial", "truncate")),
]

FAULTS = [
    "drop:1e-2,seed:1",
    "corrupt:1e-3,seed:2",
    "duplicate:0.05,seed:3",
    "drop:0.02,corrupt:0.01,duplicate:0.02,delay:1ms,seed:4",
]


def _inject(spec):
    return TCP + ("--inject", spec)


@pytest.mark.parametrize("spec", FAULTS)
@pytest.mark.parametrize("program,args", WORKLOADS, ids=[w[0] for w in WORKLOADS])
def test_injected_faults_on_tcp_leave_results_identical_to_a_fault_free_run(build, program, args, spec):
    exe = build(program)
    clean = run(3, exe, *args, mpiexec_opts=TCP, timeout=120)
    assert_ok(clean)
    faulty = run(3, exe, *args, mpiexec_opts=_inject(spec), timeout=120)
    assert_ok(faulty)
    assert faulty.stdout == clean.stdout, faulty.describe()
    assert faulty.elapsed < 90, f"took {faulty.elapsed:.1f} s\n{faulty.describe()}"


def test_ft_report_counts_injected_faults_and_the_recovery(build, tmp_path):
    report = tmp_path / "report.json"
    res = run(3, build("p2p_sizes"), mpiexec_opts=_inject("drop:0.02,corrupt:0.01,seed:9") + ("--report-json", str(report)),
              timeout=120)
    assert_ok(res)
    assert "FT report" in res.stderr, res.describe()
    import json
    summary = json.loads(report.read_text())
    assert summary["ranks_reported"] == 3, summary
    counters = summary["counters"]
    assert counters["injected_dropped"] > 0 and counters["injected_corrupted"] > 0, counters
    assert counters["frames_retransmitted"] > 0, counters
    assert counters["corrupt_caught"] > 0, counters
    # Every corrupted frame that reached a receiver was caught there.
    assert counters["corrupt_caught"] <= counters["injected_corrupted"], counters


def test_without_checksums_injected_corruption_reaches_the_application(build):
    """Negative control: the CRC32C is what keeps corrupt data out."""
    res = run(3, build("p2p_sizes"), mpiexec_opts=_inject("corrupt:0.02,seed:5") + ("--checksum", "none"), timeout=120)
    assert res.returncode != 0, res.describe()


def test_without_reliability_injected_loss_is_not_recovered(build):
    """Negative control: retransmission is what recovers lost frames."""
    res = run(3, build("p2p_sizes"), mpiexec_opts=_inject("drop:0.02,seed:6") + ("--reliable", "off", "--timeout", "10"),
              timeout=60)
    assert res.returncode != 0, res.describe()


@pytest.mark.parametrize("spec", ["drop:0.05,seed:11", "corrupt:0.02,seed:12"])
def test_send_buffer_reused_at_once_is_never_read_again(build, tmp_path, spec):
    """Large sends are retransmitted from the application's buffer (no copy):
    a send must complete only when every fragment is acknowledged, so that
    overwriting the buffer right after MPI_Send / MPI_Wait is safe even when
    fragments are lost or corrupted and resent."""
    import json

    report = tmp_path / "report.json"
    res = run(2, build("reuse"), mpiexec_opts=_inject(spec) + ("--report-json", str(report)), timeout=120)
    assert_ok(res)
    counters = json.loads(report.read_text())["counters"]
    assert counters["frames_retransmitted"] > 0, counters


@pytest.mark.parametrize("seed", [21, 22])
def test_corrupt_fragment_read_straight_into_the_receive_buffer_is_caught_and_resent(build, tmp_path, seed):
    """Over TCP a large fragment's payload is read from the socket straight
    into the matched receive's buffer and checked there (issue 10, item 4b).
    A corrupted one has then already landed in the application's buffer: it
    must be caught, never counted received, and overwritten by its
    retransmission, so that every message arrives exact."""
    import json

    report = tmp_path / "report.json"
    res = run(2, build("reuse"), mpiexec_opts=_inject(f"corrupt:0.1,seed:{seed}") + ("--report-json", str(report)),
              timeout=120)
    assert_ok(res)
    counters = json.loads(report.read_text())["counters"]
    assert counters["frames_placed"] > 0, counters
    assert counters["placed_corrupt_caught"] > 0, counters
    assert counters["placed_corrupt_caught"] <= counters["corrupt_caught"] <= counters["injected_corrupted"], counters

