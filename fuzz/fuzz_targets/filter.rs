//! The capture filter: the input up to the first 0 byte is an expression (lossy UTF-8), the rest
//! a frame. Parsing must not panic, and neither may matching with whatever compiled.
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet::filter::Filter;

fuzz_target!(|data: &[u8]| {
    let (expr, frame) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let expr = String::from_utf8_lossy(expr);
    if let Ok(filter) = Filter::parse(&expr) {
        let _ = filter.matches(frame);
    }
});
