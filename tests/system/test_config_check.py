"""System test: `linerate check` and `linerate run` on configs that must be refused, and `run`'s
syslog file.

The refused configs are the fixtures of crates/control/tests/fixtures/refused (the reproductions
of the hardening issue: configs `check` accepted, or refused without a position). Each must now
exit 1 with every error as `FILE:LINE:COL: FIELD: message`, a final `N error(s)` line that counts
them, and a short stderr. `run` must refuse them the same way, and must never panic.
"""

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "crates" / "control" / "tests" / "fixtures"
REFUSED = sorted(p.name for p in (FIXTURES / "refused").glob("*.yaml"))

ERROR_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<field>[^:\s]+): (?P<msg>.+)$")
COUNT_LINE = re.compile(r"^(?P<n>\d+) errors?; nothing was applied$")

# (file the error is in, line, column, field, part of the message) that each must report.
EXPECTED = {
    "05-overlapping-subnets.yaml": [
        ("05-overlapping-subnets.yaml", 7, 60, "interfaces[1].ipv4[0]", "overlaps `192.0.2.1/24`")],
    "12-huge-numbers.yaml": [
        ("12-huge-numbers.yaml", 1, 20, "router.workers", "`99999999999999999999999999`"),
        ("12-huge-numbers.yaml", 1, 57, "router.buffers", "18446744073709551615 buffers"),
        ("12-huge-numbers.yaml", 12, 24, "limits.ipv4-routes", "`1e30`")],
    "13-empty.yaml": [("13-empty.yaml", 1, 1, "document", "empty")],
    "14-binary-junk.yaml": [("14-binary-junk.yaml", 1, 1, "document", "byte 0x82 is not UTF-8")],
    "22-non-utf8.yaml": [("22-non-utf8.yaml", 4, 14, "ports[1].name", "byte 0xE9 is not UTF-8")],
    "31-bad-route-file-lines.yaml": [
        ("bad.routes", 2, 1, "prefix", "host bits set"),
        ("bad.routes", 3, 1, "prefix", "`banana`"),
        ("bad.routes", 4, 17, "via", "next hop 9.9.9.9")],
    "37-interface-address-network.yaml": [
        ("37-interface-address-network.yaml", 7, 60, "interfaces[1].ipv4[0]", "network address"),
        ("37-interface-address-network.yaml", 7, 77, "interfaces[1].ipv4[1]", "broadcast address")],
    "39-second-document-ignored.yaml": [
        ("39-second-document-ignored.yaml", 12, 1, "document", "second YAML document")],
    "40-duplicate-route-different-target.yaml": [
        ("40-duplicate-route-different-target.yaml", 12, 5, "routes[1]", "already configured at line 11")],
    "41-huge-buffers.yaml": [
        ("41-huge-buffers.yaml", 1, 32, "router.buffers", "100000000 buffers of 9408 bytes")],
    "45-same-subnet-twice-one-interface.yaml": [
        ("45-same-subnet-twice-one-interface.yaml", 7, 77, "interfaces[1].ipv4[1]", "same subnet")],
    "46-interface-ip-is-neighbor-ip.yaml": [
        ("46-interface-ip-is-neighbor-ip.yaml", 9, 5, "neighbors[0]", "address of interface `p1` itself")],
    "47-punt-table.yaml": [
        ("47-punt-table.yaml", 9, 11, "control-plane.punt.bgpp", "`bgpp` is not a punt class"),
        ("47-punt-table.yaml", 10, 11, "control-plane.punt.ospf.rate", "at least 1 frame per second"),
        ("47-punt-table.yaml", 11, 11, "control-plane.punt.lldp.rate", "`rate` is required")],
}


def _run(linerate_bin: Path, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(linerate_bin), *args], capture_output=True, timeout=120, cwd=cwd)


def _check_report(stderr: str, name: str):
    lines = stderr.splitlines()
    assert lines, "no error report"
    count = COUNT_LINE.match(lines[-1])
    assert count, f"last line is not `N error(s); ...`:\n{stderr}"
    errors = [ERROR_LINE.match(ln) for ln in lines[:-1]]
    assert all(errors), f"a line is not FILE:LINE:COL: FIELD: message:\n{stderr}"
    assert int(count["n"]) == len(errors), stderr
    for file, line, col, field, what in EXPECTED[name]:
        hits = [m for m in errors if Path(m["file"]).name == file and int(m["line"]) == line
                and int(m["col"]) == col and m["field"] == field and what in m["msg"]]
        assert hits, f"no {file}:{line}:{col}: {field}: ...{what}... in:\n{stderr}"


def test_every_refused_fixture_has_an_expectation():
    assert set(REFUSED) == set(EXPECTED)


@pytest.mark.parametrize("name", REFUSED)
def test_check_refuses_with_positions(linerate_bin: Path, name: str):
    r = _run(linerate_bin, "check", name, cwd=FIXTURES / "refused")
    stderr = r.stderr.decode()
    assert r.returncode == 1, f"exit {r.returncode}; stdout {r.stdout!r}; stderr:\n{stderr}"
    assert len(r.stderr) < 4096, f"{len(r.stderr)} bytes of stderr"
    _check_report(stderr, name)


@pytest.mark.parametrize("name", REFUSED)
def test_run_refuses_without_a_panic(linerate_bin: Path, name: str):
    r = _run(linerate_bin, "run", name, "--json", cwd=FIXTURES / "refused")
    stderr = r.stderr.decode()
    assert r.returncode == 1, f"exit {r.returncode}; stderr:\n{stderr}"
    assert "panicked" not in stderr, stderr
    _check_report(stderr, name)


def test_check_accepts_the_base_config(linerate_bin: Path):
    r = _run(linerate_bin, "check", "base.yaml", cwd=FIXTURES)
    assert r.returncode == 0, r.stderr.decode()


def test_a_50mb_scalar_is_not_echoed_whole(linerate_bin: Path, tmp_path: Path):
    base = (FIXTURES / "base.yaml").read_text()
    (tmp_path / "big.yaml").write_text(base.replace("workers: 1", 'workers: "' + "x" * 50_000_000 + '"'))
    r = _run(linerate_bin, "check", "big.yaml", cwd=tmp_path)
    assert r.returncode == 1
    assert len(r.stderr) < 1024, f"{len(r.stderr)} bytes of stderr"
    assert "…(50000000 bytes)" in r.stderr.decode()


def test_route_file_errors_are_capped_with_a_count(linerate_bin: Path, tmp_path: Path):
    (tmp_path / "many.routes").write_text("".join(f"10.{i}.0.1/16 via 198.51.100.2\n" for i in range(100)))
    base = (FIXTURES / "base.yaml").read_text()
    (tmp_path / "r.yaml").write_text(base + "route-files:\n  - { path: many.routes }\n")
    r = _run(linerate_bin, "check", "r.yaml", cwd=tmp_path)
    lines = r.stderr.decode().splitlines()
    assert r.returncode == 1
    assert len(lines) == 22, lines
    assert all(ERROR_LINE.match(ln) for ln in lines[:20])
    assert lines[20:] == ["... and 80 more", "100 errors; nothing was applied"]


def _udp_pcap(path: Path, dst: str):
    """One IPv4 UDP frame from 192.0.2.2 to `dst`, into p0's MAC."""
    from scapy.all import IP, UDP, Ether, Raw, wrpcap  # noqa: PLC0415
    f = (Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:01") / IP(src="192.0.2.2", dst=dst)
         / UDP(sport=50001, dport=60001) / Raw(b"x" * 18))
    wrpcap(str(path), [f], linktype=1)


def test_run_writes_acl_log_records_to_the_logging_file(linerate_bin: Path, tmp_path: Path):
    """`logging: file:` is honoured by `run`, not only by `daemon`."""
    _udp_pcap(tmp_path / "in.pcap", "10.1.2.3")
    base = (FIXTURES / "base.yaml").read_text()
    cfg = base.replace('ipv4: [192.0.2.1/24], ipv6: ["2001:db8:1::1/64"] }',
                       'ipv4: [192.0.2.1/24], ipv6: ["2001:db8:1::1/64"], acl-in: A }')
    assert cfg != base
    cfg += ('acls:\n  - { name: A, entries: ["deny udp dst 10.1.2.3/32 log", "permit ip"] }\n'
            "logging: { file: acl.log }\n")
    (tmp_path / "r.yaml").write_text(cfg)
    r = _run(linerate_bin, "run", "r.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    log = (tmp_path / "acl.log").read_text() if (tmp_path / "acl.log").exists() else ""
    records = [ln for ln in log.splitlines() if " ACL_LOG " in ln]
    assert len(records) == 1, f"ACL log file:\n{log}"
    assert "access-list A (10) deny udp 192.0.2.2(50001) -> 10.1.2.3(60001) on p0 in, 1 packet" in records[0]
