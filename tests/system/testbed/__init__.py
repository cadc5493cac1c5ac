"""Linerate's test bed for system tests with real peers: network namespaces joined by veths,
FRR and BIRD instances per namespace, tshark captures and an FPM listener, all removed when the
test ends (see README.md beside this file).

The pytest fixtures are in tests/system/conftest.py: `testbed` (a Testbed), `frr_tools`,
`bird_tools`.
"""

from .bird import BgpSession, Bird, BirdConfig, prefixes
from .capture import Capture, read_fields
from .fpm import FpmListener, NlRoute, decode_route, netlink_messages, split_frames
from .frr import Frr, bgp_config, ospf6_config, ospf_config, static_config, zebra_config
from .install import PACKAGES, ensure_packages, require_root, require_tools, skip_or_fail
from .netns import (
    Netns,
    Process,
    RouteMonitor,
    Testbed,
    Veth,
    list_netns,
    parse_route_event,
    sweep_stale,
    wait_until,
)

__all__ = [
    "BgpSession", "Bird", "BirdConfig", "Capture", "FpmListener", "Frr", "Netns", "NlRoute",
    "PACKAGES", "Process", "RouteMonitor", "Testbed", "Veth", "bgp_config", "decode_route",
    "ensure_packages", "list_netns", "netlink_messages", "ospf6_config", "ospf_config",
    "parse_route_event", "prefixes", "read_fields", "require_root", "require_tools",
    "skip_or_fail", "split_frames", "static_config", "sweep_stale", "wait_until", "zebra_config",
]
