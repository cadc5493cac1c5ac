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
//!
//! Roles: on the socket, root, the router's own user and the members of the admin group
//! (`--admin-group`, default `linerate-admin`) are admins; anyone else the socket's permissions
//! let in is read-only: reads only, a change is refused (403) and logged as refused. On TCP the
//! token names the user and the role ([`parse_tokens`]: a file of `NAME ROLE SECRET` lines, or
//! one secret alone, whose holder `token` is an admin).

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
    /// Unix: the peer's uid and primary gid; None on TCP.
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

/// One API token: who holds it and whether they may change things.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub name: String,
    pub admin: bool,
    pub secret: String,
}

/// Whom a TCP request's token names (set by the token check, read by [`account`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenHolder {
    pub name: String,
    pub admin: bool,
}

/// The token file: either one secret alone (its holder is `token`, an admin: the file of
/// earlier releases), or one token per line, `NAME ROLE SECRET` with ROLE `admin` or
/// `read-only`, `#` starting a comment. Secrets are at least 16 characters; names and secrets
/// are each used once. Errors name the file and line.
pub fn parse_tokens(text: &str, file: &str) -> Result<Vec<Token>, String> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("").trim()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    let mut out: Vec<Token> = Vec::new();
    for &(n, l) in &lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        let t = match f[..] {
            [secret] if lines.len() == 1 => Token {
                name: "token".into(),
                admin: true,
                secret: secret.into(),
            },
            [name, role, secret] => Token {
                name: name.into(),
                admin: match role {
                    "admin" => true,
                    "read-only" => false,
                    r => return Err(format!("{file}:{n}: role `{r}` is not admin or read-only")),
                },
                secret: secret.into(),
            },
            _ => {
                return Err(format!(
                    "{file}:{n}: expected `NAME ROLE SECRET` (ROLE admin or read-only)"
                ))
            }
        };
        if t.secret.len() < 16 {
            return Err(format!(
                "{file}:{n}: the secret must be at least 16 characters"
            ));
        }
        if !t
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(format!(
                "{file}:{n}: `{}`: a name is letters, digits, `-`, `_` and `.`",
                t.name
            ));
        }
        if out.iter().any(|o| o.name == t.name) {
            return Err(format!("{file}:{n}: `{}` is named twice", t.name));
        }
        if out.iter().any(|o| o.secret == t.secret) {
            return Err(format!("{file}:{n}: the same secret is given twice"));
        }
        out.push(t);
    }
    if out.is_empty() {
        return Err(format!("{file}: no token in it"));
    }
    Ok(out)
}

/// The holder of `given` among `tokens`, compared in time independent of where a secret
/// differs (every token is compared, whichever matches).
pub fn holder(tokens: &[Token], given: &str) -> Option<TokenHolder> {
    let mut found = None;
    for t in tokens {
        let same = given.len() == t.secret.len()
            && given
                .bytes()
                .zip(t.secret.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        if same {
            found = Some(TokenHolder {
                name: t.name.clone(),
                admin: t.admin,
            });
        }
    }
    found
}

/// What the accounting layer needs besides the request.
#[derive(Clone)]
pub struct Access {
    pub core: Arc<Core>,
    /// Members of this group (and root, and the router's own user) may change things.
    pub admin_group: String,
}

/// Whether `peer` is an admin: on TCP, as its token's role says (`token`); on the socket, root,
/// the router's own user, or a member of `group` (by /etc/group's member list or as primary
/// group).
pub fn is_admin(peer: &Peer, token: Option<&TokenHolder>, group: &str) -> bool {
    let Some(uid) = peer.uid else {
        // TCP: the token check let the request in and said who holds it.
        return token.is_some_and(|t| t.admin);
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let own = unsafe { libc::geteuid() };
    if uid == 0 || uid == own {
        return true;
    }
    let groups = std::fs::read_to_string("/etc/group").unwrap_or_default();
    groups.lines().any(|l| {
        let f: Vec<&str> = l.split(':').collect();
        f.len() >= 4
            && f[0] == group
            && (f[3].split(',').any(|m| m == peer.user) || f[2].parse::<u32>().ok() == peer.gid)
    })
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
                uid: Some(c.uid()),
                gid: Some(c.gid()),
            },
            Err(_) => Peer {
                user: "unknown".into(),
                pid: None,
                // Unknown: as unprivileged as a user can be.
                uid: Some(u32::MAX),
                gid: None,
            },
        }
    }
}

impl Connected<IncomingStream<'_, tokio::net::TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        Peer {
            user: format!("token@{}", stream.remote_addr().ip()),
            pid: None,
            uid: None,
            gid: None,
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
    State(access): State<Access>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Request,
    next: Next,
) -> Response {
    let core = &access.core;
    let read = req.method() == Method::GET || req.method() == Method::HEAD;
    let token = req.extensions().get::<TokenHolder>().cloned();
    let mut peer = peer;
    if let (Some(t), None) = (&token, peer.uid) {
        // `token@ADDRESS` becomes `NAME@ADDRESS`.
        let at = peer.user.split_once('@').map_or("", |x| x.1).to_string();
        peer.user = format!("{}@{at}", t.name);
    }
    let refused = !read && !is_admin(&peer, token.as_ref(), &access.admin_group);
    if let Some((sev, mut params, mut text)) = command_record(
        &peer,
        std::process::id() as i32,
        req.method(),
        req.uri().path(),
        header(&req, "x-linerate-command"),
        header(&req, "x-linerate-terminal"),
        header(&req, "x-linerate-on-behalf"),
    ) {
        if refused {
            params.push(("refused", "read-only user".into()));
            text.push_str(" (refused: read-only)");
        }
        if req.uri().path() == "/v1/session/configure" {
            let text = format!(
                "{} on {}: entered configuration mode",
                params[0].1, params[1].1
            );
            core.logger
                .log(Severity::Notice, "CONFIG_MODE", &params, text);
        } else {
            core.logger.log(sev, "COMMAND", &params, text);
        }
    }
    if refused {
        return crate::server::error(api::ApiError::new(
            api::ErrorKind::Forbidden,
            if token.is_some() {
                format!("{}: read-only (the token's role)", peer.user)
            } else {
                format!(
                    "{}: read-only (changes are for root and the members of group {})",
                    peer.user, access.admin_group
                )
            },
        ));
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
            uid: Some(1000),
            gid: Some(1000),
        }
    }

    #[test]
    fn root_and_tcp_are_admins_others_only_by_group() {
        let mut p = peer(5);
        p.uid = Some(0);
        assert!(is_admin(&p, None, "linerate-admin"));
        p.uid = None;
        let holder = |admin| TokenHolder {
            name: "noc".into(),
            admin,
        };
        assert!(is_admin(&p, Some(&holder(true)), "linerate-admin"));
        assert!(!is_admin(&p, Some(&holder(false)), "linerate-admin"));
        assert!(!is_admin(&p, None, "linerate-admin"));
        let p = peer(5);
        assert!(!is_admin(&p, None, "no-such-group-here"));
        // Primary group: root's group 0 is `root` in /etc/group.
        let mut p = peer(5);
        p.gid = Some(0);
        assert!(is_admin(&p, None, "root"));
    }

    #[test]
    fn a_token_file_names_holders_and_roles_and_mistakes_name_the_line() {
        let one = parse_tokens("0123456789abcdef0123\n", "t").unwrap();
        assert_eq!((one[0].name.as_str(), one[0].admin), ("token", true));
        let many = parse_tokens(
            "# who may use the API\nnoc admin 0123456789abcdef0123\ngrafana read-only fedcba9876543210fedc  # dashboards\n",
            "t",
        )
        .unwrap();
        assert_eq!(many.len(), 2);
        assert_eq!(
            holder(&many, "fedcba9876543210fedc"),
            Some(TokenHolder {
                name: "grafana".into(),
                admin: false
            })
        );
        assert_eq!(holder(&many, "fedcba9876543210fedd"), None);
        assert_eq!(holder(&many, ""), None);
        for (text, want) in [
            ("noc admin short\n", "t:1: the secret must be at least 16"),
            ("noc root 0123456789abcdef0123\n", "t:1: role `root`"),
            (
                "a admin 0123456789abcdef0123\na admin 0123456789abcdef0124\n",
                "t:2: `a` is named twice",
            ),
            (
                "a admin 0123456789abcdef0123\nb admin 0123456789abcdef0123\n",
                "t:2: the same secret",
            ),
            (
                "a admin 0123456789abcdef0123\n0123456789abcdef0124\n",
                "t:2: expected `NAME ROLE SECRET`",
            ),
            ("# nothing\n", "t: no token"),
        ] {
            let e = parse_tokens(text, "t").unwrap_err();
            assert!(e.starts_with(want), "{text:?}: {e}");
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
