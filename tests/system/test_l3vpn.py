"""L3VPN (RFC 4364) between Linerate, with GoBGP as its VPN speaker, and FRR's bgpd as the far
PE; traffic through the result both ways.

    ce (host)                  pe1 (linerate daemon + gobgpd)               pe2 (FRR bgpd)
      eth0 10.1.0.2 ====== ac [VRF cust-a] 10.1.0.1    core 10.0.12.1 ====== core 10.0.12.2
                           VRF cust-b (no interface)

pe2 originates two VPN routes: 10.2.0.0/24 (RD 65000:2, label 3000, RT 65000:1) and
10.3.0.0/24 (RD 65000:3, label 3001, RT 65000:99). Linerate's cust-a imports and exports RT
65000:1, cust-b imports 65000:99.

What is checked, as outcomes:
- import: each route lands only in the VRF whose import RT it carries, with its label pushed
  towards pe2 (`show ip route --vrf`, origin V; `show bgp vpn`; `show vrf`);
- export: cust-a's connected subnet and static route reach bgpd as VPN routes with cust-a's
  RD, its route target, Linerate's label for the VRF and next hop 10.0.12.1 (`show bgp ipv4
  vpn json` on pe2);
- forwarding CE -> far PE: the CE's pings to 10.2.0.5 leave the core port under label 3000,
  decoded by tshark (mpls then ip, nothing malformed);
- forwarding far PE -> CE: an echo request under cust-a's label reaches the CE, whose reply
  goes back labelled 3000;
- services on labelled traffic: the CE's packets leave with the EXP (5) its interface's QoS
  class sets; the core's input ACL sees the packets under cust-a's label and drops the ones
  it denies;
- a withdrawal on pe2 removes the route from cust-a; gobgpd going away withdraws every VPN
  route and says so in the log.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time

import pytest

from test_real_ports import Router
from testbed import require_tools, wait_until
from testbed.capture import read_fields
from testbed.frames import mac, mpls_entry, send
from testbed.frr import zebra_config
from testbed.gobgp import gobgp_config

pytestmark = pytest.mark.usefixtures("testbed_session")

PE1_CORE_MAC = "02:00:00:00:12:01"
PE1_AC_MAC = "02:00:00:00:12:02"
FAR_MAC = "02:00:00:00:0f:a2"
API_PORT = 50051


def router_yaml() -> str:
    return f"""\
router: {{ workers: 1, idle-sleep-us: 50 }}
vrfs: [cust-a, cust-b]
ports:
  - {{ name: core, driver: af_packet, device: core }}
  - {{ name: ac, driver: af_packet, device: ac }}
interfaces:
  - {{ name: core, port: core, mac: "{PE1_CORE_MAC}", ipv4: [10.0.12.1/24], acl-in: NO-BAD }}
  - {{ name: ac, port: ac, mac: "{PE1_AC_MAC}", vrf: cust-a, ipv4: [10.1.0.1/24],
      qos-in: VPN-EXP }}
acls:
  - {{ name: NO-BAD, entries: ["deny icmp src host 10.2.0.99", "permit"] }}
qos:
  policies:
    - {{ name: VPN-EXP, classes: [{{ class: class-default, set: {{ exp: 5 }} }}] }}
routes:
  - {{ prefix: 10.1.5.0/24, via: 10.1.0.2, vrf: cust-a }}
mpls:
  interfaces: [core]
l3vpn:
  bgp: {{ api: "127.0.0.1:{API_PORT}", next-hop: 10.0.12.1 }}
  vrfs:
    - {{ name: cust-a, rd: "65000:1", import: ["65000:1"], export: ["65000:1"] }}
    - {{ name: cust-b, rd: "65000:9", import: ["65000:99"] }}
control-plane: {{ taps: true }}
"""


BGPD_CONF = """\
frr defaults traditional
!
route-map RT1 permit 10
 set extcommunity rt 65000:1
exit
!
route-map RT99 permit 10
 set extcommunity rt 65000:99
exit
!
router bgp 65000
 bgp router-id 10.0.12.2
 no bgp default ipv4-unicast
 no bgp network import-check
 neighbor 10.0.12.1 remote-as 65000
 neighbor 10.0.12.1 timers connect 1
 !
 address-family ipv4 vpn
  neighbor 10.0.12.1 activate
  network 10.2.0.0/24 rd 65000:2 label 3000 route-map RT1
  network 10.3.0.0/24 rd 65000:3 label 3001 route-map RT99
 exit-address-family
exit
!
"""

def echo_request(src: str, dst: str, ident: int, seq: int) -> bytes:
    """An IPv4 ICMP echo request with correct checksums."""
    def csum(b: bytes) -> int:
        if len(b) % 2:
            b += b"\0"
        s = sum(int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        return ~s & 0xFFFF

    icmp = bytearray(b"\x08\x00\x00\x00" + ident.to_bytes(2, "big") + seq.to_bytes(2, "big")
                     + b"l3vpn-echo" + bytes(22))
    icmp[2:4] = csum(bytes(icmp)).to_bytes(2, "big")
    ip = bytearray(b"\x45\x00" + (20 + len(icmp)).to_bytes(2, "big") + b"\x00\x01\x00\x00"
                   + b"\x40\x01\x00\x00" + socket.inet_aton(src) + socket.inet_aton(dst))
    ip[10:12] = csum(bytes(ip)).to_bytes(2, "big")
    return bytes(ip) + bytes(icmp)


def frr_vpn_routes(frr) -> dict:
    """pe2's VPNv4 table: {rd: {prefix: [paths]}}."""
    j = frr.show_json("show bgp ipv4 vpn json", daemon="bgpd")
    return j.get("routes", {}).get("routeDistinguishers", {}) if j else {}


def test_l3vpn_with_gobgp_and_frr_bgpd(linerate_bin, testbed, tmp_path):
    require_tools("tshark", "gobgpd", "gobgp", "/usr/lib/frr/bgpd")
    ce, pe1, pe2 = testbed.netns("ce"), testbed.netns("pe1"), testbed.netns("pe2")
    testbed.veth(ce, "eth0", pe1, "ac")
    testbed.veth(pe1, "core", pe2, "core")
    for ns, devs in ((ce, ("eth0",)), (pe1, ("ac", "core")), (pe2, ("core",))):
        for d in devs:
            ns.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1})
            ns.up(d)
    for ns in (ce, pe1, pe2):
        ns.up("lo")
    ce.addr("eth0", "10.1.0.2/24")
    ce.ip("route", "add", "default", "via", "10.1.0.1")
    pe2.ip("link", "set", "core", "address", FAR_MAC)
    pe2.addr("core", "10.0.12.2/24")

    r = Router(linerate_bin, pe1, tmp_path / "pe1", router_yaml())
    gb = testbed.gobgp(pe1, gobgp_config(65000, "10.0.12.1", [("10.0.12.2", 65000)]),
                       api_port=API_PORT)
    frr = testbed.frr(pe2, {"zebra": zebra_config(), "bgpd": BGPD_CONF})
    core_cap = testbed.capture(pe2, "core", "l3vpn-core.pcap")
    ce_cap = testbed.capture(ce, "eth0", "l3vpn-ce.pcap")
    try:
        gb.wait_established("10.0.12.2", timeout=40)

        def imported():
            v = r.json("show", "vrf")
            counts = {x["name"]: (x["imported"], x["exported"]) for x in v["vrfs"]}
            return v if counts == {"cust-a": (1, 2), "cust-b": (1, 0)} else None

        try:
            wait_until(lambda: imported() is not None, 30, what="VPN routes both ways")
        except TimeoutError as e:
            raise AssertionError(f"{e}\n{r.cli('show', 'vrf')}{r.cli('show', 'bgp', 'vpn')}"
                                 f"{gb.cli('global', 'rib', '-a', 'vpnv4')}") from e
        v = imported()
        assert v["status"]["connected"] and v["status"]["asn"] == 65000, v
        assert v["status"]["malformed"] == 0 and v["status"]["unresolved"] == 0, v
        label_a = next(x["label"] for x in v["vrfs"] if x["name"] == "cust-a")

        # Import: each route only where its route target is imported, label pushed.
        a = {x["prefix"]: x for x in r.json("show", "ip", "route", "--vrf", "cust-a")["routes"]}
        b = {x["prefix"]: x for x in r.json("show", "ip", "route", "--vrf", "cust-b")["routes"]}
        assert "10.2.0.0/24" in a and "10.3.0.0/24" not in a, a
        assert "10.3.0.0/24" in b and "10.2.0.0/24" not in b, b
        assert a["10.2.0.0/24"]["origin"] == "vpn", a["10.2.0.0/24"]
        assert "labels 3000" in " ".join(a["10.2.0.0/24"]["via"]), a["10.2.0.0/24"]
        assert "labels 3001" in " ".join(b["10.3.0.0/24"]["via"]), b["10.3.0.0/24"]
        vpn = {(x["rd"], x["prefix"]): x for x in r.json("show", "bgp", "vpn")["routes"]}
        assert vpn[("65000:2", "10.2.0.0/24")]["installed"] == ["cust-a"], vpn
        assert vpn[("65000:2", "10.2.0.0/24")]["label"] == 3000, vpn
        assert vpn[("65000:2", "10.2.0.0/24")]["next_hop"] == "10.0.12.2", vpn
        assert vpn[("65000:3", "10.3.0.0/24")]["installed"] == ["cust-b"], vpn

        # Export: bgpd has cust-a's routes with its RD, RT, label and next hop.
        def exported():
            rds = frr_vpn_routes(frr)
            mine = rds.get("65000:1", {})
            return mine if {"10.1.0.0/24", "10.1.5.0/24"} <= set(mine) else None

        wait_until(lambda: exported() is not None, 20, what="cust-a's routes in bgpd")
        for p in ("10.1.0.0/24", "10.1.5.0/24"):
            d = frr.show_json(f"show bgp ipv4 vpn rd 65000:1 {p} json", daemon="bgpd")
            (path,) = d["65000:1"]["paths"]
            assert path["valid"] and path["bestpath"]["overall"], path
            assert path["remoteLabel"] == label_a, path
            assert path["nexthops"][0]["ip"] == "10.0.12.1", path
            assert "RT:65000:1" in path["extendedCommunity"]["string"], path
        assert "10.1.0.1/32" not in frr_vpn_routes(frr).get("65000:1", {}), "own address exported"

        # CE -> far PE: pings leave the core labelled 3000.
        ce.run(["ping", "-c", "5", "-i", "0.2", "-W", "1", "10.2.0.5"], check=False)
        # Far PE -> CE: echo requests under cust-a's label reach the CE; its replies go back
        # labelled 3000.
        frame = (mac(PE1_CORE_MAC) + mac(FAR_MAC) + b"\x88\x47" + mpls_entry(label_a)
                 + echo_request("10.2.0.7", "10.1.0.2", 0x4c52, 1))
        send(pe2, "core", frame, 5)
        # The core's input ACL sees the packets under the label: 10.2.0.99 is denied.
        bad = (mac(PE1_CORE_MAC) + mac(FAR_MAC) + b"\x88\x47" + mpls_entry(label_a)
               + echo_request("10.2.0.99", "10.1.0.2", 0x4c53, 1))
        send(pe2, "core", bad, 3)
        time.sleep(1.0)
    finally:
        core_cap.stop(settle=0.5)
        ce_cap.stop(settle=0.5)

    out = read_fields(core_cap.pcap, ["mpls.label", "mpls.bottom", "ip.src", "ip.dst",
                                      "icmp.type", "mpls.exp"],
                      "mpls && eth.src == " + PE1_CORE_MAC)
    # The CE's packets leave with the EXP its interface's QoS class sets.
    to_far = [x for x in out if x[3] == "10.2.0.5"]
    assert len(to_far) == 5, out
    assert all(x[0] == "3000" and x[1] == "1" and x[4] == "8" and x[5] == "5"
               for x in to_far), to_far
    replies = [x for x in out if x[3] == "10.2.0.7"]
    assert len(replies) == 5 and all(x[0] == "3000" and x[4] == "0" and x[5] == "5"
                                     for x in replies), out
    assert read_fields(core_cap.pcap, ["frame.number"], "_ws.malformed") == []
    got = read_fields(ce_cap.pcap, ["ip.src", "icmp.type"],
                      "icmp && ip.dst == 10.1.0.2 && ip.src == 10.2.0.7")
    assert len(got) == 5, got
    assert read_fields(ce_cap.pcap, ["ip.src"], "ip.src == 10.2.0.99") == []
    (acl,) = r.json("show", "acl", "NO-BAD")
    assert acl["entries"][0]["hits"] == 3, acl

    # A withdrawal on the far PE takes the route out of cust-a.
    frr.vtysh("configure terminal", "router bgp 65000", "address-family ipv4 vpn",
              "no network 10.2.0.0/24 rd 65000:2 label 3000", daemon="bgpd")
    wait_until(lambda: "10.2.0.0/24" not in {
        x["prefix"] for x in r.json("show", "ip", "route", "--vrf", "cust-a")["routes"]},
        20, what="10.2.0.0/24 withdrawn from cust-a")

    # The speaker goes away: every VPN route goes, and the log says why.
    gb.stop()
    wait_until(lambda: r.json("show", "vrf")["status"]["installed"] == 0, 10,
               what="VPN routes withdrawn with the speaker")
    assert not r.json("show", "vrf")["status"]["connected"]
    logs = r.cli("show", "logging", "-n", "5000")
    assert "VPN_SPEAKER_UP" in logs and "VPN_SPEAKER_DOWN" in logs, logs
    r.stop()


def test_l3vpn_config_mistakes_are_refused(linerate_bin, tmp_path):
    cases = [
        (router_yaml().replace('next-hop: 10.0.12.1', 'next-hop: 10.0.12.9'),
         "l3vpn.bgp.next-hop", "not an address of an interface"),
        (router_yaml().replace('name: cust-b, rd: "65000:9"', 'name: cust-c, rd: "65000:9"'),
         "l3vpn.vrfs[1]", "VRF `cust-c` is not defined"),
        (router_yaml().replace('rd: "65000:9"', 'rd: "65000:1"'),
         "l3vpn.vrfs[1]", "route distinguisher 65000:1 is VRF `cust-a`'s"),
        (router_yaml().replace('import: ["65000:99"]', 'import: ["x:99"]'),
         "l3vpn.vrfs[1].import[0]", "not a route target"),
        (router_yaml().replace("mpls:\n  interfaces: [core]\n", ""),
         "l3vpn", "l3vpn needs `mpls`"),
    ]
    for text, field, message in cases:
        cfg = tmp_path / "r.yaml"
        cfg.write_text(text)
        p = subprocess.run([str(linerate_bin), "check", str(cfg)], capture_output=True,
                           text=True)
        out = p.stdout + p.stderr
        assert p.returncode != 0, out
        assert f"{cfg}:" in out and field in out and message in out, (field, out)


def test_me6_vpn_routes_over_bgp_through_gobgp(linerate_bin, tmp_path):
    """ME-6 at CI scale with its VPN routes sent the whole way over BGP (`--through-gobgp`):
    fed into a far gobgpd, carried over iBGP to the router's own, read by the router's L3VPN
    service; each route read back from its VRF with its labels, the router's exports at the far
    speaker, traffic through the result both ways; both daemons gone afterwards."""
    require_tools("gobgpd")
    out = tmp_path / "out"
    p = subprocess.run(
        [str(linerate_bin), "bench", "scenario", "ME-6", "--scale", "0.01", "--through-gobgp",
         "--sizes", "68", "--seconds", "0.5", "--resolution", "5", "--quiet", "--out",
         str(out)],
        capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads((out / "me-6.json").read_text())
    checks = {c["name"]: c for c in rep["checks"]}
    for name in ("far speaker took every route", "router's speaker received every route",
                 "exports reached the far speaker", "VPN routes installed",
                 "each VPN route in its VRFs"):
        assert checks[name]["pass"] is True, checks[name]
    assert checks["each VPN route in its VRFs"]["measured"].startswith(
        "2112 checked, 0 missing or wrong"), checks
    assert checks["exports reached the far speaker"]["measured"].startswith(
        "384 exported, 0 errors, 2496 paths"), checks
    assert rep["verdict"] == "pass"
    assert rep["rows"][0]["throughput_fps"] > 0
    assert any("over iBGP to the router's gobgpd" in n for n in rep["notes"]), rep["notes"]
    left = subprocess.run(["pgrep", "-f", "linerate-gobgp-"], capture_output=True, text=True)
    assert left.stdout.strip() == "", left.stdout
