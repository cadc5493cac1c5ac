//! The text tables the views render to: a header, columns padded to their widest cell, as
//! router CLIs print them.

/// A table with `head` as its header row.
pub fn table(head: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(x) = w.get_mut(i) {
                *x = (*x).max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                let width = w.get(i).copied().unwrap_or(0);
                s.push_str(&format!("{c:<width$}  "));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(head.iter().map(|s| s.to_string()).collect());
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

/// A two-column `name  value` table.
pub fn pairs(head: [&str; 2], rows: Vec<(&str, String)>) -> String {
    table(
        &head,
        rows.into_iter()
            .map(|(k, v)| vec![k.to_string(), v])
            .collect(),
    )
}

/// An optional value, `-` when absent.
/// An interface's VLAN tags: `100` (802.1Q), `S10/C20` (802.1ad S-tag and C-tag), `S11` (an
/// S-tag's every frame), `-` for none.
pub fn vlan_tags(s_vlan: Option<u16>, vlan: Option<u16>) -> String {
    match (s_vlan, vlan) {
        (Some(s), Some(c)) => format!("S{s}/C{c}"),
        (Some(s), None) => format!("S{s}"),
        (None, v) => opt(&v),
    }
}

pub fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("-".into(), |x| x.to_string())
}

/// A list joined with `, `, `-` when empty.
pub fn list<T: AsRef<str>>(v: &[T]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.iter().map(|x| x.as_ref()).collect::<Vec<_>>().join(", ")
    }
}

/// UTC wall-clock time of a Unix time in ms: `HH:MM:SS.mmm`.
pub fn clock(ms: u64) -> String {
    let secs = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_to_their_widest_cell_and_the_last_is_not() {
        let t = table(
            &["A", "Bee", "C"],
            vec![
                vec!["long cell".into(), "x".into(), "last".into()],
                vec!["y".into(), "".into(), "".into()],
            ],
        );
        assert_eq!(t, "A          Bee  C\nlong cell  x    last\ny\n");
    }

    #[test]
    fn clock_is_utc_time_of_day() {
        assert_eq!(clock(86_400_000 + 3_723_004), "01:02:03.004");
    }
}
