//! The Rust side of engram's bench/bindings.sh (see bench/bindings/bench_c.c):
//! N one-step items of a BYTES payload into TABLE, then N items sampled in
//! batches of 64, copied out; one JSON line with items/s of each.
//!
//!     bench SOCKET TABLE BYTES N
use std::time::Instant;

use engram::{Client, Column, Dtype, SampleInfo, SampleOptions, WriterOptions};

fn main() -> Result<(), engram::Error> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: bench SOCKET TABLE BYTES N");
        std::process::exit(2);
    }
    let (bytes, n): (u32, usize) = (args[3].parse().unwrap(), args[4].parse().unwrap());
    let client = Client::connect(Some(&args[1]))?;
    let table = client.open_table(&args[2])?;
    let mut writer = client.writer(&WriterOptions::new(vec![Column::new("payload", Dtype::U8, &[bytes])]))?;
    let step = vec![7u8; bytes as usize];
    let t0 = Instant::now();
    for _ in 0..n {
        writer.append(&[&step])?;
        writer.create_item(&table, 1, 1.0)?;
    }
    writer.flush(30_000)?;
    let inserted = t0.elapsed().as_secs_f64();
    let mut o = SampleOptions::new(64);
    o.timeout_ms = 10_000;
    let mut out = vec![0u8; bytes as usize * 64];
    let mut infos = vec![SampleInfo::default(); 64];
    let t1 = Instant::now();
    for _ in (0..n).step_by(64) {
        table.sample_into(&o, &mut [&mut out[..]], &mut infos)?;
    }
    let sampled = t1.elapsed().as_secs_f64();
    println!("{{\"lang\": \"rust\", \"bytes\": {}, \"insert_per_s\": {:.0}, \"sample_per_s\": {:.0}}}", bytes,
             n as f64 / inserted, n as f64 / sampled);
    Ok(())
}
