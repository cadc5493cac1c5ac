//! The CLI as a pure client of the runtime API: each command is one request to the router's
//! socket, printed as router CLIs print it (or as JSON with `--json`).

use std::io::Write;
use std::path::PathBuf;

use api::{Client, Endpoint, Response};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

/// Where the router's API is (every client command takes these).
#[derive(Args, Clone)]
pub struct ApiArgs {
    /// The router's API socket.
    #[arg(long, global = true, env = "LINERATE_SOCKET", default_value = api::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Talk to the API on TCP (HOST:PORT) instead of the socket; needs --token-file.
    #[arg(long, global = true)]
    pub api: Option<String>,
    /// File holding the bearer token for --api.
    #[arg(long, global = true)]
    pub token_file: Option<PathBuf>,
}

impl ApiArgs {
    pub fn client(&self) -> Result<Client, String> {
        let ep = match &self.api {
            Some(addr) => {
                let f = self
                    .token_file
                    .as_ref()
                    .ok_or("--api needs --token-file (TCP requests must carry the token)")?;
                let token = std::fs::read_to_string(f)
                    .map_err(|e| format!("{}: {e}", f.display()))?
                    .trim()
                    .to_string();
                Endpoint::Tcp(addr.clone(), token)
            }
            None => Endpoint::Unix(self.socket.clone()),
        };
        Client::new(ep)
    }
}

#[derive(Subcommand)]
pub enum ShowCmd {
    /// Interfaces: port, VLAN, addresses, admin/oper state.
    Interfaces,
    /// Ports: driver, service state, queues and the workers polling them, counters.
    Ports,
    /// IPv4: `show ip route [ADDRESS | PREFIX [--longer]]`.
    Ip {
        #[command(subcommand)]
        what: RouteShow,
    },
    /// IPv6: `show ipv6 route [ADDRESS | PREFIX [--longer]]`.
    Ipv6 {
        #[command(subcommand)]
        what: RouteShow,
    },
    /// Neighbours (adjacencies) and their MAC addresses.
    Neighbors,
    /// Frames and bytes per port, since `clear counters`.
    Counters,
    /// Drops by node and reason, with each worker's share.
    Errors,
    /// Workers: core, receive queues, load.
    Workers,
    /// Per worker and graph node: calls, packets, vector size, ns per packet (sampled).
    Runtime,
    /// `show processes cpu`: per thread (workers, the router's, FRR's), CPU used and work done
    /// over 5 s, 1 min and 5 min.
    Processes {
        #[command(subcommand)]
        what: ProcessesShow,
    },
    /// The latest syslog records.
    Logging {
        #[arg(short, default_value_t = 50)]
        n: usize,
    },
    /// Version, uptime, commit, tables and their limits, API command times.
    System,
    /// Every metric, in the Prometheus text format.
    Metrics,
    /// The running config.
    RunningConfig,
    /// Access lists: entries with their hit counts, the implicit deny, where each is bound.
    Acl {
        /// One list only.
        name: Option<String>,
    },
    /// QoS policies per interface: class counters, markings, policer colours.
    Qos,
    /// Flow accounting: cache occupancy, timeouts and evictions, export counters.
    Flows,
    /// The FPM session with zebra: connection, frames, routes installed, stale sweeps.
    Fpm,
    /// The punt path: per-class punts and policer drops, TAP twins, neighbour statistics.
    Punt,
}

#[derive(Subcommand)]
pub enum AclCmd {
    /// Add an entry, or replace the entry with its sequence number:
    /// `acl add NAME 25 deny udp src host 10.0.0.1 dport 53 log`.
    Add {
        name: String,
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        entry: Vec<String>,
    },
    /// Remove the entry with sequence number SEQ.
    Del { name: String, seq: u32 },
}

pub fn acl(a: &ApiArgs, cmd: AclCmd) -> Result<(), String> {
    let c = a.client()?;
    match cmd {
        AclCmd::Add { name, entry } => {
            let v = post(
                &c,
                &format!("/v1/acl/{}/entries", enc(&name)),
                json!({"entry": entry.join(" ")}),
            )?;
            outln!("access-list {name}: entry {v} set");
        }
        AclCmd::Del { name, seq } => {
            checked(c.delete(&format!("/v1/acl/{}/entries/{seq}", enc(&name)))?)?;
            outln!("access-list {name}: entry {seq} removed");
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum RouteShow {
    Route {
        /// An address (longest match) or a prefix (exact; with --longer, and all inside it).
        prefix: Option<String>,
        #[arg(long)]
        vrf: Option<String>,
        #[arg(long)]
        longer: bool,
        /// Print at most this many routes (0: all).
        #[arg(long, default_value_t = 1000)]
        limit: usize,
    },
}

#[derive(Subcommand)]
pub enum ProcessesShow {
    /// CPU per thread.
    Cpu,
}

#[derive(Subcommand)]
pub enum ClearCmd {
    /// Shows count from zero again (metrics keep counting); `show runtime` too.
    Counters,
    /// `show runtime` counts from zero again.
    Runtime,
}

#[derive(Subcommand)]
pub enum ConfigCmd {
    /// Check FILE whole and make it the running config, atomically; or change nothing.
    Apply {
        file: PathBuf,
        /// Check and show the difference only.
        #[arg(long)]
        dry_run: bool,
        /// Roll back by itself after SECONDS unless `config confirm` comes first.
        #[arg(long, value_name = "SECONDS")]
        confirm: Option<u64>,
        /// A note kept in the history.
        #[arg(short, long, default_value = "")]
        message: String,
    },
    /// The difference between the running config and FILE (nothing is applied).
    Diff { file: PathBuf },
    /// The commits, newest last.
    History,
    /// One commit's config text.
    Show { id: u64 },
    /// Make commit ID's config the running one again.
    Rollback { id: u64 },
    /// Keep the commit that is waiting for confirmation.
    Confirm,
}

#[derive(Subcommand)]
pub enum RouteCmd {
    /// Add a route: `route add 10.9.0.0/16 via 192.0.2.2[,192.0.2.3]`, `... blackhole`, `... reject`.
    Add {
        prefix: String,
        /// `via ADDR[,ADDR...]`, `blackhole` or `reject`.
        #[arg(num_args = 1..=2, required = true)]
        target: Vec<String>,
        #[arg(long)]
        vrf: Option<String>,
    },
    /// Remove a route added through the API.
    Del {
        prefix: String,
        #[arg(long)]
        vrf: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum PortCmd {
    /// Take a port out of service (as if pulled); other ports are not touched.
    Remove { name: String },
    /// Put a port back in service.
    Insert { name: String },
}

#[derive(Subcommand)]
pub enum WorkerCmd {
    /// Start one more worker; receive queues are rebalanced onto it.
    Add {
        #[arg(long)]
        core: Option<usize>,
    },
    /// Retire a worker; its receive queues move to the others first.
    Remove { id: usize },
}

#[derive(Args)]
pub struct CaptureArgs {
    /// The port (default: every port).
    #[arg(long, short = 'i')]
    pub port: Option<String>,
    /// rx, tx or both.
    #[arg(long)]
    pub direction: Option<String>,
    /// A node's output (with -i: only frames on that port there): ethernet-input, ip4-forward,
    /// ip6-forward, slow-path.
    #[arg(long)]
    pub node: Option<String>,
    /// Dropped frames.
    #[arg(long)]
    pub drops: bool,
    /// Stop after this many frames.
    #[arg(short = 'c', long, default_value_t = 100)]
    pub count: u64,
    #[arg(short = 's', long, default_value_t = 65535)]
    pub snaplen: usize,
    /// Stop waiting after this many seconds.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// The capture file to write: pcapng (an interface per capture point, each frame's
    /// direction and original length, a dropped frame's reason), or classic pcap when its name
    /// ends in `.pcap`, `.cap` or `.dmp`.
    #[arg(short = 'w', long)]
    pub write: PathBuf,
    /// pcap or pcapng, whatever the file's name.
    #[arg(long, value_parser = ["pcap", "pcapng"])]
    pub format: Option<String>,
    /// A filter, as tcpdump's: `udp and dst net 10.0.0.0/8`.
    #[arg()]
    pub filter: Vec<String>,
}

#[derive(Args)]
pub struct TraceArgs {
    #[arg(long, short = 'i')]
    pub port: Option<String>,
    #[arg(short = 'c', long, default_value_t = 10)]
    pub count: u32,
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    #[arg(long)]
    pub json: bool,
    #[arg()]
    pub filter: Vec<String>,
}

fn checked(r: Response) -> Result<Response, String> {
    if r.ok() {
        return Ok(r);
    }
    match r.json() {
        Ok(v) => {
            let mut m = v["message"].as_str().unwrap_or("error").to_string();
            if let Some(errs) = v["errors"].as_array() {
                for e in errs {
                    m.push('\n');
                    m.push_str(e.as_str().unwrap_or(""));
                }
            }
            Err(m)
        }
        Err(_) => Err(format!(
            "the router answered {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        )),
    }
}

fn get(c: &Client, path: &str) -> Result<Value, String> {
    checked(c.get(path)?)?.json()
}

fn post(c: &Client, path: &str, body: Value) -> Result<Value, String> {
    checked(c.post(path, &body)?)?.json()
}

/// A plain text table with a header, columns padded to their widest cell.
fn table(head: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<width$}  ", width = w[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(head.iter().map(|s| s.to_string()).collect());
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

fn s(v: &Value) -> String {
    match v {
        Value::String(x) => x.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn list(v: &Value) -> String {
    let items: Vec<String> = v
        .as_array()
        .map(|a| a.iter().map(s).collect())
        .unwrap_or_default();
    if items.is_empty() {
        "-".into()
    } else {
        items.join(", ")
    }
}

fn print_json(v: &Value) {
    outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

pub fn show(a: &ApiArgs, json_out: bool, what: ShowCmd) -> Result<(), String> {
    let c = a.client()?;
    let (path, render): (String, fn(&Value) -> String) = match &what {
        ShowCmd::Interfaces => ("/v1/interfaces".into(), |v| {
            let rows = v
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| {
                    let state = match (i["admin_up"].as_bool(), i["oper_up"].as_bool()) {
                        (Some(true), Some(true)) => "up/up",
                        (Some(true), _) => "up/down",
                        _ => "admin-down/down",
                    };
                    vec![
                        s(&i["name"]),
                        s(&i["port"]),
                        s(&i["vlan"]),
                        state.into(),
                        s(&i["vrf"]),
                        s(&i["mtu"]),
                        s(&i["mac"]),
                        {
                            // IPv4 then IPv6, one list; `-` only when there are none.
                            let mut all = i["ipv4"].as_array().cloned().unwrap_or_default();
                            all.extend(i["ipv6"].as_array().cloned().unwrap_or_default());
                            list(&Value::Array(all))
                        },
                    ]
                })
                .collect();
            table(
                &[
                    "Interface",
                    "Port",
                    "VLAN",
                    "Admin/Oper",
                    "VRF",
                    "MTU",
                    "MAC",
                    "Addresses",
                ],
                rows,
            )
        }),
        ShowCmd::Ports => ("/v1/ports".into(), |v| {
            let rows = v
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    let q: Vec<String> = p["queues"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|q| format!("q{}:w{}", q["queue"], q["worker"]))
                        .collect();
                    vec![
                        s(&p["name"]),
                        s(&p["index"]),
                        s(&p["driver"]),
                        if p["in_service"].as_bool() == Some(true) {
                            "in service".into()
                        } else {
                            "removed".into()
                        },
                        if q.is_empty() {
                            "-".into()
                        } else {
                            q.join(" ")
                        },
                        s(&p["rx_packets"]),
                        s(&p["rx_errors"]),
                        s(&p["tx_packets"]),
                    ]
                })
                .collect();
            table(
                &[
                    "Port",
                    "Index",
                    "Driver",
                    "State",
                    "Queues",
                    "RX frames",
                    "RX errors",
                    "TX frames",
                ],
                rows,
            )
        }),
        ShowCmd::Ip {
            what:
                RouteShow::Route {
                    prefix,
                    vrf,
                    longer,
                    limit,
                },
        }
        | ShowCmd::Ipv6 {
            what:
                RouteShow::Route {
                    prefix,
                    vrf,
                    longer,
                    limit,
                },
        } => {
            let fam = if matches!(what, ShowCmd::Ip { .. }) {
                "ipv4"
            } else {
                "ipv6"
            };
            let mut q = format!("/v1/routes?family={fam}&longer={longer}");
            if let Some(p) = prefix {
                q.push_str(&format!("&prefix={}", enc(p)));
            }
            if let Some(v) = vrf {
                q.push_str(&format!("&vrf={}", enc(v)));
            }
            if *limit > 0 {
                q.push_str(&format!("&limit={limit}"));
            }
            (q, |v| {
                let mut out = format!(
                    "VRF {}, {}: {} routes{}\nCodes: C connected, S static, F route file, R FRR (FPM), A API, N neighbour\n\n",
                    s(&v["vrf"]),
                    s(&v["family"]),
                    v["total"],
                    if v["matched"] != v["total"] {
                        format!(", {} matched", v["matched"])
                    } else {
                        String::new()
                    }
                );
                let rows: Vec<Vec<String>> = v["routes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| {
                        let code = match r["origin"].as_str() {
                            Some("connected") => "C",
                            Some("static") => "S",
                            Some("api") => "A",
                            Some("neighbor") => "N",
                            Some("fpm") => "R",
                            _ => "F",
                        };
                        let via = match r["kind"].as_str() {
                            Some("forward") | Some("ecmp") => format!("via {}", list(&r["via"])),
                            Some("connected") => format!("directly connected, {}", list(&r["via"])),
                            Some("local") => "local (the router's address)".into(),
                            Some("down") => format!("down ({})", list(&r["via"])),
                            Some(k) => k.to_string(),
                            None => "-".into(),
                        };
                        vec![code.into(), s(&r["prefix"]), via]
                    })
                    .collect();
                let shown = rows.len();
                out.push_str(&table(&["", "Prefix", "Next hop"], rows));
                if let Some(m) = v["matched"].as_u64() {
                    if m as usize > shown {
                        out.push_str(&format!(
                            "... {} more (use --limit 0 for all)\n",
                            m as usize - shown
                        ));
                    }
                }
                out
            })
        }
        ShowCmd::Neighbors => ("/v1/neighbors".into(), |v| {
            let rows = v
                .as_array()
                .into_iter()
                .flatten()
                .map(|n| {
                    vec![
                        s(&n["ip"]),
                        s(&n["mac"]),
                        s(&n["interface"]),
                        s(&n["state"]),
                        n["age_s"]
                            .as_f64()
                            .map_or("-".into(), |a| format!("{a:.1}")),
                    ]
                })
                .collect();
            table(&["Address", "MAC", "Interface", "State", "Age (s)"], rows)
        }),
        ShowCmd::Counters => {
            ("/v1/counters".into(), |v| {
                let rows = v["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        vec![
                            s(&p["port"]),
                            s(&p["rx_packets"]),
                            s(&p["rx_bytes"]),
                            s(&p["rx_errors"]),
                            s(&p["tx_packets"]),
                            s(&p["tx_bytes"]),
                        ]
                    })
                    .collect();
                let mut out = table(
                    &[
                        "Port",
                        "RX frames",
                        "RX bytes",
                        "RX errors",
                        "TX frames",
                        "TX bytes",
                    ],
                    rows,
                );
                out.push_str(&format!(
                "\ndrops {}  icmp-sent {}  icmp-rate-limited {}  echo-replies {}  slow-path {}\n",
                v["drops"], v["icmp_sent"], v["icmp_rate_limited"], v["echo_replies"], v["slow_path"]
            ));
                out
            })
        }
        ShowCmd::Errors => ("/v1/errors".into(), |v| {
            let rows: Vec<Vec<String>> = v
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    let per: Vec<String> = e["per_worker"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(w, n)| format!("w{w}:{n}"))
                        .collect();
                    vec![
                        s(&e["node"]),
                        s(&e["reason"]),
                        s(&e["count"]),
                        if per.is_empty() {
                            "-".into()
                        } else {
                            per.join(" ")
                        },
                        s(&e["text"]),
                    ]
                })
                .collect();
            if rows.is_empty() {
                return "no drops\n".into();
            }
            table(&["Node", "Reason", "Count", "Per worker", "Meaning"], rows)
        }),
        ShowCmd::Runtime => ("/v1/runtime".into(), render_runtime),
        ShowCmd::Processes {
            what: ProcessesShow::Cpu,
        } => ("/v1/cpu".into(), render_cpu),
        ShowCmd::Workers => ("/v1/workers".into(), |v| {
            let rows = v
                .as_array()
                .into_iter()
                .flatten()
                .map(|w| {
                    vec![
                        s(&w["id"]),
                        s(&w["core"]),
                        list(&w["rx_queues"]),
                        s(&w["rx_packets"]),
                        s(&w["tx_packets"]),
                        s(&w["drops"]),
                        s(&w["vectors"]),
                    ]
                })
                .collect();
            table(
                &[
                    "Worker",
                    "Core",
                    "RX queues",
                    "RX frames",
                    "TX frames",
                    "Drops",
                    "Vectors",
                ],
                rows,
            )
        }),
        ShowCmd::Logging { n } => (format!("/v1/logging?n={n}"), |v| {
            let mut out = String::new();
            for r in v.as_array().into_iter().flatten() {
                let ms = r["unix_ms"].as_u64().unwrap_or(0);
                out.push_str(&format!(
                    "{} {:<7} {:<16} {}\n",
                    clock(ms),
                    s(&r["severity"]),
                    s(&r["msgid"]),
                    s(&r["text"])
                ));
            }
            out
        }),
        ShowCmd::System => ("/v1/system".into(), |v| {
            let mut out = format!(
                "linerate {}, up {} s, config commit {}{}\nworkers {}, ports {}, buffers {} ({} free)\n\n",
                s(&v["version"]),
                v["uptime_s"],
                v["commit"],
                match v["pending_confirm"].as_array() {
                    Some(p) => format!(" (commit {} rolls back in {} s unless confirmed)", p[0], p[1]),
                    None => String::new(),
                },
                v["workers"],
                v["ports"],
                v["buffers"],
                v["buffers_free"]
            );
            let rows = v["tables"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    vec![
                        s(&t["table"]),
                        s(&t["entries"]),
                        s(&t["limit"]),
                        s(&t["bytes"]),
                    ]
                })
                .collect();
            out.push_str(&table(&["Table", "Entries", "Limit", "Bytes"], rows));
            out
        }),
        ShowCmd::Metrics => {
            let r = checked(c.get("/metrics")?)?;
            out!("{}", String::from_utf8_lossy(&r.body));
            return Ok(());
        }
        ShowCmd::Acl { name } => (
            match name {
                Some(n) => format!("/v1/acl?name={}", enc(n)),
                None => "/v1/acl".into(),
            },
            |v| {
                let mut out = String::new();
                for a in v.as_array().into_iter().flatten() {
                    out.push_str(&format!(
                        "access-list {} ({}), bound: {}, compiled: {} bytes\n",
                        s(&a["name"]),
                        s(&a["family"]),
                        if a["bound"].as_array().is_some_and(|b| b.is_empty()) {
                            "nowhere".to_string()
                        } else {
                            list(&a["bound"])
                        },
                        s(&a["compiled_bytes"])
                    ));
                    let mut rows: Vec<Vec<String>> = a["entries"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|e| vec![s(&e["seq"]), s(&e["text"]), s(&e["hits"])])
                        .collect();
                    rows.push(vec![
                        "-".into(),
                        "(implicit deny)".into(),
                        s(&a["implicit_deny"]),
                    ]);
                    out.push_str(&table(&["Seq", "Entry", "Matches"], rows));
                    out.push('\n');
                }
                out
            },
        ),
        ShowCmd::Qos => ("/v1/qos".into(), |v| {
            let mut out = String::new();
            for q in v.as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "{} {}: policy {}\n",
                    s(&q["interface"]),
                    s(&q["direction"]),
                    s(&q["policy"])
                ));
                let rows = q["classes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let p = &c["policer"];
                        let pol = if p.is_null() {
                            "-".to_string()
                        } else {
                            format!(
                                "conform {} B, exceed {} B, violate {} B, dropped {} pkts",
                                s(&p["conformed_bytes"]),
                                s(&p["exceeded_bytes"]),
                                s(&p["violated_bytes"]),
                                s(&p["dropped_packets"])
                            )
                        };
                        vec![
                            s(&c["class"]),
                            s(&c["packets"]),
                            s(&c["bytes"]),
                            s(&c["set_dscp"]),
                            s(&c["set_cos"]),
                            pol,
                        ]
                    })
                    .collect();
                out.push_str(&table(
                    &[
                        "Class", "Packets", "Bytes", "Set DSCP", "Set CoS", "Policer",
                    ],
                    rows,
                ));
                out.push('\n');
            }
            if out.is_empty() {
                out = "no QoS policy is bound\n".into();
            }
            out
        }),
        ShowCmd::Flows => ("/v1/flows".into(), |v| {
            if v["enabled"] != json!(true) {
                return "flow accounting is off (no flow-export section)\n".into();
            }
            let e = &v["export"];
            format!(
                "Flow export: {} to {}\nAccounting on: {}\n\n{}",
                s(&v["version"]),
                list(&v["collectors"]),
                list(&v["interfaces"]),
                table(
                    &["Counter", "Value"],
                    [
                        ("cache capacity", &v["capacity"]),
                        ("flows in cache", &v["occupancy"]),
                        ("flows created", &v["created"]),
                        ("expired (inactive)", &v["expired_idle"]),
                        ("expired (active)", &v["expired_active"]),
                        ("ended (TCP FIN/RST)", &v["ended_tcp"]),
                        ("evicted (cache full)", &v["evicted"]),
                        ("flushed", &v["flushed"]),
                        ("lost (export queue full)", &v["queue_dropped"]),
                        ("records exported", &e["records"]),
                        ("datagrams sent", &e["datagrams"]),
                        ("templates sent", &e["templates"]),
                        ("send errors", &e["send_errors"]),
                    ]
                    .into_iter()
                    .map(|(k, x)| vec![k.to_string(), s(x)])
                    .collect()
                )
            )
        }),
        ShowCmd::Fpm => ("/v1/fpm".into(), |v| {
            let rows = [
                ("listening on", &v["listen"]),
                ("connected", &v["connected"]),
                ("zebra", &v["peer"]),
                ("connections", &v["connections"]),
                ("frames", &v["frames"]),
                ("bytes", &v["bytes"]),
                ("malformed (connection reset)", &v["malformed"]),
                ("routes held", &v["routes"]),
                ("routes installed", &v["routes_installed"]),
                ("routes removed", &v["routes_removed"]),
                ("next-hop sets", &v["next_hop_sets"]),
                ("left to the config", &v["conflicts"]),
                ("unresolved", &v["unresolved"]),
                ("stale sweeps", &v["stale_sweeps"]),
                ("swept", &v["swept"]),
                ("sweep due in (s)", &v["sweep_in_s"]),
                ("apply time (ms)", &v["apply_ms"]),
            ];
            table(
                &["FPM", "Value"],
                rows.into_iter()
                    .map(|(k, x)| vec![k.to_string(), s(x)])
                    .collect(),
            )
        }),
        ShowCmd::Punt => ("/v1/punt".into(), |v| {
            let classes = v["classes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    vec![
                        s(&c["class"]),
                        s(&c["rate"]),
                        s(&c["burst"]),
                        s(&c["punted"]),
                        s(&c["policed"]),
                        s(&c["queue_full"]),
                    ]
                })
                .collect();
            let taps = v["taps"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    vec![
                        s(&t["interface"]),
                        s(&t["tap"]),
                        s(&t["to_kernel"]),
                        s(&t["from_kernel"]),
                        s(&t["to_kernel_dropped"]),
                    ]
                })
                .collect();
            let head = [
                "Class",
                "Rate/worker",
                "Burst",
                "Punted",
                "Policed",
                "Queue full",
            ];
            if v["punt_path"].as_bool() != Some(true) {
                return format!(
                    "{}(no punt path: the slow path's classes are policed; the rest are dropped as having no service)\n",
                    table(&head, classes)
                );
            }
            format!(
                "{}\n{}\nInjected: {}, inject drops: {}, no TAP: {}, stale (from before a commit): {}\nNeighbours: {}\n",
                table(&head, classes),
                table(
                    &[
                        "Interface",
                        "TAP",
                        "To kernel",
                        "From kernel",
                        "Kernel full"
                    ],
                    taps
                ),
                s(&v["injected"]),
                s(&v["inject_dropped"]),
                s(&v["no_tap"]),
                s(&v["stale"]),
                v["neighbor_stats"],
            )
        }),
        ShowCmd::RunningConfig => {
            let v = get(&c, "/v1/config")?;
            if json_out {
                print_json(&v);
            } else {
                out!("{}", v["text"].as_str().unwrap_or(""));
            }
            return Ok(());
        }
    };
    let v = get(&c, &path)?;
    if json_out {
        print_json(&v);
    } else {
        out!("{}", render(&v));
    }
    Ok(())
}

/// Percent-encodes a query value (prefixes carry '/' and ':').
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// UTC wall-clock time of a Unix time in ms: `HH:MM:SS.mmm`.
fn clock(ms: u64) -> String {
    let secs = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60,
        ms % 1000
    )
}

pub fn clear(a: &ApiArgs, what: ClearCmd) -> Result<(), String> {
    match what {
        ClearCmd::Counters => {
            post(&a.client()?, "/v1/counters/clear", json!({}))?;
            outln!("counters cleared");
        }
        ClearCmd::Runtime => {
            post(&a.client()?, "/v1/runtime/clear", json!({}))?;
            outln!("runtime counters cleared");
        }
    }
    Ok(())
}

/// `show processes cpu`: one row per thread, busy and CPU per window.
fn render_cpu(v: &Value) -> String {
    let pct = |x: &Value| format!("{:.1}%", x.as_f64().unwrap_or(0.0));
    let rows = v["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            vec![
                s(&r["name"]),
                s(&r["kind"]),
                s(&r["id"]),
                r["core"].as_u64().map_or("-".into(), |c| c.to_string()),
                pct(&r["busy"][0]),
                pct(&r["busy"][1]),
                pct(&r["busy"][2]),
                pct(&r["cpu"][0]),
                pct(&r["cpu"][1]),
                pct(&r["cpu"][2]),
            ]
        })
        .collect();
    let covered = |i: usize| v["covered_s"][i].as_f64().unwrap_or(0.0);
    format!(
        "{}(busy: work done, for a worker the vectors that carried frames; cpu: time on a CPU, \
         polling included; % of one CPU; history: {:.0} s)\n",
        table(
            &["Thread", "Kind", "Id", "Core", "Busy 5s", "1m", "5m", "CPU 5s", "1m", "5m"],
            rows
        ),
        covered(2)
    )
}

/// `show runtime`: one table per worker, then the total, in the manner of VPP's.
fn render_runtime(v: &Value) -> String {
    let rows = |nodes: &Value| -> Vec<Vec<String>> {
        nodes
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| {
                let ns = match n["ns_per_packet"].as_f64() {
                    Some(x) => format!("{x:.1}"),
                    None => "-".into(),
                };
                vec![
                    s(&n["node"]),
                    s(&n["calls"]),
                    s(&n["packets"]),
                    format!("{:.1}", n["vector_size"].as_f64().unwrap_or(0.0)),
                    ns,
                ]
            })
            .collect()
    };
    let head = ["Node", "Calls", "Packets", "Vector", "ns/packet"];
    let mut out = String::new();
    for w in v["workers"].as_array().into_iter().flatten() {
        let core = w["core"]
            .as_u64()
            .map_or("not pinned".to_string(), |c| format!("core {c}"));
        out += &format!("worker {} ({core})\n", s(&w["worker"]));
        out += &table(&head, rows(&w["nodes"]));
        out += "\n";
    }
    out += "total\n";
    out += &table(&head, rows(&v["total"]));
    out += &format!(
        "(ns/packet from one vector in {}; calls and packets from all)\n",
        s(&v["timed_every"])
    );
    out
}

fn print_outcome(v: &Value) {
    if v["changed"].as_bool() != Some(true) {
        outln!("no changes: the running config is the same");
        return;
    }
    let diff = v["diff"].as_str().unwrap_or("");
    out!("{diff}");
    for l in v["summary"].as_array().into_iter().flatten() {
        outln!("{}", s(l));
    }
    for w in v["warnings"].as_array().into_iter().flatten() {
        outln!("warning: {}", s(w));
    }
    if v["dry_run"].as_bool() == Some(true) {
        outln!("dry run: nothing was applied");
    } else if let Some(id) = v["commit"].as_u64() {
        match v["confirm_deadline_s"].as_u64() {
            Some(t) => outln!(
                "commit {id} applied; it rolls back in {t} s unless `linerate config confirm`"
            ),
            None => outln!("commit {id} applied"),
        }
    }
}

pub fn config(a: &ApiArgs, json_out: bool, cmd: ConfigCmd) -> Result<(), String> {
    let c = a.client()?;
    let read = |f: &PathBuf| -> Result<(String, PathBuf), String> {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let abs = std::fs::canonicalize(f).map_err(|e| format!("{}: {e}", f.display()))?;
        Ok((text, abs))
    };
    let v = match cmd {
        ConfigCmd::Apply {
            file,
            dry_run,
            confirm,
            message,
        } => {
            let (text, source) = read(&file)?;
            post(
                &c,
                "/v1/config/apply",
                json!({"text": text, "source": source, "dry_run": dry_run,
                       "confirm_seconds": confirm, "comment": message}),
            )?
        }
        ConfigCmd::Diff { file } => {
            let (text, source) = read(&file)?;
            post(
                &c,
                "/v1/config/apply",
                json!({"text": text, "source": source, "dry_run": true}),
            )?
        }
        ConfigCmd::History => {
            let v = get(&c, "/v1/config/history")?;
            if json_out {
                print_json(&v);
                return Ok(());
            }
            let rows = v
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| {
                    vec![
                        s(&h["id"]),
                        clock(h["unix_time"].as_u64().unwrap_or(0) * 1000),
                        s(&h["status"]),
                        h["summary"].as_array().map_or(0, |a| a.len()).to_string(),
                        s(&h["comment"]),
                    ]
                })
                .collect();
            out!(
                "{}",
                table(
                    &["Commit", "Time (UTC)", "Status", "Changes", "Comment"],
                    rows
                )
            );
            return Ok(());
        }
        ConfigCmd::Show { id } => {
            let v = get(&c, &format!("/v1/config/history/{id}"))?;
            if json_out {
                print_json(&v);
            } else {
                out!("{}", v["text"].as_str().unwrap_or(""));
            }
            return Ok(());
        }
        ConfigCmd::Rollback { id } => post(&c, &format!("/v1/config/rollback/{id}"), json!({}))?,
        ConfigCmd::Confirm => {
            let v = post(&c, "/v1/config/confirm", json!({}))?;
            outln!("commit {v} confirmed");
            return Ok(());
        }
    };
    if json_out {
        print_json(&v);
    } else {
        print_outcome(&v);
    }
    Ok(())
}

pub fn route(a: &ApiArgs, cmd: RouteCmd) -> Result<(), String> {
    let c = a.client()?;
    match cmd {
        RouteCmd::Add {
            prefix,
            target,
            vrf,
        } => {
            let body = match target
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .as_slice()
            {
                ["via", list] => json!({"prefix": prefix, "vrf": vrf,
                    "via": list.split(',').collect::<Vec<_>>()}),
                ["blackhole"] => json!({"prefix": prefix, "vrf": vrf, "blackhole": true}),
                ["reject"] => json!({"prefix": prefix, "vrf": vrf, "reject": true}),
                _ => return Err("expected `via ADDR[,ADDR...]`, `blackhole` or `reject`".into()),
            };
            post(&c, "/v1/routes", body)?;
        }
        RouteCmd::Del { prefix, vrf } => {
            let mut q = format!("/v1/routes?prefix={}", enc(&prefix));
            if let Some(v) = vrf {
                q.push_str(&format!("&vrf={}", enc(&v)));
            }
            checked(c.delete(&q)?)?;
        }
    }
    Ok(())
}

pub fn port(a: &ApiArgs, cmd: PortCmd) -> Result<(), String> {
    let c = a.client()?;
    let (name, what) = match &cmd {
        PortCmd::Remove { name } => (name, "remove"),
        PortCmd::Insert { name } => (name, "insert"),
    };
    post(&c, &format!("/v1/ports/{}/{what}", enc(name)), json!({}))?;
    outln!(
        "port {name} {}",
        if what == "remove" {
            "out of service"
        } else {
            "in service"
        }
    );
    Ok(())
}

pub fn worker(a: &ApiArgs, cmd: WorkerCmd) -> Result<(), String> {
    let c = a.client()?;
    match cmd {
        WorkerCmd::Add { core } => {
            let v = post(&c, "/v1/workers", json!({"core": core}))?;
            outln!("worker {} started", v["worker"]);
        }
        WorkerCmd::Remove { id } => {
            checked(c.delete(&format!("/v1/workers/{id}"))?)?;
            outln!("worker {id} removed");
        }
    }
    Ok(())
}

/// The format `linerate capture` writes: as asked, else classic pcap for the names tcpdump's
/// users give such files, else pcapng (as dumpcap and tshark do).
fn capture_format(c: &CaptureArgs) -> &str {
    if let Some(f) = &c.format {
        return f;
    }
    let ext = c.write.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext.to_ascii_lowercase().as_str() {
        "pcap" | "cap" | "dmp" => "pcap",
        _ => "pcapng",
    }
}

pub fn capture(a: &ApiArgs, c: CaptureArgs) -> Result<(), String> {
    let client = a.client()?;
    let body = json!({
        "port": c.port, "direction": c.direction, "node": c.node, "drops": c.drops,
        "filter": c.filter.join(" "), "count": c.count, "snaplen": c.snaplen,
        "timeout_ms": (c.timeout * 1000.0) as u64, "format": capture_format(&c),
    });
    let r = checked(client.post("/v1/capture", &body)?)?;
    let mut f =
        std::fs::File::create(&c.write).map_err(|e| format!("{}: {e}", c.write.display()))?;
    f.write_all(&r.body)
        .map_err(|e| format!("{}: {e}", c.write.display()))?;
    let frames = packet::capture::AnyReader::new(&r.body[..])
        .map(|mut rd| {
            let mut n = 0;
            let mut buf = Vec::new();
            while let Ok(Some(_)) = rd.next_into(&mut buf) {
                n += 1;
            }
            n
        })
        .unwrap_or(0);
    eprintln!(
        "{frames} frames written to {} ({})",
        c.write.display(),
        capture_format(&c)
    );
    Ok(())
}

pub fn trace(a: &ApiArgs, t: TraceArgs) -> Result<(), String> {
    let c = a.client()?;
    let v = post(
        &c,
        "/v1/trace",
        json!({"port": t.port, "filter": t.filter.join(" "), "count": t.count,
               "timeout_ms": (t.timeout * 1000.0) as u64}),
    )?;
    if t.json {
        print_json(&v);
        return Ok(());
    }
    let all = v.as_array().cloned().unwrap_or_default();
    if all.is_empty() {
        outln!("no frame matched before the timeout");
    }
    for tr in all {
        outln!(
            "Packet {} (worker {}): {}",
            tr["id"],
            tr["worker"],
            s(&tr["summary"])
        );
        for st in tr["steps"].as_array().into_iter().flatten() {
            outln!(
                "  {:<15} {} -> {}",
                s(&st["node"]),
                s(&st["decision"]),
                s(&st["next"])
            );
        }
        outln!();
    }
    Ok(())
}
