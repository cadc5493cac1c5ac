"""Self-test of the private rsyslogd of rsyslog.py: hand-made RFC 5424 datagrams go in, and
every field rsyslog's RFC 5424 parser decoded comes back out of its JSON lines.

Needs rsyslogd (installed on demand when root, else skipped); not the linerate binary.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from rsyslog import Rsyslog, parse_structured_data, rsyslog_server

# <165> = local4 (20) * 8 + notice (5). The structured data escapes '"', '\' and ']' as RFC 5424
# section 6.3.3 says; the message is UTF-8 without a BOM.
WITH_SD = (
    '<165>1 2026-11-21T17:09:15.123456Z r1.example linerate 4242 LINK_DOWN '
    '[linerate@32473 port="eth0" why="carrier \\"lost\\" at C:\\\\x\\] now" empty=""] '
    "port eth0 is down: \u00e9t\u00e9"
)
# <190> = local7 (23) * 8 + info (6); no structured data, a leap day, and one microsecond.
WITHOUT_SD = "<190>1 2000-02-29T00:00:00.000001Z r2 linerate 7 CONFIG_COMMIT - committed 3 changes"


@pytest.fixture
def rsyslog(tmp_path: Path):
    with rsyslog_server(tmp_path) as srv:
        yield srv


def test_rfc5424_fields_are_decoded(rsyslog: Rsyslog) -> None:
    rsyslog.send(WITH_SD)
    rsyslog.send(WITHOUT_SD)
    recs = rsyslog.wait_for(lambda recs: len(recs) >= 2)
    assert len(recs) == 2, recs
    a, b = sorted(recs, key=lambda r: r["pri"])

    assert a == {
        "pri": 165,
        "facility": 20,
        "severity": 5,
        "timestamp": "2026-11-21T17:09:15.123456Z",
        "hostname": "r1.example",
        "app-name": "linerate",
        "procid": "4242",
        "msgid": "LINK_DOWN",
        "structured-data": (
            '[linerate@32473 port="eth0" why="carrier \\"lost\\" at C:\\\\x\\] now" empty=""]'
        ),
        "msg": "port eth0 is down: \u00e9t\u00e9",
        "protocol-version": "1",
        "rawmsg": WITH_SD,
    }
    assert parse_structured_data(a["structured-data"]) == [
        (
            "linerate@32473",
            [("port", "eth0"), ("why", 'carrier "lost" at C:\\x] now'), ("empty", "")],
        )
    ]

    assert b == {
        "pri": 190,
        "facility": 23,
        "severity": 6,
        "timestamp": "2000-02-29T00:00:00.000001Z",
        "hostname": "r2",
        "app-name": "linerate",
        "procid": "7",
        "msgid": "CONFIG_COMMIT",
        "structured-data": "-",
        "msg": "committed 3 changes",
        "protocol-version": "1",
        "rawmsg": WITHOUT_SD,
    }
    assert parse_structured_data(b["structured-data"]) == []


def test_control_characters_are_kept(rsyslog: Rsyslog) -> None:
    sent = "<190>1 2026-01-01T00:00:00.000000Z h linerate 1 M - two\nlines\tand a tab"
    rsyslog.send(sent)
    (rec,) = rsyslog.wait_for(lambda recs: len(recs) >= 1)
    assert rec["msg"] == "two\nlines\tand a tab"
    assert rec["rawmsg"] == sent


def test_strict_mode_drops_non_rfc5424(rsyslog: Rsyslog) -> None:
    # An RFC 3164 datagram is refused by the only parser configured; the next RFC 5424 one is
    # still received, so the first was dropped, not delayed.
    rsyslog.send("<13>Nov 21 17:09:15 oldhost tag: legacy format")
    rsyslog.send(WITHOUT_SD)
    recs = rsyslog.wait_for(lambda recs: any(r["msgid"] == "CONFIG_COMMIT" for r in recs))
    assert [r["rawmsg"] for r in recs] == [WITHOUT_SD]
    assert "could not be processed by any parser" in rsyslog.internal_path.read_text()


def test_lenient_mode_falls_back_to_rfc3164(tmp_path: Path) -> None:
    with rsyslog_server(tmp_path, strict=False) as srv:
        srv.send("<13>Nov 21 17:09:15 oldhost tag: legacy format")
        (rec,) = srv.wait_for(lambda recs: len(recs) >= 1)
    # Not RFC 5424: no MSGID or structured data, and rsyslog keeps the space after "tag:".
    assert (rec["pri"], rec["hostname"], rec["app-name"]) == (13, "oldhost", "tag")
    assert (rec["msgid"], rec["structured-data"], rec["msg"]) == ("-", "-", " legacy format")
    assert rec["protocol-version"] == "0"


def test_isolation_and_cleanup(tmp_path: Path) -> None:
    srv = Rsyslog(tmp_path)
    with srv:
        pid = srv.proc.pid
        assert srv.running and srv.port > 0
        conf = srv.conf_path.read_text()
        # Only imudp, bound to loopback; rsyslogd's own messages stay in the test's directory.
        assert 'module(load="imudp")' in conf
        assert "imuxsock" not in conf and "imklog" not in conf
        assert 'processInternalMessages="on"' in conf
        assert f'port="{srv.port}"' in conf and 'address="127.0.0.1"' in conf
        assert int(srv.pid_path.read_text()) == pid
        # The port is taken by the daemon.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            with pytest.raises(OSError):
                s.bind(("127.0.0.1", srv.port))
    assert not srv.running
    assert not Path(f"/proc/{pid}").exists()  # stopped and reaped
    internal = srv.internal_path.read_text()
    assert "start" in internal and "exiting on signal 15" in internal
    srv.stop()  # a second stop is harmless


def test_wait_for_times_out_with_diagnostics(rsyslog: Rsyslog) -> None:
    with pytest.raises(TimeoutError, match="0 received"):
        rsyslog.wait_for(lambda recs: len(recs) > 0, timeout=0.3)


def test_parse_structured_data() -> None:
    assert parse_structured_data('[a@1 x="1"][b y="\\]" z="\\q"]') == [
        ("a@1", [("x", "1")]),
        ("b", [("y", "]"), ("z", "\\q")]),
    ]
    with pytest.raises(ValueError):
        parse_structured_data("[oops")


def test_records_are_json_lines(rsyslog: Rsyslog) -> None:
    for i in range(5):
        rsyslog.send(f"<134>1 2026-01-01T00:00:0{i}.000000Z h linerate 1 N{i} - m{i}")
    recs = rsyslog.wait_for(lambda recs: len(recs) >= 5)
    assert sorted(r["msgid"] for r in recs) == [f"N{i}" for i in range(5)]
    lines = rsyslog.out_path.read_text().splitlines()
    assert len(lines) == 5 and all(isinstance(json.loads(line), dict) for line in lines)
