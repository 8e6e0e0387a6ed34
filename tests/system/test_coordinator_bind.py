"""A local pod's coordinator listens on loopback only (podrl.core.cluster_env.bind_address): `podrl launch`
starts 2 processes that join through `podrl.cli.train.set_up_devices` (as `podrl anakin` does); the test
reads which addresses process 0's own sockets listen on at the coordinator's port, from
/proc/<pid>/net/tcp and tcp6 and the socket inodes of /proc/<pid>/fd, sending no traffic anywhere.
JAX alone would listen on [::]:<port>, every interface of the host."""

from __future__ import annotations

import ipaddress
import os
import re
import sys
from pathlib import Path

import pytest

from pods import Pod

CHILD = """
import os, sys, time
from podrl.cli.train import set_up_devices
set_up_devices(sys.argv[2:])
print("joined", sys.argv[sys.argv.index("--coordinator") + 1], flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.1)
"""


def address(hex_host: str) -> str:
    """An address of /proc/net/tcp (4 bytes) or tcp6 (4 words of 4 bytes), each in host (little-endian)
    order; an IPv4-mapped IPv6 address (a v6 socket bound to ::ffff:a.b.c.d) as the IPv4 one."""
    raw = bytes.fromhex(hex_host)
    ip = ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))
    return str(getattr(ip, "ipv4_mapped", None) or ip)


def listening(pid: int, port: int) -> set[str]:
    """The addresses on which `pid`'s own sockets listen at TCP `port`."""
    links = (os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
    inodes = {link[len("socket:["):-1] for link in links if link.startswith("socket:[")}
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            host, port_hex = fields[1].split(":")
            if fields[3] == "0A" and int(port_hex, 16) == port and fields[9] in inodes:  # 0A: LISTEN
                found.add(address(host))
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_the_coordinator_of_a_local_pod_listens_on_loopback_only(tmp_path, host):
    release = tmp_path / "release"
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    with Pod(2, 1, [str(child), str(release)], launcher=("--host", host), program=[sys.executable]) as pod:
        line = pod.wait_for(r"^\[p0\] joined ", timeout=90)
        pod.wait_for(r"^\[p1\] joined ", timeout=30)
        port = int(re.search(r":(\d+)$", line.strip()).group(1))
        found = listening(pod.pids[0], port)
        release.touch()
        assert pod.finish(timeout=60) == 0, pod.text[-3000:]
    assert found and all(ipaddress.ip_address(a).is_loopback for a in found), found
    if host == "127.0.0.1":
        assert found == {"127.0.0.1"}, found
