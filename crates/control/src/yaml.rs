//! A YAML document as a tree that remembers where each node came from, so that every config error
//! can name the file, line and field. The YAML parser (saphyr) is used here only; the rest of the
//! crate sees [`Node`].

use saphyr::{LoadableYamlNode, MarkedYamlOwned, ScalarOwned, YamlDataOwned};

#[derive(Clone, Debug)]
pub enum Value {
    Null,
    Scalar(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

#[derive(Clone, Debug)]
pub struct Node {
    pub line: usize,
    pub col: usize,
    pub value: Value,
}

/// A parse error with its position.
#[derive(Debug)]
pub struct SyntaxError {
    pub line: usize,
    pub col: usize,
    /// `syntax`, or `document` for a problem with the file as a whole.
    pub field: &'static str,
    pub message: String,
}

pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let docs = MarkedYamlOwned::load_from_str(text).map_err(|e| SyntaxError {
        line: e.marker().line(),
        col: e.marker().col() + 1,
        field: "syntax",
        message: e.info().to_string(),
    })?;
    let src = Source::new(text);
    let mut docs = docs.into_iter();
    let first = match docs.next() {
        Some(d) => convert(d, &src)?,
        None => Node {
            line: 1,
            col: 1,
            value: Value::Null,
        },
    };
    // A config is one document: a second one would otherwise be dropped without a word.
    if let Some(second) = docs.next() {
        let at = second.span.start.line();
        // Point at the `---` that starts it, if there is one.
        let line = (1..=at)
            .rev()
            .find(|&l| src.line(l).is_some_and(|s| s.starts_with("---")))
            .unwrap_or(at);
        return Err(SyntaxError {
            line,
            col: 1,
            field: "document",
            message: "a second YAML document starts here; a config is one document (remove the \
                      `---` and what follows, or merge it into the first)"
                .into(),
        });
    }
    Ok(first)
}

/// The text, with where each line starts, to recover a scalar as it was written.
struct Source<'t> {
    text: &'t str,
    line_starts: Vec<usize>,
}

impl<'t> Source<'t> {
    fn new(text: &'t str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Source { text, line_starts }
    }

    /// Line `line` (1-based), without its end.
    fn line(&self, line: usize) -> Option<&'t str> {
        let start = *self.line_starts.get(line.checked_sub(1)?)?;
        let rest = &self.text[start..];
        Some(rest.split('\n').next().unwrap_or(rest))
    }

    /// The plain number that starts at `line`, `col` (1-based; `col` in characters), as written.
    fn number_at(&self, line: usize, col: usize) -> Option<&'t str> {
        let l = self.line(line)?;
        let start = l.char_indices().nth(col.checked_sub(1)?)?.0;
        let rest = &l[start..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.' | '_')))
            .unwrap_or(rest.len());
        (end > 0).then(|| &rest[..end])
    }
}

/// The field path (`ports[1].name`) of the last node that starts at or before `line`, `col`:
/// where a problem found in the raw text (an undecodable byte) belongs.
pub fn field_at(root: &Node, line: usize, col: usize) -> String {
    fn walk(n: &Node, path: &str, at: (usize, usize), best: &mut Option<((usize, usize), String)>) {
        if (n.line, n.col) > at {
            return;
        }
        if best.as_ref().is_none_or(|(p, _)| (n.line, n.col) >= *p) {
            *best = Some(((n.line, n.col), path.to_string()));
        }
        match &n.value {
            Value::Seq(items) => {
                for (i, it) in items.iter().enumerate() {
                    walk(it, &format!("{path}[{i}]"), at, best);
                }
            }
            Value::Map(m) => {
                for (k, v) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(v, &p, at, best);
                }
            }
            _ => {}
        }
    }
    let mut best = None;
    walk(root, "", (line, col), &mut best);
    best.map(|(_, p)| p).unwrap_or_default()
}

fn convert(n: MarkedYamlOwned, src: &Source) -> Result<Node, SyntaxError> {
    let line = n.span.start.line();
    let col = n.span.start.col() + 1;
    let err = |message: String| SyntaxError {
        line,
        col,
        field: "syntax",
        message,
    };
    let value = match n.data {
        YamlDataOwned::Value(ScalarOwned::FloatingPoint(f)) => {
            // A number too large for an integer is read as a float; keep what was written, so
            // an error echoes `18446744073709551615`, not `18446744073709552000`.
            Value::Scalar(match src.number_at(line, col) {
                Some(raw) => raw.to_string(),
                None => f.to_string(),
            })
        }
        YamlDataOwned::Value(s) => scalar(s),
        YamlDataOwned::Representation(s, _, _) => Value::Scalar(s),
        YamlDataOwned::Sequence(v) => Value::Seq(
            v.into_iter()
                .map(|x| convert(x, src))
                .collect::<Result<_, _>>()?,
        ),
        YamlDataOwned::Mapping(m) => {
            let mut out: Vec<(String, Node)> = Vec::new();
            for (k, v) in m {
                let kl = k.span.start.line();
                let kc = k.span.start.col() + 1;
                let key = match convert(k, src)?.value {
                    Value::Scalar(s) => s,
                    _ => {
                        return Err(SyntaxError {
                            line: kl,
                            col: kc,
                            field: "syntax",
                            message: "keys must be plain names".into(),
                        })
                    }
                };
                if out.iter().any(|(x, _)| *x == key) {
                    return Err(SyntaxError {
                        line: kl,
                        col: kc,
                        field: "syntax",
                        message: format!("duplicate key `{key}`"),
                    });
                }
                out.push((key, convert(v, src)?));
            }
            Value::Map(out)
        }
        YamlDataOwned::Tagged(_, inner) => return convert(*inner, src),
        YamlDataOwned::Alias(_) => {
            return Err(err("YAML aliases are not supported in configs".into()))
        }
        YamlDataOwned::BadValue => return Err(err("unreadable value".into())),
    };
    Ok(Node { line, col, value })
}

fn scalar(s: ScalarOwned) -> Value {
    match s {
        ScalarOwned::Null => Value::Null,
        ScalarOwned::Boolean(b) => Value::Scalar(b.to_string()),
        ScalarOwned::Integer(i) => Value::Scalar(i.to_string()),
        ScalarOwned::FloatingPoint(f) => Value::Scalar(f.to_string()),
        ScalarOwned::String(s) => Value::Scalar(s),
    }
}
