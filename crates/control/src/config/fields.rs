//! The readers every section uses: [`Fields`] reads one mapping's keys (and complains about
//! unknown ones), [`Errs`] collects errors with their positions.

use packet::ethernet::MacAddr;

use super::{ConfigError, Origin};
use crate::yaml::{Node, Value};

/// Reads the fields of one mapping, collecting errors instead of stopping at the first, and
/// complaining about keys nobody asked for (a misspelt key is a mistake, not a default).
pub(super) struct Fields<'a> {
    pub(super) path: String,
    pub(super) node: &'a Node,
    pub(super) map: &'a [(String, Node)],
    pub(super) used: Vec<&'a str>,
}

pub(super) struct Errs<'a> {
    pub(super) file: &'a str,
    /// The file's text, for positions inside a scalar (a quoted one starts a column later).
    pub(super) text: &'a str,
    pub(super) list: Vec<ConfigError>,
}

impl<'a> Errs<'a> {
    pub(super) fn at(&mut self, n: &Node, field: &str, message: impl Into<String>) {
        self.push(n.line, n.col, field, message.into());
    }
    pub(super) fn origin(&mut self, o: &Origin, message: impl Into<String>) {
        self.push(o.line, o.col, &o.field, message.into());
    }
    fn push(&mut self, line: usize, col: usize, field: &str, message: String) {
        self.list.push(ConfigError {
            file: self.file.to_string(),
            line,
            col,
            // The file as a whole (a root that is not a mapping) has no key to name.
            field: if field.is_empty() { "document" } else { field }.to_string(),
            message: shorten_quoted(&message),
        });
    }
}

/// Every value a message quotes (between backticks) cut to a short excerpt: a message may echo
/// what was written, never megabytes of it.
pub(super) fn shorten_quoted(message: &str) -> String {
    let mut parts = message.split('`');
    let mut out = String::with_capacity(message.len().min(256));
    out.push_str(parts.next().unwrap_or(""));
    for (i, p) in parts.enumerate() {
        out.push('`');
        // Odd pieces are inside backticks (an unpaired one leaves the tail as it is, cut too).
        out.push_str(&if i % 2 == 0 {
            super::excerpt(p)
        } else {
            p.to_string()
        });
    }
    out
}

pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl<'a> Fields<'a> {
    pub(super) fn new(path: String, node: &'a Node, e: &mut Errs) -> Option<Self> {
        match &node.value {
            Value::Map(m) => Some(Self {
                path,
                node,
                map: m,
                used: Vec::new(),
            }),
            Value::Null => Some(Self {
                path,
                node,
                map: &[],
                used: Vec::new(),
            }),
            _ => {
                e.at(node, &path, "expected a mapping (key: value)");
                None
            }
        }
    }

    pub(super) fn get(&mut self, key: &'a str) -> Option<&'a Node> {
        self.used.push(key);
        self.map
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .filter(|v| !matches!(v.value, Value::Null))
    }

    /// The node of `key`, if present and not null, without counting the key as read.
    pub(super) fn node(&self, key: &str) -> Option<&'a Node> {
        self.map
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .filter(|v| !matches!(v.value, Value::Null))
    }

    pub(super) fn field(&self, key: &str) -> String {
        join(&self.path, key)
    }

    pub(super) fn origin(&self) -> Origin {
        Origin {
            line: self.node.line,
            col: self.node.col,
            field: self.path.clone(),
        }
    }

    pub(super) fn str(&mut self, key: &'a str, e: &mut Errs) -> Option<String> {
        let n = self.get(key)?;
        match &n.value {
            Value::Scalar(s) => Some(s.clone()),
            _ => {
                e.at(n, &self.field(key), "expected a single value");
                None
            }
        }
    }

    pub(super) fn required(&mut self, key: &'a str, e: &mut Errs) -> Option<String> {
        let v = self.str(key, e);
        if v.is_none() && !self.map.iter().any(|(k, _)| k == key) {
            e.at(self.node, &self.field(key), format!("`{key}` is required"));
        }
        v
    }

    pub(super) fn parse<T: std::str::FromStr>(
        &mut self,
        key: &'a str,
        what: &str,
        e: &mut Errs,
    ) -> Option<T> {
        let n = self.get(key)?;
        let f = self.field(key);
        match &n.value {
            Value::Scalar(s) => match s.parse() {
                Ok(v) => Some(v),
                Err(_) => {
                    e.at(n, &f, format!("`{s}` is not {what}"));
                    None
                }
            },
            _ => {
                e.at(n, &f, format!("expected {what}"));
                None
            }
        }
    }

    /// A list of scalars; a single scalar counts as a list of one.
    pub(super) fn list(&mut self, key: &'a str, e: &mut Errs) -> Vec<(String, &'a Node, String)> {
        let Some(n) = self.get(key) else {
            return Vec::new();
        };
        let f = self.field(key);
        match &n.value {
            Value::Scalar(s) => vec![(s.clone(), n, f)],
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, it)| match &it.value {
                    Value::Scalar(s) => Some((s.clone(), it, format!("{f}[{i}]"))),
                    _ => {
                        e.at(it, &format!("{f}[{i}]"), "expected a single value");
                        None
                    }
                })
                .collect(),
            _ => {
                e.at(n, &f, "expected a list");
                Vec::new()
            }
        }
    }

    pub(super) fn finish(self, e: &mut Errs) {
        for (k, v) in self.map {
            if !self.used.contains(&k.as_str()) {
                let known = self.used.join(", ");
                e.at(
                    v,
                    &join(&self.path, k),
                    format!("unknown key `{k}` (known here: {known})"),
                );
            }
        }
    }
}

pub(super) fn seq<'a>(f: &mut Fields<'a>, key: &'a str, e: &mut Errs) -> Vec<(&'a Node, String)> {
    let Some(n) = f.get(key) else {
        return Vec::new();
    };
    let path = f.field(key);
    match &n.value {
        Value::Seq(items) => items
            .iter()
            .enumerate()
            .map(|(i, it)| (it, format!("{path}[{i}]")))
            .collect(),
        _ => {
            e.at(n, &path, "expected a list");
            Vec::new()
        }
    }
}

pub(super) fn mac(s: &str, n: &Node, field: &str, e: &mut Errs) -> Option<MacAddr> {
    match s.parse::<MacAddr>() {
        Ok(m) if m.is_unicast() && !m.is_zero() => Some(m),
        Ok(_) => {
            e.at(n, field, format!("`{s}` is not a unicast MAC address"));
            None
        }
        Err(_) => {
            e.at(
                n,
                field,
                format!("`{s}` is not a MAC address (aa:bb:cc:dd:ee:ff)"),
            );
            None
        }
    }
}

/// Where node `n` (the field `field`) is, for checks made after parsing.
pub(super) fn origin_at(n: &Node, field: &str) -> Origin {
    Origin {
        line: n.line,
        col: n.col,
        field: field.to_string(),
    }
}

/// The names listed under `key`, each with where it is.
pub(super) fn names(f: &mut Fields<'_>, key: &'static str, e: &mut Errs) -> Vec<(String, Origin)> {
    f.list(key, e)
        .into_iter()
        .map(|(s, n, field)| (s, origin_at(n, &field)))
        .collect()
}
