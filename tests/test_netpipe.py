"""Debian's NetPIPE (netpipe-mpich2, binary built against MPICH)."""
import shutil

import pytest

from conftest import run
from test_interop import abi_env

NP = shutil.which("NPmpich2")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(NP is None, reason="NPmpich2 (netpipe-mpich2) not installed")]

LAST_SIZE = 8388611  # default sweep: up to 8 MiB, perturbation +-3


def last_size(np_out):
    rows = [l.split() for l in np_out.read_text().splitlines() if l.strip()]
    return int(rows[-1][0]) if rows else None


def test_netpipe_completes_its_full_size_sweep(tmp_path, paths):
    # default sweep (1 B .. 8 MiB + 3); a constant 10 repeats per size keeps it < 3 min
    res = run(2, NP, "-n", "10", mpiexec_opts=paths, env=abi_env(), timeout=180, cwd=tmp_path)
    assert res.returncode == 0, res.describe()
    out = tmp_path / "np.out"
    assert out.exists(), res.describe()
    assert last_size(out) == LAST_SIZE, f"sweep stopped at {last_size(out)}\n{res.describe()}"
    assert f"{LAST_SIZE} bytes" in res.output, res.describe()


def test_netpipe_integrity_check_passes_at_every_size(tmp_path, paths):
    res = run(2, NP, "-i", "-n", "3", mpiexec_opts=paths, env=abi_env(), timeout=180, cwd=tmp_path)
    assert res.returncode == 0, res.describe()
    sizes = [l for l in res.output.splitlines() if " bytes " in l]
    assert sizes and all("Integrity check passed" in l for l in sizes), res.describe()
    assert "8388609 bytes" in sizes[-1], res.describe()
