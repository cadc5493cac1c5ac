//! Who sent each request, and a log record per command (accounting, as AAA accounting on a
//! router): the user is the Unix user at the other end of the API socket (SO_PEERCRED), or the
//! TCP listener's token holder. Every request that changes something, and every request the CLI
//! sends (it names the command line as typed and the terminal), is logged as a `COMMAND` record
//! with user, terminal and command, before it runs: a refused attempt is logged too. The event
//! manager's command detector reads these records.
//!
//! A request from the router's own process may name the user it runs for
//! (`x-linerate-on-behalf`: the event manager's commands); from anyone else that header is
//! ignored.

use std::sync::Arc;

use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::IncomingStream;
use control::mgmt::Core;
use control::syslog::Severity;

/// The far end of an API connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub user: String,
    pub pid: Option<i32>,
}

/// The login name of `uid` (from /etc/passwd), else `uid N`.
pub fn user_name(uid: u32) -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let id: u32 = f.nth(1)?.parse().ok()?;
            (id == uid).then(|| name.to_string())
        })
        .unwrap_or_else(|| format!("uid {uid}"))
}

impl Connected<IncomingStream<'_, tokio::net::UnixListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, tokio::net::UnixListener>) -> Self {
        match stream.io().peer_cred() {
            Ok(c) => Peer {
                user: user_name(c.uid()),
                pid: c.pid(),
            },
            Err(_) => Peer {
                user: "unknown".into(),
                pid: None,
            },
        }
    }
}

impl Connected<IncomingStream<'_, tokio::net::TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        Peer {
            user: format!("token@{}", stream.remote_addr().ip()),
            pid: None,
        }
    }
}

fn header<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// A `COMMAND` record: its severity, parameters and text.
pub type CommandRecord = (Severity, Vec<(&'static str, String)>, String);

/// What the record says about one request, or None for a request that is not accounted (a
/// read by a script or a scrape, which names no command).
pub fn command_record(
    peer: &Peer,
    own_pid: i32,
    method: &Method,
    path: &str,
    command: Option<&str>,
    terminal: Option<&str>,
    on_behalf: Option<&str>,
) -> Option<CommandRecord> {
    let changes = method != Method::GET && method != Method::HEAD;
    if !changes && command.is_none() {
        return None;
    }
    let user = match on_behalf {
        Some(u) if peer.pid == Some(own_pid) => u.to_string(),
        _ => peer.user.clone(),
    };
    let terminal = terminal.unwrap_or("-").to_string();
    let command = command
        .map(str::to_string)
        .unwrap_or_else(|| format!("{method} {path}"));
    let text = format!("{user} on {terminal}: {command}");
    let sev = if changes {
        Severity::Notice
    } else {
        Severity::Informational
    };
    Some((
        sev,
        vec![
            ("user", user),
            ("terminal", terminal),
            ("command", command),
            ("request", format!("{method} {path}")),
        ],
        text,
    ))
}

pub async fn account(
    State(core): State<Arc<Core>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Request,
    next: Next,
) -> Response {
    if let Some((sev, params, text)) = command_record(
        &peer,
        std::process::id() as i32,
        req.method(),
        req.uri().path(),
        header(&req, "x-linerate-command"),
        header(&req, "x-linerate-terminal"),
        header(&req, "x-linerate-on-behalf"),
    ) {
        core.logger.log(sev, "COMMAND", &params, text);
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(pid: i32) -> Peer {
        Peer {
            user: "alice".into(),
            pid: Some(pid),
        }
    }

    #[test]
    fn changes_and_cli_commands_are_accounted_plain_reads_are_not() {
        assert!(command_record(&peer(5), 1, &Method::GET, "/metrics", None, None, None).is_none());
        let (sev, p, text) = command_record(
            &peer(5),
            1,
            &Method::POST,
            "/v1/config/apply",
            Some("config apply lab.yaml"),
            Some("pts/3"),
            None,
        )
        .unwrap();
        assert_eq!(sev, Severity::Notice);
        assert_eq!(text, "alice on pts/3: config apply lab.yaml");
        assert_eq!(p[0], ("user", "alice".to_string()));
        let (sev, p, _) = command_record(
            &peer(5),
            1,
            &Method::GET,
            "/v1/ports",
            Some("show ports"),
            None,
            None,
        )
        .unwrap();
        assert_eq!(sev, Severity::Informational);
        assert_eq!(p[1].1, "-");
        let (_, p, _) =
            command_record(&peer(5), 1, &Method::DELETE, "/v1/routes", None, None, None).unwrap();
        assert_eq!(p[2].1, "DELETE /v1/routes");
    }

    #[test]
    fn only_the_router_itself_may_name_another_user() {
        let (_, p, _) = command_record(
            &peer(5),
            1,
            &Method::POST,
            "/x",
            None,
            None,
            Some("event-manager"),
        )
        .unwrap();
        assert_eq!(p[0].1, "alice", "a client cannot pass itself off");
        let (_, p, _) = command_record(
            &peer(1),
            1,
            &Method::POST,
            "/x",
            None,
            None,
            Some("event-manager"),
        )
        .unwrap();
        assert_eq!(p[0].1, "event-manager");
    }

    #[test]
    fn root_has_a_name() {
        assert_eq!(user_name(0), "root");
        assert_eq!(user_name(4_000_000_000), "uid 4000000000");
    }
}
