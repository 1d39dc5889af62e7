//! Writes 1000 steps of a random walk into table "walk" of a running
//! server, each step an item. Run `sampler` beside it.
//!
//!     cargo run --example writer -- [SOCKET]
use engram::{bytes, Client, Column, Dtype, TableOptions, WriterOptions};

fn main() -> Result<(), engram::Error> {
    let socket = std::env::args().nth(1);
    let columns = vec![Column::new("position", Dtype::F32, &[2]), Column::new("step", Dtype::I64, &[])];
    let client = Client::connect(socket.as_deref())?;
    match client.create_table(&TableOptions::new("walk", columns.clone(), 10_000)) {
        Err(e) if e.code() == engram_sys::ENGRAM_E_EXISTS => {}
        other => other?,
    }
    let table = client.open_table("walk")?;
    let mut writer = client.writer(&WriterOptions::new(columns))?;
    let (mut position, mut seed) = ([0f32; 2], 1u64);
    for step in 0..1000i64 {
        for p in position.iter_mut() {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            *p += ((seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5;
        }
        writer.append(&[bytes(&position), bytes(&[step])])?;
        writer.create_item(&table, 1, 1.0)?;
    }
    writer.flush(-1)?;
    println!("wrote 1000 steps; the table holds {} items", client.table_info("walk")?.size);
    Ok(())
}
