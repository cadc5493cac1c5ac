//! What the API takes: request bodies (JSON) and query parameters, typed both ways so the CLI
//! builds exactly what the server parses. The router checks their meaning (prefixes, filters,
//! ranges); here they are only shapes and defaults.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Percent-encodes a query value or path segment (prefixes carry '/' and ':').
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An address family, as queries and views name it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    #[default]
    Ipv4,
    Ipv6,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
        }
    }
}

/// `GET /v1/routes`: the whole table, one prefix (with `longer`: and everything inside it), or
/// the longest match of an address.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoutesQuery {
    #[serde(default)]
    pub vrf: Option<String>,
    #[serde(default)]
    pub family: Family,
    /// An address (longest match) or a prefix (exact).
    #[serde(default)]
    pub prefix: Option<String>,
    #[serde(default)]
    pub longer: bool,
    /// At most this many routes in the answer (None: all).
    #[serde(default)]
    pub limit: Option<usize>,
}

impl RoutesQuery {
    /// The request path with its query string.
    pub fn path(&self) -> String {
        let mut q = format!(
            "/v1/routes?family={}&longer={}",
            self.family.name(),
            self.longer
        );
        if let Some(p) = &self.prefix {
            q += &format!("&prefix={}", enc(p));
        }
        if let Some(v) = &self.vrf {
            q += &format!("&vrf={}", enc(v));
        }
        if let Some(l) = self.limit {
            q += &format!("&limit={l}");
        }
        q
    }
}

/// `DELETE /v1/routes?prefix=P[&vrf=V]`: a route added through the API.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouteDelete {
    #[serde(default)]
    pub vrf: Option<String>,
    pub prefix: String,
}

impl RouteDelete {
    pub fn path(&self) -> String {
        let mut q = format!("/v1/routes?prefix={}", enc(&self.prefix));
        if let Some(v) = &self.vrf {
            q += &format!("&vrf={}", enc(v));
        }
        q
    }
}

/// `GET /v1/logging?n=N`: the latest records.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogQuery {
    /// How many (None: 50).
    #[serde(default)]
    pub n: Option<usize>,
}

impl LogQuery {
    pub fn path(&self) -> String {
        match self.n {
            Some(n) => format!("/v1/logging?n={n}"),
            None => "/v1/logging".into(),
        }
    }
}

/// `GET /v1/igmp-snooping?bridge=B`: one bridge's snooped groups (all when None).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SnoopQuery {
    #[serde(default)]
    pub bridge: Option<String>,
}

impl SnoopQuery {
    pub fn path(&self) -> String {
        match &self.bridge {
            Some(b) => format!("/v1/igmp-snooping?bridge={}", enc(b)),
            None => "/v1/igmp-snooping".into(),
        }
    }
}

/// `GET /v1/gtp/contexts?imsi=I&apn=A&ip=ADDR&limit=N`: the PDP contexts of one IMSI, APN or
/// UE address (all when none is given), at most `limit` (None: 1,000; 0: all).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GtpContextQuery {
    #[serde(default)]
    pub imsi: Option<String>,
    #[serde(default)]
    pub apn: Option<String>,
    #[serde(default)]
    pub ip: Option<String>,
    #[serde(default)]
    pub limit: Option<usize>,
}

impl GtpContextQuery {
    pub fn path(&self) -> String {
        let mut q = Vec::new();
        for (k, v) in [("imsi", &self.imsi), ("apn", &self.apn), ("ip", &self.ip)] {
            if let Some(v) = v {
                q.push(format!("{k}={}", enc(v)));
            }
        }
        if let Some(l) = self.limit {
            q.push(format!("limit={l}"));
        }
        if q.is_empty() {
            "/v1/gtp/contexts".into()
        } else {
            format!("/v1/gtp/contexts?{}", q.join("&"))
        }
    }
}

/// `GET /v1/mroutes?family=ipv4|ipv6&vrf=V`: the multicast FIB's routes of one family (IPv4
/// when None), of one VRF (all when None).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MrouteQuery {
    #[serde(default)]
    pub family: Option<String>,
    #[serde(default)]
    pub vrf: Option<String>,
}

impl MrouteQuery {
    pub fn path(&self) -> String {
        let mut q = Vec::new();
        if let Some(f) = &self.family {
            q.push(format!("family={}", enc(f)));
        }
        if let Some(v) = &self.vrf {
            q.push(format!("vrf={}", enc(v)));
        }
        if q.is_empty() {
            "/v1/mroutes".into()
        } else {
            format!("/v1/mroutes?{}", q.join("&"))
        }
    }
}

/// `GET /v1/mac-table?bridge=B&interface=I&limit=N`: the entries of one bridge and/or one
/// member (all when neither is given), at most `limit` of them (None: 1,000; 0: all). The same
/// fields are `POST /v1/mac-table/clear`'s body: the dynamic entries it removes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MacQuery {
    #[serde(default)]
    pub bridge: Option<String>,
    #[serde(default)]
    pub interface: Option<String>,
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `GET /v1/bgp/vpn?limit=N`: at most `limit` VPN routes (None: 1,000; 0: all).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BgpVpnQuery {
    #[serde(default)]
    pub limit: Option<usize>,
}

impl BgpVpnQuery {
    pub fn path(&self) -> String {
        match self.limit {
            Some(n) => format!("/v1/bgp/vpn?limit={n}"),
            None => "/v1/bgp/vpn".into(),
        }
    }
}

impl MacQuery {
    pub fn path(&self) -> String {
        let mut q = Vec::new();
        if let Some(b) = &self.bridge {
            q.push(format!("bridge={}", enc(b)));
        }
        if let Some(i) = &self.interface {
            q.push(format!("interface={}", enc(i)));
        }
        if let Some(n) = self.limit {
            q.push(format!("limit={n}"));
        }
        if q.is_empty() {
            "/v1/mac-table".into()
        } else {
            format!("/v1/mac-table?{}", q.join("&"))
        }
    }
}

/// `GET /v1/acl[?name=NAME]`: every list, or one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AclQuery {
    #[serde(default)]
    pub name: Option<String>,
}

impl AclQuery {
    pub fn path(&self) -> String {
        match &self.name {
            Some(n) => format!("/v1/acl?name={}", enc(n)),
            None => "/v1/acl".into(),
        }
    }
}

/// `POST /v1/routes`: a route to add (exactly one of `via`, `blackhole`, `reject`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteRequest {
    #[serde(default)]
    pub vrf: Option<String>,
    pub prefix: String,
    /// Next hops (configured neighbours); more than one is ECMP.
    #[serde(default)]
    pub via: Vec<String>,
    #[serde(default)]
    pub blackhole: bool,
    #[serde(default)]
    pub reject: bool,
}

/// `POST /v1/capture`: what to capture; the answer is the capture file itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaptureRequest {
    /// A port name; None: every port.
    #[serde(default)]
    pub port: Option<String>,
    /// `rx`, `tx` or `both` (the default), for the port points.
    #[serde(default)]
    pub direction: Option<String>,
    /// Capture a node's output instead of (or besides) the port: `ethernet-input`,
    /// `ip4-forward`, `ip6-forward`, `slow-path`.
    #[serde(default)]
    pub node: Option<String>,
    /// Capture dropped frames (with their reason).
    #[serde(default)]
    pub drops: bool,
    #[serde(default)]
    pub filter: String,
    #[serde(default = "default_count")]
    pub count: u64,
    #[serde(default = "default_snaplen")]
    pub snaplen: usize,
    /// Give up waiting for `count` frames after this long and return what was captured.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// The file format: `pcap` (the default) or `pcapng`.
    #[serde(default)]
    pub format: Option<String>,
}

impl Default for CaptureRequest {
    fn default() -> Self {
        CaptureRequest {
            port: None,
            direction: None,
            node: None,
            drops: false,
            filter: String::new(),
            count: default_count(),
            snaplen: default_snaplen(),
            timeout_ms: default_timeout(),
            format: None,
        }
    }
}

fn default_count() -> u64 {
    100
}
fn default_snaplen() -> usize {
    65535
}
fn default_timeout() -> u64 {
    10_000
}
fn default_trace_count() -> u32 {
    10
}

/// `POST /v1/trace`: what to trace; the answer is a list of [`crate::views::TraceView`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceRequest {
    #[serde(default)]
    pub port: Option<String>,
    #[serde(default)]
    pub filter: String,
    #[serde(default = "default_trace_count")]
    pub count: u32,
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
}

impl Default for TraceRequest {
    fn default() -> Self {
        TraceRequest {
            port: None,
            filter: String::new(),
            count: default_trace_count(),
            timeout_ms: default_timeout(),
        }
    }
}

/// How a config is applied.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ApplyOptions {
    /// A note kept in the history.
    #[serde(default)]
    pub comment: String,
    /// Check and compute the difference only; change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Roll back by itself after this many seconds unless confirmed.
    #[serde(default)]
    pub confirm_seconds: Option<u64>,
}

/// `POST /v1/config/apply`: a whole config; the answer is a [`crate::views::ApplyOutcome`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApplyRequest {
    pub text: String,
    /// The path the text was read from (relative paths in it resolve against its folder).
    pub source: PathBuf,
    #[serde(flatten)]
    pub opts: ApplyOptions,
}

/// `POST /v1/acl/NAME/entries`: one entry in the config's syntax (`25 deny udp ... log`); the
/// answer is its sequence number.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AclEntryRequest {
    pub entry: String,
}

/// `POST /v1/workers`: one more worker, on this core if given; the answer is a
/// [`crate::views::WorkerAdded`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerRequest {
    #[serde(default)]
    pub core: Option<usize>,
}

/// `POST /v1/logical-routers/NAME/upgrade` (the supervisor's API): run the LR on this binary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UpgradeRequest {
    pub binary: String,
    /// Stop the running process, then start the new binary (not hitless).
    #[serde(default)]
    pub cold: bool,
}

/// `lr restart`: hitless unless `cold`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RestartRequest {
    #[serde(default)]
    pub cold: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_routes_query_makes_the_path_the_server_parses_back() {
        let q = RoutesQuery {
            vrf: Some("blue red".into()),
            family: Family::Ipv6,
            prefix: Some("2001:db8::/32".into()),
            longer: true,
            limit: Some(7),
        };
        assert_eq!(
            q.path(),
            "/v1/routes?family=ipv6&longer=true&prefix=2001%3Adb8%3A%3A%2F32&vrf=blue%20red&limit=7"
        );
    }

    #[test]
    fn bodies_left_out_take_the_defaults_the_cli_documents() {
        let c: CaptureRequest = serde_json::from_str("{}").unwrap();
        assert_eq!(c, CaptureRequest::default());
        assert_eq!((c.count, c.snaplen, c.timeout_ms), (100, 65535, 10_000));
        let t: TraceRequest = serde_json::from_str("{}").unwrap();
        assert_eq!(t, TraceRequest::default());
        let a: ApplyRequest =
            serde_json::from_str(r#"{"text":"x","source":"/a","dry_run":true}"#).unwrap();
        assert!(a.opts.dry_run && a.opts.confirm_seconds.is_none());
        assert_eq!(
            serde_json::from_value::<ApplyRequest>(serde_json::to_value(&a).unwrap()).unwrap(),
            a
        );
    }
}
