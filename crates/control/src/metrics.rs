//! Writing metrics in the Prometheus text exposition format, version 0.0.4 (the
//! `text/plain; version=0.0.4` one every Prometheus server and `promtool check metrics` read).
//!
//! ```text
//! # HELP linerate_rx_packets_total Packets received.
//! # TYPE linerate_rx_packets_total counter
//! linerate_rx_packets_total{port="eth0",queue="0"} 1027
//! linerate_rx_packets_total{port="eth1",queue="0"} 3
//! # HELP linerate_workers Workers running.
//! # TYPE linerate_workers gauge
//! linerate_workers 2
//! ```
//!
//! Counter names end in `_total`, and the `# HELP` and `# TYPE` lines of a counter name it *with*
//! the suffix, the same name as its samples. That is what the classic format means by a family
//! name: a sample belongs to the family whose name it has (histograms and summaries aside), and
//! the official Python client writes its counters so (`Counter('foo', ...)` is exposed as
//! `# HELP foo_total ...`, `# TYPE foo_total counter`, `foo_total 1.0`). Its parser,
//! `prometheus_client.parser.text_string_to_metric_families` (0.26.0 checked), reads
//! `# TYPE foo_total counter` followed by `foo_total{a="x"} 1` as one counter family, which it
//! names `foo` in its OpenMetrics-style model, holding the sample `foo_total{a="x"}`. Writing
//! `# TYPE foo counter` with samples named `foo_total` instead is *not* read as one family by
//! that parser: it yields an empty counter `foo` and a separate untyped family `foo_total`.
//!
//! [`Exposition`] checks names in debug builds: metric names `[a-zA-Z_:][a-zA-Z0-9_:]*`, label
//! names `[a-zA-Z_][a-zA-Z0-9_]*`, counter names ending in `_total`, each family started once
//! and each label once per sample.

use std::collections::HashSet;
use std::fmt::Write as _;

/// The Content-Type of [`Exposition::finish`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The type of a metric family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (resets to 0 on restart); its name ends in `_total`.
    Counter,
    /// Goes up and down.
    Gauge,
}

impl Kind {
    /// The word of the `# TYPE` line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// Whether `name` is a valid metric name: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
/// This process's resident memory in MB, from /proc (0 where /proc cannot say): what soaks
/// sample to show memory stays flat.
pub fn process_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

pub fn valid_metric_name(name: &str) -> bool {
    let mut b = name.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_' || c == b':')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
}

/// Whether `name` is a valid label name: `[a-zA-Z_][a-zA-Z0-9_]*`.
pub fn valid_label_name(name: &str) -> bool {
    let mut b = name.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// A metrics page being written: start a family, give its samples, start the next, then
/// [`finish`](Exposition::finish).
#[derive(Debug, Default)]
pub struct Exposition {
    buf: String,
    /// Name of the family samples go to.
    current: Option<String>,
    /// Every family started, to catch one started twice.
    families: HashSet<String>,
    /// Collecting instead of writing: the families wanted and their samples so far.
    collect: Option<(HashSet<String>, Vec<Series>)>,
    /// Whether the current family is one of those wanted.
    wanted: bool,
}

/// One sample, as the event manager reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Exposition {
    pub fn new() -> Self {
        Self::default()
    }

    /// An exposition that writes no text but keeps the samples of the `wanted` families
    /// ([`Exposition::series`]): what a rule reads, without formatting every metric.
    pub fn collecting(wanted: HashSet<String>) -> Self {
        Exposition {
            collect: Some((wanted, Vec::new())),
            ..Self::default()
        }
    }

    /// The samples collected (see [`Exposition::collecting`]).
    /// Whether any family whose name starts with `prefix` is wanted (a collecting exposition
    /// skips the work of families nobody asked for; a writing one wants everything).
    pub fn wants_prefix(&self, prefix: &str) -> bool {
        match &self.collect {
            Some((wanted, _)) => wanted.iter().any(|w| w.starts_with(prefix)),
            None => true,
        }
    }

    pub fn series(self) -> Vec<Series> {
        self.collect.map(|(_, s)| s).unwrap_or_default()
    }

    /// Starts a family: writes `# HELP name help` (with `\` and newlines in `help` escaped) and
    /// `# TYPE name counter|gauge`. A counter's name ends in `_total` and is used whole on both
    /// lines and by its samples (see the module's documentation).
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) -> &mut Self {
        debug_assert!(valid_metric_name(name), "invalid metric name {name:?}");
        debug_assert!(
            kind != Kind::Counter || name.ends_with("_total"),
            "counter name {name:?} does not end in _total"
        );
        let fresh = self.families.insert(name.to_string());
        debug_assert!(fresh, "metric family {name:?} started twice");
        if let Some((wanted, _)) = &self.collect {
            self.wanted = wanted.contains(name);
            self.current = Some(name.to_string());
            return self;
        }
        self.buf.push_str("# HELP ");
        self.buf.push_str(name);
        self.buf.push(' ');
        for c in help.chars() {
            match c {
                '\\' => self.buf.push_str("\\\\"),
                '\n' => self.buf.push_str("\\n"),
                c => self.buf.push(c),
            }
        }
        let _ = writeln!(self.buf, "\n# TYPE {name} {}", kind.name());
        self.current = Some(name.to_string());
        self
    }

    /// Writes one sample of the current family: its labels in the given order, with `\`, `"`
    /// and newlines in the values escaped, then the value ([`format_value`]).
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) -> &mut Self {
        debug_assert!(self.current.is_some(), "sample before any family");
        let Some(name) = &self.current else {
            return self;
        };
        if let Some((_, out)) = &mut self.collect {
            if self.wanted {
                out.push(Series {
                    name: name.clone(),
                    labels: labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    value,
                });
            }
            return self;
        }
        self.buf.push_str(name);
        if !labels.is_empty() {
            self.buf.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                debug_assert!(valid_label_name(k), "invalid label name {k:?}");
                debug_assert!(
                    labels[..i].iter().all(|(k2, _)| k2 != k),
                    "label {k:?} given twice"
                );
                if i > 0 {
                    self.buf.push(',');
                }
                self.buf.push_str(k);
                self.buf.push_str("=\"");
                for c in v.chars() {
                    match c {
                        '\\' => self.buf.push_str("\\\\"),
                        '"' => self.buf.push_str("\\\""),
                        '\n' => self.buf.push_str("\\n"),
                        c => self.buf.push(c),
                    }
                }
                self.buf.push('"');
            }
            self.buf.push('}');
        }
        self.buf.push(' ');
        write_value(&mut self.buf, value);
        self.buf.push('\n');
        self
    }

    /// The text written so far.
    pub fn finish(self) -> String {
        self.buf
    }
}

/// Formats a sample value as Prometheus reads it: `NaN`, `+Inf`, `-Inf`; a whole number below
/// 10^15 in magnitude without a decimal point (`42`, `-7`, `0`); other numbers in Rust's
/// shortest round-trip form, with an exponent when very large or small (`0.25`, `1e15`,
/// `1.5e-7`).
pub fn format_value(v: f64) -> String {
    let mut s = String::new();
    write_value(&mut s, v);
    s
}

fn write_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v == v.trunc() && v.abs() < 1e15 {
        // Exact: every integer below 2^53 is a whole f64; -0.0 becomes 0.
        let _ = write!(out, "{}", v as i64);
    } else if v.abs() >= 1e15 || v.abs() < 1e-4 {
        let _ = write!(out, "{v:e}");
    } else {
        let _ = write!(out, "{v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_counter_and_gauge_families() {
        let mut e = Exposition::new();
        e.family(
            "linerate_rx_packets_total",
            Kind::Counter,
            "Packets received.",
        )
        .sample(&[("port", "eth0"), ("queue", "0")], 1027.0)
        .sample(&[("port", "eth1"), ("queue", "0")], 3.0);
        e.family("linerate_workers", Kind::Gauge, "Workers running.")
            .sample(&[], 2.0);
        assert_eq!(
            e.finish(),
            "# HELP linerate_rx_packets_total Packets received.\n\
             # TYPE linerate_rx_packets_total counter\n\
             linerate_rx_packets_total{port=\"eth0\",queue=\"0\"} 1027\n\
             linerate_rx_packets_total{port=\"eth1\",queue=\"0\"} 3\n\
             # HELP linerate_workers Workers running.\n\
             # TYPE linerate_workers gauge\n\
             linerate_workers 2\n"
        );
    }

    #[test]
    fn metrics_escaping() {
        let mut e = Exposition::new();
        e.family("x", Kind::Gauge, "a \\ b\nc \"q\"")
            .sample(&[("path", "C:\\dir \"x\"\nnext"), ("z", "")], 1.0);
        assert_eq!(
            e.finish(),
            "# HELP x a \\\\ b\\nc \"q\"\n\
             # TYPE x gauge\n\
             x{path=\"C:\\\\dir \\\"x\\\"\\nnext\",z=\"\"} 1\n"
        );
    }

    #[test]
    fn metrics_value_formatting() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-7.0, "-7"),
            (1027.0, "1027"),
            (18_446_744_073_709.0, "18446744073709"),
            (999_999_999_999_999.0, "999999999999999"),
            (1e15, "1e15"),
            (1.8446744073709552e19, "1.8446744073709552e19"),
            (0.25, "0.25"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (1234.5678, "1234.5678"),
            (1.5e-7, "1.5e-7"),
            (0.0001, "0.0001"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
        ];
        for &(v, want) in cases {
            assert_eq!(format_value(v), want, "{v:?}");
            // Whatever is written reads back as the same number.
            if v.is_finite() {
                assert_eq!(want.parse::<f64>().unwrap(), v);
            }
        }
        let mut e = Exposition::new();
        e.family("g", Kind::Gauge, "h")
            .sample(&[], f64::NAN)
            .sample(&[("a", "b")], 0.5);
        assert_eq!(
            e.finish(),
            "# HELP g h\n# TYPE g gauge\ng NaN\ng{a=\"b\"} 0.5\n"
        );
    }

    #[test]
    fn metrics_name_syntax() {
        for ok in ["a", "_", ":", "a:b_c9", "linerate_rx_total", "A_Z"] {
            assert!(valid_metric_name(ok), "{ok}");
        }
        for bad in ["", "9a", "a-b", "a b", "é", "a.b", "a{"] {
            assert!(!valid_metric_name(bad), "{bad}");
        }
        for ok in ["a", "_", "port", "queue_9", "Z"] {
            assert!(valid_label_name(ok), "{ok}");
        }
        for bad in ["", "9", "a:b", ":", "a-b", "é"] {
            assert!(!valid_label_name(bad), "{bad}");
        }
        assert_eq!(Exposition::new().finish(), "");
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "started twice")]
    fn metrics_family_started_twice_panics() {
        let mut e = Exposition::new();
        e.family("a", Kind::Gauge, "h").sample(&[], 1.0);
        e.family("b", Kind::Gauge, "h");
        e.family("a", Kind::Gauge, "h");
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "invalid metric name")]
    fn metrics_bad_metric_name_panics() {
        Exposition::new().family("rx-packets", Kind::Gauge, "h");
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "invalid label name")]
    fn metrics_bad_label_name_panics() {
        Exposition::new()
            .family("a", Kind::Gauge, "h")
            .sample(&[("a:b", "v")], 1.0);
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "does not end in _total")]
    fn metrics_counter_without_total_panics() {
        Exposition::new().family("rx_packets", Kind::Counter, "h");
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "given twice")]
    fn metrics_duplicate_label_panics() {
        Exposition::new()
            .family("a", Kind::Gauge, "h")
            .sample(&[("x", "1"), ("x", "2")], 1.0);
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "sample before any family")]
    fn metrics_sample_without_family_panics() {
        Exposition::new().sample(&[], 1.0);
    }
}
