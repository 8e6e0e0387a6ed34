"""A local pod's coordinator listens on loopback only: `podrl launch` (JAX_COORDINATOR_BIND_ADDRESS) and a
`--coordinator` that names a loopback address (podrl.core.cluster_env.bind_address). 2 processes join
through `podrl.cli.train.set_up_devices` (as `podrl anakin` does), started by the launcher or by hand; the test
reads which addresses process 0's own sockets listen on at the coordinator's port, from
/proc/<pid>/net/tcp and tcp6 and the socket inodes of /proc/<pid>/fd, sending no traffic anywhere.
JAX alone would listen on [::]:<port>, every interface of the host."""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from podrl.cli.launch import free_port
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


ON_LINUX = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")


def check_loopback_only(found: set[str], host: str) -> None:
    assert found and all(ipaddress.ip_address(a).is_loopback for a in found), found
    if host == "127.0.0.1":
        assert found == {"127.0.0.1"}, found


@ON_LINUX
@pytest.mark.timeout(120)
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_the_coordinator_of_a_podrl_launch_pod_listens_on_loopback_only(tmp_path, host):
    release = tmp_path / "release"
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    with Pod(2, 1, [str(child), str(release)], launcher=("--host", host), program=[sys.executable]) as pod:
        joined = [pod.wait_for(r"^\[p\d\] joined ", timeout=90) for _ in range(2)]  # in either order
        assert sorted(line[:4] for line in joined) == ["[p0]", "[p1]"], joined
        port = int(re.search(r":(\d+)$", joined[0].strip()).group(1))
        found = listening(pod.pids[0], port)
        release.touch()
        assert pod.finish(timeout=60) == 0, pod.text[-3000:]
    check_loopback_only(found, host)


@ON_LINUX
@pytest.mark.timeout(120)
def test_a_coordinator_given_by_hand_as_a_loopback_address_listens_there_only(tmp_path):
    """Without `podrl launch` (which also sets JAX_COORDINATOR_BIND_ADDRESS): podrl's own rule."""
    release = tmp_path / "release"
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    port = free_port("127.0.0.1")
    env = {k: v for k, v in os.environ.items() if k != "JAX_COORDINATOR_BIND_ADDRESS"}
    procs = [subprocess.Popen([sys.executable, str(child), str(release), "--coordinator", f"127.0.0.1:{port}",
                               "--num-processes", "2", "--process-id", str(i), "--cpu-devices", "1"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(2)]
    try:
        for proc in procs:
            assert next(line for line in iter(proc.stdout.readline, "") if line.startswith("joined "))
        found = listening(procs[0].pid, port)
        release.touch()
        assert [proc.wait(timeout=60) for proc in procs] == [0, 0]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    check_loopback_only(found, "127.0.0.1")
