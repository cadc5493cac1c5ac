//! The analyzer's cost per received frame: 4,096 valid 64-byte test frames of one stream,
//! accounted again and again. Prints ns per frame (best of ROUNDS).
//!
//! `cargo run --release -p tester --example analyzer_rate -- [ROUNDS]`

use std::time::Instant;

use tester::analyzer::Analyzer;
use tester::stream::{finish, v4_stream, GenStream};

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let mut g = GenStream::new(&v4_stream(), &[64], 1);
    let frames: Vec<Vec<u8>> = (0..4096u32)
        .map(|i| {
            let mut f = vec![0u8; g.templates[0].len as usize];
            let s = g.build(0, &mut f, 1, 0, false);
            finish(&g.templates[0], &mut f, 1000 + i, s);
            f
        })
        .collect();
    let mut a = Analyzer::new(&[1], 2);
    let mut best = f64::MAX;
    for trial in 0..rounds {
        a.reset(trial as u8 + 1);
        let passes = 500;
        let t0 = Instant::now();
        for _ in 0..passes {
            for f in &frames {
                std::hint::black_box(a.frame(1, f, 5000));
            }
        }
        let ns = t0.elapsed().as_nanos() as f64 / (passes * frames.len()) as f64;
        best = best.min(ns);
    }
    println!("analyzer: {best:.2} ns per 64-byte frame (best of {rounds})");
}
