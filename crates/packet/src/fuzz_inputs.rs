//! The inputs kept in the repository for a fuzz target: its seeds (`fuzz/seeds/TARGET`) and the
//! inputs that once crashed it (`fuzz/regressions/TARGET`). Each crate's stable tests run them
//! through the target's entry function, so every crash stays a regression test. Not part of
//! the API.

use std::path::Path;

/// Every file under `fuzz/seeds/TARGET` and `fuzz/regressions/TARGET`, with its name, sorted.
/// Empty if neither folder exists (a crate built outside this repository).
pub fn saved(target: &str) -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut out = Vec::new();
    for kind in ["seeds", "regressions"] {
        let Ok(dir) = std::fs::read_dir(root.join(kind).join(target)) else {
            continue;
        };
        for e in dir.flatten() {
            let p = e.path();
            if p.is_file() {
                let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                out.push((
                    format!("{kind}/{target}/{}", e.file_name().to_string_lossy()),
                    data,
                ));
            }
        }
    }
    out.sort();
    out
}
