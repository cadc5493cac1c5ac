//! A client of GoBGP's gRPC API: the calls the VPN service makes (its speaker's AS, the best
//! paths as they change, a path added or withdrawn) and the ones a route feeder makes (paths
//! added in bulk, a table's size).
//!
//! Async, on whatever tokio runtime the caller runs; every error is a string naming the call.

use std::time::Duration;

use tonic::codegen::http::uri::PathAndQuery;
use tonic::codegen::tokio_stream;
use tonic::transport::{Channel, Endpoint};
use tonic::Streaming;
use tonic_prost::ProstCodec;

use super::gobgp::{self, Family, Path};

/// GoBGP sends the whole table in a watch's first event: allow it whole (230,400 routes are
/// ~50 MB).
const MAX_MESSAGE: usize = 1 << 30;

pub struct Client {
    grpc: tonic::client::Grpc<Channel>,
}

impl Client {
    /// Connects to the API at `api` (`ADDR:PORT`), giving up after a second.
    pub async fn connect(api: &str) -> Result<Client, String> {
        let ch = Endpoint::from_shared(format!("http://{api}"))
            .map_err(|e| e.to_string())?
            .connect_timeout(Duration::from_secs(1))
            .connect()
            .await
            .map_err(|e| format!("connecting: {e}"))?;
        Ok(Client {
            grpc: tonic::client::Grpc::new(ch).max_decoding_message_size(MAX_MESSAGE),
        })
    }

    async fn unary<Req, Resp>(&mut self, req: Req, path: &'static str) -> Result<Resp, String>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        self.grpc.ready().await.map_err(|e| e.to_string())?;
        self.grpc
            .unary(
                tonic::Request::new(req),
                PathAndQuery::from_static(path),
                ProstCodec::<Req, Resp>::default(),
            )
            .await
            .map(|r| r.into_inner())
            .map_err(|s| format!("{path}: {}", s.message()))
    }

    /// The speaker's AS and router id (and proof that it answers).
    pub async fn global(&mut self) -> Result<gobgp::Global, String> {
        let r: gobgp::GetBgpResponse = self
            .unary(gobgp::GetBgpRequest {}, "/apipb.GobgpApi/GetBgp")
            .await?;
        Ok(r.global.unwrap_or_default())
    }

    /// The best path of every destination as it changes, the table as it is first.
    pub async fn watch_best(&mut self) -> Result<Streaming<gobgp::WatchEventResponse>, String> {
        self.grpc.ready().await.map_err(|e| e.to_string())?;
        let watch = gobgp::WatchEventRequest {
            table: Some(gobgp::WatchTable {
                filters: vec![gobgp::WatchFilter {
                    r#type: 0,
                    init: true,
                }],
            }),
        };
        self.grpc
            .server_streaming(
                tonic::Request::new(watch),
                PathAndQuery::from_static("/apipb.GobgpApi/WatchEvent"),
                ProstCodec::<gobgp::WatchEventRequest, gobgp::WatchEventResponse>::default(),
            )
            .await
            .map(|r| r.into_inner())
            .map_err(|s| format!("WatchEvent: {}", s.message()))
    }

    /// Adds `path` to the global table; GoBGP's id for it (to withdraw it by).
    pub async fn add_path(&mut self, path: Path) -> Result<Vec<u8>, String> {
        let req = gobgp::AddPathRequest {
            table_type: gobgp::TABLE_GLOBAL,
            vrf_id: String::new(),
            path: Some(path),
        };
        let r: gobgp::AddPathResponse = self.unary(req, "/apipb.GobgpApi/AddPath").await?;
        Ok(r.uuid)
    }

    /// Withdraws the path `add_path` answered `uuid` for.
    pub async fn delete_path(&mut self, family: Family, uuid: Vec<u8>) -> Result<(), String> {
        let req = gobgp::DeletePathRequest {
            table_type: gobgp::TABLE_GLOBAL,
            family: Some(family),
            uuid,
            ..Default::default()
        };
        self.unary::<_, gobgp::Empty>(req, "/apipb.GobgpApi/DeletePath")
            .await
            .map(|_| ())
    }

    /// Adds `paths` to the global table in one client stream, `per_message` paths a message.
    /// GoBGP answers when the stream ends; it takes the paths in as they arrive.
    pub async fn add_paths(&mut self, paths: Vec<Path>, per_message: usize) -> Result<(), String> {
        let mut messages = Vec::with_capacity(paths.len() / per_message.max(1) + 1);
        let mut it = paths.into_iter().peekable();
        while it.peek().is_some() {
            messages.push(gobgp::AddPathStreamRequest {
                table_type: gobgp::TABLE_GLOBAL,
                vrf_id: String::new(),
                paths: it.by_ref().take(per_message.max(1)).collect(),
            });
        }
        self.grpc.ready().await.map_err(|e| e.to_string())?;
        self.grpc
            .client_streaming(
                tonic::Request::new(tokio_stream::iter(messages)),
                PathAndQuery::from_static("/apipb.GobgpApi/AddPathStream"),
                ProstCodec::<gobgp::AddPathStreamRequest, gobgp::Empty>::default(),
            )
            .await
            .map(|_| ())
            .map_err(|s| format!("AddPathStream: {}", s.message()))
    }

    /// The global table of `family`: (destinations, paths).
    pub async fn table_size(&mut self, family: Family) -> Result<(u64, u64), String> {
        let req = gobgp::GetTableRequest {
            table_type: gobgp::TABLE_GLOBAL,
            family: Some(family),
            name: String::new(),
        };
        let r: gobgp::GetTableResponse = self.unary(req, "/apipb.GobgpApi/GetTable").await?;
        Ok((r.num_destination, r.num_path))
    }
}
