//! A stand-alone FPM server for trying zebra against: prints every event and RIB change, and the
//! RIB's routes after each sweep.
//!
//! `cargo run -p fpm --example fpm_listen -- [ADDR] [IDLE_MS]` (default 127.0.0.1:2620, 5000).
//! Stops when the channel ends (never, unless the server is shut down) or on Ctrl-C.

use std::time::Duration;

use fpm::{Change, Event, Rib, Server, ServerConfig};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:2620".into());
    let idle = args.next().map_or(5000, |a| a.parse().expect("IDLE_MS"));
    let cfg = ServerConfig {
        idle: Duration::from_millis(idle),
        ..ServerConfig::default()
    };
    let (server, events) = Server::bind_with(&addr, cfg)?;
    println!("listening on {}", server.local_addr());
    let mut rib = Rib::new();
    let mut replaying = false;
    for ev in events {
        let changes = match ev {
            Event::Connected { peer } => {
                println!("connected: {peer}; replay begins");
                rib.begin_replay();
                replaying = true;
                continue;
            }
            Event::Batch(msgs) => {
                println!("batch of {} messages", msgs.len());
                rib.apply_batch(&msgs)
            }
            Event::Idle if replaying => {
                replaying = false;
                println!("idle: replay over, sweeping");
                rib.sweep()
            }
            Event::Idle => continue,
            Event::Disconnected { reason } => {
                println!("disconnected: {reason:?}");
                continue;
            }
        };
        for c in &changes {
            match c {
                Change::SetAdded { id, set } => println!("  set {} = {set:?}", id.0),
                Change::SetChanged { id, set } => println!("  set {} now {set:?}", id.0),
                Change::Upsert { key, set, replaced } => println!(
                    "  {} {} table {} via set {}",
                    if *replaced { "replace" } else { "add" },
                    key.prefix,
                    key.table,
                    set.0
                ),
                Change::Removed { key } => println!("  remove {} table {}", key.prefix, key.table),
                Change::SetRemoved { id } => println!("  set {} removed", id.0),
            }
        }
        println!("  rib: {:?}", rib.counters());
        println!("  server: {:?}", server.stats().snapshot());
    }
    Ok(())
}
