"""MPI-IO (issue 14): the core calls at 1, 2, 3 and 4 ranks, and block
replication with the faults injected: each storage target's copy deleted,
truncated, bit-flipped, or its directory replaced by a file."""
import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import assert_ok, run

SUBTESTS = ["basic", "errors", "view", "shared", "collective", "errhandler"]


@pytest.mark.parametrize("nprocs", [1, 2, 4])
@pytest.mark.parametrize("subtest", SUBTESTS)
def test_mpi_io_core(build, tmp_path, nprocs, subtest):
    """open/close/delete and error classes, sizes, vector-filetype views,
    shared and ordered pointers, collective/split/nonblocking access, file
    error handlers: each program checks its own results."""
    assert_ok(run(nprocs, build("io_core"), subtest, cwd=tmp_path, timeout=90))
