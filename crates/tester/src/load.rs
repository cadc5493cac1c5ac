//! Frame sizes, mixes and offered load: how a percentage of a nominal port rate becomes frames
//! per second.
//!
//! Sizes count the Ethernet FCS, as RFC 2544 and every tester do (a 64-byte frame is 60 bytes in a
//! buffer, the NIC adds the FCS). A line-rate frame also costs the 8-byte preamble and the 12-byte
//! inter-frame gap on the wire: 64-byte frames at 10 Gbit/s are 14,880,952 frames/s.

use std::fmt;

/// Preamble + start delimiter (8) and inter-frame gap (12), in bytes.
pub const WIRE_OVERHEAD: u32 = 20;
/// The FCS a buffer does not hold.
pub const FCS: usize = 4;

/// Frames of one size or a weighted mix.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameSizes {
    Fixed(u16),
    /// (size, weight by count), and the name the mix is known by.
    Mix(&'static str, Vec<(u16, u32)>),
}

impl FrameSizes {
    /// The "simple IMIX": 64:7, 594:4, 1518:1 by count.
    pub fn imix() -> Self {
        FrameSizes::Mix("IMIX", vec![(64, 7), (594, 4), (1518, 1)])
    }

    /// The GGSN report's IMIX: 85:3, 171:1, 553:1, 1419:4.
    pub fn ggsn_imix() -> Self {
        FrameSizes::Mix("GGSN-IMIX", vec![(85, 3), (171, 1), (553, 1), (1419, 4)])
    }

    /// Parses `64`, `imix`, `ggsn-imix` or a custom mix `64:7,594:4,1518:1`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "imix" => return Ok(Self::imix()),
            "ggsn-imix" | "ggsn" => return Ok(Self::ggsn_imix()),
            _ => {}
        }
        let size = |v: &str| -> Result<u16, String> {
            let n: u16 = v
                .trim()
                .parse()
                .map_err(|_| format!("frame size {v:?}: not a number of bytes"))?;
            if !(64..=9216).contains(&n) {
                return Err(format!("frame size {n}: must be 64..=9216 bytes"));
            }
            Ok(n)
        };
        if !t.contains(':') {
            return Ok(FrameSizes::Fixed(size(&t)?));
        }
        let mut mix = Vec::new();
        for part in t.split(',') {
            let (sz, w) = part
                .split_once(':')
                .ok_or_else(|| format!("mix entry {part:?}: expected SIZE:WEIGHT"))?;
            let w: u32 = w
                .trim()
                .parse()
                .map_err(|_| format!("mix entry {part:?}: weight is not a whole number"))?;
            if w == 0 || w > 1000 {
                return Err(format!("mix entry {part:?}: weight must be 1..=1000"));
            }
            mix.push((size(sz)?, w));
        }
        Ok(FrameSizes::Mix("custom mix", mix))
    }

    /// Every distinct size, for building templates.
    pub fn sizes(&self) -> Vec<u16> {
        match self {
            FrameSizes::Fixed(s) => vec![*s],
            FrameSizes::Mix(_, m) => m.iter().map(|&(s, _)| s).collect(),
        }
    }

    pub fn smallest(&self) -> u16 {
        self.sizes().into_iter().min().unwrap_or(64)
    }

    /// Mean size by count.
    pub fn mean(&self) -> f64 {
        match self {
            FrameSizes::Fixed(s) => *s as f64,
            FrameSizes::Mix(_, m) => {
                let n: u32 = m.iter().map(|&(_, w)| w).sum();
                m.iter().map(|&(s, w)| s as f64 * w as f64).sum::<f64>() / n as f64
            }
        }
    }

    /// The order sizes are sent in, as indices into [`FrameSizes::sizes`]: each size as often as
    /// its weight, spread evenly (smooth weighted round robin), so a short stretch of a trial
    /// already carries the mix and no size arrives in a block.
    pub fn cycle(&self) -> Vec<u8> {
        match self {
            FrameSizes::Fixed(_) => vec![0],
            FrameSizes::Mix(_, m) => {
                let total: i64 = m.iter().map(|&(_, w)| w as i64).sum();
                let mut cur = vec![0i64; m.len()];
                let mut out = Vec::with_capacity(total as usize);
                for _ in 0..total {
                    for (c, &(_, w)) in cur.iter_mut().zip(m) {
                        *c += w as i64;
                    }
                    let (best, _) = cur
                        .iter()
                        .enumerate()
                        .max_by_key(|&(i, &c)| (c, std::cmp::Reverse(i)))
                        .expect("a mix has entries");
                    cur[best] -= total;
                    out.push(best as u8);
                }
                out
            }
        }
    }

    /// The same mix with every size raised to at least `min` (IPv6 cannot carry a signature in a
    /// 64-byte frame; the reports use 78 bytes for it).
    pub fn at_least(&self, min: u16) -> Self {
        match self {
            FrameSizes::Fixed(s) => FrameSizes::Fixed((*s).max(min)),
            FrameSizes::Mix(n, m) => {
                FrameSizes::Mix(n, m.iter().map(|&(s, w)| (s.max(min), w)).collect())
            }
        }
    }
}

impl fmt::Display for FrameSizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameSizes::Fixed(s) => write!(f, "{s}"),
            FrameSizes::Mix(n, _) => write!(f, "{n}"),
        }
    }
}

/// Frames per second at 100% of `bits_per_s` for frames of mean size `size` bytes.
pub fn line_rate_fps(bits_per_s: f64, size: f64) -> f64 {
    bits_per_s / ((size + WIRE_OVERHEAD as f64) * 8.0)
}

/// Parses a port speed: `1g`, `10G`, `622m`, `100M`, `40g`, or bits per second.
pub fn parse_speed(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix('g') {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix('k') {
        (n, 1e3)
    } else {
        (t.as_str(), 1.0)
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("port speed {s:?}: expected e.g. 1g, 10g, 622m"))?;
    if !(v > 0.0 && v * mult <= 1e12) {
        return Err(format!(
            "port speed {s:?}: must be above 0 and at most 1 Tbit/s"
        ));
    }
    Ok(v * mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_rate_matches_the_textbook_figures() {
        assert_eq!(line_rate_fps(10e9, 64.0).round(), 14_880_952.0);
        assert_eq!(line_rate_fps(1e9, 64.0).round(), 1_488_095.0);
        assert_eq!(line_rate_fps(1e9, 1518.0).round(), 81_274.0);
    }

    #[test]
    fn mixes_parse_and_average() {
        let m = FrameSizes::parse("imix").unwrap();
        assert!((m.mean() - (64.0 * 7.0 + 594.0 * 4.0 + 1518.0) / 12.0).abs() < 1e-9);
        assert_eq!(FrameSizes::parse("128").unwrap(), FrameSizes::Fixed(128));
        let c = FrameSizes::parse("100:1, 200:3").unwrap();
        assert_eq!(c.sizes(), vec![100, 200]);
        for bad in ["63", "9217", "abc", "64:0", "64:x", "64;7"] {
            assert!(FrameSizes::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_cycle_carries_each_size_by_its_weight_spread_out() {
        let m = FrameSizes::imix();
        let c = m.cycle();
        assert_eq!(c.len(), 12);
        for (i, want) in [(0u8, 7), (1, 4), (2, 1)] {
            assert_eq!(c.iter().filter(|&&x| x == i).count(), want);
        }
        // No more than two 64-byte frames in a row out of seven in twelve.
        assert!(!c.windows(3).any(|w| w.iter().all(|&x| x == 0)), "{c:?}");
    }

    #[test]
    fn speeds_parse() {
        assert_eq!(parse_speed("10g").unwrap(), 10e9);
        assert_eq!(parse_speed("622M").unwrap(), 622e6);
        assert!(parse_speed("fast").is_err());
        assert!(parse_speed("0g").is_err());
    }
}
