//! The API client: one HTTP/1.1 request over the Unix socket (or TCP with a token), answered
//! with the status and the body, or read as the typed view it carries. The CLI makes one request
//! per command.

use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::Serialize;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::Request;
use hyper_util::rt::TokioIo;

use crate::ApiError;

/// Where the API is.
#[derive(Clone, Debug)]
pub enum Endpoint {
    Unix(PathBuf),
    /// `host:port` and the bearer token.
    Tcp(String, String),
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Response {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub fn json(&self) -> Result<serde_json::Value, String> {
        self.view()
    }

    /// The body as the view it carries.
    pub fn view<T: DeserializeOwned>(&self) -> Result<T, String> {
        serde_json::from_slice(&self.body).map_err(|e| format!("bad answer from the router: {e}"))
    }

    /// Itself if the router did what was asked, else the router's [`ApiError`] as a message
    /// (with a config's errors one per line).
    pub fn checked(self) -> Result<Response, String> {
        if self.ok() {
            return Ok(self);
        }
        match self.view::<ApiError>() {
            Ok(e) => Err(e.to_string()),
            Err(_) => Err(format!(
                "the router answered {}: {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )),
        }
    }
}

pub struct Client {
    ep: Endpoint,
    rt: tokio::runtime::Runtime,
    /// Headers every request carries (the command line and terminal, for accounting).
    headers: Vec<(String, String)>,
}

impl Client {
    pub fn new(ep: Endpoint) -> Result<Client, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Client {
            ep,
            rt,
            headers: Vec::new(),
        })
    }

    /// Sends `name: value` with every request (what a header cannot carry, control and
    /// non-ASCII characters, is sent as `?`; at most 1,024 characters).
    pub fn header(&mut self, name: &str, value: &str) {
        let v: String = value
            .chars()
            .take(1024)
            .map(|c| {
                if c.is_ascii() && !c.is_ascii_control() {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        self.headers.push((name.to_string(), v));
    }

    pub fn get(&self, path: &str) -> Result<Response, String> {
        self.request("GET", path, None)
    }

    pub fn post(&self, path: &str, body: &impl Serialize) -> Result<Response, String> {
        let body = serde_json::to_vec(body).map_err(|e| e.to_string())?;
        self.request("POST", path, Some(body))
    }

    /// `GET path`, read as the view it answers (an error answer is the router's message).
    pub fn view<T: DeserializeOwned>(&self, path: &str) -> Result<T, String> {
        self.get(path)?.checked()?.view()
    }

    /// `POST path` with a typed request, read as the typed answer.
    pub fn call<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, String> {
        self.post(path, body)?.checked()?.view()
    }

    pub fn delete(&self, path: &str) -> Result<Response, String> {
        self.request("DELETE", path, None)
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Response, String> {
        self.rt.block_on(self.send(method, path, body))
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Response, String> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "linerate");
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        if let Endpoint::Tcp(_, token) = &self.ep {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| e.to_string())?;
        let resp = match &self.ep {
            Endpoint::Unix(p) => {
                let s = tokio::net::UnixStream::connect(p).await.map_err(|e| {
                    format!(
                        "cannot reach the router at {}: {e} (is `linerate daemon` running? --socket names another socket)",
                        p.display()
                    )
                })?;
                exchange(TokioIo::new(s), req).await?
            }
            Endpoint::Tcp(addr, _) => {
                let s = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(|e| format!("cannot reach the router at {addr}: {e}"))?;
                exchange(TokioIo::new(s), req).await?
            }
        };
        Ok(resp)
    }
}

async fn exchange<IO>(io: IO, req: Request<Full<Bytes>>) -> Result<Response, String>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut send, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes()
        .to_vec();
    driver.abort();
    Ok(Response {
        status,
        content_type,
        body,
    })
}

/// POSTs `json` to an `http://HOST[:PORT]/PATH` URL and returns the answer's status (the event
/// manager's webhook action); gives up after `timeout`.
pub fn post_json_url(url: &str, json: &str, timeout: std::time::Duration) -> Result<u16, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(format!("{url}: no host"));
    }
    let addr = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        && !authority.ends_with(']')
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let work = async {
            let s = tokio::net::TcpStream::connect(&addr)
                .await
                .map_err(|e| format!("{addr}: {e}"))?;
            let req = Request::builder()
                .method("POST")
                .uri(path)
                .header("host", authority)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(json.to_string())))
                .map_err(|e| e.to_string())?;
            exchange(TokioIo::new(s), req).await.map(|r| r.status)
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| format!("timed out after {} ms", timeout.as_millis()))?
    })
}
