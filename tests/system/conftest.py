"""Shared fixtures for Linerate's system tests.

These tests drive the real `linerate` binary; they build nothing. The binary is
`target/release/linerate` under the repository root, or whatever LINERATE_BIN names.

If the binary is missing the tests are skipped, unless LINERATE_REQUIRE_BIN is set (CI sets it),
in which case a missing binary is a failure.

Python requirements: `pip install -r tests/system/requirements.txt` (pytest, scapy).
tshark is installed on demand from Debian's packages when running as root.

The test bed (tests/system/testbed/, see its README.md) adds the fixtures `testbed` (a Testbed:
namespaces, veths, FRR, BIRD, captures, all removed when the test ends), `frr_tools` and
`bird_tools`. Its tools (frr, bird2, tshark, nftables, iproute2, procps, iputils-ping) are
installed from Debian's packages in one go when missing and running as root; otherwise the test
is skipped, or fails when LINERATE_REQUIRE_BIN or CI is set. A failing test's report carries the
logs of the daemons it started. `@pytest.mark.slow` marks tests that take more than a few
seconds each (deselect with `-m "not slow"`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testbed import Testbed, require_root, require_tools, sweep_stale
from testbed.frr import FRR_LIB

REPO_ROOT = Path(__file__).resolve().parents[2]


def _truthy(value: str | None) -> bool:
    return bool(value) and value.strip().lower() not in ("0", "false", "no", "off")


def binary_required() -> bool:
    return _truthy(os.environ.get("LINERATE_REQUIRE_BIN"))


def linerate_bin_path() -> Path:
    env = os.environ.get("LINERATE_BIN")
    if env:
        p = Path(env)
        return p if p.is_absolute() else (REPO_ROOT / p)
    return REPO_ROOT / "target" / "release" / "linerate"


@pytest.fixture(scope="session")
def linerate_bin() -> Path:
    """Path of the `linerate` binary; skips (or fails under LINERATE_REQUIRE_BIN) if missing."""
    p = linerate_bin_path()
    if not (p.is_file() and os.access(p, os.X_OK)):
        msg = (
            f"linerate binary not found or not executable at {p} "
            "(build it with `cargo build --release -p linerate`, or set LINERATE_BIN)"
        )
        if binary_required():
            pytest.fail(msg + "; LINERATE_REQUIRE_BIN is set, so this is a failure", pytrace=False)
        pytest.skip(msg)
    return p


def ensure_tshark() -> str:
    """Returns the path of tshark, installing it from Debian's packages if missing.

    Installing needs root; without root and without tshark, the calling test is skipped.
    """
    found = shutil.which("tshark")
    if found:
        return found
    if os.geteuid() != 0:
        pytest.skip(
            "tshark is not installed and this user is not root, so it cannot be installed "
            "(apt-get install tshark)"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    steps = [
        ["apt-get", "update"],
        ["sh", "-c",
         "echo 'wireshark-common wireshark-common/install-setuid boolean false' "
         "| debconf-set-selections"],
        ["apt-get", "install", "-y", "tshark"],
    ]
    for cmd in steps:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
        if r.returncode != 0:
            pytest.fail(
                f"installing tshark failed at {' '.join(cmd)!r} (exit {r.returncode}):\n"
                f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}",
                pytrace=False,
            )
    found = shutil.which("tshark")
    if not found:
        pytest.fail("apt-get install tshark succeeded but tshark is not on PATH", pytrace=False)
    return found


@pytest.fixture(scope="session")
def tshark() -> str:
    return ensure_tshark()


# -- the test bed (tests/system/testbed/) ------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: a test that takes more than a few seconds (deselect with -m 'not slow')"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[type-arg]
    """Adds the logs of the test bed's daemons to the report of a test that failed (they are
    still running then: the fixture's teardown comes later)."""
    outcome = yield
    rep = outcome.get_result()
    tb = getattr(item, "_lrt_testbed", None)
    if tb is not None and rep.when in ("setup", "call") and rep.failed:
        try:
            text = tb.diagnostics()
        except Exception as e:  # noqa: BLE001 - a report must not fail
            text = f"(could not collect the test bed's logs: {e!r})"
        if text:
            rep.sections.append(("test bed logs", text))


@pytest.fixture(scope="session")
def testbed_session() -> None:
    """Checks once per run that the test bed can work (root, iproute2 and friends) and removes
    what killed earlier runs left (namespaces and run directories of dead pids)."""
    require_root()
    require_tools("ip", "nsenter", "sysctl", "ping")
    sweep_stale()


@pytest.fixture
def testbed(request: pytest.FixtureRequest, tmp_path: Path, testbed_session: None):
    """A Testbed for one test: everything it made is stopped and deleted when the test ends,
    whether it passed or not; its run directory (configs, logs, pcaps) is copied to
    tmp_path/testbed first."""
    tb = Testbed(tmp_path)
    request.node._lrt_testbed = tb
    try:
        yield tb
    finally:
        tb.close()


@pytest.fixture(scope="session")
def frr_tools() -> dict[str, str]:
    """FRR's daemons and vtysh (installed if missing; skip or fail otherwise)."""
    return require_tools(*(f"{FRR_LIB}/{d}" for d in ("zebra", "bgpd", "ospfd", "ospf6d",
                                                       "staticd")), "vtysh")


@pytest.fixture(scope="session")
def bird_tools() -> dict[str, str]:
    """BIRD 2's bird and birdc (installed if missing; skip or fail otherwise)."""
    return require_tools("bird", "birdc")
