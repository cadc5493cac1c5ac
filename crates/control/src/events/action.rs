//! Running one action of a firing: syslog, mail (SMTP), webhook (HTTP POST), CLI commands,
//! a config commit, an external program. Each runs on a thread of its own, bounded by its
//! `timeout-ms`; what it did (or why not) comes back as an [`Outcome`].
//!
//! Reads: the action's config, the firing's variables, the running config (commit), the
//! router's CLI (through the [`CommandRunner`] the daemon installs). Sets: the router's config
//! (commit), its log (syslog; every record carries `eem-rule` and `eem-depth`, which is how the
//! engine knows its own records). Sends: mail to the relay, a POST to the webhook, the
//! program's environment.

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::rule::Vars;
use crate::config::events::{Action, MailCfg};
use crate::mgmt::{ApplyOptions, Core};
use crate::syslog::Severity;

/// Runs one CLI command line (`show interfaces`) as `user`, returning what it printed: the
/// daemon gives the event manager its own CLI, so actions and mails use the commands people
/// use.
pub type CommandRunner = Arc<dyn Fn(&str, &str) -> Result<String, String> + Send + Sync>;

/// What an action did.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub ok: bool,
    pub timed_out: bool,
    /// A short note: the error, the commit made, the program's status.
    pub detail: String,
    /// What commands or the program printed (cut to [`OUTPUT_MAX`]).
    pub output: String,
}

pub const OUTPUT_MAX: usize = 16 * 1024;

impl Outcome {
    fn ok(detail: impl Into<String>, output: String) -> Outcome {
        Outcome {
            ok: true,
            timed_out: false,
            detail: detail.into(),
            output,
        }
    }
    fn err(detail: impl Into<String>) -> Outcome {
        Outcome {
            ok: false,
            timed_out: false,
            detail: detail.into(),
            output: String::new(),
        }
    }
}

/// `text` with each `{name}` replaced by the variable's value; `{{` is `{`; an unknown name is
/// left as written.
pub fn fill(text: &str, vars: &Vars) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('{') {
            out.push('{');
            rest = stripped;
            continue;
        }
        match after.find('}') {
            Some(j) if vars.contains_key(&after[..j]) => {
                out.push_str(&vars[&after[..j]]);
                rest = &after[j + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn cut(mut s: String) -> String {
    if s.len() > OUTPUT_MAX {
        let mut at = OUTPUT_MAX;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
        s.push_str("\n[cut]\n");
    }
    s
}

/// Everything an action may need besides its config.
pub struct Context {
    pub core: std::sync::Weak<Core>,
    pub runner: Option<CommandRunner>,
    pub mail: Option<MailCfg>,
    /// The SNMP master's AgentX socket.
    pub agentx: Option<String>,
    pub rule: String,
    /// The chain depth the action's own records carry (the event's + 1).
    pub depth: u32,
    pub resolve: bool,
}

impl Context {
    fn run_command(&self, line: &str) -> Result<String, String> {
        match &self.runner {
            Some(r) => r(line, "event-manager"),
            None => Err("no CLI here (the event manager runs commands in a daemon)".into()),
        }
    }

    fn eem_params(&self, vars: &Vars) -> Vec<(&'static str, String)> {
        vec![
            ("rule", self.rule.clone()),
            (
                "instance",
                vars.get("instance").cloned().unwrap_or_default(),
            ),
            ("eem-rule", self.rule.clone()),
            ("eem-depth", self.depth.to_string()),
        ]
    }
}

/// Runs `action`; `deadline` bounds it (the program is killed; a mail or POST gives up; a
/// command or commit that overruns is reported as timed out and left to finish).
pub fn run(action: &Action, vars: &Vars, ctx: &Context, timeout: Duration) -> Outcome {
    match action {
        Action::Syslog {
            severity,
            msgid,
            text,
        } => {
            let Some(core) = ctx.core.upgrade() else {
                return Outcome::err("the router is stopping");
            };
            let text = fill(text, vars);
            core.logger
                .log(*severity, msgid, &ctx.eem_params(vars), text.clone());
            Outcome::ok("logged", text)
        }
        Action::Mail {
            to,
            subject,
            body,
            show,
        } => mail(ctx, vars, to, subject, body, show, timeout),
        Action::Webhook { url } => {
            let url = fill(url, vars);
            let body = serde_json::json!({
                "rule": ctx.rule,
                "state": if ctx.resolve { "resolved" } else { "firing" },
                "variables": vars,
            });
            match api::client::post_json_url(&url, &body.to_string(), timeout) {
                Ok(status) if (200..300).contains(&status) => {
                    Outcome::ok(format!("{url}: {status}"), String::new())
                }
                Ok(status) => Outcome::err(format!("{url}: answered {status}")),
                Err(e) => timed(format!("{url}: {e}"), e.contains("timed out")),
            }
        }
        Action::Cli { commands } => bounded(timeout, {
            let cmds: Vec<String> = commands.iter().map(|c| fill(c, vars)).collect();
            let runner = ctx.runner.clone();
            move || {
                let mut out = String::new();
                for c in &cmds {
                    out.push_str(&format!("# {c}\n"));
                    let r = match &runner {
                        Some(r) => r(c, "event-manager"),
                        None => {
                            Err("no CLI here (the event manager runs commands in a daemon)".into())
                        }
                    };
                    match r {
                        Ok(o) => out.push_str(&o),
                        Err(e) => {
                            return Outcome {
                                ok: false,
                                timed_out: false,
                                detail: format!("`{c}`: {e}"),
                                output: cut(out),
                            }
                        }
                    }
                }
                Outcome::ok(format!("{} command(s)", cmds.len()), cut(out))
            }
        }),
        Action::Commit {
            set,
            delete,
            rollback_after_s,
        } => {
            let core = ctx.core.clone();
            let rule = ctx.rule.clone();
            let set: Vec<(String, String)> = set
                .iter()
                .map(|(p, v)| (fill(p, vars), fill(v, vars)))
                .collect();
            let delete: Vec<String> = delete.iter().map(|p| fill(p, vars)).collect();
            let confirm = *rollback_after_s;
            bounded(timeout, move || commit(core, &rule, &set, &delete, confirm))
        }
        Action::Script { argv } => script(argv, vars, ctx, timeout),
        Action::SnmpTrap { oid, objects } => {
            let Some(master) = &ctx.agentx else {
                return Outcome::err("no AgentX master configured");
            };
            let uptime_cs = ctx.core.upgrade().map_or(0, |c| {
                (c.uptime().as_millis() / 10).min(u32::MAX as u128) as u32
            });
            let objects = objects
                .iter()
                .map(|(o, t)| {
                    (
                        o.clone(),
                        packet::agentx::Value::OctetString(fill(t, vars).into_bytes()),
                    )
                })
                .collect();
            match super::snmp::send(master, oid, objects, uptime_cs, timeout) {
                Ok(session) => Outcome::ok(
                    format!("notification sent through {master} (session {session})"),
                    String::new(),
                ),
                Err(e) => timed(
                    format!("{master}: {e}"),
                    e.contains("timed out") || e.contains("WouldBlock"),
                ),
            }
        }
    }
}

fn timed(detail: String, timed_out: bool) -> Outcome {
    Outcome {
        ok: false,
        timed_out,
        detail,
        output: String::new(),
    }
}

/// Runs `f` on a thread of its own and waits at most `timeout` for it.
fn bounded(timeout: Duration, f: impl FnOnce() -> Outcome + Send + 'static) -> Outcome {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("eem-call".into())
        .spawn(move || {
            let _ = tx.send(f());
        });
    if let Err(e) = spawned {
        return Outcome::err(format!("cannot start a thread: {e}"));
    }
    match rx.recv_timeout(timeout) {
        Ok(o) => o,
        Err(_) => timed(
            format!(
                "still running after {} ms (left to finish)",
                timeout.as_millis()
            ),
            true,
        ),
    }
}

fn commit(
    core: std::sync::Weak<Core>,
    rule: &str,
    set: &[(String, String)],
    delete: &[String],
    confirm: Option<u64>,
) -> Outcome {
    let Some(core) = core.upgrade() else {
        return Outcome::err("the router is stopping");
    };
    // One edit at a time: two rules (or two instances of one, as when two sources of a worm
    // fire together) each reading the running text and committing their edit of it would
    // otherwise lose the first one's change.
    static EDITS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = EDITS.lock().unwrap_or_else(|e| e.into_inner());
    let (mut text, source, before) = core.running_config();
    for (p, v) in set {
        match crate::config::edit::set(&text, p, v) {
            Ok(t) => text = t,
            Err(e) => return Outcome::err(format!("set {p}: {e}")),
        }
    }
    for p in delete {
        match crate::config::edit::delete(&text, p) {
            Ok(t) => text = t,
            Err(e) => return Outcome::err(format!("delete {p}: {e}")),
        }
    }
    let opts = ApplyOptions {
        comment: format!("event-manager rule {rule}"),
        dry_run: false,
        confirm_seconds: confirm,
    };
    match core.apply(&text, &source, opts) {
        Ok(out) => match out.commit {
            Some(id) => Outcome::ok(
                match confirm {
                    Some(s) => format!(
                        "commit {id} (after {before}); rolled back in {s} s unless confirmed"
                    ),
                    None => format!("commit {id} (after {before})"),
                },
                out.summary.join("\n"),
            ),
            None => Outcome::ok(
                "nothing to change: the config already says so",
                String::new(),
            ),
        },
        Err(e) => {
            let mut d = e.message.clone();
            for x in &e.errors {
                d.push_str("; ");
                d.push_str(x);
            }
            Outcome::err(d)
        }
    }
}

fn mail(
    ctx: &Context,
    vars: &Vars,
    to: &[String],
    subject: &str,
    body: &str,
    show: &[String],
    timeout: Duration,
) -> Outcome {
    use lettre::message::header::ContentType;
    use lettre::{Message, SmtpTransport, Transport};
    let Some(m) = &ctx.mail else {
        return Outcome::err("no mail relay configured");
    };
    let started = Instant::now();
    let mut text = fill(body, vars);
    text.push_str("\n\n");
    for c in show {
        let c = fill(c, vars);
        text.push_str(&format!("--- {c}\n"));
        match ctx.run_command(&c) {
            Ok(o) => text.push_str(&o),
            Err(e) => text.push_str(&format!("(failed: {e})\n")),
        }
        text.push('\n');
    }
    let mut msg = Message::builder()
        .subject(fill(subject, vars))
        .header(ContentType::TEXT_PLAIN);
    match m.from.parse() {
        Ok(a) => msg = msg.from(a),
        Err(e) => return Outcome::err(format!("from {}: {e}", m.from)),
    }
    for t in to {
        let t = fill(t, vars);
        match t.parse() {
            Ok(a) => msg = msg.to(a),
            Err(e) => return Outcome::err(format!("to {t}: {e}")),
        }
    }
    let msg = match msg.body(text.clone()) {
        Ok(x) => x,
        Err(e) => return Outcome::err(format!("the message: {e}")),
    };
    let Some((host, port)) = m.server.rsplit_once(':') else {
        return Outcome::err(format!("{}: not HOST:PORT", m.server));
    };
    let port: u16 = port.parse().unwrap_or(25);
    let left = timeout
        .saturating_sub(started.elapsed())
        .min(Duration::from_millis(m.timeout_ms))
        .max(Duration::from_millis(1));
    // Plain SMTP to the relay (the management network's MTA); no TLS.
    let mailer = SmtpTransport::builder_dangerous(host)
        .port(port)
        .timeout(Some(left))
        .build();
    match mailer.send(&msg) {
        Ok(r) => Outcome::ok(
            format!("sent to {} via {}: {}", to.join(", "), m.server, r.code()),
            cut(text),
        ),
        Err(e) => {
            let s = e.to_string();
            let t = s.contains("timed out") || s.contains("timeout");
            timed(format!("via {}: {s}", m.server), t)
        }
    }
}

fn script(argv: &[String], vars: &Vars, ctx: &Context, timeout: Duration) -> Outcome {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let args: Vec<String> = argv.iter().map(|a| fill(a, vars)).collect();
    let mut cmd = Command::new(&args[0]);
    // A process group of its own, so that a timeout kills what it started too (a shell's
    // children would otherwise hold its output open).
    cmd.args(&args[1..])
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("LINERATE_EVENT_RULE", &ctx.rule)
        .env(
            "LINERATE_EVENT_STATE",
            if ctx.resolve { "resolved" } else { "firing" },
        );
    for (k, v) in vars {
        let name: String = k
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        cmd.env(format!("LINERATE_EVENT_{name}"), v);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::err(format!("{}: {e}", args[0])),
    };
    // Read both pipes on threads of their own: a chatty program must not block on a full pipe
    // while we wait for it to end.
    let take = |p: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(mut p) = p {
                let _ = p.by_ref().take(OUTPUT_MAX as u64 + 1).read_to_end(&mut s);
                // Drain the rest so the program is never stuck writing.
                let _ = std::io::copy(&mut p, &mut std::io::sink());
            }
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = take(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = take(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if started.elapsed() >= timeout => {
                // SAFETY: kill(2) has no memory-safety preconditions; the group is the one
                // the child leads (process_group(0) above), not yet reaped, so its id is ours.
                unsafe {
                    libc::kill(-(child.id() as i32), libc::SIGKILL);
                }
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Outcome::err(format!("{}: {e}", args[0])),
        }
    };
    let mut output = out.join().unwrap_or_default();
    let e = err.join().unwrap_or_default();
    if !e.is_empty() {
        output.push_str(&e);
    }
    let output = cut(output);
    match status {
        None => Outcome {
            ok: false,
            timed_out: true,
            detail: format!("{}: killed after {} ms", args[0], timeout.as_millis()),
            output,
        },
        Some(s) if s.success() => Outcome::ok(format!("{}: exit 0", args[0]), output),
        Some(s) => Outcome {
            ok: false,
            timed_out: false,
            detail: format!("{}: {s}", args[0]),
            output,
        },
    }
}

/// The severity an action's outcome is logged at when it fails.
pub const FAILURE_SEVERITY: Severity = Severity::Warning;

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        Vars::from([
            ("port".to_string(), "p1".to_string()),
            ("value".to_string(), "97.5".to_string()),
        ])
    }

    #[test]
    fn fill_substitutes_known_names_and_keeps_the_rest() {
        assert_eq!(fill("port {port} at {value}%", &vars()), "port p1 at 97.5%");
        assert_eq!(fill("{{port}} {nope} {", &vars()), "{port}} {nope} {");
        assert_eq!(fill("", &vars()), "");
    }

    fn ctx() -> Context {
        Context {
            core: std::sync::Weak::new(),
            runner: None,
            mail: None,
            agentx: None,
            rule: "r".into(),
            depth: 1,
            resolve: false,
        }
    }

    #[test]
    fn a_script_gets_the_variables_and_its_output_is_kept() {
        let o = script(
            &[
                "/bin/sh".into(),
                "-c".into(),
                "echo $LINERATE_EVENT_PORT {value}".into(),
            ],
            &vars(),
            &ctx(),
            Duration::from_secs(5),
        );
        assert!(o.ok, "{o:?}");
        assert_eq!(o.output, "p1 97.5\n");
    }

    #[test]
    fn a_script_past_its_time_is_killed_and_a_failing_one_reported() {
        let t = Instant::now();
        let o = script(
            &["/bin/sh".into(), "-c".into(), "sleep 5".into()],
            &vars(),
            &ctx(),
            Duration::from_millis(100),
        );
        assert!(o.timed_out && !o.ok, "{o:?}");
        assert!(t.elapsed() < Duration::from_secs(2));
        let o = script(
            &["/bin/sh".into(), "-c".into(), "echo no >&2; exit 3".into()],
            &vars(),
            &ctx(),
            Duration::from_secs(5),
        );
        assert!(!o.ok && !o.timed_out);
        assert!(o.detail.contains('3'), "{o:?}");
        assert_eq!(o.output, "no\n");
        let o = script(
            &["/nonexistent/x".into()],
            &vars(),
            &ctx(),
            Duration::from_secs(1),
        );
        assert!(!o.ok);
    }

    #[test]
    fn commands_without_a_runner_fail_clearly() {
        let o = run(
            &Action::Cli {
                commands: vec!["show interfaces".into()],
            },
            &vars(),
            &ctx(),
            Duration::from_secs(1),
        );
        assert!(!o.ok && o.detail.contains("no CLI"), "{o:?}");
    }
}
