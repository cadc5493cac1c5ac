//! `show system` (version, uptime, commit, tables and their limits, API command times) and
//! `show logging`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::{clock, table};

/// How long commands of one kind waited for the state lock and ran.
#[derive(Clone, Default, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandStats {
    pub count: u64,
    pub wait_ns: u64,
    pub run_ns: u64,
    pub max_wait_ns: u64,
    pub max_run_ns: u64,
}

/// A table of the router's and how full it is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TableView {
    pub table: String,
    pub entries: usize,
    pub limit: usize,
    pub bytes: usize,
}

/// `GET /v1/system`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemView {
    pub version: String,
    pub uptime_s: u64,
    /// The running config's commit.
    pub commit: u64,
    /// A commit waiting for confirmation, and the seconds left before it rolls back.
    pub pending_confirm: Option<(u64, u64)>,
    pub workers: usize,
    pub ports: usize,
    pub buffers: usize,
    pub buffers_free: usize,
    pub tables: Vec<TableView>,
    /// Per kind of command (`show.routes`, `commit`, ...).
    pub api: BTreeMap<String, CommandStats>,
    /// The router's name (its log records' HOSTNAME): the interactive CLI's prompt.
    #[serde(default)]
    pub hostname: String,
}

impl Render for SystemView {
    fn render(&self) -> String {
        let mut out = format!(
            "linerate {}, up {} s, config commit {}{}\nworkers {}, ports {}, buffers {} ({} free)\n\n",
            self.version,
            self.uptime_s,
            self.commit,
            match self.pending_confirm {
                Some((id, left)) =>
                    format!(" (commit {id} rolls back in {left} s unless confirmed)"),
                None => String::new(),
            },
            self.workers,
            self.ports,
            self.buffers,
            self.buffers_free
        );
        let rows = self
            .tables
            .iter()
            .map(|t| {
                vec![
                    t.table.clone(),
                    t.entries.to_string(),
                    t.limit.to_string(),
                    t.bytes.to_string(),
                ]
            })
            .collect();
        out += &table(&["Table", "Entries", "Limit", "Bytes"], rows);
        out
    }
}

/// `GET /v1/logging?n=N`: one syslog record (RFC 5424's fields).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogView {
    pub seq: u64,
    pub unix_ms: u64,
    pub severity: String,
    pub msgid: String,
    /// Structured data: the record's parameters, in order.
    pub params: Vec<(String, String)>,
    pub text: String,
}

impl Render for Vec<LogView> {
    fn render(&self) -> String {
        self.iter()
            .map(|r| {
                format!(
                    "{} {:<7} {:<16} {}\n",
                    clock(r.unix_ms),
                    r.severity,
                    r.msgid,
                    r.text
                )
            })
            .collect()
    }
}
