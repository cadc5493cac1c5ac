//! QoS re-marking of DSCP (IPv4 with an incremental checksum update, IPv6 traffic class) and 802.1p.
