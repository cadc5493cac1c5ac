//! The supervisor's API on its own Unix socket: `GET /v1/logical-routers[/NAME]`, `POST
//! /v1/logical-routers/NAME/{start,stop,restart,upgrade}`. Only root (and the socket's group)
//! may connect: these start and stop routers.

use std::path::PathBuf;
use std::sync::Arc;

use api::requests::{RestartRequest, UpgradeRequest};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use control::lr::supervisor::Supervisor;
use tokio::sync::oneshot;

use crate::server::{error, Server};

type S = State<Arc<Supervisor>>;

/// Runs `f` on tokio's blocking pool (stop and start wait for the process) and answers its
/// view or its error.
async fn blocking<T: serde::Serialize + Send + 'static>(
    f: impl FnOnce() -> Result<T, api::ApiError> + Send + 'static,
) -> Response {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Json(v).into_response(),
        Ok(Err(e)) => error(e),
        Err(e) => error(api::ApiError::internal(e.to_string())),
    }
}

async fn list(State(s): S) -> Response {
    blocking(move || Ok(s.list())).await
}
async fn one(State(s): S, Path(name): Path<String>) -> Response {
    blocking(move || s.get(&name)).await
}
async fn start(State(s): S, Path(name): Path<String>) -> Response {
    blocking(move || s.start_lr(&name)).await
}
async fn stop(State(s): S, Path(name): Path<String>) -> Response {
    blocking(move || s.stop(&name)).await
}
async fn restart(State(s): S, Path(name): Path<String>, Json(r): Json<RestartRequest>) -> Response {
    blocking(move || s.restart(&name, r.cold)).await
}
async fn upgrade(State(s): S, Path(name): Path<String>, Json(r): Json<UpgradeRequest>) -> Response {
    blocking(move || s.upgrade(&name, std::path::Path::new(&r.binary), r.cold)).await
}

/// Serves the supervisor's API on `socket` until the returned server is stopped.
pub fn serve_supervisor(sup: Arc<Supervisor>, socket: PathBuf) -> Result<Server, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(4)
        .thread_name("lr-api")
        .enable_all()
        .build()
        .map_err(|e| format!("API runtime: {e}"))?;
    crate::server::prepare_socket(&socket, "supervisor")?;
    let l = {
        let _g = rt.enter();
        tokio::net::UnixListener::bind(&socket).map_err(|e| format!("{}: {e}", socket.display()))?
    };
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o660))
        .map_err(|e| format!("{}: {e}", socket.display()))?;
    let app = Router::new()
        .route("/v1/logical-routers", get(list))
        .route("/v1/logical-routers/{name}", get(one))
        .route("/v1/logical-routers/{name}/start", post(start))
        .route("/v1/logical-routers/{name}/stop", post(stop))
        .route("/v1/logical-routers/{name}/restart", post(restart))
        .route("/v1/logical-routers/{name}/upgrade", post(upgrade))
        .with_state(sup);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("lr-api".into())
        .spawn(move || {
            rt.block_on(async move {
                let _ = axum::serve(l, app)
                    .with_graceful_shutdown(async move {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
        })
        .map_err(|e| e.to_string())?;
    Ok(Server::new(stop_tx, thread, socket))
}
