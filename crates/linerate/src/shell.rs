//! `linerate cli`: the interactive CLI, with a router's habits (IOS, vtysh, Junos): a prompt
//! with the host name, tab completion and `?` help from the same command tree as the one-shot
//! commands, unique abbreviations (`sh int`), history, output filters (`| include RE`,
//! `| exclude RE`, `| count`, `| json`), and a configure mode that edits a candidate config.
//!
//! Configure mode (`configure`): the candidate starts as the running config. `set PATH VALUE`,
//! `delete PATH` (paths as in `config::edit`: `control-plane.punt.local.rate`,
//! `interfaces[name=p1].qos-in`), `load FILE`, `show [PATH]`, `show | compare` (the diff a
//! commit would make), `commit [confirmed SECONDS] [comment TEXT]`, `confirm`, `rollback N`
//! (the candidate becomes commit N's config), `abort` (back to the running config), `run CMD`
//! (or `do CMD`: an exec command), `exit`. Entering configure mode is logged by the router with
//! the user and the terminal.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use api::requests::{ApplyOptions, ApplyRequest};
use api::views::{ApplyOutcome, RunningConfig};
use api::Render;
use clap::{Command, CommandFactory};
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{
    ConditionalEventHandler, Context, Editor, Event, EventContext, EventHandler, Helper, KeyEvent,
    RepeatCount,
};

use crate::client_cmd::ApiArgs;

/// The exec words the shell itself handles besides the command tree.
const SHELL_WORDS: &[(&str, &str)] = &[
    ("configure", "Edit a candidate config, then commit it"),
    ("exit", "Leave the CLI"),
];

/// The configure mode's words.
const CONFIG_WORDS: &[(&str, &str)] = &[
    ("set", "set PATH VALUE: set a value in the candidate (YAML: 100, \"{ a: 1 }\", [x, y])"),
    ("delete", "delete PATH: remove a key or list item from the candidate"),
    ("load", "load FILE: the candidate becomes FILE's config"),
    ("show", "show [PATH]: the candidate (or part of it); `show | compare`: the diff a commit would make"),
    ("commit", "commit [confirmed SECONDS] [comment TEXT]: check and apply the candidate"),
    ("confirm", "keep the commit waiting for confirmation"),
    ("rollback", "rollback N: the candidate becomes commit N's config"),
    ("abort", "discard the candidate's changes (back to the running config)"),
    ("run", "run CMD: an exec command (show ..., clear ...); `do` too"),
    ("exit", "leave configure mode (refused with uncommitted changes: commit or abort first)"),
];

/// The command tree, every level taking unique abbreviations of its words and options.
pub fn tree() -> Command {
    fn infer(c: Command) -> Command {
        let c = c.infer_subcommands(true).infer_long_args(true);
        let names: Vec<String> = c
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        names.into_iter().fold(c, |c, n| c.mut_subcommand(n, infer))
    }
    infer(crate::Cli::command())
}

/// Only the commands that talk to a running router are offered in the shell.
const EXEC: &[&str] = &[
    "show", "clear", "config", "route", "acl", "port", "worker", "capture", "trace",
];

/// The words that can follow `words` (the last one may be partial): `(word, help)`.
pub fn candidates(tree: &Command, words: &[&str], config_mode: bool) -> Vec<(String, String)> {
    let (done, partial) = match words.split_last() {
        Some((last, rest)) => (rest, *last),
        None => (&[][..], ""),
    };
    let mut out: Vec<(String, String)> = Vec::new();
    if config_mode && done.is_empty() {
        out.extend(
            CONFIG_WORDS
                .iter()
                .map(|(w, h)| (w.to_string(), h.to_string())),
        );
    } else {
        let done = if config_mode && matches!(done.first(), Some(&"run") | Some(&"do")) {
            &done[1..]
        } else if config_mode {
            return Vec::new();
        } else {
            done
        };
        let mut c = tree;
        let mut chain: Vec<&Command> = Vec::new();
        for w in done {
            if w.starts_with('-') {
                continue;
            }
            let subs: Vec<&Command> = c
                .get_subcommands()
                .filter(|s| s.get_name().starts_with(w))
                .collect();
            let next = match subs.as_slice() {
                [one] => Some(*one),
                _ => subs.iter().find(|s| s.get_name() == *w).copied(),
            };
            // No match: an argument's value; stay at this level.
            if let Some(n) = next {
                chain.push(c);
                c = n;
            }
        }
        let top = std::ptr::eq(c, tree);
        for s in c.get_subcommands() {
            if top && !EXEC.contains(&s.get_name()) {
                continue;
            }
            let help = s.get_about().map(|a| a.to_string()).unwrap_or_default();
            out.push((s.get_name().to_string(), first_line(&help)));
        }
        if top && !config_mode {
            out.extend(
                SHELL_WORDS
                    .iter()
                    .map(|(w, h)| (w.to_string(), h.to_string())),
            );
        }
        // The command's own options and those its ancestors give to every subcommand.
        let args = c.get_arguments().chain(
            chain
                .iter()
                .flat_map(|p| p.get_arguments().filter(|a| a.is_global_set())),
        );
        for a in args {
            if let Some(l) = a.get_long() {
                if ["help", "version", "socket", "api", "token-file"].contains(&l) {
                    continue;
                }
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                out.push((format!("--{l}"), first_line(&help)));
            }
        }
    }
    out.retain(|(w, _)| w.starts_with(partial));
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

struct Shell {
    tree: Command,
    config_mode: Arc<AtomicBool>,
}

impl Completer for Shell {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let head = &line[..pos];
        let start = head.rfind(' ').map_or(0, |i| i + 1);
        let mut words: Vec<&str> = head.split_whitespace().collect();
        if head.ends_with(' ') || head.is_empty() {
            words.push("");
        }
        let c = candidates(&self.tree, &words, self.config_mode.load(Ordering::Relaxed));
        Ok((
            start,
            c.into_iter()
                .map(|(w, _)| Pair {
                    display: w.clone(),
                    replacement: format!("{w} "),
                })
                .collect(),
        ))
    }
}

impl Hinter for Shell {
    type Hint = String;
}
impl Highlighter for Shell {}
impl Validator for Shell {}
impl Helper for Shell {}

/// `?` anywhere: accept the line with a mark, so the loop prints help and offers it again.
struct HelpKey(Arc<AtomicBool>);

impl ConditionalEventHandler for HelpKey {
    fn handle(
        &self,
        _evt: &Event,
        _n: RepeatCount,
        _positive: bool,
        _ctx: &EventContext,
    ) -> Option<rustyline::Cmd> {
        self.0.store(true, Ordering::Relaxed);
        Some(rustyline::Cmd::AcceptLine)
    }
}

/// Output filters after `|`.
enum Filter {
    Include(regex::Regex),
    Exclude(regex::Regex),
    Count,
    Json,
    Compare,
}

fn parse_filters(parts: &[&str]) -> Result<Vec<Filter>, String> {
    parts
        .iter()
        .map(|p| {
            let p = p.trim();
            let (verb, arg) = p.split_once(' ').unwrap_or((p, ""));
            let arg = arg.trim();
            let re = || regex::Regex::new(arg).map_err(|e| format!("`{arg}`: {e}"));
            match verb {
                v if "include".starts_with(v) && !v.is_empty() => Ok(Filter::Include(re()?)),
                v if "exclude".starts_with(v) && !v.is_empty() => Ok(Filter::Exclude(re()?)),
                v if "count".starts_with(v) && !v.is_empty() => Ok(Filter::Count),
                "json" => Ok(Filter::Json),
                v if "compare".starts_with(v) && !v.is_empty() => Ok(Filter::Compare),
                _ => Err(format!(
                    "`| {p}`: filters are include RE, exclude RE, count, json (and compare in configure mode)"
                )),
            }
        })
        .collect()
}

fn apply_filters(text: String, filters: &[Filter]) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut count = false;
    for f in filters {
        match f {
            Filter::Include(r) => lines.retain(|l| r.is_match(l)),
            Filter::Exclude(r) => lines.retain(|l| !r.is_match(l)),
            Filter::Count => count = true,
            Filter::Json | Filter::Compare => {}
        }
    }
    if count {
        return format!("Count: {} lines\n", lines.len());
    }
    let mut s = lines.join("\n");
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

struct Session {
    api: ApiArgs,
    tree: Command,
    host: String,
    /// Configure mode's candidate: its text, the running config's source path, the commit it
    /// started from, and whether it differs from what was last committed or loaded.
    candidate: Option<Candidate>,
}

struct Candidate {
    text: String,
    source: PathBuf,
    base_text: String,
}

impl Session {
    fn client(&self, command: &str) -> Result<api::Client, String> {
        self.api.with_command(command).client()
    }

    fn prompt(&self) -> String {
        match &self.candidate {
            Some(_) => format!("{}(config)# ", self.host),
            None => format!("{}# ", self.host),
        }
    }

    /// One exec command line through the command tree; what it printed.
    fn exec(&self, line: &str, json: bool) -> Result<String, String> {
        let mut words = shell_words::split(line).map_err(|e| format!("`{line}`: {e}"))?;
        if words.is_empty() {
            return Ok(String::new());
        }
        if json {
            words.push("--json".into());
        }
        crate::run_words(&self.tree, &self.api, words, line)
    }

    fn enter_configure(&mut self) -> Result<String, String> {
        let c = self.client("configure")?;
        let r: RunningConfig = c
            .post("/v1/session/configure", &serde_json::json!({}))?
            .checked()?
            .view()?;
        self.candidate = Some(Candidate {
            text: r.text.clone(),
            source: r.source,
            base_text: r.text,
        });
        Ok(format!(
            "Entering configure mode: the candidate is the running config (commit {}). `?` lists what you can do.\n",
            r.commit
        ))
    }

    fn apply(
        &self,
        cand: &Candidate,
        dry_run: bool,
        confirm: Option<u64>,
        comment: String,
        line: &str,
    ) -> Result<ApplyOutcome, String> {
        let c = self.client(line)?;
        let req = ApplyRequest {
            text: cand.text.clone(),
            source: cand.source.clone(),
            opts: ApplyOptions {
                comment,
                dry_run,
                confirm_seconds: confirm,
            },
        };
        c.post("/v1/config/apply", &req)?.checked()?.view()
    }

    /// One configure-mode line.
    fn configure(&mut self, line: &str, filters: &[Filter]) -> Result<String, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(cand) = self.candidate.as_mut() else {
            return Err("not in configure mode".into());
        };
        let rest = |n: usize| -> String {
            // The text after the first n words, as typed.
            let mut s = line.trim_start();
            for _ in 0..n {
                s = s.trim_start();
                s = s.find(char::is_whitespace).map_or("", |i| &s[i..]);
            }
            s.trim().to_string()
        };
        let verb = words.first().copied().unwrap_or("");
        let pick = |v: &str| -> Result<&'static str, String> {
            let m: Vec<&str> = CONFIG_WORDS
                .iter()
                .map(|(w, _)| *w)
                .chain(["do", "end", "quit"])
                .filter(|w| w.starts_with(v))
                .collect();
            match m.as_slice() {
                [one] => Ok(one),
                _ if m.contains(&v) => Ok(m.into_iter().find(|w| *w == v).unwrap_or("")),
                [] => Err(format!(
                    "`{v}`: unknown in configure mode (`?` lists the commands)"
                )),
                _ => Err(format!("`{v}` is ambiguous: {}", m.join(", "))),
            }
        };
        match pick(verb)? {
            "set" => {
                let (path, value) = (words.get(1).ok_or("set PATH VALUE")?, rest(2));
                if value.is_empty() {
                    return Err("set PATH VALUE: the value is missing".into());
                }
                cand.text = control::config::edit::set(&cand.text, path, &value)?;
                Ok(String::new())
            }
            "delete" => {
                let path = words.get(1).ok_or("delete PATH")?;
                cand.text = control::config::edit::delete(&cand.text, path)?;
                Ok(String::new())
            }
            "load" => {
                let f = rest(1);
                let text = std::fs::read_to_string(&f).map_err(|e| format!("{f}: {e}"))?;
                cand.text = text;
                if let Ok(abs) = std::fs::canonicalize(&f) {
                    cand.source = abs;
                }
                Ok(format!("loaded {f} into the candidate\n"))
            }
            "show" => {
                if filters.iter().any(|f| matches!(f, Filter::Compare)) {
                    let cand = self.candidate.as_ref().expect("in configure mode");
                    // The router checks the candidate whole (its errors are the answer)...
                    let o = self.apply(cand, true, None, String::new(), line)?;
                    if !o.changed {
                        return Ok("no changes\n".into());
                    }
                    // ...and the diff is between both in one layout: only the changes show.
                    let a = control::config::edit::canonical(&cand.base_text)?;
                    let b = control::config::edit::canonical(&cand.text)?;
                    let mut d = control::mgmt::commit::text_diff(&a, &b, "running", "candidate");
                    if !o.summary.is_empty() {
                        d.push_str(&format!("\n{}\n", o.summary.join("\n")));
                    }
                    return Ok(d);
                }
                match words.get(1) {
                    Some(p) => control::config::edit::get(&cand.text, p),
                    None => Ok(cand.text.clone()),
                }
            }
            "commit" => {
                let mut confirm = None;
                let mut comment = String::new();
                let mut i = 1;
                while i < words.len() {
                    match words[i] {
                        "confirmed" => {
                            confirm = Some(
                                words
                                    .get(i + 1)
                                    .and_then(|s| s.parse().ok())
                                    .ok_or("commit confirmed SECONDS")?,
                            );
                            i += 2;
                        }
                        "comment" => {
                            comment = rest(i + 1);
                            break;
                        }
                        w => {
                            return Err(format!("`{w}`: commit [confirmed SECONDS] [comment TEXT]"))
                        }
                    }
                }
                let cand = self.candidate.as_ref().expect("in configure mode");
                let o = self.apply(cand, false, confirm, comment, line)?;
                let cand = self.candidate.as_mut().expect("in configure mode");
                // What the router now runs is what the candidate says.
                cand.base_text = cand.text.clone();
                Ok(o.render())
            }
            "confirm" => {
                let c = self.client(line)?;
                let id: u64 = c.call("/v1/config/confirm", &serde_json::json!({}))?;
                Ok(format!("commit {id} confirmed\n"))
            }
            "rollback" => {
                let id: u64 = words
                    .get(1)
                    .and_then(|s| s.parse().ok())
                    .ok_or("rollback N (see `run config history`)")?;
                let c = self.client(line)?;
                let t: api::views::CommitText = c.view(&format!("/v1/config/history/{id}"))?;
                let cand = self.candidate.as_mut().expect("in configure mode");
                cand.text = t.text;
                Ok(format!(
                    "the candidate is commit {id}'s config: `show | compare`, then `commit`\n"
                ))
            }
            "abort" => {
                cand.text = cand.base_text.clone();
                Ok("candidate discarded\n".into())
            }
            "run" | "do" => {
                let json = filters.iter().any(|f| matches!(f, Filter::Json));
                self.exec(&rest(1), json)
            }
            "exit" | "end" | "quit" => {
                if cand.text != cand.base_text {
                    return Err(
                        "the candidate has uncommitted changes: `commit` them or `abort`".into(),
                    );
                }
                self.candidate = None;
                Ok(String::new())
            }
            other => Err(format!("`{other}`: unknown in configure mode")),
        }
    }

    /// One line in whatever mode; `Ok(None)` ends the session.
    fn line(&mut self, line: &str) -> Result<Option<String>, String> {
        let mut parts = line.split(" | ");
        let cmd = parts.next().unwrap_or("").trim();
        let filters = parse_filters(&parts.collect::<Vec<_>>())?;
        if cmd.is_empty() {
            return Ok(Some(String::new()));
        }
        let out = if self.candidate.is_some() {
            self.configure(cmd, &filters)?
        } else {
            let first = cmd.split_whitespace().next().unwrap_or("");
            if !first.is_empty() && "configure".starts_with(first) && first.len() >= 4 {
                self.enter_configure()?
            } else if ["exit", "quit", "end", "logout"].contains(&first) {
                return Ok(None);
            } else {
                let json = filters.iter().any(|f| matches!(f, Filter::Json));
                self.exec(cmd, json)?
            }
        };
        Ok(Some(apply_filters(out, &filters)))
    }
}

fn print_help(tree: &Command, line: &str, config_mode: bool) {
    let mut words: Vec<&str> = line.split_whitespace().collect();
    if line.ends_with(' ') || line.is_empty() {
        words.push("");
    }
    let c = candidates(tree, &words, config_mode);
    if c.is_empty() {
        outln!("  <cr>");
        return;
    }
    let w = c.iter().map(|(x, _)| x.len()).max().unwrap_or(0);
    for (word, help) in c {
        outln!("  {word:<w$}  {help}");
    }
}

/// Runs the interactive CLI until `exit` or end of input.
pub fn run(api: ApiArgs) -> Result<(), String> {
    let host = {
        let mut a = api.clone();
        a.context.clear();
        let c = a.client()?;
        let v: api::views::SystemView = c.view("/v1/system")?;
        if v.hostname.is_empty() {
            "linerate".to_string()
        } else {
            v.hostname
        }
    };
    let tree = tree();
    let help = Arc::new(AtomicBool::new(false));
    let config_mode = Arc::new(AtomicBool::new(false));
    let mut rl: Editor<Shell, rustyline::history::FileHistory> =
        Editor::new().map_err(|e| format!("terminal: {e}"))?;
    rl.set_helper(Some(Shell {
        tree: tree.clone(),
        config_mode: config_mode.clone(),
    }));
    rl.bind_sequence(
        KeyEvent::from('?'),
        EventHandler::Conditional(Box::new(HelpKey(help.clone()))),
    );
    let history = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".linerate_history"));
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    let mut s = Session {
        api,
        tree: tree.clone(),
        host,
        candidate: None,
    };
    let interactive = std::io::stdin().is_terminal();
    let mut initial = String::new();
    loop {
        config_mode.store(s.candidate.is_some(), Ordering::Relaxed);
        let prompt = s.prompt();
        let read = if initial.is_empty() {
            rl.readline(&prompt)
        } else {
            rl.readline_with_initial(&prompt, (&initial, ""))
        };
        initial.clear();
        let line = match read {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(format!("terminal: {e}")),
        };
        if help.swap(false, Ordering::Relaxed) {
            let l = line.trim_end_matches('?');
            print_help(&tree, l, s.candidate.is_some());
            crate::out::flush();
            initial = l.to_string();
            continue;
        }
        if !line.trim().is_empty() {
            let _ = rl.add_history_entry(line.as_str());
        }
        match s.line(&line) {
            Ok(Some(out)) => out!("{out}"),
            Ok(None) => break,
            Err(e) => outln!("% {}", e.replace('\n', "\n% ")),
        }
        crate::out::flush();
        if !interactive && line.trim() == "exit" && s.candidate.is_none() {
            break;
        }
    }
    if let Some(h) = &history {
        let _ = rl.save_history(h);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_walks_the_command_tree_with_abbreviations() {
        let t = tree();
        let c = |w: &[&str]| -> Vec<String> {
            candidates(&t, w, false).into_iter().map(|x| x.0).collect()
        };
        assert!(c(&["sh"]).contains(&"show".to_string()));
        assert!(
            !c(&[""]).contains(&"bench".to_string()),
            "the shell offers router commands"
        );
        assert!(c(&[""]).contains(&"configure".to_string()));
        let int = c(&["sh", "int"]);
        assert_eq!(int, ["interfaces"]);
        assert!(c(&["show", "ip", ""]).contains(&"route".to_string()));
        assert!(c(&["show", "ip", "route", "--"]).contains(&"--longer".to_string()));
        assert!(c(&["show", "event", ""]).contains(&"--json".to_string()));
        let conf: Vec<String> = candidates(&t, &["co"], true)
            .into_iter()
            .map(|x| x.0)
            .collect();
        assert_eq!(conf, ["commit", "confirm"]);
        let run: Vec<String> = candidates(&t, &["run", "sh"], true)
            .into_iter()
            .map(|x| x.0)
            .collect();
        assert_eq!(run, ["show"]);
    }

    #[test]
    fn filters_include_exclude_and_count() {
        let text = "a 1\nb 2\na 3\n".to_string();
        let f = parse_filters(&["include ^a"]).unwrap();
        assert_eq!(apply_filters(text.clone(), &f), "a 1\na 3\n");
        let f = parse_filters(&["ex 3", "count"]).unwrap();
        assert_eq!(apply_filters(text.clone(), &f), "Count: 2 lines\n");
        assert!(parse_filters(&["grep x"]).is_err());
        assert!(parse_filters(&["include (x"]).is_err());
    }
}
