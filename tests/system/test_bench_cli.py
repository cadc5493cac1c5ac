"""The tester's command line: `linerate bench run` and `linerate bench scenario`, as a user runs
them, checked through the files they write (JSON, Markdown, SVG) and their exit status.

Trials are short (CI scale); the assertions are about what was measured (frames through, no loss
at the passing load, every stream received where it was sent), never about speed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROUTER = """\
router: { workers: 1 }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [198.18.0.1/24], ipv6: ["2001:db8::1/64"] }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.18.1.1/24], ipv6: ["2001:db8:0:1::1/64"] }
  - { name: p2, port: p2, mac: "02:00:00:00:02:01", ipv4: [198.18.2.1/24] }
neighbors:
  - { interface: p0, ip: 198.18.0.2, mac: "02:00:00:00:00:02" }
  - { interface: p0, ip: "2001:db8::2", mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 198.18.1.2, mac: "02:00:00:00:01:02" }
  - { interface: p1, ip: "2001:db8:0:1::2", mac: "02:00:00:00:01:02" }
  - { interface: p2, ip: 198.18.2.2, mac: "02:00:00:00:02:02" }
routes:
  - { prefix: 10.1.0.0/16, via: 198.18.1.2 }
"""

STREAMS = """\
speeds: { default: 100m }
streams:
  - name: to-customers
    from: p0
    to: p1
    ipv4: { src: 198.18.0.2, dst: 10.1.0.1 }
    vary:
      - { field: dst-ip, count: 500 }
      - { field: src-port, count: 20, random: true }
  - { name: v6-back, from: p1, to: p0, ipv6: { src: "2001:db8:0:1::2", dst: "2001:db8::2" }, udp: none }
"""


def run(bin_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(bin_path), *args], capture_output=True, text=True, timeout=300
    )


def test_streams_file_run_reports_every_stream(linerate_bin, tmp_path):
    (tmp_path / "router.yaml").write_text(ROUTER)
    (tmp_path / "streams.yaml").write_text(STREAMS)
    out = tmp_path / "out"
    p = run(
        linerate_bin, "bench", "run", "--router", str(tmp_path / "router.yaml"),
        "--streams", str(tmp_path / "streams.yaml"), "--sizes", "128 imix",
        "--seconds", "0.3", "--resolution", "5", "--out", str(out), "--quiet",
    )
    assert p.returncode == 0, p.stderr
    rep = json.loads((out / "custom.json").read_text())
    assert [r["sizes"] for r in rep["rows"]] == ["128", "IMIX"]
    assert rep["flows"] == 500 * 20 + 1
    for row in rep["rows"]:
        best = [t for t in row["trials"] if t["pass"]]
        assert best, row
        t = max(best, key=lambda t: t["load"])
        assert t["rx"] > 1000 and t["lost"] == 0 and t["misdelivered"] == 0
        assert t["latency"]["min_ns"] > 0
        # 100 Mbit/s nominal on two ports: at 100% load, 84,459 128-byte frames/s each.
        assert t["offered_fps"] <= 2 * 84_460 * t["load"] + 1
    assert (out / "custom.svg").read_text().startswith("<svg")
    assert "| 128 |" in (out / "custom.md").read_text()


def test_a_bad_streams_file_names_its_mistakes_and_runs_nothing(linerate_bin, tmp_path):
    (tmp_path / "router.yaml").write_text(ROUTER)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "streams:\n"
        "  - { from: p0, to: p7, ipv4: { src: 198.18.0.2, dst: 10.1.0.1 } }\n"
        "  - { from: p0, to: p1, ipv4: { src: 198.18.0.2, dst: 10.1.0.1 }, vary: [ { field: dst-ip } ] }\n"
    )
    out = tmp_path / "out"
    p = run(
        linerate_bin, "bench", "run", "--router", str(tmp_path / "router.yaml"),
        "--streams", str(bad), "--seconds", "0.1", "--out", str(out),
    )
    assert p.returncode != 0
    assert f"{bad}:2:" in p.stderr and "streams[0].to: no mem port" in p.stderr
    assert f"{bad}:3:" in p.stderr and "streams[1].vary[0].count" in p.stderr
    assert not out.exists(), "nothing ran, nothing was written"


def test_a_seed_scenario_runs_at_ci_scale(linerate_bin, tmp_path):
    p = run(linerate_bin, "bench", "scenario", "--list")
    assert p.returncode == 0 and "GR-3" in p.stdout and "XR-4" in p.stdout
    out = tmp_path / "gr2"
    p = run(
        linerate_bin, "bench", "scenario", "GR-2", "--max-streams", "2",
        "--seconds", "0.2", "--resolution", "5", "--out", str(out), "--quiet",
    )
    assert p.returncode == 0, p.stderr
    assert "| streams | seed (fps) |" in p.stdout
    rep = json.loads((out / "gr-2.json").read_text())
    assert rep["scenario"] == "GR-2"
    assert [r["key"] for r in rep["rows"]] == ["1", "2"]
    assert rep["method"]["loss_tolerance"] == 0.02
    for r in rep["rows"]:
        assert r["throughput_fps"] > 0
    assert rep["rows"][0]["seed_fps"] == 529.54e6 / (1518 * 8)
    p = run(linerate_bin, "bench", "scenario", "ZZ-9")
    assert p.returncode != 0 and "no scenario" in p.stderr


def test_me15_hot_swap_logs_each_change_and_loses_nothing_elsewhere(linerate_bin, tmp_path):
    """ME-15 at CI scale: a port out and back, a worker added and the first removed, a config
    reload, all under IPv6 traffic: each change leaves its syslog record, the streams that do not
    use the removed port lose nothing, and the ones through it do lose (it really was out)."""
    out = tmp_path / "out"
    p = run(linerate_bin, "bench", "scenario", "ME-15", "--scale", "0.02", "--seconds", "3",
            "--quiet", "--out", str(out))
    assert p.returncode == 0, p.stderr
    h = json.loads((out / "me-15.json").read_text())["hot_swap"]
    assert [c["msgid"] for c in h["changes"]] == [
        "PORT_REMOVED", "PORT_INSERTED", "WORKER_ADDED", "WORKER_REMOVED", "CONFIG_COMMIT"]
    assert all(c["logged"] and c["error"] is None for c in h["changes"]), h["changes"]
    assert h["others"]["tx"] > 0 and h["others"]["lost"] == 0, h["others"]
    assert h["others"]["rx"] == h["others"]["tx"]
    assert 0 < h["involved"]["lost"] < h["involved"]["tx"], h["involved"]
    assert h["passed"] is True
    assert "PASS" in (out / "me-15.md").read_text()


def test_management_storm_trial_reports_requests_and_loss(linerate_bin, tmp_path):
    """--mgmt-storm: after the search, a trial at the load found while a client drives the real
    API socket with reads and route changes; the report says how many requests were made and
    what forwarding lost (a count, not a speed: CI machines differ)."""
    (tmp_path / "router.yaml").write_text(ROUTER)
    out = tmp_path / "out"
    p = run(linerate_bin, "bench", "run", "--router", str(tmp_path / "router.yaml"),
            "--pattern", "pair", "--speed", "100m", "--sizes", "256", "--seconds", "1",
            "--mgmt-storm", "200", "--quiet", "--out", str(out))
    assert p.returncode == 0, p.stderr
    r = json.loads((out / "custom.json").read_text())
    (st,) = r["mgmt_storm"]
    s = st["storm"]
    assert s["reads"] > 20 and s["route_changes"] > 2, s
    assert s["errors"] == 0, s
    assert st["trial"]["tx"] > 0
    assert "Under management load" in (out / "custom.md").read_text()


def test_xr5_denies_one_flow_logs_it_and_passes_the_rest(linerate_bin, tmp_path):
    """XR-5 at CI scale (50-entry lists instead of 5,000): the searches without and with the
    ACLs and with logging all pass traffic; the flow named by the last IPv4 DENY loses every
    frame (and the entry counts each one) while every other stream loses none; the router's log
    names the flow as the report's example does."""
    out = tmp_path / "out"
    p = run(linerate_bin, "bench", "scenario", "XR-5", "--scale", "0.01", "--seconds", "0.5",
            "--resolution", "5", "--quiet", "--out", str(out))
    assert p.returncode == 0, p.stderr
    sv = json.loads((out / "xr-5.json").read_text())["services"]
    assert sv["kind"] == "acl" and sv["entries_per_list"] == 51
    assert [r["label"].split(" ")[0] for r in sv["runs"]] == ["no", "ACL", "ACL"]
    assert all(r["fps"] > 0 for r in sv["runs"]), sv["runs"]
    d = sv["denied"]
    assert d["tx"] > 0 and d["rx"] == 0, d
    assert d["entry_hits"] == d["tx"], d
    assert d["others_tx"] > 0 and d["others_lost"] == 0, d
    assert d["passed"] is True
    log = sv["log"]
    assert log["passed"] is True, log
    assert log["record"].startswith("access-list IPV4_Test (500) deny udp 25.0.1.1(1025) -> 24.0.1.1(5000)")
    md = (out / "xr-5.md").read_text()
    assert "100% dropped" in md and "zero loss" in md
    assert "(2) Denied flow" in md and "Result: PASS" in md.split("(3) Logging")[0]


def test_me1s_services_on_count_every_frame_and_export_flows(linerate_bin, tmp_path):
    """ME-1S at CI scale: the ACL's final permit and the QoS class each counted exactly the frames
    the router received with the services on, no other entry matched, and NetFlow v9 created
    flows and exported records to the tester's collector socket."""
    out = tmp_path / "out"
    p = run(linerate_bin, "bench", "scenario", "ME-1S", "--scale", "0.01", "--sizes", "1518",
            "--seconds", "0.3", "--resolution", "5", "--quiet", "--out", str(out))
    assert p.returncode == 0, p.stderr
    rep = json.loads((out / "me-1s.json").read_text())
    assert [r["key"] for r in rep["rows"]] == ["1518 off", "1518 on"]
    sv = rep["services"]
    assert sv["kind"] == "on_off" and sv["acl_lines"] == 100 and sv["qos_lines"] == 10
    assert sv["router_rx"] > 10_000
    assert sv["permit_hits"] == sv["router_rx"] and sv["other_hits"] == 0, sv
    assert sv["qos_class_packets"] == sv["router_rx"], sv
    f = sv["flows"]
    assert f["created"] > 0 and f["records_exported"] > 0 and f["datagrams_sent"] > 0, f
    assert sv["offered_flows"] > 0 and f["created"] >= sv["offered_flows"], sv
    assert sv["flows_match"] is True
    assert f["collector_datagrams"] > 0 and f["send_errors"] == 0, f
    assert all(r["fps"] > 0 for r in sv["on"] + sv["off"])
    assert sv["passed"] is True
    assert "| 1518 |" in (out / "me-1s.md").read_text()


def test_qos1_policers_meter_within_one_percent(linerate_bin, tmp_path):
    """QOS-1: a two-rate and a single-rate policer metering streams offered above their rates:
    conformed against CIR, conformed + exceeded against PIR, violated against the rest, each
    within 1%; the tester received exactly the conformed and exceeded frames."""
    out = tmp_path / "out"
    p = run(linerate_bin, "bench", "scenario", "QOS-1", "--seconds", "3", "--quiet",
            "--out", str(out))
    assert p.returncode == 0, p.stderr
    sv = json.loads((out / "qos-1.json").read_text())["services"]
    assert sv["kind"] == "policer" and len(sv["checks"]) == 2
    for c in sv["checks"]:
        for k in ("conform_error_pct", "conform_exceed_error_pct", "violate_error_pct"):
            assert abs(c[k]) <= 1.0, (k, c)
        assert c["rx_frames"] == c["conformed"][0] + c["exceeded"][0], c
        # Everything the policer metered came from the tester (a frame refused by a full
        # receive ring during a stall never reaches it, and is counted apart).
        assert 0 < c["metered_bytes"] <= c["tester_l3_bytes"], c
        assert c["unmetered_frames"] * 494 == c["tester_l3_bytes"] - c["metered_bytes"], c
        assert c["violated"][0] > 0 and c["passed"] is True
    assert sv["passed"] is True
    assert "Result: PASS" in (out / "qos-1.md").read_text()
