"""Two Linerate processes joined by a shared-memory port, as two logical routers' link will be.

h1 -- [p0 af_packet] router A [p1 shm server] == /dev/shm file == [p1 shm client] router B
[p0 af_packet] -- h2. Each router is `linerate daemon` in a namespace of its own, with TAP twins:
ARP resolves across the shared-memory link as on any port, and the hosts' kernels ping each
other through both routers. Then router B's process is stopped and a new one started on the
same file: the link comes back with router A untouched (the server keeps the file and its
rings). That frames written while a client is away wait in the rings and are read by the next
one is `dataplane::port::shm`'s unit test `a_client_that_restarts_resumes_where_it_stopped`.
"""

from __future__ import annotations

import os

import pytest

from test_real_ports import Router
from testbed.netns import wait_until

pytestmark = pytest.mark.usefixtures("testbed_session")


def config(name: str, dev: str, host_net: str, link_ip: str, far_net: str, far_ip: str,
           shm: str, server: bool, mac: int) -> str:
    role = "server" if server else "client"
    return f"""\
router: {{ workers: 1 }}
ports:
  - {{ name: p0, driver: af_packet, device: {dev} }}
  - {{ name: p1, driver: shm, path: {shm}, role: {role}, slots: 256 }}
interfaces:
  - {{ name: p0, port: p0, mac: "02:00:00:00:{mac:02x}:01", ipv4: [{host_net}] }}
  - {{ name: p1, port: p1, mac: "02:00:00:00:{mac:02x}:02", ipv4: [{link_ip}/30] }}
routes:
  - {{ prefix: {far_net}, via: {far_ip} }}
control-plane:
  taps: true
  neighbor: {{ reachable-time: 30, retransmit-ms: 200, retries: 5, hold: 8 }}
"""


def test_two_routers_forward_across_a_shared_memory_link_and_one_restarts(linerate_bin,
                                                                          testbed, tmp_path):
    a, b = testbed.netns("lra"), testbed.netns("lrb")
    h1, h2 = testbed.netns("h1"), testbed.netns("h2")
    testbed.veth(h1, "eth0", a, "d0")
    testbed.veth(h2, "eth0", b, "d0")
    for ns in (a, b):
        ns.sysctl({"net.ipv6.conf.d0.disable_ipv6": 1})
        ns.up("d0")
        ns.up("lo")
    h1.addr("eth0", "192.0.2.2/24")
    h2.addr("eth0", "198.51.100.2/24")
    h1.route("default", "via", "192.0.2.1")
    h2.route("default", "via", "198.51.100.1")
    shm = f"/dev/shm/linerate-test-{os.getpid()}-link"
    ra = Router(linerate_bin, a, tmp_path / "a",
                config("a", "d0", "192.0.2.1/24", "10.0.12.1", "198.51.100.0/24", "10.0.12.2",
                       shm, True, 0x0a))
    cfg_b = config("b", "d0", "198.51.100.1/24", "10.0.12.2", "192.0.2.0/24", "10.0.12.1",
                   shm, False, 0x0b)
    rb = Router(linerate_bin, b, tmp_path / "b", cfg_b)
    try:
        assert os.path.exists(shm)
        assert h1.ping("198.51.100.2", count=3, timeout=5), ra.log.read_text() + rb.log.read_text()
        # ARP across the link: each router knows the other's MAC on p1.
        nbrs = {(n["interface"], n["ip"]): n["mac"] for n in ra.json("show", "neighbors")}
        assert nbrs[("p1", "10.0.12.2")] == "02:00:00:00:0b:02", nbrs
        ports = {p["name"]: p for p in ra.json("show", "ports")}
        p1 = ports["p1"]
        assert p1["driver"] == "shm" and p1["queues"] == [{"queue": 0, "worker": 0}], p1
        assert p1["tx_packets"] >= 3 and p1["rx_packets"] >= 3, p1

        # B's process goes; a new one maps the same file. A keeps its end throughout.
        rb.stop()
        rb = Router(linerate_bin, b, tmp_path / "b2", cfg_b)
        assert h1.ping("198.51.100.2", count=3, timeout=8), rb.log.read_text()
        assert ra.proc.running
        drops = ra.drops()
        assert not any(k.startswith("Tx") for k in drops), drops
    finally:
        rb.stop()
        ra.stop()
    assert not os.path.exists(shm), "the server removes its file when it goes"


def test_a_client_without_its_server_is_refused_with_the_file_named(linerate_bin, testbed,
                                                                    tmp_path):
    ns = testbed.netns("lone")
    missing = f"/dev/shm/linerate-test-{os.getpid()}-nobody"
    cfg = f"""\
router: {{ workers: 1 }}
ports:
  - {{ name: p1, driver: shm, path: {missing} }}
interfaces:
  - {{ name: p1, port: p1, mac: "02:00:00:00:0c:01", ipv4: [10.0.0.1/30] }}
"""
    wd = tmp_path / "lone"
    wd.mkdir()
    (wd / "router.yaml").write_text(cfg)
    p = ns.popen([str(linerate_bin), "daemon", "--config", str(wd / "router.yaml"), "--state",
                  str(wd / "state"), "--socket", str(wd / "api.sock")], log=wd / "daemon.log",
                 name="linerate")
    wait_until(lambda: not p.running, 20, what="the daemon to refuse its config")
    log = (wd / "daemon.log").read_text()
    assert p.popen.returncode != 0, log
    assert f"port p1: shm file {missing}" in log and "is its server up?" in log, log
