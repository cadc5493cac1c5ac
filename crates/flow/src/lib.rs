//! Flow accounting: a per-worker flow cache on the packet path, and the exporter that turns the
//! records it expires into NetFlow v9 or IPFIX (RFC 7011) datagrams for collectors.
