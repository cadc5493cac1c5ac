//! Editing a config by path, as `set` and `delete` do on a router: the event manager's commit
//! action and the CLI's configure mode change the running text this way, then commit it through
//! the normal path (checked whole, applied atomically, kept in the history).
//!
//! A path names mapping keys with `.` and list items with `[N]` (0-based) or `[key=value]` (the
//! item whose `key` is `value`): `control-plane.punt.local`, `interfaces[name=p1].qos-in`,
//! `acls[name=edge].entries[0]`. `set` creates missing mappings on the way (not list items);
//! a `[key=value]` that matches no item appends one `{ key: value }` to build on. Values are
//! YAML text (`100`, `"{ rate: 100, burst: 10 }"`, `[a, b]`).
//!
//! The result is written out in one canonical block style: comments and the original layout
//! do not survive an edit (as on routers, whose running config has no comments).

use crate::yaml::{self, Node, Value};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
    Match(String, String),
}

fn parse_path(path: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    // Split on the dots outside brackets: `[name=worm-198.51.100.7]` is one step.
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in path.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '.' if depth == 0 => {
                parts.push(&path[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&path[start..]);
    for part in parts {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if key.is_empty() && steps.is_empty() {
            return Err(format!("`{path}`: a path starts with a key"));
        }
        if !key.is_empty() {
            steps.push(Step::Key(key.to_string()));
        }
        while !rest.is_empty() {
            let end = rest
                .find(']')
                .ok_or_else(|| format!("`{path}`: `[` without `]`"))?;
            let inner = &rest[1..end];
            steps.push(match inner.split_once('=') {
                Some((k, v)) if !k.is_empty() => Step::Match(k.to_string(), v.to_string()),
                _ => Step::Index(
                    inner
                        .parse()
                        .map_err(|_| format!("`{path}`: `[{inner}]` is not [N] or [key=value]"))?,
                ),
            });
            rest = &rest[end + 1..];
        }
    }
    if steps.is_empty() {
        return Err("an empty path".into());
    }
    Ok(steps)
}

fn node(value: Value) -> Node {
    Node {
        line: 0,
        col: 0,
        value,
    }
}

fn item_matches(n: &Node, k: &str, v: &str) -> bool {
    matches!(&n.value, Value::Map(m) if m.iter().any(|(mk, mv)| mk == k && matches!(&mv.value, Value::Scalar(s) if s == v)))
}

/// The node at `steps` under `n`, made on the way where `create`.
fn walk<'a>(
    mut n: &'a mut Node,
    steps: &[Step],
    create: bool,
    path: &str,
) -> Result<&'a mut Node, String> {
    for s in steps {
        if create && matches!(n.value, Value::Null) {
            n.value = match s {
                Step::Key(_) => Value::Map(Vec::new()),
                _ => Value::Seq(Vec::new()),
            };
        }
        n = match (s, &mut n.value) {
            (Step::Key(k), Value::Map(m)) => {
                let i = match m.iter().position(|(mk, _)| mk == k) {
                    Some(i) => i,
                    None if create => {
                        m.push((k.clone(), node(Value::Null)));
                        m.len() - 1
                    }
                    None => return Err(format!("`{path}`: no `{k}` there")),
                };
                &mut m[i].1
            }
            (Step::Index(i), Value::Seq(items)) => {
                let len = items.len();
                items
                    .get_mut(*i)
                    .ok_or_else(|| format!("`{path}`: [{i}] is past the list's {len} item(s)"))?
            }
            (Step::Match(k, v), Value::Seq(items)) => {
                let i = match items.iter().position(|it| item_matches(it, k, v)) {
                    Some(i) => i,
                    None if create => {
                        items.push(node(Value::Map(vec![(
                            k.clone(),
                            node(Value::Scalar(v.clone())),
                        )])));
                        items.len() - 1
                    }
                    None => return Err(format!("`{path}`: no item with {k} = {v}")),
                };
                &mut items[i]
            }
            (Step::Key(k), _) => {
                return Err(format!(
                    "`{path}`: `{k}` is under something that is not a mapping"
                ))
            }
            (_, _) => {
                return Err(format!(
                    "`{path}`: an index into something that is not a list"
                ))
            }
        };
    }
    Ok(n)
}

fn parse_text(text: &str) -> Result<Node, String> {
    yaml::parse(text).map_err(|e| format!("line {}, column {}: {}", e.line, e.col, e.message))
}

/// `text` with the value at `path` set to `value` (YAML text).
pub fn set(text: &str, path: &str, value: &str) -> Result<String, String> {
    let mut root = parse_text(text)?;
    let steps = parse_path(path)?;
    let v = parse_text(value).map_err(|e| format!("the value of `{path}`: {e}"))?;
    *walk(&mut root, &steps, true, path)? = v;
    Ok(emit(&root))
}

/// `text` without the key or list item at `path`.
pub fn delete(text: &str, path: &str) -> Result<String, String> {
    let mut root = parse_text(text)?;
    let steps = parse_path(path)?;
    let (last, parent) = steps.split_last().expect("a path has a step");
    let p = walk(&mut root, parent, false, path)?;
    match (last, &mut p.value) {
        (Step::Key(k), Value::Map(m)) => {
            let i = m
                .iter()
                .position(|(mk, _)| mk == k)
                .ok_or_else(|| format!("`{path}`: no `{k}` there"))?;
            m.remove(i);
        }
        (Step::Index(i), Value::Seq(items)) if *i < items.len() => {
            items.remove(*i);
        }
        (Step::Match(k, v), Value::Seq(items)) => {
            let i = items
                .iter()
                .position(|it| item_matches(it, k, v))
                .ok_or_else(|| format!("`{path}`: no item with {k} = {v}"))?;
            items.remove(i);
        }
        _ => return Err(format!("`{path}`: nothing to delete there")),
    }
    Ok(emit(&root))
}

/// `text` in the canonical form edits write (what `show | compare` diffs, so that only the
/// changes show, not the layout).
pub fn canonical(text: &str) -> Result<String, String> {
    Ok(emit(&parse_text(text)?))
}

/// The value at `path`, written as YAML (for `show` in configure mode).
pub fn get(text: &str, path: &str) -> Result<String, String> {
    let mut root = parse_text(text)?;
    let steps = parse_path(path)?;
    Ok(emit(walk(&mut root, &steps, false, path)?))
}

/// Whether a scalar can be written plain and read back as the same string.
fn plain(s: &str) -> bool {
    !s.is_empty()
        && s.trim() == s
        && !matches!(s, "~" | "null" | "Null" | "NULL")
        && !s.starts_with([
            '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%',
            '@', '`',
        ])
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with(':')
        && !s.contains(['\n', '\r', '\t', '{', '}', '[', ']', ','])
        && !s.chars().any(char::is_control)
        || s.starts_with('-')
            && s.len() > 1
            && s[1..].bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

fn scalar(s: &str) -> String {
    if plain(s) {
        return s.to_string();
    }
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            '\r' => q.push_str("\\r"),
            c if c.is_control() => q.push_str(&format!("\\u{:04x}", c as u32)),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// The tree as block YAML.
pub fn emit(n: &Node) -> String {
    let mut out = String::new();
    match &n.value {
        Value::Map(_) | Value::Seq(_) => block(n, 0, &mut out),
        Value::Scalar(s) => {
            out.push_str(&scalar(s));
            out.push('\n');
        }
        Value::Null => out.push_str("~\n"),
    }
    out
}

fn inline(n: &Node) -> Option<String> {
    match &n.value {
        Value::Null => Some(String::new()),
        Value::Scalar(s) => Some(format!(" {}", scalar(s))),
        Value::Map(m) if m.is_empty() => Some(" {}".into()),
        Value::Seq(s) if s.is_empty() => Some(" []".into()),
        _ => None,
    }
}

fn block(n: &Node, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match &n.value {
        Value::Map(m) => {
            for (k, v) in m {
                out.push_str(&pad);
                out.push_str(&scalar(k));
                out.push(':');
                match inline(v) {
                    Some(s) => {
                        out.push_str(&s);
                        out.push('\n');
                    }
                    None => {
                        out.push('\n');
                        block(v, indent + 2, out);
                    }
                }
            }
        }
        Value::Seq(items) => {
            for it in items {
                match (&it.value, inline(it)) {
                    (Value::Map(_), None) | (Value::Seq(_), None) => {
                        let mut inner = String::new();
                        block(it, indent + 2, &mut inner);
                        // The item's first line takes the dash in place of its indent.
                        out.push_str(&pad);
                        out.push_str("- ");
                        out.push_str(&inner[indent + 2..]);
                    }
                    (_, Some(s)) => {
                        out.push_str(&pad);
                        out.push('-');
                        out.push_str(if s.is_empty() { " ~" } else { &s });
                        out.push('\n');
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: &str = "\
# a comment
ports:
  - { name: p0, driver: mem }
  - name: p1
    driver: mem
interfaces:
  - { name: p0, port: p0, mac: 02:00:00:00:00:01, ipv4: [192.0.2.1/24] }
control-plane:
  punt:
    local: { rate: 1000, burst: 100 }
logging: { hostname: \"edge 1\" }
";

    fn same_tree(a: &str, b: &str) {
        assert_eq!(emit(&parse_text(a).unwrap()), emit(&parse_text(b).unwrap()));
    }

    #[test]
    fn the_canonical_text_reads_back_as_the_same_tree() {
        let out = emit(&parse_text(CFG).unwrap());
        same_tree(&out, CFG);
        assert!(out.contains("hostname: \"edge 1\"") || out.contains("hostname: edge 1"));
        assert!(out.contains("mac: 02:00:00:00:00:01"), "{out}");
        // And the router reads it as it read the original.
        let a = crate::config::parse(CFG, std::path::Path::new("a.yaml")).unwrap();
        let b = crate::config::parse(&out, std::path::Path::new("a.yaml")).unwrap();
        assert_eq!(a.interfaces, b.interfaces);
        assert_eq!(a.control_plane, b.control_plane);
    }

    #[test]
    fn set_replaces_creates_and_finds_items_by_key() {
        let t = set(CFG, "control-plane.punt.local", "{ rate: 50, burst: 5 }").unwrap();
        assert_eq!(get(&t, "control-plane.punt.local.rate").unwrap(), "50\n");
        let t = set(&t, "control-plane.punt.ttl-expired.rate", "10").unwrap();
        assert_eq!(
            get(&t, "control-plane.punt.ttl-expired").unwrap(),
            "rate: 10\n"
        );
        let t = set(&t, "ports[name=p1].driver", "pcap").unwrap();
        assert_eq!(get(&t, "ports[1].driver").unwrap(), "pcap\n");
        let t = set(&t, "ports[name=p2].driver", "mem").unwrap();
        assert_eq!(get(&t, "ports[2].name").unwrap(), "p2\n");
        // Dots inside a key's value (an address) do not split the path.
        let t = set(
            &t,
            "qos.classes[name=worm-198.51.100.7].match",
            "[\"udp src host 198.51.100.7 dport 1434\"]",
        )
        .unwrap();
        assert_eq!(
            get(&t, "qos.classes[0].name").unwrap(),
            "worm-198.51.100.7\n"
        );
        assert!(get(&t, "qos.classes[name=worm-198.51.100.7].match")
            .unwrap()
            .contains("dport 1434"));
    }

    #[test]
    fn delete_removes_keys_and_items() {
        let t = delete(CFG, "ports[name=p0]").unwrap();
        assert_eq!(get(&t, "ports[0].name").unwrap(), "p1\n");
        let t = delete(&t, "control-plane.punt.local").unwrap();
        assert!(get(&t, "control-plane.punt.local").is_err());
        assert!(delete(&t, "nothing.here").is_err());
    }

    #[test]
    fn bad_paths_and_values_are_refused_with_a_reason() {
        for (p, v) in [
            ("ports[9].name", "x"),
            ("ports[x", "x"),
            ("logging.hostname.deeper", "x"),
            ("control-plane.punt", "{ unclosed"),
        ] {
            let e = set(CFG, p, v).unwrap_err();
            assert!(!e.is_empty(), "{p}");
        }
    }

    #[test]
    fn scalars_that_yaml_would_misread_are_quoted() {
        for s in [
            "",
            "a: b",
            "#x",
            "[1]",
            "null",
            "~",
            " pad",
            "x,y",
            "line\nbreak",
            "-",
        ] {
            let n = node(Value::Map(vec![(
                "k".into(),
                node(Value::Scalar(s.into())),
            )]));
            let back = parse_text(&emit(&n)).unwrap();
            match &back.value {
                Value::Map(m) => {
                    assert!(
                        matches!(&m[0].1.value, Value::Scalar(x) if x == s),
                        "{s:?}: {:?}",
                        m[0].1
                    )
                }
                _ => panic!("{s:?}"),
            }
        }
    }
}
