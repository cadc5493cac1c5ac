//! The CLI as a pure client of the runtime API: each command is one request to the router's
//! socket, printed as router CLIs print it (or as JSON with `--json`).

use std::io::Write;
use std::path::PathBuf;

use api::requests::{
    enc, AclEntryRequest, AclQuery, ApplyOptions, ApplyRequest, BgpVpnQuery, CaptureRequest,
    Family, GtpContextQuery, LogQuery, MacQuery, MrouteQuery, RouteDelete, RouteRequest,
    RoutesQuery, SnoopQuery, TraceRequest, WorkerRequest,
};
use api::views::{
    AclView, ApnView, ApplyOutcome, AtmView, BgpVpnView, BridgeView, CommitText, CommitView,
    CountersView, CpuView, DlswCircuitsView, DlswPeersView, DlswReachabilityView, ErrorView,
    EventManagerView, FlowsView, FpmStatus, GtpContextsView, GtpStatsView, InterfaceView,
    L2vpnView, LdpBindingView, LdpDiscoveryView, LdpNeighborView, LinkDiagView, LogView,
    MacCleared, MacTableView, MplsView, MrouteView, NeighborView, PortView, PuntView, QosView,
    RoutesView, RunningConfig, RuntimeView, SnoopView, SystemView, TraceView, VrfView, WorkerAdded,
    WorkerView,
};
use api::{Client, Endpoint, Render};
use clap::{Args, Subcommand};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Where the router's API is (every client command takes these).
#[derive(Args, Clone)]
pub struct ApiArgs {
    /// The router's API socket.
    #[arg(long, global = true, env = "LINERATE_SOCKET", default_value = api::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Talk to the API on TCP (HOST:PORT) instead of the socket; needs --token-file.
    #[arg(long, global = true)]
    pub api: Option<String>,
    /// File holding the bearer token for --api: the secret alone, or one `NAME ROLE SECRET`
    /// line as the router's token file has it.
    #[arg(long, global = true)]
    pub token_file: Option<PathBuf>,
    /// Talk to this logical router (its socket is asked of the supervisor).
    #[arg(short = 'l', long = "lr", global = true)]
    pub lr: Option<String>,
    /// The supervisor's API socket (logical routers).
    #[arg(long, global = true, env = "LINERATE_SUPERVISOR", default_value = control::config::lr::DEFAULT_SOCKET)]
    pub supervisor: PathBuf,
    /// Headers every request carries: the command line as typed and the terminal, which the
    /// router logs with the user (accounting).
    #[arg(skip)]
    pub context: Vec<(String, String)>,
}

/// The terminal standard input is, as `who` names it (`pts/3`), if it is one.
pub fn terminal() -> Option<String> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        return None;
    }
    let p = std::fs::read_link("/proc/self/fd/0").ok()?;
    let s = p.to_string_lossy();
    Some(s.strip_prefix("/dev/").unwrap_or(&s).to_string())
}

impl ApiArgs {
    /// These arguments with `line` as the command every request names (accounting).
    pub fn with_command(&self, line: &str) -> ApiArgs {
        let mut a = self.clone();
        a.context.retain(|(k, _)| k != "x-linerate-command");
        a.context
            .push(("x-linerate-command".into(), line.to_string()));
        a
    }

    pub fn client(&self) -> Result<Client, String> {
        let ep = match &self.api {
            Some(addr) => {
                let f = self
                    .token_file
                    .as_ref()
                    .ok_or("--api needs --token-file (TCP requests must carry the token)")?;
                let text =
                    std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
                Endpoint::Tcp(addr.clone(), client_secret(&text, f)?)
            }
            None => match &self.lr {
                Some(name) => Endpoint::Unix(crate::lr_cmd::lr_socket(&self.supervisor, name)?),
                None => Endpoint::Unix(self.socket.clone()),
            },
        };
        let mut c = Client::new(ep)?;
        for (k, v) in &self.context {
            c.header(k, v);
        }
        Ok(c)
    }
}

#[derive(Subcommand)]
pub enum ShowCmd {
    /// Interfaces: port, VLAN, addresses, admin/oper state.
    Interfaces,
    /// Ports: driver, service state, queues and the workers polling them, counters.
    Ports,
    /// Logical routers (from the supervisor): state, PID, namespace, CPUs, memory, CPU use,
    /// uptime, restarts.
    LogicalRouters,
    /// `show link PORT`: the link under a port (kernel device state, carrier changes, speed,
    /// the driver's error counters) beside the router's counters for it.
    Link { port: String },
    /// The event manager: each rule's detector, state, firings, and its actions' runs.
    EventManager,
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
    /// Bridge domains: members, settings, addresses and switching counters.
    Bridge,
    /// `show mac address-table [--bridge B] [--interface I]`: learned and static addresses.
    Mac {
        #[command(subcommand)]
        what: MacShow,
    },
    /// `show igmp snooping groups [--bridge B]`: IGMP/MLD snooping's groups, members, routers.
    Igmp {
        #[command(subcommand)]
        what: IgmpShow,
    },
    /// The GGSN: `show gtp contexts [--imsi I] [--apn A] [--ip ADDR]`, `show gtp statistics`.
    Gtp {
        #[command(subcommand)]
        what: GtpShow,
    },
    /// The GGSN's APNs: VRF, interface, pools and their use, DNS servers.
    Apn,
    /// ATM: `show atm pvc`: each PVC's encapsulation, traffic class and SAR counters.
    Atm {
        #[command(subcommand)]
        what: AtmShow,
    },
    /// DLSw: `show dlsw peers|circuits|reachability`.
    Dlsw {
        #[command(subcommand)]
        what: DlswShow,
    },
    /// MPLS: `show mpls forwarding-table`: each incoming label, its action, where it sends,
    /// its packets and bytes.
    Mpls {
        #[command(subcommand)]
        what: MplsShow,
    },
    /// Pseudowires: attachment circuit, peer and VC id, labels, next hop, state, frames.
    L2vpn,
    /// L3VPN: each VPN VRF with its RD, route targets, VPN label and routes each way, and
    /// the VPN speaker's state.
    Vrf,
    /// BGP: `show bgp vpn`: the VPN routes learned from peers and the VRFs they went into.
    Bgp {
        #[command(subcommand)]
        what: BgpShow,
    },
}

#[derive(Subcommand)]
pub enum BgpShow {
    /// VPNv4/VPNv6 routes from peers: RD, prefix, label, next hop, route targets, VRFs.
    Vpn {
        /// At most this many routes (0: all).
        #[arg(long, default_value_t = 1000)]
        limit: usize,
    },
}

#[derive(Subcommand)]
pub enum MplsShow {
    /// The label table (the LFIB).
    ForwardingTable,
    /// LDP: `neighbor` (sessions), `discovery` (hello adjacencies), `binding` (pseudowire
    /// labels both ways).
    Ldp {
        #[command(subcommand)]
        what: LdpShow,
    },
}

#[derive(Subcommand)]
pub enum LdpShow {
    /// Each session: state, role, keepalive, uptime, PDUs, the peer's addresses.
    Neighbor,
    /// The hello adjacencies and where targeted hellos go.
    Discovery,
    /// Each signalled pseudowire: labels, control word, MTU and status both ways, state.
    Binding,
}

#[derive(Subcommand)]
pub enum DlswShow {
    /// Each remote peer: state, uptime, circuits, SSP messages, INFOFRAMEs, explorers and
    /// keepalives each way; DLSw's LAN-side and circuit counters.
    Peers,
    /// Each circuit: the two stations, the peer, the circuit's and the LLC2 link's states, I
    /// frames each way.
    Circuits,
    /// The reachability cache: MACs behind peers, and on the LAN (with their port).
    Reachability,
}

#[derive(Subcommand)]
pub enum AtmShow {
    /// Every PVC of every ATM port: PDUs and cells each way, CRC, length, timeout and oversize
    /// errors, OAM loopbacks answered, shaper drops; per port, cells that reached no PVC.
    Pvc,
}

#[derive(Subcommand)]
pub enum GtpShow {
    /// PDP contexts: IMSI, APN, address, TEIDs, the SGSN, traffic counters.
    Contexts {
        #[arg(long)]
        imsi: Option<String>,
        #[arg(long)]
        apn: Option<String>,
        /// The UE's IPv4 address or an address in its IPv6 /64.
        #[arg(long)]
        ip: Option<String>,
        /// List at most this many (0: all).
        #[arg(long, default_value_t = 1000)]
        limit: usize,
    },
    /// GTP-C messages by type and cause, Error Indications, SGSN restarts.
    Statistics,
}

#[derive(Subcommand)]
pub enum GtpClear {
    /// `clear gtp context TEID`: deletes one PDP context here (its SGSN is not told).
    Context {
        /// The context's TEID (ours), decimal or 0x hex.
        teid: String,
    },
}

#[derive(Subcommand)]
pub enum MacShow {
    /// The MAC address table.
    AddressTable(MacArgs),
}

#[derive(Subcommand)]
pub enum IgmpShow {
    /// IGMP/MLD snooping.
    Snooping {
        #[command(subcommand)]
        what: SnoopingShow,
    },
}

#[derive(Subcommand)]
pub enum SnoopingShow {
    /// The groups snooped per bridge domain (IPv4 and IPv6), their members and counters.
    Groups(SnoopArgs),
}

#[derive(Args)]
pub struct SnoopArgs {
    /// One bridge domain's groups.
    #[arg(long)]
    bridge: Option<String>,
}

#[derive(Args)]
pub struct MacArgs {
    /// One bridge domain's entries.
    #[arg(long)]
    bridge: Option<String>,
    /// One member interface's entries.
    #[arg(long)]
    interface: Option<String>,
    /// List at most this many (0: all; shows only).
    #[arg(long, default_value_t = 1000)]
    limit: usize,
}

impl MacArgs {
    fn query(self) -> MacQuery {
        MacQuery {
            bridge: self.bridge,
            interface: self.interface,
            limit: Some(self.limit),
        }
    }
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
            let seq: u32 = c.call(
                &format!("/v1/acl/{}/entries", enc(&name)),
                &AclEntryRequest {
                    entry: entry.join(" "),
                },
            )?;
            outln!("access-list {name}: entry {seq} set");
        }
        AclCmd::Del { name, seq } => {
            c.delete(&format!("/v1/acl/{}/entries/{seq}", enc(&name)))?
                .checked()?;
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
    /// The multicast FIB: (S,G) and (*,G) routes, RPF and output interfaces, counters.
    Mroute {
        #[arg(long)]
        vrf: Option<String>,
    },
}

impl RouteShow {
    /// The API's query for this `show ip[v6] route`.
    fn query(self, family: Family) -> RoutesQuery {
        let RouteShow::Route {
            prefix,
            vrf,
            longer,
            limit,
        } = self
        else {
            unreachable!("mroute is shown by show_ip")
        };
        RoutesQuery {
            vrf,
            family,
            prefix,
            longer,
            limit: (limit > 0).then_some(limit),
        }
    }
}

/// `show ip[v6] route ...` or `show ip[v6] mroute`.
fn show_ip(c: &Client, what: RouteShow, family: Family, json_out: bool) -> Result<(), String> {
    match what {
        RouteShow::Mroute { vrf } => {
            let q = MrouteQuery {
                family: Some(
                    match family {
                        Family::Ipv4 => "ipv4",
                        Family::Ipv6 => "ipv6",
                    }
                    .into(),
                ),
                vrf,
            };
            print_view::<MrouteView>(c, &q.path(), json_out)
        }
        route => print_view::<RoutesView>(c, &route.query(family).path(), json_out),
    }
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
    /// `clear mac address-table [--bridge B] [--interface I]`: removes learned addresses
    /// (static ones stay: they are the config's).
    Mac {
        #[command(subcommand)]
        what: MacShow,
    },
    /// `clear igmp snooping groups [--bridge B]`: ends the snooped memberships (hosts join
    /// again at the next query).
    Igmp {
        #[command(subcommand)]
        what: IgmpShow,
    },
    /// `clear gtp context TEID`.
    Gtp {
        #[command(subcommand)]
        what: GtpClear,
    },
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
    /// Set a mem port's link down, as a cable pulled (kernel ports: set the device down).
    LinkDown { name: String },
    /// Set a mem port's link back up.
    LinkUp { name: String },
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

/// Prints a view: its JSON as the router sent it (`--json`), or its text.
fn print_view<T: DeserializeOwned + Render>(
    c: &Client,
    path: &str,
    json_out: bool,
) -> Result<(), String> {
    let r = c.get(path)?.checked()?;
    if json_out {
        print_json(&r.json()?);
    } else {
        out!("{}", r.view::<T>()?.render());
    }
    Ok(())
}

fn print_json(v: &Value) {
    outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

pub fn show(a: &ApiArgs, json_out: bool, what: ShowCmd) -> Result<(), String> {
    let c = a.client()?;
    let c = &c;
    match what {
        ShowCmd::Interfaces => print_view::<Vec<InterfaceView>>(c, "/v1/interfaces", json_out),
        ShowCmd::Ports => print_view::<Vec<PortView>>(c, "/v1/ports", json_out),
        ShowCmd::LogicalRouters => crate::lr_cmd::show(&a.supervisor, json_out),
        ShowCmd::Ip { what } => show_ip(c, what, Family::Ipv4, json_out),
        ShowCmd::Ipv6 { what } => show_ip(c, what, Family::Ipv6, json_out),
        ShowCmd::Neighbors => print_view::<Vec<NeighborView>>(c, "/v1/neighbors", json_out),
        ShowCmd::Counters => print_view::<CountersView>(c, "/v1/counters", json_out),
        ShowCmd::Errors => print_view::<Vec<ErrorView>>(c, "/v1/errors", json_out),
        ShowCmd::Runtime => print_view::<RuntimeView>(c, "/v1/runtime", json_out),
        ShowCmd::Processes {
            what: ProcessesShow::Cpu,
        } => print_view::<CpuView>(c, "/v1/cpu", json_out),
        ShowCmd::Workers => print_view::<Vec<WorkerView>>(c, "/v1/workers", json_out),
        ShowCmd::Link { port } => {
            print_view::<LinkDiagView>(c, &format!("/v1/ports/{}/link", enc(&port)), json_out)
        }
        ShowCmd::EventManager => print_view::<EventManagerView>(c, "/v1/event-manager", json_out),
        ShowCmd::Logging { n } => {
            print_view::<Vec<LogView>>(c, &LogQuery { n: Some(n) }.path(), json_out)
        }
        ShowCmd::System => print_view::<SystemView>(c, "/v1/system", json_out),
        ShowCmd::Metrics => {
            let r = c.get("/metrics")?.checked()?;
            out!("{}", String::from_utf8_lossy(&r.body));
            Ok(())
        }
        ShowCmd::Acl { name } => print_view::<Vec<AclView>>(c, &AclQuery { name }.path(), json_out),
        ShowCmd::Qos => print_view::<Vec<QosView>>(c, "/v1/qos", json_out),
        ShowCmd::Flows => print_view::<FlowsView>(c, "/v1/flows", json_out),
        ShowCmd::Fpm => print_view::<FpmStatus>(c, "/v1/fpm", json_out),
        ShowCmd::Punt => print_view::<PuntView>(c, "/v1/punt", json_out),
        ShowCmd::Bridge => print_view::<Vec<BridgeView>>(c, "/v1/bridges", json_out),
        ShowCmd::Mac {
            what: MacShow::AddressTable(a),
        } => print_view::<MacTableView>(c, &a.query().path(), json_out),
        ShowCmd::Igmp {
            what: IgmpShow::Snooping {
                what: SnoopingShow::Groups(a),
            },
        } => print_view::<SnoopView>(c, &SnoopQuery { bridge: a.bridge }.path(), json_out),
        ShowCmd::RunningConfig => print_view::<RunningConfig>(c, "/v1/config", json_out),
        ShowCmd::Gtp {
            what:
                GtpShow::Contexts {
                    imsi,
                    apn,
                    ip,
                    limit,
                },
        } => {
            let q = GtpContextQuery {
                imsi,
                apn,
                ip,
                limit: Some(limit),
            };
            print_view::<GtpContextsView>(c, &q.path(), json_out)
        }
        ShowCmd::Gtp {
            what: GtpShow::Statistics,
        } => print_view::<GtpStatsView>(c, "/v1/gtp/statistics", json_out),
        ShowCmd::Apn => print_view::<Vec<ApnView>>(c, "/v1/apns", json_out),
        ShowCmd::Atm { what: AtmShow::Pvc } => print_view::<AtmView>(c, "/v1/atm/pvcs", json_out),
        ShowCmd::Mpls {
            what: MplsShow::ForwardingTable,
        } => print_view::<MplsView>(c, "/v1/mpls/forwarding-table", json_out),
        ShowCmd::Mpls {
            what: MplsShow::Ldp { what },
        } => match what {
            LdpShow::Neighbor => {
                print_view::<LdpNeighborView>(c, "/v1/mpls/ldp/neighbor", json_out)
            }
            LdpShow::Discovery => {
                print_view::<LdpDiscoveryView>(c, "/v1/mpls/ldp/discovery", json_out)
            }
            LdpShow::Binding => print_view::<LdpBindingView>(c, "/v1/mpls/ldp/binding", json_out),
        },
        ShowCmd::L2vpn => print_view::<L2vpnView>(c, "/v1/l2vpn", json_out),
        ShowCmd::Vrf => print_view::<VrfView>(c, "/v1/vrf", json_out),
        ShowCmd::Bgp {
            what: BgpShow::Vpn { limit },
        } => print_view::<BgpVpnView>(c, &BgpVpnQuery { limit: Some(limit) }.path(), json_out),
        ShowCmd::Dlsw { what } => match what {
            DlswShow::Peers => print_view::<DlswPeersView>(c, "/v1/dlsw/peers", json_out),
            DlswShow::Circuits => print_view::<DlswCircuitsView>(c, "/v1/dlsw/circuits", json_out),
            DlswShow::Reachability => {
                print_view::<DlswReachabilityView>(c, "/v1/dlsw/reachability", json_out)
            }
        },
    }
}

/// A POST with no body whose answer is not needed beyond success.
fn post_empty(c: &Client, path: &str) -> Result<(), String> {
    c.post(path, &serde_json::json!({}))?.checked()?;
    Ok(())
}

pub fn clear(a: &ApiArgs, what: ClearCmd) -> Result<(), String> {
    let c = a.client()?;
    match what {
        ClearCmd::Counters => {
            post_empty(&c, "/v1/counters/clear")?;
            outln!("counters cleared");
        }
        ClearCmd::Runtime => {
            post_empty(&c, "/v1/runtime/clear")?;
            outln!("runtime counters cleared");
        }
        ClearCmd::Mac {
            what: MacShow::AddressTable(a),
        } => {
            let q = MacQuery {
                limit: None,
                ..a.query()
            };
            let r: MacCleared = c.post("/v1/mac-table/clear", &q)?.view()?;
            outln!("{} address(es) removed", r.removed);
        }
        ClearCmd::Igmp {
            what: IgmpShow::Snooping {
                what: SnoopingShow::Groups(a),
            },
        } => {
            let r: serde_json::Value = c
                .post("/v1/igmp-snooping/clear", &SnoopQuery { bridge: a.bridge })?
                .view()?;
            outln!("{} membership(s) ended", r["ended"]);
        }
        ClearCmd::Gtp {
            what: GtpClear::Context { teid },
        } => {
            c.delete(&format!("/v1/gtp/contexts/{}", enc(&teid)))?
                .checked()?;
            outln!("PDP context {teid} deleted");
        }
    }
    Ok(())
}

pub fn config(a: &ApiArgs, json_out: bool, cmd: ConfigCmd) -> Result<(), String> {
    let c = a.client()?;
    let read = |f: &PathBuf| -> Result<(String, PathBuf), String> {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let abs = std::fs::canonicalize(f).map_err(|e| format!("{}: {e}", f.display()))?;
        Ok((text, abs))
    };
    let r = match cmd {
        ConfigCmd::Apply {
            file,
            dry_run,
            confirm,
            message,
        } => {
            let (text, source) = read(&file)?;
            let req = ApplyRequest {
                text,
                source,
                opts: ApplyOptions {
                    comment: message,
                    dry_run,
                    confirm_seconds: confirm,
                },
            };
            c.post("/v1/config/apply", &req)?
        }
        ConfigCmd::Diff { file } => {
            let (text, source) = read(&file)?;
            let req = ApplyRequest {
                text,
                source,
                opts: ApplyOptions {
                    dry_run: true,
                    ..Default::default()
                },
            };
            c.post("/v1/config/apply", &req)?
        }
        ConfigCmd::History => {
            return print_view::<Vec<CommitView>>(&c, "/v1/config/history", json_out)
        }
        ConfigCmd::Show { id } => {
            return print_view::<CommitText>(&c, &format!("/v1/config/history/{id}"), json_out)
        }
        ConfigCmd::Rollback { id } => {
            c.post(&format!("/v1/config/rollback/{id}"), &serde_json::json!({}))?
        }
        ConfigCmd::Confirm => {
            let id: u64 = c.call("/v1/config/confirm", &serde_json::json!({}))?;
            outln!("commit {id} confirmed");
            return Ok(());
        }
    };
    let r = r.checked()?;
    if json_out {
        print_json(&r.json()?);
    } else {
        out!("{}", r.view::<ApplyOutcome>()?.render());
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
            let mut req = RouteRequest {
                vrf,
                prefix,
                ..Default::default()
            };
            match target
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .as_slice()
            {
                ["via", list] => req.via = list.split(',').map(String::from).collect(),
                ["blackhole"] => req.blackhole = true,
                ["reject"] => req.reject = true,
                _ => return Err("expected `via ADDR[,ADDR...]`, `blackhole` or `reject`".into()),
            }
            c.post("/v1/routes", &req)?.checked()?;
        }
        RouteCmd::Del { prefix, vrf } => {
            c.delete(&RouteDelete { vrf, prefix }.path())?.checked()?;
        }
    }
    Ok(())
}

pub fn port(a: &ApiArgs, cmd: PortCmd) -> Result<(), String> {
    let c = a.client()?;
    let (name, what) = match &cmd {
        PortCmd::Remove { name } => (name, "remove"),
        PortCmd::Insert { name } => (name, "insert"),
        PortCmd::LinkDown { name } => (name, "link-down"),
        PortCmd::LinkUp { name } => (name, "link-up"),
    };
    post_empty(&c, &format!("/v1/ports/{}/{what}", enc(name)))?;
    outln!(
        "port {name} {}",
        match what {
            "remove" => "out of service",
            "insert" => "in service",
            "link-down" => "link down",
            _ => "link up",
        }
    );
    Ok(())
}

pub fn worker(a: &ApiArgs, cmd: WorkerCmd) -> Result<(), String> {
    let c = a.client()?;
    match cmd {
        WorkerCmd::Add { core } => {
            let w: WorkerAdded = c.call("/v1/workers", &WorkerRequest { core })?;
            outln!("worker {} started", w.worker);
        }
        WorkerCmd::Remove { id } => {
            c.delete(&format!("/v1/workers/{id}"))?.checked()?;
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
    let req = CaptureRequest {
        port: c.port.clone(),
        direction: c.direction.clone(),
        node: c.node.clone(),
        drops: c.drops,
        filter: c.filter.join(" "),
        count: c.count,
        snaplen: c.snaplen,
        timeout_ms: (c.timeout * 1000.0) as u64,
        format: Some(capture_format(&c).to_string()),
    };
    let r = client.post("/v1/capture", &req)?.checked()?;
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
    let req = TraceRequest {
        port: t.port,
        filter: t.filter.join(" "),
        count: t.count,
        timeout_ms: (t.timeout * 1000.0) as u64,
    };
    let r = c.post("/v1/trace", &req)?.checked()?;
    if t.json {
        print_json(&r.json()?);
    } else {
        out!("{}", r.view::<Vec<TraceView>>()?.render());
    }
    Ok(())
}

/// The secret of a client's token file: one token, read as the router reads its file (the
/// secret alone, or one `NAME ROLE SECRET` line).
fn client_secret(text: &str, f: &std::path::Path) -> Result<String, String> {
    let tokens = api_server::accounting::parse_tokens(text, &f.display().to_string())?;
    match &tokens[..] {
        [one] => Ok(one.secret.clone()),
        _ => Err(format!(
            "{}: a client's token file holds one token (the secret, or `NAME ROLE SECRET`)",
            f.display()
        )),
    }
}
