"""MPI-IO (issue 14): the core calls at 1, 2, 3 and 4 ranks, and block
replication with the faults injected: each storage target's copy deleted,
truncated, bit-flipped, or its directory replaced by a file."""
import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import IS_RESMPI, assert_ok, run

SUBTESTS = ["basic", "errors", "view", "shared", "collective", "errhandler", "sequential", "atomicity"]


@pytest.mark.parametrize("nprocs", [1, 2, 4])
@pytest.mark.parametrize("subtest", SUBTESTS)
def test_mpi_io_core(build, tmp_path, nprocs, subtest):
    """open/close/delete and error classes, sizes, vector-filetype views,
    shared and ordered pointers, collective/split/nonblocking access, file
    error handlers: each program checks its own results."""
    assert_ok(run(nprocs, build("io_core"), subtest, cwd=tmp_path, timeout=90))


@pytest.mark.resmpi_only("MPICH 4.0's ROMIO refuses every conversion function (\"not supported by MPI-IO\")")
@pytest.mark.parametrize("nprocs", [1, 2, 3])
@pytest.mark.parametrize("subtest", ["registered", "collective", "errors"])
def test_user_data_representations_convert_what_reaches_the_file(build, tmp_path, nprocs, subtest):
    """MPI_Register_datarep(_c): a byte-swapping representation written and
    read back, independently and collectively; NULL conversion functions
    keep the native bytes; a taken name, a missing extent function, a
    failing conversion function and a size-changing representation are
    errors, never a hang."""
    assert_ok(run(nprocs, build("io_datarep"), subtest, cwd=tmp_path, timeout=90))


@pytest.mark.resmpi_only("ROMIO converts long in external32 views")
@pytest.mark.parametrize("nprocs", [1, 2])
def test_external32_views_refuse_types_whose_size_changes(build, tmp_path, nprocs):
    assert_ok(run(nprocs, build("io_core"), "external32_longs", cwd=tmp_path, timeout=90))


@pytest.mark.parametrize("nprocs", [2, 3, 4])
@pytest.mark.parametrize("storage", ["plain", "replicated"])
@pytest.mark.parametrize("mode", ["enable", "disable", "automatic"])
def test_collective_io_through_aggregators_and_without(build, tmp_path, nprocs, storage, mode):
    """An irregular interleaved view (rank r owns r+1 ints of each tile)
    written and read collectively in many small exchange rounds with two
    aggregators (romio_cb_write/read=enable), independently (disable) or as
    the access pattern decides (automatic): the same file every time; on a
    replicated file every copy agrees afterwards."""
    if storage == "replicated" and not IS_RESMPI:
        pytest.skip("resmpi only: block replication")
    target = tmp_path / "target"
    target.mkdir()
    where = "plain" if storage == "plain" else str(target)
    assert_ok(run(nprocs, build("io_collective"), mode, where, cwd=tmp_path, timeout=90))


@pytest.mark.parametrize("overlap", ["0", "1"])
@pytest.mark.parametrize("storage", ["plain", "replicated"])
def test_collective_io_with_and_without_the_aggregators_thread(build, tmp_path, storage, overlap):
    """The same rounds with the aggregator writing (and reading ahead) on a
    thread of its own, which it does only with a core to spare unless
    RESMPI_IO_OVERLAP forces it (a 2-core host running 3 ranks has none),
    and without."""
    if not IS_RESMPI:
        pytest.skip("resmpi only: RESMPI_IO_OVERLAP")
    target = tmp_path / "target"
    target.mkdir()
    where = "plain" if storage == "plain" else str(target)
    assert_ok(run(3, build("io_collective"), "enable", where, cwd=tmp_path, timeout=90,
                  env={"RESMPI_IO_OVERLAP": overlap}))


# ---------------------------------------------------------------- replication

FAULTS = ["delete", "truncate", "flip", "directory_is_a_file"]


def copy_files(tmp_path, victim):
    """The data and checksum files of copy `victim` (0 = the primary)."""
    if victim == 0:
        return tmp_path / "rep.dat", tmp_path / ".rep.dat.resmpi-crc"
    target = tmp_path / f"target{victim}"
    data = [p for p in target.iterdir() if p.name.startswith("rep.dat.") and p.suffix not in (".crc", ".meta")]
    assert len(data) == 1, list(target.iterdir())
    return data[0], Path(str(data[0]) + ".crc")


def damage(tmp_path, victim, fault):
    data, checksums = copy_files(tmp_path, victim)
    if fault == "delete":
        data.unlink()
        checksums.unlink()
    elif fault == "truncate":
        os.truncate(data, 5000)
    elif fault == "flip":
        raw = bytearray(data.read_bytes())
        for i in range(100, len(raw), 3001):
            raw[i] ^= 0x41
        data.write_bytes(bytes(raw))
    elif fault == "directory_is_a_file":
        shutil.rmtree(data.parent)
        data.parent.write_text("this target's disk is gone\n")
    return data


def repairs(res):
    m = re.search(r"repaired (\d+) unrepaired (\d+)", res.stdout)
    assert m, res.describe()
    return int(m.group(1)), int(m.group(2))


def write_replicated(exe, tmp_path, factor, nprocs=2, env=None, hints=True):
    targets = [tmp_path / f"target{n}" for n in range(1, factor)]
    for target in targets:
        target.mkdir()
    spec = ",".join(str(t) for t in targets) if hints else "env"
    assert_ok(run(nprocs, exe, "write", factor, spec, cwd=tmp_path, env=env, timeout=90))
    # The primary is an ordinary file, byte-identical to the unreplicated write.
    assert (tmp_path / "rep.dat").read_bytes() == (tmp_path / "plain.dat").read_bytes()
    return targets


@pytest.mark.resmpi_only("block replication")
@pytest.mark.parametrize("factor", [2, 3])
@pytest.mark.parametrize("fault", FAULTS)
def test_replicated_read_survives_each_fault_on_each_copy_and_repairs_it(build, tmp_path, factor, fault):
    """For every copy in turn (the primary, then each target): damage it,
    read everything back (exact bytes, checked by the program), see the
    damaged copy named and repaired, and a second read find nothing."""
    exe = build("io_replica")
    for victim in range(factor):
        if victim == 0 and fault == "directory_is_a_file":
            continue  # the primary's directory holds the test itself
        case = tmp_path / f"copy{victim}"
        case.mkdir()
        write_replicated(exe, case, factor)
        damaged = damage(case, victim, fault)
        # The primary is always read; a target copy is checked when reads
        # verify every copy (the hint's environment default).
        verify = {"RESMPI_IO_VERIFY_READS": "all"}
        res = run(2, exe, "read", cwd=case, env=verify, timeout=90)
        assert_ok(res)
        repaired, unrepaired = repairs(res)
        what = f"R={factor} copy {victim} {fault}\n{res.describe()}"
        assert str(damaged) in res.stderr, f"the report does not name the damaged copy: {what}"
        if fault == "directory_is_a_file":
            assert unrepaired > 0 and "NOT repaired" in res.stderr, what
            # The target comes back (a replaced disk): the next read rebuilds it.
            damaged.parent.unlink()
            damaged.parent.mkdir()
            res = run(2, exe, "read", cwd=case, env=verify, timeout=90)
            assert_ok(res)
            assert repairs(res)[0] > 0, res.describe()
        else:
            assert repaired > 0 and unrepaired == 0, what
        again = run(2, exe, "read", cwd=case, env=verify, timeout=90)
        assert_ok(again)
        assert repairs(again) == (0, 0), f"second read still repairs: {again.describe()}"
        assert "block" not in again.stderr, again.describe()
        assert (case / "rep.dat").read_bytes() == (case / "plain.dat").read_bytes()


@pytest.mark.resmpi_only("block replication")
def test_r3_survives_two_lost_copies_and_a_plain_read_repairs_the_primary(build, tmp_path):
    """R − 1 = 2 copies lost (the primary deleted, target 1's bytes flipped):
    every block still reads right, with reads checking only what they need."""
    exe = build("io_replica")
    write_replicated(exe, tmp_path, 3, nprocs=3)
    damage(tmp_path, 0, "delete")
    damage(tmp_path, 1, "flip")
    res = run(3, exe, "read", cwd=tmp_path, timeout=90)
    assert_ok(res)
    assert repairs(res)[0] > 0, res.describe()
    assert (tmp_path / "rep.dat").read_bytes() == (tmp_path / "plain.dat").read_bytes()


@pytest.mark.resmpi_only("block replication")
def test_all_copies_damaged_is_an_io_error_not_wrong_data(build, tmp_path):
    exe = build("io_replica")
    write_replicated(exe, tmp_path, 2)
    damage(tmp_path, 0, "flip")
    damage(tmp_path, 1, "flip")
    res = run(2, exe, "read", cwd=tmp_path, timeout=90)
    assert res.returncode != 0, res.describe()
    assert "no intact copy" in res.stderr or "returned" in res.stderr, res.describe()


@pytest.mark.resmpi_only("block replication")
def test_environment_defaults_replicate_an_unmodified_program(build, tmp_path):
    """RESMPI_IO_REPLICATION_FACTOR / RESMPI_IO_REPLICA_TARGETS protect a
    program that passes no hints; the metadata lets a later job read it
    with none."""
    exe = build("io_replica")
    targets = [tmp_path / "target1", tmp_path / "target2"]
    env = {
        "RESMPI_IO_REPLICATION_FACTOR": "3",
        "RESMPI_IO_REPLICA_TARGETS": ",".join(str(t) for t in targets),
        "RESMPI_IO_BLOCK_SIZE": "4096",
    }
    write_replicated(exe, tmp_path, 3, nprocs=4, env=env, hints=False)
    damage(tmp_path, 0, "truncate")
    res = run(4, exe, "read", cwd=tmp_path, timeout=90)
    assert_ok(res)
    assert repairs(res)[0] > 0, res.describe()


@pytest.mark.resmpi_only("block replication")
def test_resmpi_io_check_finds_and_scrub_rebuilds_a_replaced_target(build, tmp_path):
    """A copy nobody reads is only checked by the scrub command: check
    reports it (exit 1), scrub rebuilds it (a target replaced by an empty
    directory, another copy's bytes flipped), check is then clean."""
    from conftest import PREFIX, run_cmd
    tool = str(PREFIX / "bin" / "resmpi-io")
    exe = build("io_replica")
    write_replicated(exe, tmp_path, 3)
    primary = str(tmp_path / "rep.dat")
    res = run_cmd([tool, "info", primary])
    assert res.returncode == 0 and "replication_factor=3" in res.stdout, res.describe()
    assert run_cmd([tool, "check", primary]).returncode == 0
    shutil.rmtree(tmp_path / "target1")
    (tmp_path / "target1").mkdir()
    damage(tmp_path, 2, "flip")
    res = run_cmd([tool, "check", primary])
    assert res.returncode == 1 and "target1" in res.stdout and "target2" in res.stdout, res.describe()
    assert "NOT repaired" in res.stdout, res.describe()
    res = run_cmd([tool, "scrub", primary])
    assert res.returncode == 0 and "0 remaining" in res.stdout, res.describe()
    res = run_cmd([tool, "check", primary])
    assert res.returncode == 0 and " 0 damaged" in res.stdout, res.describe()
    assert any(p.name.endswith(".meta") for p in (tmp_path / "target1").iterdir())
    # The rebuilt copies carry the data: lose the primary, read from them.
    damage(tmp_path, 0, "delete")
    assert_ok(run(2, exe, "read", cwd=tmp_path, timeout=90))
    assert run_cmd([tool, "check", str(tmp_path / "plain.dat")]).returncode == 2


@pytest.mark.resmpi_only("block replication")
@pytest.mark.parametrize("nprocs", [2, 4])
def test_concurrent_small_writes_to_shared_replicated_blocks_lose_nothing(build, tmp_path, nprocs):
    """Ranks write interleaved 13-byte pieces into shared 512-byte blocks of
    an R=3 file with independent nonblocking writes: every byte arrives,
    and no read reports a block as damaged."""
    targets = [tmp_path / "t1", tmp_path / "t2"]
    for target in targets:
        target.mkdir()
    res = run(nprocs, build("io_replica"), "concurrent", ",".join(map(str, targets)), cwd=tmp_path,
              env={"RESMPI_IO_VERIFY_READS": "all"}, timeout=120)
    assert_ok(res)
    assert "block" not in res.stderr, res.describe()
