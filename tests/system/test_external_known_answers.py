"""Known answers for the tester in external mode, each checked against counts taken outside it.

    tester namespace                                  DUT namespace (the kernel forwarding)
    linerate bench external --core 0   t0 == d0   nft / tc on the path; its receive side
                                       t1 == d1   steered to CPU 1 (RPS)

On a veth the receiving side runs on the sender's CPU (PEERS.md): without RPS the kernel's
forwarding would run inside the tester's own `send()` calls and every slow device would look
like a slow tester. With the device's receive queues steered to the other CPU and the tester
pinned to CPU 0, a device slower than the load pushes back on the tester's transmit ring, as a
separate box would.

What each case checks, as outcomes:

- a bare veth pair (no device): nothing lost, what the tester says it sent is what the veth
  counted, nothing left in its rings, and latency is the tester's own floor (microseconds, not
  the 1 ms a block ring hands frames over after);
- nft dropping every 10th frame: the tester's loss is exactly nft's counter;
- nft duplicating every 10th frame of one stream: the tester's duplicates are exactly nft's
  counter, and nothing is counted lost;
- tbf limiting one direction: the throughput search finds the limiter's rate, and its failed
  trials' loss is exactly what tbf dropped;
- a device slower than the load (2,000 linear nft rules): frames the tester's transmit ring
  refused are neither sent nor lost, the search's answer is a load that went out whole, and
  the veths counted exactly what the tester says it sent;
- Linerate as the device, its API given: each trial carries the device's own drops, and an ACL
  denying one stream makes that stream's frames the loss, each an `AclDenied` drop.

Not built here: a reordering stand-in and a delay stand-in (netem is not in this kernel; tc's
other qdiscs neither reorder within a flow nor hold frames for a set time).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from testbed.netns import wait_until

pytestmark = pytest.mark.usefixtures("testbed_session")

T_MAC = ["02:00:00:00:00:02", "02:00:00:00:01:02"]
D_MAC = ["02:00:00:00:0a:01", "02:00:00:00:0b:01"]

DUT_YAML = f"""\
ports:
  - {{ name: p0, driver: af_packet, device: d0 }}
  - {{ name: p1, driver: af_packet, device: d1 }}
interfaces:
  - {{ name: p0, port: p0, mac: "{D_MAC[0]}", ipv4: [198.18.0.1/24] }}
  - {{ name: p1, port: p1, mac: "{D_MAC[1]}", ipv4: [198.18.1.1/24] }}
neighbors:
  - {{ interface: p0, ip: 198.18.0.2, mac: "{T_MAC[0]}" }}
  - {{ interface: p1, ip: 198.18.1.2, mac: "{T_MAC[1]}" }}
"""


def two_cpus() -> bool:
    return (os.cpu_count() or 1) >= 2


def kernel_device(testbed):
    """The tester's namespace and a kernel router between t0/d0 and t1/d1 that knows the
    tester's addresses (permanent neighbours: no ARP in the counts), no IPv6 anywhere (no ND or
    MLD chatter), its receive side on CPU 1."""
    tst, dut = testbed.netns("tester"), testbed.netns("dut")
    testbed.veth(tst, "t0", dut, "d0")
    testbed.veth(tst, "t1", dut, "d1")
    tst.sysctl({"net.ipv6.conf.all.disable_ipv6": 1, "net.ipv6.conf.t0.disable_ipv6": 1,
                "net.ipv6.conf.t1.disable_ipv6": 1})
    dut.sysctl({"net.ipv6.conf.all.disable_ipv6": 1, "net.ipv6.conf.d0.disable_ipv6": 1,
                "net.ipv6.conf.d1.disable_ipv6": 1})
    for d, mac in (("d0", D_MAC[0]), ("d1", D_MAC[1])):
        dut.ip("link", "set", d, "address", mac)
    dut.addr("d0", "198.18.0.1/24")
    dut.addr("d1", "198.18.1.1/24")
    dut.set_forwarding(True)
    dut.sysctl({"net.ipv4.conf.all.rp_filter": 0, "net.ipv4.conf.d0.rp_filter": 0,
                "net.ipv4.conf.d1.rp_filter": 0})
    dut.ip("neigh", "replace", "198.18.0.2", "lladdr", T_MAC[0], "dev", "d0", "nud", "permanent")
    dut.ip("neigh", "replace", "198.18.1.2", "lladdr", T_MAC[1], "dev", "d1", "nud", "permanent")
    if two_cpus():
        for d in ("d0", "d1"):
            for q in (0, 1):
                dut.run(["sh", "-c", f"echo 2 > /sys/class/net/{d}/queues/rx-{q}/rps_cpus"])
    return tst, dut


def link_stats(ns, dev: str) -> dict:
    (link,) = ns.ip_json("-s", "link", "show", dev)
    return link["stats64"]


def run_external(bin_: Path, tst, tmp: Path, name: str, *extra: str) -> dict:
    f = tmp / "dut.yaml"
    f.write_text(DUT_YAML)
    out = tmp / name
    argv = [str(bin_), "bench", "external", "--dut", str(f), "--port", "p0=t0", "--port",
            "p1=t1", "--quiet", "--out", str(out), *extra]
    if two_cpus():
        argv += ["--core", "0"]
    p = tst.run(argv, check=False, timeout=300)
    assert p.returncode in (0, 1), f"{p.stdout}\n{p.stderr}"
    rep = json.loads((out / "external.json").read_text())
    rep["_md"] = (out / "external.md").read_text()
    return rep


def trials(rep: dict) -> list[dict]:
    (row,) = rep["rows"]
    return row["trials"]


def priming_sent(rep: dict) -> int:
    return sum(sent for sent, _ in rep["external"]["priming"])


def priming_lost(rep: dict) -> int:
    return sum(lost for _, lost in rep["external"]["priming"])


def nft_counter(ns, family: str, table: str, chain: str) -> int:
    """The packets of the one counter in `chain`."""
    out = json.loads(ns.run(["nft", "-j", "list", "chain", family, table, chain]).stdout)
    counts = [r["counter"]["packets"] for item in out["nftables"] if "rule" in item
              for r in item["rule"]["expr"] if "counter" in r]
    assert len(counts) == 1, out
    return counts[0]


def test_a_bare_veth_pair_loses_nothing_and_its_latency_is_the_testers_floor(linerate_bin,
                                                                             testbed, tmp_path):
    tst = testbed.netns("tester")
    testbed.veth(tst, "t0", tst, "t1")
    tst.sysctl({"net.ipv6.conf.all.disable_ipv6": 1, "net.ipv6.conf.t0.disable_ipv6": 1,
                "net.ipv6.conf.t1.disable_ipv6": 1})
    before = {d: link_stats(tst, d) for d in ("t0", "t1")}
    # 2% of 1 Gbit/s: 29,762 frames/s each way.
    rep = run_external(linerate_bin, tst, tmp_path, "bare", "--speed", "1g", "--load", "2",
                       "--seconds", "2")
    after = {d: link_stats(tst, d) for d in ("t0", "t1")}
    (t,) = trials(rep)
    assert t["pass"] and t["lost"] == 0 and t["rx"] == t["tx"] > 100_000, t
    assert (t["tx_refused"], t["tx_unsent"], t["tester_drops"]) == (0, 0, 0), t
    assert (t["duplicated"], t["reordered"], t["foreign"], t["stale"]) == (0, 0, 0, 0), t
    # What the tester sent is what the veths carried: each end sent what the other received.
    sent = sum(after[d]["tx"]["packets"] - before[d]["tx"]["packets"] for d in ("t0", "t1"))
    got = sum(after[d]["rx"]["packets"] - before[d]["rx"]["packets"] for d in ("t0", "t1"))
    assert sent == got == t["tx"] + priming_sent(rep), (sent, got, t["tx"], rep["external"])
    print(f"bare veth: tester sent {t['tx']:,} + priming {priming_sent(rep):,}, veths carried "
          f"{sent:,}; lost {t['lost']}; latency p50 {t['latency']['p50_ns'] / 1e3:.1f} us, p99 "
          f"{t['latency']['p99_ns'] / 1e3:.1f} us")
    # The frame ring hands each frame over at once with the kernel's receive time: the median
    # is the tester's own floor, not a block ring's 1 ms timeout (which gave a median of
    # ~500 us here).
    lat = t["latency"]
    assert 0 < lat["p50_ns"] < 200_000, lat
    assert "one-frame slots, each frame stamped with the kernel's receive time" in rep["_md"]


def test_nft_dropping_every_tenth_frame_is_exactly_the_testers_loss(linerate_bin, testbed,
                                                                   tmp_path):
    tst, dut = kernel_device(testbed)
    dut.run(["nft", "add table inet ka; add chain inet ka fw { type filter hook forward "
             "priority 0; policy accept; }; add rule inet ka fw meta l4proto udp "
             "numgen inc mod 10 == 0 counter drop"])
    rep = run_external(linerate_bin, tst, tmp_path, "nth", "--speed", "1g", "--load", "1",
                       "--seconds", "2")
    (t,) = trials(rep)
    dropped = nft_counter(dut, "inet", "ka", "fw")
    # Priming lost its share too (it retries while anything is lost).
    assert t["lost"] + priming_lost(rep) == dropped, (t["lost"], priming_lost(rep), dropped)
    print(f"nft every 10th: tester lost {t['lost']:,} of {t['tx']:,} (+ priming "
          f"{priming_lost(rep):,}); nft counted {dropped:,}")
    # Every 10th of what went through the rule, counted from wherever the priming left it.
    assert abs(t["lost"] - t["tx"] / 10) <= 1, t
    assert not t["pass"] and (t["tx_refused"], t["tx_unsent"]) == (0, 0), t
    assert t["rx"] + t["lost"] == t["tx"], t


def test_nft_duplicating_every_tenth_frame_is_counted_as_duplicates_not_loss(linerate_bin,
                                                                            testbed, tmp_path):
    tst, dut = kernel_device(testbed)
    # Only the stream towards p1: the copy leaves d1 to the same neighbour, as the original
    # (`dup` needs a table of one address family).
    dut.run(["nft", 'add table ip ka; add chain ip ka fw { type filter hook forward '
             'priority 0; policy accept; }; add rule ip ka fw oifname "d1" meta l4proto udp '
             'numgen inc mod 10 == 0 counter dup to 198.18.1.2 device "d1"'])
    rep = run_external(linerate_bin, tst, tmp_path, "dup", "--speed", "1g", "--load", "1",
                       "--seconds", "2")
    (t,) = trials(rep)
    copies = nft_counter(dut, "ip", "ka", "fw")
    primed = priming_sent(rep) // 2  # the priming's frames towards p1 were copied as well
    assert t["lost"] == 0 and t["rx"] == t["tx"], t
    assert abs(t["duplicated"] - (copies - primed // 10)) <= 1, (t["duplicated"], copies, primed)
    print(f"nft dup every 10th: tester duplicates {t['duplicated']:,}, lost {t['lost']}; nft "
          f"copies {copies:,} (of which the priming's about {primed // 10:,})")
    by_name = {s["name"]: s for s in t["streams"]}
    assert sum(s["duplicated"] for s in by_name.values()) == t["duplicated"], by_name
    assert abs(t["duplicated"] - t["tx"] / 2 / 10) <= 1, t


@pytest.mark.slow
def test_the_search_finds_a_tbf_limiter_and_its_loss_is_what_tbf_dropped(linerate_bin, testbed,
                                                                       tmp_path):
    tst, dut = kernel_device(testbed)
    # 5 Mbit/s of 60-byte frames (64 on the wire with the FCS the veth does not carry):
    # 10,417 frames/s out of d1; the other direction is not limited. (At 20 Mbit/s the kernel
    # device, forwarding both directions on the same two vCPUs as the tester, itself dropped
    # frames below the tbf rate now and then, in its veths' backlogs: the search then rightly
    # found a lower rate, and tbf was no longer the only limit the test assumes.)
    dut.run(["tc", "qdisc", "add", "dev", "d1", "root", "tbf", "rate", "5mbit", "burst",
             "5kb", "latency", "20ms"])
    rep = run_external(linerate_bin, tst, tmp_path, "tbf", "--speed", "1g", "--seconds", "1",
                       "--resolution", "1")
    limit_fps = 5e6 / (60 * 8)
    (row,) = rep["rows"]
    # The same load on both ports: the answer's per-port rate is the limited direction's.
    per_port = row["throughput_fps"] / 2
    # Within the search's 1% resolution either way, plus what tbf's 5 KB burst and its 20 ms
    # queue let through above the rate in a 1 s trial (about 0.8% and 2%).
    # On failure, every trial of the search and the device's own drop counts: a low answer
    # means a trial under the limit lost frames, and these say where.
    why = (per_port, limit_fps, [(round(x["load"], 4), x["tx"], x["rx"], x["lost"],
                                  x["tester_limited"], x.get("behind")) for x in row["trials"]],
           {d: link_stats(dut, d)["tx"]["dropped"] for d in ("d0", "d1")})
    assert 0.95 * limit_fps <= per_port <= 1.04 * limit_fps, why
    assert not row["tester_limited"], row
    qd = json.loads(dut.run(["tc", "-s", "-j", "qdisc", "show", "dev", "d1"]).stdout)
    tbf_drops = sum(q.get("drops", 0) for q in qd if q.get("kind") == "tbf")
    # The device also drops what its veths cannot hand on to the tester's ends (their receive
    # backlog is on the device's CPU here, full while it forwards flat out): each veth counts
    # those as its own transmit drops. (Its receive drops are frames the tester's socket sent
    # into a full backlog: the kernel keeps those in the tester's ring and sends them again,
    # so they are not lost.)
    out_drops = sum(link_stats(dut, d)["tx"]["dropped"] for d in ("d0", "d1"))
    lost = sum(x["lost"] for x in row["trials"]) + priming_lost(rep)
    assert tbf_drops > 0 and lost == tbf_drops + out_drops, (lost, tbf_drops, out_drops)
    print(f"tbf 5 Mbit/s ({limit_fps:,.0f} fps): search answer {per_port:,.0f} fps per port in "
          f"{len(row['trials'])} trials; tester lost {lost:,} in all, tbf dropped {tbf_drops:,} "
          f"+ the veths' transmit drops {out_drops:,}")


@pytest.mark.slow
@pytest.mark.skipif(not two_cpus(), reason="the device needs a CPU of its own to push back")
def test_a_slow_device_pushes_back_on_the_tester_without_false_loss(linerate_bin, testbed,
                                                                   tmp_path):
    tst, dut = kernel_device(testbed)
    rules = ["table inet slow {", " chain fw {",
             "  type filter hook forward priority 0; policy accept;"]
    rules += [f"  ip daddr 203.0.{i // 250}.{i % 250 + 1} udp dport {1000 + i} drop"
              for i in range(2000)]
    rules += [" }", "}"]
    f = tmp_path / "slow.nft"
    f.write_text("\n".join(rules) + "\n")
    dut.run(["nft", "-f", str(f)])
    before = {d: link_stats(tst, d) for d in ("t0", "t1")}
    rep = run_external(linerate_bin, tst, tmp_path, "slow", "--speed", "1g", "--seconds", "1")
    after = {d: link_stats(tst, d) for d in ("t0", "t1")}
    (row,) = rep["rows"]
    ts = row["trials"]
    # 100% of 1 Gbit/s is far beyond 2,000 linear rules: the ring refused most of it (none of
    # that is sent or lost); what went out overran the device, which dropped what its queues
    # could not hold.
    first = ts[0]
    assert first["tx_refused"] > first["tx"] > 0, first
    assert first["tester_limited"] and not first["pass"], first
    # The answer went out whole and lost nothing.
    best = max((x for x in ts if x["pass"]), key=lambda x: x["load"])
    assert (best["tx_refused"], best["tx_unsent"], best["lost"]) == (0, 0, 0), best
    assert row["throughput_fps"] > 0 and not row["tester_limited"], row
    # Every frame the tester counted as sent is on the veths' counters, and nothing else left
    # it: the refused frames never reached the wire.
    sent = sum(after[d]["tx"]["packets"] - before[d]["tx"]["packets"] for d in ("t0", "t1"))
    assert sent == sum(x["tx"] for x in ts) + priming_sent(rep), (sent, ts)
    # What the tester lost is what the device dropped handing frames on towards the tester
    # (each veth counts those as its transmit drops; see the tbf case), and the veths back to
    # the tester carried the rest.
    lost = sum(x["lost"] for x in ts) + priming_lost(rep)
    out_drops = sum(link_stats(dut, d)["tx"]["dropped"] for d in ("d0", "d1"))
    got = sum(after[d]["rx"]["packets"] - before[d]["rx"]["packets"] for d in ("t0", "t1"))
    assert got == sent - lost, (got, sent, lost)
    assert lost == out_drops, (lost, out_drops)
    print(f"2,000 linear rules: first trial at 100%: sent {first['tx']:,}, refused "
          f"{first['tx_refused']:,}, lost {first['lost']:,}; answer {row['throughput_fps']:,.0f} "
          f"fps in {len(ts)} trials; veths carried {sent:,} = the tester's sent; lost in all "
          f"{lost:,} = the device's veths' transmit drops {out_drops:,}")


def test_a_linerate_device_reports_its_drops_and_they_are_the_testers_loss(linerate_bin,
                                                                          testbed, tmp_path):
    """Linerate as the device, with its API given: each trial carries the device's own drop
    counters (as embedded mode's do), and an ACL denying one of the two streams makes exactly
    that stream's frames the loss, every one of them an `AclDenied` drop."""
    tst, dut = testbed.netns("tester"), testbed.netns("dut")
    testbed.veth(tst, "t0", dut, "d0")
    testbed.veth(tst, "t1", dut, "d1")
    for ns, devs in ((tst, ("t0", "t1")), (dut, ("d0", "d1"))):
        ns.sysctl({"net.ipv6.conf.all.disable_ipv6": 1,
                   **{f"net.ipv6.conf.{d}.disable_ipv6": 1 for d in devs}})
    dut.up("d0", "d1")
    cfg = tmp_path / "router.yaml"
    cfg.write_text(f"""\
router: {{ workers: 1 }}
ports:
  - {{ name: p0, driver: af_packet, device: d0 }}
  - {{ name: p1, driver: af_packet, device: d1 }}
interfaces:
  - {{ name: p0, port: p0, mac: "{D_MAC[0]}", ipv4: [198.18.0.1/24], acl-in: A }}
  - {{ name: p1, port: p1, mac: "{D_MAC[1]}", ipv4: [198.18.1.1/24] }}
neighbors:
  - {{ interface: p0, ip: 198.18.0.2, mac: "{T_MAC[0]}" }}
  - {{ interface: p1, ip: 198.18.1.2, mac: "{T_MAC[1]}" }}
acls:
  - {{ name: A, entries: ["10 deny udp src host 198.18.0.2 dst host 198.18.1.2", "20 permit"] }}
""")
    sock, log = tmp_path / "api.sock", tmp_path / "daemon.log"
    proc = dut.popen([str(linerate_bin), "daemon", "--config", str(cfg), "--no-state",
                      "--socket", str(sock)], log=log, name="linerate")
    try:
        wait_until(lambda: sock.exists() or not proc.running, 20, what="the daemon's API socket")
        assert proc.running, log.read_text()
        rep = run_external(linerate_bin, tst, tmp_path, "acl", "--speed", "1g", "--load", "1",
                           "--seconds", "1", "--dut-api", str(sock))
        (t,) = trials(rep)
        by_name = {s["name"]: s for s in t["streams"]}
        denied, allowed = by_name["p0>p1"], by_name["p1>p0"]
        assert denied["rx"] == 0 and denied["lost"] == denied["tx"] > 0, by_name
        assert allowed["lost"] == 0 and allowed["rx"] == allowed["tx"] > 0, by_name
        drops = {d["reason"]: d["frames"] for d in t["dut_drops"]}
        assert drops == {"AclDenied": t["lost"]}, (drops, t["lost"])
        print(f"Linerate + ACL: tester lost {t['lost']:,}; the device counted AclDenied "
              f"{drops['AclDenied']:,}")
        assert "[the device dropped: AclDenied" in rep["_md"]
    finally:
        proc.stop()
