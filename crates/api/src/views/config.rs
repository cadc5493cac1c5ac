//! Config commits: what an apply did (`config apply`, `config diff`, `config rollback`), the
//! history, and the running config's text.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Render;
use crate::table::{clock, table};

/// What an apply did (or, dry, would do).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ApplyOutcome {
    /// The new commit's id; None when nothing changed or on a dry run.
    pub commit: Option<u64>,
    pub changed: bool,
    pub dry_run: bool,
    /// What changed, one line per item (`+ port p9`, `~ interface p0`, ...).
    pub summary: Vec<String>,
    /// A unified diff of the config text.
    pub diff: String,
    /// Seconds until an automatic rollback, for a commit-confirmed.
    pub confirm_deadline_s: Option<u64>,
    pub warnings: Vec<String>,
}

impl Render for ApplyOutcome {
    fn render(&self) -> String {
        if !self.changed {
            return "no changes: the running config is the same\n".into();
        }
        let mut out = self.diff.clone();
        for l in &self.summary {
            out += &format!("{l}\n");
        }
        for w in &self.warnings {
            out += &format!("warning: {w}\n");
        }
        if self.dry_run {
            out += "dry run: nothing was applied\n";
        } else if let Some(id) = self.commit {
            out += &match self.confirm_deadline_s {
                Some(t) => format!(
                    "commit {id} applied; it rolls back in {t} s unless `linerate config confirm`\n"
                ),
                None => format!("commit {id} applied\n"),
            };
        }
        out
    }
}

/// One entry of `GET /v1/config/history`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CommitView {
    pub id: u64,
    pub unix_time: u64,
    pub comment: String,
    /// The path the config was read from.
    pub source: PathBuf,
    /// What changed, one line per item.
    pub summary: Vec<String>,
    /// `committed`, `pending` (waiting for confirmation), `confirmed`, `rolled-back`.
    pub status: String,
}

impl Render for Vec<CommitView> {
    fn render(&self) -> String {
        let rows = self
            .iter()
            .map(|h| {
                vec![
                    h.id.to_string(),
                    clock(h.unix_time * 1000),
                    h.status.clone(),
                    h.summary.len().to_string(),
                    h.comment.clone(),
                ]
            })
            .collect();
        table(
            &["Commit", "Time (UTC)", "Status", "Changes", "Comment"],
            rows,
        )
    }
}

/// `GET /v1/config`: the running config.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunningConfig {
    pub text: String,
    pub source: PathBuf,
    pub commit: u64,
}

impl Render for RunningConfig {
    fn render(&self) -> String {
        self.text.clone()
    }
}

/// `GET /v1/config/history/ID`: one commit and its config text.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CommitText {
    pub commit: CommitView,
    pub text: String,
}

impl Render for CommitText {
    fn render(&self) -> String {
        self.text.clone()
    }
}
