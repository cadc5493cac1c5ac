//! ME-6's VPN routes over real BGP (`--through-gobgp`): the far PEs' routes are fed into a far
//! GoBGP, which advertises them over an iBGP session (VPNv4 and VPNv6, labels and all) to the
//! router's own gobgpd, which the router's L3VPN service reads through its gRPC API, as a
//! deployed Linerate does; the router's exports travel back the same way.
//!
//! ```text
//!   tester --AddPathStream--> far gobgpd 127.0.0.2 ==iBGP== router's gobgpd 127.0.0.1
//!                                                              | WatchEvent / AddPath
//!                                                          L3VPN service -> VRFs
//! ```
//!
//! Both daemons run on loopback, started here and killed when the run ends. What is checked:
//! the far speaker took every route (GoBGP has dropped routes on injection), the router's
//! speaker received them all, the router installed each one where it belongs
//! ([`crate::l3vpn::imported`]), and its exports reached the far speaker; with the time each
//! stage took.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use control::l3vpn::client::Client;
use control::l3vpn::gobgp::{self, Family};
use control::l3vpn::service::Service;
use control::mgmt::Core;

use crate::report::Check;
use crate::scenario::VpnPlan;

/// Paths per AddPathStream message.
const PER_MESSAGE: usize = 1000;
const AS: u32 = 65000;

/// A gobgpd process, killed when dropped.
struct Gobgpd {
    child: Child,
    api: String,
}

impl Drop for Gobgpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What keeps the routes in place for the run: the service, then the two speakers (dropped in
/// that order, so the service stops before its speaker goes).
pub struct Speakers {
    _service: Service,
    router: Gobgpd,
    far: Gobgpd,
    dir: PathBuf,
}

impl Drop for Speakers {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts both speakers in `workdir`, the router's L3VPN service on its own, feeds the plan's
/// routes into the far one and waits until they are installed and the exports have arrived.
pub fn install(
    core: &std::sync::Arc<Core>,
    plan: &VpnPlan,
    workdir: &Path,
) -> Result<(Vec<Check>, String, Speakers), String> {
    let dir = workdir.join(format!("linerate-gobgp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let ports = free_ports(4)?;
    let (router_bgp, far_bgp, router_api, far_api) = (ports[0], ports[1], ports[2], ports[3]);
    let router = start(
        &dir,
        "router",
        "127.0.0.1",
        router_bgp,
        ("127.0.0.2", far_bgp),
        router_api,
    )?;
    let far = start(
        &dir,
        "far",
        "127.0.0.2",
        far_bgp,
        ("127.0.0.1", router_bgp),
        far_api,
    )?;
    let mut cfg = {
        let s = core.lock("tester.gobgp");
        s.router
            .cfg
            .l3vpn
            .clone()
            .ok_or("the config has no `l3vpn`")?
    };
    cfg.api = router
        .api
        .parse()
        .map_err(|e| format!("{}: {e}", router.api))?;
    let service = Service::start(core, cfg)?;
    let speakers = Speakers {
        _service: service,
        router,
        far,
        dir,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let n = plan.routes.len() as u64;
    let e = plan.exports as u64;
    let mut families: Vec<Family> = plan
        .routes
        .iter()
        .map(|r| gobgp::family_of(r.prefix))
        .collect();
    families.sort_by_key(|f| f.afi);
    families.dedup();
    let paths: Vec<gobgp::Path> = plan
        .routes
        .iter()
        .map(|r| gobgp::export_path(r.rd, r.prefix, r.label, r.next_hop, &r.rts))
        .collect();
    // Generous: GoBGP sends one prefix per UPDATE (PEERS: 500,000 took 55 s).
    let deadline = Instant::now() + Duration::from_secs(60) + Duration::from_millis(n / 2);
    let m = rt.block_on(feed_and_wait(
        core, &speakers, paths, &families, n, e, deadline,
    ))?;
    let st = core.vrf_view().status;
    let secs = |d: Option<Duration>| match d {
        Some(d) => format!("{:.1} s", d.as_secs_f64()),
        None => "never".into(),
    };
    let mut checks = vec![
        Check {
            name: "far speaker took every route".into(),
            expected: n.to_string(),
            measured: format!("{} paths in its table", m.far_fed),
            pass: m.far_fed == n,
        },
        Check {
            name: "router's speaker received every route".into(),
            expected: format!("{n} from the far speaker and the router's {e} exports"),
            measured: format!("{} paths in its table", m.router_has),
            pass: m.router_has == n + e,
        },
        Check {
            name: "exports reached the far speaker".into(),
            expected: format!(
                "{e} exported, none refused, {} paths at the far speaker",
                n + e
            ),
            measured: format!(
                "{} exported, {} errors, {} paths at the far speaker",
                st.exported, st.export_errors, m.far_has
            ),
            pass: st.exported as u64 == e && st.export_errors == 0 && m.far_has == n + e,
        },
    ];
    checks.extend(crate::l3vpn::imported(core, plan));
    let note = format!(
        "{n} VPN routes fed into a far GoBGP (AddPathStream, {PER_MESSAGE} a message) and sent \
         over iBGP to the router's gobgpd, read by its L3VPN service. The router's {e} exports \
         were at the far speaker {} after the service connected (the session up); from the \
         start of the feed the routes were in the far speaker's table at {}, in the router's \
         speaker's at {}, installed at {} ({:.0} routes/s end to end). Every route read back \
         from its VRF.",
        secs(m.exported),
        secs(m.fed),
        secs(m.received),
        secs(m.installed),
        m.installed
            .map(|d| n as f64 / d.as_secs_f64().max(1e-9))
            .unwrap_or(0.0)
    );
    Ok((checks, note, speakers))
}

/// What [`feed_and_wait`] saw: table sizes, and when each stage was complete (None: not by
/// the deadline): the exports from the service's connection, the rest from the feed's start.
struct Measured {
    far_fed: u64,
    router_has: u64,
    far_has: u64,
    fed: Option<Duration>,
    received: Option<Duration>,
    installed: Option<Duration>,
    exported: Option<Duration>,
}

/// How often the tables are looked at while waiting.
const POLL: Duration = Duration::from_millis(100);

async fn feed_and_wait(
    core: &Core,
    speakers: &Speakers,
    paths: Vec<gobgp::Path>,
    families: &[Family],
    n: u64,
    e: u64,
    deadline: Instant,
) -> Result<Measured, String> {
    let mut router = Client::connect(&speakers.router.api).await?;
    let mut far = Client::connect(&speakers.far.api).await?;
    // The service reads its speaker before anything arrives, as a router in service would.
    while !core.vrf_view().status.connected {
        if Instant::now() > deadline {
            return Err("the L3VPN service never reached the router's gobgpd".into());
        }
        tokio::time::sleep(POLL).await;
    }
    // The router exports its CE routes as soon as it reads its speaker: their arrival at the
    // far speaker says the session is up (and carries them); the feed starts after.
    let t0 = Instant::now();
    let mut m = Measured {
        far_fed: 0,
        router_has: 0,
        far_has: 0,
        fed: None,
        received: None,
        installed: None,
        exported: None,
    };
    while Instant::now() <= deadline {
        m.far_has = count(&mut far, families).await?;
        if m.far_has >= e {
            m.exported = Some(t0.elapsed());
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let t0 = Instant::now();
    far.add_paths(paths, PER_MESSAGE).await?;
    loop {
        m.far_fed = count(&mut far, families).await?.saturating_sub(m.far_has);
        if m.far_fed >= n {
            m.fed = Some(t0.elapsed());
            break;
        }
        if Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    while Instant::now() <= deadline {
        m.router_has = count(&mut router, families).await?;
        if m.router_has >= n + e {
            m.received = Some(t0.elapsed());
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    while Instant::now() <= deadline {
        let st = core.vrf_view().status;
        if st.installed as u64 >= n {
            m.installed = Some(t0.elapsed());
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    // A last look, in case a stage timed out part way.
    m.router_has = count(&mut router, families).await?;
    m.far_has = count(&mut far, families).await?;
    Ok(m)
}

/// Paths in a speaker's global table, over `families`.
async fn count(c: &mut Client, families: &[Family]) -> Result<u64, String> {
    let mut total = 0;
    for f in families {
        total += c.table_size(f.clone()).await?.1;
    }
    Ok(total)
}

/// `n` TCP ports free on loopback now (bound together, so they differ, then let go).
fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let ls: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").map_err(|e| format!("a free port: {e}")))
        .collect::<Result<_, _>>()?;
    ls.iter()
        .map(|l| l.local_addr().map(|a| a.port()).map_err(|e| e.to_string()))
        .collect()
}

/// Starts gobgpd `name`: BGP on `addr:port` with one iBGP neighbour `peer` (VPNv4 and VPNv6),
/// its API on 127.0.0.1:`api`; waits until the API answers.
fn start(
    dir: &Path,
    name: &str,
    addr: &str,
    port: u16,
    peer: (&str, u16),
    api: u16,
) -> Result<Gobgpd, String> {
    let conf = dir.join(format!("{name}.toml"));
    let mut t = format!(
        "[global.config]\n  as = {AS}\n  router-id = \"{addr}\"\n  port = {port}\n  \
         local-address-list = [\"{addr}\"]\n\n[[neighbors]]\n  [neighbors.config]\n    \
         neighbor-address = \"{}\"\n    peer-as = {AS}\n  [neighbors.transport.config]\n    \
         local-address = \"{addr}\"\n    remote-port = {}\n  [neighbors.timers.config]\n    \
         connect-retry = 1\n",
        peer.0, peer.1
    );
    for f in ["l3vpn-ipv4-unicast", "l3vpn-ipv6-unicast"] {
        t += &format!(
            "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      \
             afi-safi-name = \"{f}\"\n"
        );
    }
    std::fs::write(&conf, t).map_err(|e| format!("{}: {e}", conf.display()))?;
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).map_err(|e| e.to_string())?;
    let child = Command::new("gobgpd")
        .arg("-f")
        .arg(&conf)
        .args([
            "--api-hosts",
            &format!("127.0.0.1:{api}"),
            "-p",
            "--pprof-disable",
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("gobgpd (Debian's gobgpd package): {e}"))?;
    let mut d = Gobgpd {
        child,
        api: format!("127.0.0.1:{api}"),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    loop {
        let up = rt.block_on(async {
            let mut c = Client::connect(&d.api).await?;
            c.global().await
        });
        let exited = d.child.try_wait().ok().flatten().is_some();
        match up {
            Ok(_) => return Ok(d),
            Err(e) if exited || t0.elapsed() > Duration::from_secs(15) => {
                return Err(format!(
                    "gobgpd {name} did not answer on {} ({e}){}; its config and log are in {}",
                    d.api,
                    if exited { ", it exited" } else { "" },
                    dir.display()
                ))
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}
