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
    pub message: String,
}

pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let docs = MarkedYamlOwned::load_from_str(text).map_err(|e| SyntaxError {
        line: e.marker().line(),
        col: e.marker().col() + 1,
        message: e.info().to_string(),
    })?;
    match docs.into_iter().next() {
        Some(d) => convert(d),
        None => Ok(Node {
            line: 1,
            col: 1,
            value: Value::Null,
        }),
    }
}

fn convert(n: MarkedYamlOwned) -> Result<Node, SyntaxError> {
    let line = n.span.start.line();
    let col = n.span.start.col() + 1;
    let err = |message: String| SyntaxError { line, col, message };
    let value = match n.data {
        YamlDataOwned::Value(s) => scalar(s),
        YamlDataOwned::Representation(s, _, _) => Value::Scalar(s),
        YamlDataOwned::Sequence(v) => {
            Value::Seq(v.into_iter().map(convert).collect::<Result<_, _>>()?)
        }
        YamlDataOwned::Mapping(m) => {
            let mut out: Vec<(String, Node)> = Vec::new();
            for (k, v) in m {
                let kl = k.span.start.line();
                let kc = k.span.start.col() + 1;
                let key = match convert(k)?.value {
                    Value::Scalar(s) => s,
                    _ => {
                        return Err(SyntaxError {
                            line: kl,
                            col: kc,
                            message: "keys must be plain names".into(),
                        })
                    }
                };
                if out.iter().any(|(x, _)| *x == key) {
                    return Err(SyntaxError {
                        line: kl,
                        col: kc,
                        message: format!("duplicate key `{key}`"),
                    });
                }
                out.push((key, convert(v)?));
            }
            Value::Map(out)
        }
        YamlDataOwned::Tagged(_, inner) => return convert(*inner),
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
