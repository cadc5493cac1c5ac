//! SVG charts for the tester's reports: throughput against frame size, drawn as grouped bars with
//! one bar per series (a router, a run) in each category (a frame size, or IMIX).
//!
//! Hand-written rather than taken from a plotting crate: a chart of a dozen bars is a few hundred
//! lines of text, and does not justify a plotting crate with its font loading and rendering
//! dependencies (and their build time) in a workspace that otherwise has almost none. The output
//! is a standalone SVG document that depends only on its inputs, so a report's chart can be
//! committed beside it and diffed like any other text.

use std::fmt::Write as _;

/// One line of the chart: a name for the legend and one y value per category (None = no point).
pub struct Series {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

const WIDTH: f64 = 900.0;
/// The height with one legend row; each further row adds `LEGEND_ROW`, so a long legend pushes the
/// document down instead of overlapping the axis labels.
const HEIGHT: f64 = 480.0;
/// Room for y tick labels such as "500k" and the rotated y axis label.
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 48.0;
const PLOT_BOTTOM: f64 = 390.0;
const LEGEND_ROW: f64 = 20.0;
const FONT: f64 = 12.0;
const SWATCH: f64 = 12.0;
/// Okabe and Ito's palette: told apart by readers with the common colour-vision deficiencies,
/// which matters when the only link between a bar and its legend entry is the colour.
const PALETTE: [&str; 8] = [
    "#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#f0e442", "#000000",
];
/// A 1-2-5 sequence of log ticks wider than this many steps (four decades) would crowd the axis,
/// so only the decades are marked.
const MAX_LOG_STEPS: i32 = 12;

/// Writing to a `String` cannot fail, so the `fmt::Result` carries nothing worth handling.
macro_rules! put {
    ($out:expr, $($arg:tt)*) => {
        let _ = writeln!($out, $($arg)*);
    };
}

/// A chart of categories (x, e.g. frame sizes "64", "128", ..., "IMIX") against values (y,
/// e.g. frames/s). y is drawn on a log10 scale when `log_y` (ticks at 1, 2, 5 x 10^k), else linear
/// from 0 (ticks at round steps). Returns a complete standalone SVG document.
///
/// A value that is not finite or not positive gets no bar on either scale: on a log scale it has
/// no position, and on a linear one a zero bar would be invisible anyway. Values beyond the last
/// category are ignored; a series shorter than `categories` has no points for the rest.
pub fn svg(
    title: &str,
    x_label: &str,
    y_label: &str,
    categories: &[String],
    series: &[Series],
    log_y: bool,
) -> String {
    let drawn = || {
        series
            .iter()
            .flat_map(|s| s.values.iter().take(categories.len()))
            .filter_map(|v| bar_value(*v))
    };
    let (Some(min), Some(max)) = (drawn().reduce(f64::min), drawn().reduce(f64::max)) else {
        return no_data(title);
    };
    let scale = if log_y {
        Scale::log(min, max)
    } else {
        Scale::linear(max)
    };

    let legend = legend_rows(series);
    let height = HEIGHT + LEGEND_ROW * (legend.len().max(1) - 1) as f64;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = PLOT_BOTTOM - TOP;
    let y_of = |v: f64| PLOT_BOTTOM - plot_h * scale.frac(v);

    let mut out = header(height);
    put!(
        out,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16" font-weight="bold">{}</text>"#,
        num(WIDTH / 2.0),
        esc(title)
    );

    put!(out, r##"<g class="grid" stroke="#ddd">"##);
    for &t in &scale.ticks {
        let y = num(y_of(t));
        put!(
            out,
            r#"<line x1="{}" y1="{y}" x2="{}" y2="{y}"/>"#,
            num(LEFT),
            num(LEFT + plot_w)
        );
    }
    put!(out, "</g>");
    put!(
        out,
        r##"<g class="y-ticks" text-anchor="end" fill="#333">"##
    );
    for &t in &scale.ticks {
        put!(
            out,
            r#"<text x="{}" y="{}">{}</text>"#,
            num(LEFT - 6.0),
            num(y_of(t) + FONT / 3.0),
            short(t)
        );
    }
    put!(out, "</g>");

    let group_w = plot_w / categories.len() as f64;
    // Bars fill 80% of their group, so neighbouring categories stay visibly apart.
    let bar_w = group_w * 0.8 / series.len() as f64;
    put!(out, r#"<g class="bars">"#);
    for (s, ser) in series.iter().enumerate() {
        put!(out, r#"<g fill="{}">"#, PALETTE[s % PALETTE.len()]);
        for (c, cat) in categories.iter().enumerate() {
            let Some(v) = bar_value(ser.values.get(c).copied().flatten()) else {
                continue;
            };
            let x = LEFT + group_w * (c as f64 + 0.1) + bar_w * s as f64;
            let top = y_of(v);
            // The tooltip gives the exact figure, which the axis can only suggest.
            put!(
                out,
                r#"<rect class="bar" x="{}" y="{}" width="{}" height="{}"><title>{}, {}: {}</title></rect>"#,
                num(x + bar_w * 0.05),
                num(top),
                num(bar_w * 0.9),
                num(PLOT_BOTTOM - top),
                esc(&ser.name),
                esc(cat),
                full(v)
            );
        }
        put!(out, "</g>");
    }
    put!(out, "</g>");

    put!(
        out,
        r##"<g class="x-ticks" text-anchor="middle" fill="#333">"##
    );
    for (c, cat) in categories.iter().enumerate() {
        put!(
            out,
            r#"<text x="{}" y="{}">{}</text>"#,
            num(LEFT + group_w * (c as f64 + 0.5)),
            num(PLOT_BOTTOM + 18.0),
            esc(cat)
        );
    }
    put!(out, "</g>");

    // Axes after the bars, so a bar's edge never hides them.
    put!(out, r##"<g class="axes" stroke="#000">"##);
    put!(
        out,
        r#"<line x1="{l}" y1="{b}" x2="{r}" y2="{b}"/>"#,
        l = num(LEFT),
        r = num(LEFT + plot_w),
        b = num(PLOT_BOTTOM)
    );
    put!(
        out,
        r#"<line x1="{l}" y1="{t}" x2="{l}" y2="{b}"/>"#,
        l = num(LEFT),
        t = num(TOP),
        b = num(PLOT_BOTTOM)
    );
    put!(out, "</g>");
    put!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        num(LEFT + plot_w / 2.0),
        num(PLOT_BOTTOM + 42.0),
        esc(x_label)
    );
    // Said on the chart because bars on a log axis mislead a reader who assumes a linear one.
    let y_text = if log_y {
        format!("{} (log scale)", esc(y_label))
    } else {
        esc(y_label)
    };
    put!(
        out,
        r#"<text transform="translate(20,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
        num(TOP + plot_h / 2.0),
        y_text
    );

    put!(out, r#"<g class="legend">"#);
    for (r, row) in legend.iter().enumerate() {
        let row_w: f64 = row.iter().map(|&(_, w)| w).sum::<f64>() - LEGEND_GAP;
        let mut x = LEFT + (plot_w - row_w) / 2.0;
        let y = PLOT_BOTTOM + 68.0 + LEGEND_ROW * r as f64;
        for &(s, w) in row {
            put!(
                out,
                r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/>"#,
                num(x),
                num(y - SWATCH / 2.0),
                num(SWATCH),
                num(SWATCH),
                PALETTE[s % PALETTE.len()]
            );
            put!(
                out,
                r#"<text x="{}" y="{}">{}</text>"#,
                num(x + SWATCH + 6.0),
                num(y + FONT / 3.0),
                esc(&series[s].name)
            );
            x += w;
        }
    }
    put!(out, "</g>");
    out.push_str("</svg>\n");
    out
}

/// The value a bar is drawn for, if any (see `svg`).
fn bar_value(v: Option<f64>) -> Option<f64> {
    v.filter(|v| v.is_finite() && *v > 0.0)
}

fn header(height: f64) -> String {
    let mut out = String::new();
    put!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="{f}">"#,
        w = num(WIDTH),
        h = num(height),
        f = num(FONT)
    );
    // Viewers differ in their default background; a dark one would hide the black text.
    put!(
        out,
        r##"<rect width="{}" height="{}" fill="#fff"/>"##,
        num(WIDTH),
        num(height)
    );
    out
}

/// A chart with nothing to draw still has to be a valid document: the report embeds it either way.
fn no_data(title: &str) -> String {
    let mut out = header(HEIGHT);
    put!(
        out,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16" font-weight="bold">{}</text>"#,
        num(WIDTH / 2.0),
        esc(title)
    );
    put!(
        out,
        r##"<text x="{}" y="{}" text-anchor="middle" fill="#666">no data</text>"##,
        num(WIDTH / 2.0),
        num(HEIGHT / 2.0)
    );
    out.push_str("</svg>\n");
    out
}

/// Space between legend entries.
const LEGEND_GAP: f64 = 18.0;

/// Legend entries as rows of (series index, width including the gap after it), wrapped to the
/// plot width. Widths are estimated from the character count: SVG text cannot be measured
/// without a font, and an estimate only has to keep entries from overlapping.
fn legend_rows(series: &[Series]) -> Vec<Vec<(usize, f64)>> {
    let plot_w = WIDTH - LEFT - RIGHT;
    let mut rows: Vec<Vec<(usize, f64)>> = Vec::new();
    let mut row_w = 0.0;
    for (s, ser) in series.iter().enumerate() {
        let w = SWATCH + 6.0 + ser.name.chars().count() as f64 * FONT * 0.6 + LEGEND_GAP;
        match rows.last_mut() {
            Some(row) if row_w + w - LEGEND_GAP <= plot_w => {
                row.push((s, w));
                row_w += w;
            }
            _ => {
                rows.push(vec![(s, w)]);
                row_w = w;
            }
        }
    }
    rows
}

/// The y axis: its range, where the tick marks go, and how a value maps onto it.
#[derive(Debug)]
struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
    ticks: Vec<f64>,
}

impl Scale {
    /// From 0 to the first round step at or above `max`, in steps of 1, 2 or 5 x 10^k chosen to
    /// give about 5 to 10 ticks: enough to read a bar against, few enough to label.
    fn linear(max: f64) -> Scale {
        let raw = max / 8.0;
        let mag = 10f64.powf(raw.log10().floor());
        let mut step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag);
        // Only a subnormal `max` gets here; one step to it is still a valid axis.
        if !step.is_normal() {
            step = max;
        }
        let n = (max / step).ceil().clamp(1.0, 20.0) as u32;
        Scale {
            lo: 0.0,
            hi: step * n as f64,
            log: false,
            ticks: (0..=n).map(|i| step * i as f64).collect(),
        }
    }

    /// From the last 1-2-5 tick strictly below `min` (so the shortest bar still has a height) to
    /// the first at or above `max`.
    fn log(min: f64, max: f64) -> Scale {
        let mut lo = 3 * min.log10().floor() as i32 + 2;
        while tick125(lo) >= min {
            lo -= 1;
        }
        while tick125(lo + 1) < min {
            lo += 1;
        }
        let mut hi = lo + 1;
        while tick125(hi) < max {
            hi += 1;
        }
        let every = if hi - lo > MAX_LOG_STEPS {
            // Widen to whole decades so both ends of the axis are labelled.
            lo -= lo.rem_euclid(3);
            hi += (3 - hi.rem_euclid(3)) % 3;
            3
        } else {
            1
        };
        Scale {
            lo: tick125(lo),
            hi: tick125(hi),
            log: true,
            ticks: (lo..=hi).step_by(every).map(tick125).collect(),
        }
    }

    /// Where `v` falls between the bottom (0) and the top (1) of the axis.
    fn frac(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        if f.is_finite() {
            f.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

/// The `i`th value of the sequence ..., 1, 2, 5, 10, 20, 50, ...; tick125(0) = 1.
fn tick125(i: i32) -> f64 {
    [1.0, 2.0, 5.0][i.rem_euclid(3) as usize] * 10f64.powi(i.div_euclid(3))
}

/// A coordinate with at most one decimal: a tenth of a pixel is below what any viewer shows, and
/// more digits would only make the document longer and noisier to diff.
fn num(x: f64) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        // Through an integer so that -0.0 prints as "0".
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// A tick label: two or three significant figures with an SI suffix (15,009,592 -> "15M",
/// 190,559 -> "191k", 1.5 -> "1.5"), short enough to sit beside the axis.
fn short(v: f64) -> String {
    const UNITS: [(f64, &str); 8] = [
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "k"),
        (1.0, ""),
        (1e-3, "m"),
        (1e-6, "\u{b5}"),
        (1e-9, "n"),
    ];
    if v == 0.0 {
        return "0".to_string();
    }
    let a = v.abs();
    if !a.is_finite() || a < 1e-9 {
        return format!("{v:.1e}");
    }
    let sign = if v < 0.0 { "-" } else { "" };
    let mut i = UNITS
        .iter()
        .position(|&(u, _)| a >= u)
        .unwrap_or(UNITS.len() - 1);
    loop {
        let (unit, suffix) = UNITS[i];
        let x = a / unit;
        let r = if x < 10.0 {
            (x * 10.0).round() / 10.0
        } else {
            x.round()
        };
        // 999,999 rounds to "1000k"; "1M" is what a reader expects.
        if r >= 1000.0 && i > 0 {
            i -= 1;
            continue;
        }
        return format!("{sign}{}{suffix}", trim(r));
    }
}

/// The exact figure for a tooltip: thousands separated, at most one decimal (15,009,592.4).
fn full(v: f64) -> String {
    let r = (v.abs() * 10.0).round() / 10.0;
    let int = format!("{:.0}", r.trunc());
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    let tenth = ((r - r.trunc()) * 10.0).round() as u32;
    let sign = if v < 0.0 && r != 0.0 { "-" } else { "" };
    if tenth == 0 {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{tenth}")
    }
}

/// `r`, already rounded to at most one decimal, without a trailing ".0".
fn trim(r: f64) -> String {
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

/// Text for an element or a double-quoted attribute. Control characters other than tab and
/// newline are dropped: XML 1.0 forbids them, and one stray byte in a series name would make the
/// whole document unreadable.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\t' | '\n' | '\r' => out.push(ch),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cats(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn series(name: &str, values: &[Option<f64>]) -> Series {
        Series {
            name: name.to_string(),
            values: values.to_vec(),
        }
    }

    fn bars(doc: &str) -> usize {
        doc.matches(r#"<rect class="bar""#).count()
    }

    fn well_formed(doc: &str) {
        assert!(doc.starts_with("<svg"), "{doc}");
        assert!(doc.ends_with("</svg>\n"), "{doc}");
        assert_eq!(doc.matches("<svg").count(), 1);
        let opened = doc.matches("<g ").count() + doc.matches("<g>").count();
        assert_eq!(opened, doc.matches("</g>").count(), "{doc}");
        assert_eq!(doc.matches("<text").count(), doc.matches("</text>").count());
        assert_eq!(
            doc.matches("<title>").count(),
            doc.matches("</title>").count()
        );
    }

    /// Every '.' between digits is followed by at most one digit.
    fn at_most_one_decimal(doc: &str) {
        let b = doc.as_bytes();
        for i in 1..b.len().saturating_sub(2) {
            if b[i] == b'.' && b[i - 1].is_ascii_digit() && b[i + 1].is_ascii_digit() {
                assert!(
                    !b[i + 2].is_ascii_digit(),
                    "{}",
                    &doc[i.saturating_sub(20)..(i + 20).min(doc.len())]
                );
            }
        }
    }

    #[test]
    fn one_bar_per_positive_value() {
        let c = cats(&["64", "128", "256", "IMIX"]);
        let s = vec![
            series(
                "a",
                &[Some(14_880_952.4), Some(8_445_945.9), None, Some(0.0)],
            ),
            series(
                "b",
                &[Some(-3.0), Some(f64::NAN), Some(1.5), Some(190_559.0)],
            ),
            // Longer than the categories: the extra value has no category to sit in.
            series(
                "c",
                &[None, Some(f64::INFINITY), Some(2.0), Some(3.0), Some(4.0)],
            ),
        ];
        for log in [false, true] {
            let doc = svg("t", "x", "y", &c, &s, log);
            well_formed(&doc);
            at_most_one_decimal(&doc);
            assert_eq!(bars(&doc), 6, "log {log}");
        }
        // A series shorter than the categories simply has no bars for the rest.
        let doc = svg("t", "x", "y", &c, &[series("a", &[Some(1.0)])], false);
        assert_eq!(bars(&doc), 1);
    }

    #[test]
    fn text_is_escaped() {
        let c = cats(&["R&D", "<64>"]);
        let s = vec![series("\"quoted\" <b>", &[Some(1.0), Some(2.0)])];
        let doc = svg("a<b & \"c\">", "x&y", "<y>", &c, &s, true);
        well_formed(&doc);
        assert!(doc.contains("a&lt;b &amp; &quot;c&quot;&gt;"), "{doc}");
        assert!(doc.contains("R&amp;D"));
        assert!(doc.contains("&lt;64&gt;"));
        assert!(doc.contains("&quot;quoted&quot; &lt;b&gt;"));
        assert!(doc.contains("x&amp;y"));
        assert!(doc.contains("&lt;y&gt; (log scale)"));
        assert!(!doc.contains("<b>") && !doc.contains("a<b") && !doc.contains("R&D"));
        assert_eq!(esc("a\u{1}b\tc"), "ab\tc");
        // The "no data" document carries the title too.
        let empty = svg("<&>", "", "", &[], &[], false);
        assert!(empty.contains("&lt;&amp;&gt;"));
    }

    #[test]
    fn log_ticks_cover_the_decades() {
        let scale = Scale::log(190_559.0, 19_000_000.0);
        for decade in [1e5, 1e6, 1e7] {
            assert!(scale.ticks.contains(&decade), "{scale:?}");
        }
        assert!(scale.ticks.contains(&2e5) && scale.ticks.contains(&5e6));
        assert!(
            scale.lo < 190_559.0 && scale.hi >= 19_000_000.0,
            "{scale:?}"
        );
        assert_eq!((scale.lo, scale.hi), (1e5, 2e7));

        let c = cats(&["64", "1518"]);
        let s = vec![series("r", &[Some(19_000_000.0), Some(190_559.0)])];
        let doc = svg("t", "frame size", "frames/s", &c, &s, true);
        well_formed(&doc);
        for label in [">100k<", ">200k<", ">1M<", ">10M<", ">20M<"] {
            assert!(doc.contains(label), "{label} in {doc}");
        }
    }

    #[test]
    fn log_ticks_edge_cases() {
        // A value exactly on a tick still gets a tick below it, so its bar has a height.
        let s = Scale::log(100.0, 100.0);
        assert!(
            s.lo < 100.0 && s.hi >= 100.0 && s.frac(100.0) > 0.0,
            "{s:?}"
        );
        // A wide range is marked by decades only, with both ends on a decade.
        let s = Scale::log(3.0, 3e9);
        assert_eq!(s.ticks.first(), Some(&1.0));
        assert_eq!(s.ticks.last(), Some(&1e10));
        assert_eq!(s.ticks.len(), 11);
        // Below 1 the sequence carries on.
        let s = Scale::log(0.03, 0.3);
        assert!(s.lo < 0.03 && s.hi >= 0.3, "{s:?}");
    }

    #[test]
    fn linear_ticks_are_round_steps_from_zero() {
        for max in [1.5, 7.9, 10.0, 11.0, 190_559.0, 15_009_592.0, 0.004] {
            let s = Scale::linear(max);
            assert_eq!(s.ticks[0], 0.0);
            assert!(s.hi >= max && s.ticks.last() == Some(&s.hi), "{max}: {s:?}");
            assert!((3..=11).contains(&s.ticks.len()), "{max}: {s:?}");
            let step = s.ticks[1];
            let m = step / 10f64.powf(step.log10().floor());
            assert!(
                [1.0, 2.0, 5.0].iter().any(|x| (m - x).abs() < 1e-9),
                "{max}: {s:?}"
            );
        }
        assert_eq!(Scale::linear(15_009_592.0).hi, 16e6);
    }

    #[test]
    fn no_data() {
        let c = cats(&["64", "128"]);
        let cases = [
            svg("t", "x", "y", &[], &[series("a", &[Some(1.0)])], false),
            svg("t", "x", "y", &c, &[], false),
            svg("t", "x", "y", &c, &[series("a", &[None, None])], true),
            svg(
                "t",
                "x",
                "y",
                &c,
                &[series("a", &[Some(0.0), Some(-1.0)])],
                true,
            ),
        ];
        for doc in cases {
            well_formed(&doc);
            assert!(doc.contains(">no data<"), "{doc}");
            assert_eq!(bars(&doc), 0);
        }
        let doc = svg("t", "x", "y", &c, &[series("a", &[Some(1.0), None])], false);
        assert!(!doc.contains("no data"));
    }

    #[test]
    fn legend_and_colours() {
        let c = cats(&["64"]);
        let s: Vec<Series> = (0..10)
            .map(|i| series(&format!("router {i}"), &[Some(1e6 * (i + 1) as f64)]))
            .collect();
        let doc = svg("t", "x", "y", &c, &s, false);
        well_formed(&doc);
        for i in 0..10 {
            assert!(doc.contains(&format!(">router {i}<")));
        }
        // Each series' bars sit in a group of its own colour, cycling after the palette.
        let fills: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("<g fill=\"")?.strip_suffix("\">"))
            .collect();
        assert_eq!(fills.len(), 10);
        for i in 0..6 {
            assert!(!fills[..i].contains(&fills[i]), "{fills:?}");
        }
        assert_eq!(fills[8], fills[0]);
    }

    #[test]
    fn long_legend_wraps_and_grows_the_document() {
        let c = cats(&["64"]);
        let s: Vec<Series> = (0..12)
            .map(|i| series(&format!("a rather long series name {i}"), &[Some(1.0)]))
            .collect();
        assert!(legend_rows(&s).len() > 1);
        let doc = svg("t", "x", "y", &c, &s, false);
        well_formed(&doc);
        assert!(
            !doc.contains(r#"height="480""#),
            "{}",
            doc.lines().next().unwrap()
        );
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(short(15_009_592.0), "15M");
        assert_eq!(short(190_559.0), "191k");
        assert_eq!(short(1.5), "1.5");
        assert_eq!(short(0.0), "0");
        assert_eq!(short(999_999.0), "1M");
        assert_eq!(short(2_500_000.0), "2.5M");
        assert_eq!(short(100e9), "100G");
        assert_eq!(short(0.05), "50m");
        assert_eq!(short(-2000.0), "-2k");
        assert_eq!(full(15_009_592.44), "15,009,592.4");
        assert_eq!(full(190_559.0), "190,559");
        assert_eq!(full(1.5), "1.5");
        assert_eq!(full(999.96), "1,000");
        assert_eq!(num(-0.04), "0");
        assert_eq!(num(12.345), "12.3");
    }

    #[test]
    fn deterministic() {
        let c = cats(&["64", "IMIX"]);
        let s = vec![series("a", &[Some(1.0e6), Some(3.3e5)])];
        assert_eq!(
            svg("t", "x", "y", &c, &s, true),
            svg("t", "x", "y", &c, &s, true)
        );
    }
}
