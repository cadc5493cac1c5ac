//! The classifiers of `bench forward --services` on their own: the 10,000-line ACL and the
//! 500-line QoS policy of the ME 6524 services, asked for the benchmark's traffic (which matches
//! only the final permit, and the QoS policy's last line). Prints ns per key and bytes.
//!
//! `cargo run --release -p bench --example services_classify [acl|qos]` (both when not named)
use std::time::Instant;
fn main() {
    let dir = std::env::temp_dir().join("svcprobe");
    std::fs::create_dir_all(&dir).unwrap();
    let extra = bench::forward::services_config(&dir, Some(4096)).unwrap();
    let text = format!("ports:\n  - {{ name: p0, driver: mem }}\ninterfaces:\n  - {{ name: p0, port: p0, mac: \"02:00:00:00:00:01\", ipv4: [192.0.2.1/24], acl-in: SERVICES, qos-in: remark }}\n{extra}");
    let cfg = control::config::parse(&text, &dir.join("r.yaml")).unwrap();
    let st = control::services::ServicesState::build(&cfg, None);
    let f = st.features[0].clone().unwrap();
    let acl = f
        .acl(dataplane::feature::Direction::Input)
        .cloned()
        .unwrap();
    let qos = f
        .qos(dataplane::feature::Direction::Input)
        .cloned()
        .unwrap();
    // traffic keys
    let mut keys = Vec::new();
    for i in 0..4096u32 {
        let mut k = classify::Key::default();
        use classify::Dim::*;
        k.set(EtherType, 0x0800);
        k.set(Src0, 0xc0000202);
        k.set(Dst0, 0x0a00_0000 | (i.wrapping_mul(2_654_435_761) >> 8));
        k.set(Proto, 17);
        k.set(SrcPort, 1024 + i);
        k.set(DstPort, 5000);
        k.set(EthDstHi, 0x0200);
        k.set(EthDstLo, 1);
        k.set(EthSrcHi, 0x0200);
        k.set(EthSrcLo, 2);
        keys.push(k);
    }
    let only = std::env::args().nth(1);
    for (name, c) in [("acl", &acl.classifier), ("qos", &*qos.classifier)] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let mut out = vec![0u32; 256];
        let t = Instant::now();
        let mut n = 0;
        while t.elapsed().as_secs_f64() < 1.0 {
            for ch in keys.chunks(256) {
                c.classify_batch(ch, &mut out[..ch.len()]);
                n += ch.len();
            }
        }
        println!(
            "{name}: {} rules, {:.1} ns/key, {} bytes, result {}",
            c.len(),
            t.elapsed().as_nanos() as f64 / n as f64,
            c.bytes(),
            out[0]
        );
    }
}
