//! The HTTP/JSON server. Each handler runs its `Core` call on tokio's blocking pool (a command
//! may wait for the state lock or, for capture and trace, for frames), so the listener itself
//! never waits. The server's threads run at a lower CPU priority than the workers: on a machine
//! where they share cores, a polling storm slows the API down, not forwarding.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use api::requests::{
    AclEntryRequest, AclQuery, ApplyRequest, BgpVpnQuery, CaptureRequest, GtpContextQuery,
    LogQuery, MacQuery, MrouteQuery, RouteDelete, RouteRequest, RoutesQuery, SnoopQuery,
    TraceRequest, WorkerRequest,
};
use api::views::{CommitText, RunningConfig, WorkerAdded};
use api::{ApiError, ErrorKind};
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use control::mgmt::show::trace_view;
use control::mgmt::Core;
use tokio::sync::oneshot;

/// Where to listen.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub socket: PathBuf,
    /// Also the full API on TCP, for requests that carry one of these bearer tokens (each names
    /// its holder and role: see `accounting::parse_tokens`).
    pub tcp: Option<(SocketAddr, Vec<crate::accounting::Token>)>,
    /// `/metrics` alone on TCP, without a token (what Prometheus scrapes).
    pub metrics: Option<SocketAddr>,
    /// `nice` value for the server's threads (0..=19).
    pub nice: i32,
    /// Members of this Unix group may change things over the socket (besides root and the
    /// router's own user); others are read-only.
    pub admin_group: String,
}

/// A running server; dropping it stops it.
pub struct Server {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    pub socket: PathBuf,
}

impl Server {
    pub(crate) fn new(
        stop: oneshot::Sender<()>,
        thread: JoinHandle<()>,
        socket: PathBuf,
    ) -> Server {
        Server {
            stop: Some(stop),
            thread: Some(thread),
            socket,
        }
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Lowers the calling thread's CPU priority to `nice` (the control plane's threads use it, so
/// workers keep the CPU when they share it).
pub fn lower_priority(nice: i32) {
    // SAFETY: gettid and setpriority have no memory-safety preconditions; they only read and
    // change this thread's scheduling priority.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice);
    }
}

/// Makes `socket`'s folder and takes the place of a socket file left by a process that is gone;
/// refuses one that answers (another `who` is listening there).
pub fn prepare_socket(socket: &std::path::Path, who: &str) -> Result<(), String> {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    if socket.exists() {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return Err(format!(
                "{}: another {who} is listening there",
                socket.display()
            ));
        }
        let _ = std::fs::remove_file(socket);
    }
    Ok(())
}

/// Starts the server on its own threads; returns once every listener is bound.
pub fn serve(core: Arc<Core>, opts: ServeOptions) -> Result<Server, String> {
    let nice = opts.nice;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(8)
        .thread_name("api")
        .on_thread_start(move || lower_priority(nice))
        .enable_all()
        .build()
        .map_err(|e| format!("API runtime: {e}"))?;
    prepare_socket(&opts.socket, "linerate")?;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let o = opts.clone();
    let thread = std::thread::Builder::new()
        .name("api-server".into())
        .spawn(move || {
            lower_priority(o.nice);
            rt.block_on(async move {
                let unix = match tokio::net::UnixListener::bind(&o.socket) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("{}: {e}", o.socket.display())));
                        return;
                    }
                };
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&o.socket, std::fs::Permissions::from_mode(0o660));
                let (stop_all, _) = tokio::sync::broadcast::channel::<()>(1);
                let access = crate::accounting::Access {
                    core: core.clone(),
                    admin_group: o.admin_group.clone(),
                };
                let mut tasks = Vec::new();
                let app = routes(core.clone())
                    .layer(middleware::from_fn_with_state(
                        access.clone(),
                        crate::accounting::account,
                    ))
                    .into_make_service_with_connect_info::<crate::accounting::Peer>();
                let mut rx = stop_all.subscribe();
                tasks.push(tokio::spawn(async move {
                    let _ = axum::serve(unix, app)
                        .with_graceful_shutdown(async move {
                            let _ = rx.recv().await;
                        })
                        .await;
                }));
                if let Some((addr, tokens)) = o.tcp.clone() {
                    let l = match tokio::net::TcpListener::bind(addr).await {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(format!("API on {addr}: {e}")));
                            return;
                        }
                    };
                    let tokens = Arc::new(tokens);
                    let app = routes(core.clone())
                        .layer(middleware::from_fn_with_state(
                            access.clone(),
                            crate::accounting::account,
                        ))
                        .layer(middleware::from_fn(move |req: Request, next: Next| {
                            let tokens = tokens.clone();
                            async move { authorize(&tokens, req, next).await }
                        }))
                        .into_make_service_with_connect_info::<crate::accounting::Peer>();
                    let mut rx = stop_all.subscribe();
                    tasks.push(tokio::spawn(async move {
                        let _ = axum::serve(l, app)
                            .with_graceful_shutdown(async move {
                                let _ = rx.recv().await;
                            })
                            .await;
                    }));
                }
                if let Some(addr) = o.metrics {
                    let l = match tokio::net::TcpListener::bind(addr).await {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(format!("metrics on {addr}: {e}")));
                            return;
                        }
                    };
                    let app = Router::new()
                        .route("/metrics", get(metrics))
                        .with_state(core.clone());
                    let mut rx = stop_all.subscribe();
                    tasks.push(tokio::spawn(async move {
                        let _ = axum::serve(l, app)
                            .with_graceful_shutdown(async move {
                                let _ = rx.recv().await;
                            })
                            .await;
                    }));
                }
                let _ = ready_tx.send(Ok(()));
                let _ = stop_rx.await;
                let _ = stop_all.send(());
                for t in tasks {
                    let _ = t.await;
                }
            });
        })
        .map_err(|e| e.to_string())?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(Server {
            stop: Some(stop_tx),
            thread: Some(thread),
            socket: opts.socket,
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => Err("the API server thread ended before it was ready".into()),
    }
}

async fn authorize(tokens: &[crate::accounting::Token], mut req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    match crate::accounting::holder(tokens, given) {
        Some(h) => {
            req.extensions_mut().insert(h);
            next.run(req).await
        }
        None => error(ApiError::new(
            ErrorKind::Unauthorized,
            "this listener needs `Authorization: Bearer TOKEN` with a token it knows",
        )),
    }
}

pub(crate) fn error(e: ApiError) -> Response {
    let status =
        StatusCode::from_u16(e.kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(e)).into_response()
}

type Shared = State<Arc<Core>>;

fn running_config(c: &Core) -> RunningConfig {
    let (text, source, commit) = c.running_config();
    RunningConfig {
        text,
        source,
        commit,
    }
}

/// A JSON request body, or what is wrong with it.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::invalid(format!("request body: {e}")))
}

/// Runs a blocking `Core` call off the async threads and turns its answer into JSON.
async fn call<T, F>(core: Arc<Core>, f: F) -> Response
where
    T: serde::Serialize + Send + 'static,
    F: FnOnce(&Arc<Core>) -> Result<T, ApiError> + Send + 'static,
{
    match tokio::task::spawn_blocking(move || f(&core)).await {
        Ok(Ok(v)) => Json(v).into_response(),
        Ok(Err(e)) => error(e),
        Err(e) => error(ApiError::internal(format!("command failed: {e}"))),
    }
}

fn routes(core: Arc<Core>) -> Router {
    Router::new()
        .route(
            "/v1/system",
            get(|State(c): Shared| call(c, |c| Ok(c.system()))),
        )
        .route(
            "/v1/interfaces",
            get(|State(c): Shared| call(c, |c| Ok(c.interfaces()))),
        )
        .route(
            "/v1/ports",
            get(|State(c): Shared| call(c, |c| Ok(c.ports()))),
        )
        .route(
            "/v1/ports/{name}/link",
            get(|State(c): Shared, Path(n): Path<String>| call(c, move |c| c.link_diagnostics(&n))),
        )
        .route(
            "/v1/ports/{name}/remove",
            post(|State(c): Shared, Path(n): Path<String>| call(c, move |c| c.port_remove(&n))),
        )
        .route(
            "/v1/ports/{name}/link-down",
            post(|State(c): Shared, Path(n): Path<String>| {
                call(c, move |c| c.port_link(&n, false))
            }),
        )
        .route(
            "/v1/ports/{name}/link-up",
            post(|State(c): Shared, Path(n): Path<String>| call(c, move |c| c.port_link(&n, true))),
        )
        .route(
            "/v1/ports/{name}/insert",
            post(|State(c): Shared, Path(n): Path<String>| call(c, move |c| c.port_insert(&n))),
        )
        .route(
            "/v1/routes",
            get(routes_get).post(route_add).delete(route_del),
        )
        .route(
            "/v1/fpm",
            get(|State(c): Shared| call(c, |c| control::fpm::status(c))),
        )
        .route(
            "/v1/punt",
            get(|State(c): Shared| call(c, |c| c.punt_status())),
        )
        .route(
            "/v1/neighbors",
            get(|State(c): Shared| call(c, |c| Ok(c.neighbors()))),
        )
        .route(
            "/v1/counters",
            get(|State(c): Shared| call(c, |c| Ok(c.counters()))),
        )
        .route(
            "/v1/counters/clear",
            post(|State(c): Shared| {
                call(c, |c| {
                    c.clear_counters();
                    Ok(())
                })
            }),
        )
        .route("/v1/cpu", get(|State(c): Shared| call(c, |c| c.cpu())))
        .route(
            "/v1/event-manager",
            get(|State(c): Shared| call(c, |c| Ok(c.event_manager()))),
        )
        .route(
            "/v1/bridges",
            get(|State(c): Shared| call(c, |c| Ok(c.bridges()))),
        )
        .route("/v1/mac-table", get(mac_table))
        .route("/v1/mac-table/clear", post(mac_clear))
        .route("/v1/igmp-snooping", get(igmp_snooping))
        .route("/v1/mroutes", get(mroutes))
        .route("/v1/gtp/contexts", get(gtp_contexts))
        .route(
            "/v1/gtp/statistics",
            get(|State(c): Shared| call(c, |c| c.gtp_stats())),
        )
        .route(
            "/v1/dlsw/peers",
            get(|State(c): Shared| call(c, |c| Ok(c.dlsw_peers()))),
        )
        .route(
            "/v1/dlsw/circuits",
            get(|State(c): Shared| call(c, |c| Ok(c.dlsw_circuits()))),
        )
        .route(
            "/v1/dlsw/reachability",
            get(|State(c): Shared| call(c, |c| Ok(c.dlsw_reachability()))),
        )
        .route(
            "/v1/mpls/forwarding-table",
            get(|State(c): Shared| call(c, |c| Ok(c.mpls_view()))),
        )
        .route(
            "/v1/mpls/ldp/neighbor",
            get(|State(c): Shared| call(c, |c| Ok(c.ldp_neighbors()))),
        )
        .route(
            "/v1/mpls/ldp/discovery",
            get(|State(c): Shared| call(c, |c| Ok(c.ldp_discovery()))),
        )
        .route(
            "/v1/mpls/ldp/binding",
            get(|State(c): Shared| call(c, |c| Ok(c.ldp_bindings()))),
        )
        .route(
            "/v1/l2vpn",
            get(|State(c): Shared| call(c, |c| Ok(c.l2vpn_view()))),
        )
        .route(
            "/v1/vrf",
            get(|State(c): Shared| call(c, |c| Ok(c.vrf_view()))),
        )
        .route("/v1/bgp/vpn", get(bgp_vpn))
        .route(
            "/v1/atm/pvcs",
            get(|State(c): Shared| call(c, |c| Ok(c.atm_pvcs()))),
        )
        .route(
            "/v1/apns",
            get(|State(c): Shared| call(c, |c| Ok(c.apns()))),
        )
        .route("/v1/gtp/contexts/{teid}", delete(gtp_clear))
        .route("/v1/igmp-snooping/clear", post(igmp_snooping_clear))
        .route(
            "/v1/runtime",
            get(|State(c): Shared| call(c, |c| Ok(c.runtime()))),
        )
        .route(
            "/v1/runtime/clear",
            post(|State(c): Shared| {
                call(c, |c| {
                    c.clear_runtime();
                    Ok(())
                })
            }),
        )
        .route(
            "/v1/errors",
            get(|State(c): Shared| call(c, |c| Ok(c.errors()))),
        )
        .route(
            "/v1/workers",
            get(|State(c): Shared| call(c, |c| Ok(c.workers()))).post(worker_add),
        )
        .route(
            "/v1/workers/{id}",
            axum::routing::delete(|State(c): Shared, Path(id): Path<usize>| {
                call(c, move |c| c.worker_remove(id))
            }),
        )
        .route("/v1/logging", get(logging))
        .route(
            "/v1/config",
            get(|State(c): Shared| call(c, |c| Ok(running_config(c)))),
        )
        .route(
            "/v1/config/history",
            get(|State(c): Shared| {
                call(c, |c| {
                    Ok(c.history().iter().map(|k| k.view()).collect::<Vec<_>>())
                })
            }),
        )
        .route(
            "/v1/config/history/{id}",
            get(|State(c): Shared, Path(id): Path<u64>| {
                call(c, move |c| {
                    let k = c.commit_text(id)?;
                    Ok(CommitText {
                        commit: k.view(),
                        text: k.text,
                    })
                })
            }),
        )
        .route("/v1/config/apply", post(config_apply))
        .route(
            "/v1/session/configure",
            post(|State(c): Shared| {
                // Entering configure mode is logged by the accounting layer (CONFIG_MODE); the
                // answer is the candidate's starting point.
                call(c, |c| Ok(running_config(c)))
            }),
        )
        .route(
            "/v1/config/confirm",
            post(|State(c): Shared| call(c, |c| c.confirm())),
        )
        .route(
            "/v1/config/rollback/{id}",
            post(|State(c): Shared, Path(id): Path<u64>| call(c, move |c| c.rollback(id))),
        )
        .route("/v1/acl", get(acl_show))
        .route("/v1/acl/{name}/entries", post(acl_add))
        .route(
            "/v1/acl/{name}/entries/{seq}",
            axum::routing::delete(|State(c): Shared, Path((name, seq)): Path<(String, u32)>| {
                call(c, move |c| c.acl_entry_remove(&name, seq))
            }),
        )
        .route("/v1/qos", get(|State(c): Shared| call(c, |c| Ok(c.qos()))))
        .route(
            "/v1/flows",
            get(|State(c): Shared| call(c, |c| Ok(c.flows()))),
        )
        .route("/v1/capture", post(capture))
        .route("/v1/trace", post(trace))
        .route("/metrics", get(metrics))
        .with_state(core)
}

async fn routes_get(State(c): Shared, Query(q): Query<RoutesQuery>) -> Response {
    call(c, move |c| c.routes(&q)).await
}

async fn route_add(State(c): Shared, body: Bytes) -> Response {
    let r: RouteRequest = match parse(&body) {
        Ok(x) => x,
        Err(e) => return error(e),
    };
    call(c, move |c| c.route_add(&r)).await
}

async fn route_del(State(c): Shared, Query(p): Query<RouteDelete>) -> Response {
    call(c, move |c| c.route_del(p.vrf.as_deref(), &p.prefix)).await
}

async fn worker_add(State(c): Shared, body: Bytes) -> Response {
    let w: WorkerRequest = if body.is_empty() {
        WorkerRequest::default()
    } else {
        match parse(&body) {
            Ok(x) => x,
            Err(e) => return error(e),
        }
    };
    call(c, move |c| {
        c.worker_add(w.core).map(|worker| WorkerAdded { worker })
    })
    .await
}

async fn logging(State(c): Shared, Query(p): Query<LogQuery>) -> Response {
    call(c, move |c| Ok(c.logging(p.n.unwrap_or(50)))).await
}

async fn bgp_vpn(State(c): Shared, Query(q): Query<BgpVpnQuery>) -> Response {
    call(c, move |c| Ok(c.bgp_vpn_view(q.limit))).await
}

async fn mac_table(State(c): Shared, Query(q): Query<MacQuery>) -> Response {
    call(c, move |c| c.mac_table(&q)).await
}

async fn gtp_contexts(State(c): Shared, Query(q): Query<GtpContextQuery>) -> Response {
    call(c, move |c| c.gtp_contexts(&q)).await
}

async fn gtp_clear(State(c): Shared, Path(teid): Path<String>) -> Response {
    let t = teid
        .strip_prefix("0x")
        .map_or_else(|| teid.parse(), |h| u32::from_str_radix(h, 16));
    let Ok(t) = t else {
        return error(ApiError::invalid(format!(
            "TEID `{teid}`: a number (decimal or 0x hex)"
        )));
    };
    call(c, move |c| c.gtp_clear(t)).await
}

async fn mroutes(State(c): Shared, Query(q): Query<MrouteQuery>) -> Response {
    call(c, move |c| c.mroutes(&q)).await
}

async fn igmp_snooping(State(c): Shared, Query(q): Query<SnoopQuery>) -> Response {
    call(c, move |c| c.igmp_snooping(&q)).await
}

async fn igmp_snooping_clear(State(c): Shared, body: Bytes) -> Response {
    let q: SnoopQuery = match parse(&body) {
        Ok(x) => x,
        Err(e) => return error(e),
    };
    call(c, move |c| {
        c.igmp_snooping_clear(&q)
            .map(|n| serde_json::json!({ "ended": n }))
    })
    .await
}

async fn mac_clear(State(c): Shared, body: Bytes) -> Response {
    let q: MacQuery = match parse(&body) {
        Ok(x) => x,
        Err(e) => return error(e),
    };
    call(c, move |c| c.mac_clear(&q)).await
}

async fn acl_show(State(c): Shared, Query(p): Query<AclQuery>) -> Response {
    call(c, move |c| c.acls(p.name.as_deref())).await
}

async fn acl_add(State(c): Shared, Path(name): Path<String>, body: Bytes) -> Response {
    let b: AclEntryRequest = match parse(&body) {
        Ok(x) => x,
        Err(e) => return error(e),
    };
    call(c, move |c| c.acl_entry_add(&name, &b.entry)).await
}

async fn config_apply(State(c): Shared, body: Bytes) -> Response {
    let b: ApplyRequest = match parse(&body) {
        Ok(x) => x,
        Err(e) => return error(e),
    };
    call(c, move |c| c.apply(&b.text, &b.source, b.opts)).await
}

async fn capture(State(c): Shared, body: Bytes) -> Response {
    let r: CaptureRequest = match parse(&body) {
        Ok(x) => x,
        Err(e) => return error(e),
    };
    let res = tokio::task::spawn_blocking(move || c.capture_file(&r)).await;
    match res {
        Ok(Ok(f)) => {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                f.format.content_type().parse().expect("static"),
            );
            headers.insert("x-linerate-frames", f.frames.into());
            (StatusCode::OK, headers, f.bytes).into_response()
        }
        Ok(Err(e)) => error(e),
        Err(e) => error(ApiError::internal(e.to_string())),
    }
}

async fn trace(State(c): Shared, body: Bytes) -> Response {
    let r: TraceRequest = match parse(&body) {
        Ok(x) => x,
        Err(e) => return error(e),
    };
    call(c, move |c| {
        Ok(c.trace(&r)?.into_iter().map(trace_view).collect::<Vec<_>>())
    })
    .await
}

async fn metrics(State(c): Shared) -> Response {
    match tokio::task::spawn_blocking(move || c.metrics()).await {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => error(ApiError::internal(e.to_string())),
    }
}
