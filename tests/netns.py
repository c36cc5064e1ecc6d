"""Two "hosts" made of network namespaces, for multi-host tests.

``two_hosts`` (a pytest fixture) creates namespaces ``rmpi-a-<id>`` and
``rmpi-b-<id>`` (<id> unique per test session and per use) joined by three
veth pairs, each end named the same in both namespaces:

    mgmt   10.77.0.1/24  <->  10.77.0.2/24   control traffic (mpiexec <-> proxies)
    rail0  10.77.1.1/24  <->  10.77.1.2/24   data rail 0
    rail1  10.77.2.1/24  <->  10.77.2.2/24   data rail 1

with ``lo`` up in each, and tears everything down afterwards, even when the
test fails (processes left inside are killed, then the namespaces deleted,
which removes the veths).  It needs root; where ``ip netns add`` fails the
test fails with the reason (``RESMPI_SKIP_NETNS_TESTS=1`` skips instead,
on purpose).

``mpiexec`` runs inside namespace A (``hosts.run_in_a``) with
``--hosts A,B --launcher-exec scripts/netns-exec --control-addr 10.77.0.1``
(``hosts.mpiexec_opts()``).  ``hosts.link(ns, dev, up)`` takes a link down or
up inside a namespace (``ip -n NS link set DEV down|up``).
"""

import itertools
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NETNS_EXEC = REPO / "scripts" / "netns-exec"

# (device, subnet third octet): management first, so it is the first
# non-loopback interface of each namespace.
LINKS = (("mgmt", 0), ("rail0", 1), ("rail1", 2))
SESSION_ID = f"{os.getpid() % 100000}"
_counter = itertools.count()


def ip(*args, check=True):
    """Run `ip ARGS`; on failure raise with its stderr."""
    p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.strip() or p.returncode}")
    return p


def address(host_index, link_index):
    """10.77.<link>.<host+1>: host 0 = A, 1 = B; link 0 = mgmt, 1 = rail0, 2 = rail1."""
    return f"10.77.{link_index}.{host_index + 1}"


@dataclass
class TwoHosts:
    a: str
    b: str
    created: list = field(default_factory=list)

    @property
    def names(self):
        return [self.a, self.b]

    @property
    def control_addr(self):
        return address(0, 0)

    def mpiexec_opts(self, hosts=None, control=True):
        """mpiexec options that place ranks on the two namespaces."""
        opts = ["--hosts", hosts or f"{self.a},{self.b}", "--launcher-exec", str(NETNS_EXEC)]
        if control:
            opts += ["--control-addr", self.control_addr]
        return opts

    def run_in_a(self, cmd):
        """`cmd` prefixed to run in namespace A (where mpiexec lives)."""
        return ["ip", "netns", "exec", self.a, *[str(c) for c in cmd]]

    def link(self, ns, dev, up):
        """Take link `dev` of namespace `ns` down (up=False) or up."""
        ip("-n", ns, "link", "set", dev, "up" if up else "down")

    def netns_inode(self, ns):
        """The inode that /proc/self/ns/net shows as net:[inode] inside `ns`."""
        return os.stat(f"/run/netns/{ns}").st_ino


def _kill_inside(ns):
    p = ip("netns", "pids", ns, check=False)
    for word in p.stdout.split():
        try:
            os.kill(int(word), signal.SIGKILL)
        except (ValueError, OSError):
            pass


def destroy(hosts):
    for ns in hosts.created:
        _kill_inside(ns)
    deadline = time.monotonic() + 5
    for ns in hosts.created:
        while ip("netns", "pids", ns, check=False).stdout.split() and time.monotonic() < deadline:
            time.sleep(0.05)
        ip("netns", "del", ns, check=False)
    hosts.created.clear()


def create():
    """Create the two namespaces and their links; returns TwoHosts.  Raises
    RuntimeError (after cleaning up) when namespaces cannot be made."""
    n = next(_counter)
    hosts = TwoHosts(a=f"rmpi-a-{SESSION_ID}-{n}", b=f"rmpi-b-{SESSION_ID}-{n}")
    try:
        for ns in hosts.names:
            ip("netns", "del", ns, check=False)  # a leftover of a killed run
            ip("netns", "add", ns)
            hosts.created.append(ns)
            ip("-n", ns, "link", "set", "lo", "up")
        for dev, subnet in LINKS:
            ip("-n", hosts.a, "link", "add", dev, "type", "veth", "peer", "name", dev, "netns", hosts.b)
            for index, ns in enumerate(hosts.names):
                ip("-n", ns, "addr", "add", f"{address(index, subnet)}/24", "dev", dev)
                ip("-n", ns, "link", "set", dev, "up")
    except Exception:
        destroy(hosts)
        raise
    return hosts


def _cannot_run(reason):
    """A multi-host fault test that cannot run fails (CI must not lose it
    quietly), unless the person running the suite opted out with
    RESMPI_SKIP_NETNS_TESTS=1 (then it is reported as skipped)."""
    if os.environ.get("RESMPI_SKIP_NETNS_TESTS") == "1":
        pytest.skip(f"{reason} (RESMPI_SKIP_NETNS_TESTS=1)")
    pytest.fail(f"{reason}; set RESMPI_SKIP_NETNS_TESTS=1 to skip these tests on purpose", pytrace=False)


@pytest.fixture
def two_hosts():
    """Two namespace hosts joined by a management link and two rails."""
    if os.geteuid() != 0:
        _cannot_run("network-namespace hosts need root (ip netns add)")
    if not NETNS_EXEC.exists():
        pytest.fail(f"{NETNS_EXEC} is missing", pytrace=False)
    try:
        hosts = create()
    except (RuntimeError, FileNotFoundError, subprocess.SubprocessError) as error:
        _cannot_run(f"cannot create network namespaces: {error}")
    try:
        yield hosts
    finally:
        destroy(hosts)
