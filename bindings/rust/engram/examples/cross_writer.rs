//! The Rust writer of engram's cross-language test (tests/cross/run.sh):
//! N items of table "cross", item k holding writer id W, step k and payload
//! byte i = (W*31 + k*7 + i) & 0xFF, as the C and Python writers do.
//!
//!     cross_writer SOCKET WRITER_ID N
use engram::{bytes, Client, Column, Dtype, WriterOptions};

const PAYLOAD: usize = 48;

fn main() -> Result<(), engram::Error> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: cross_writer SOCKET WRITER_ID N");
        std::process::exit(2);
    }
    let (id, n): (i32, i64) = (args[2].parse().unwrap(), args[3].parse().unwrap());
    let columns = vec![Column::new("writer", Dtype::I32, &[]), Column::new("step", Dtype::I64, &[]),
                       Column::new("payload", Dtype::U8, &[PAYLOAD as u32])];
    let client = Client::connect(Some(&args[1]))?;
    let table = client.open_table("cross")?;
    let mut writer = client.writer(&WriterOptions::new(columns))?;
    for k in 0..n {
        let payload: Vec<u8> = (0..PAYLOAD as i64).map(|i| ((id as i64 * 31 + k * 7 + i) & 0xFF) as u8).collect();
        writer.append(&[bytes(&[id]), bytes(&[k]), &payload])?;
        writer.create_item(&table, 1, 1.0)?;
    }
    writer.flush(10_000)?;
    println!("rust writer {}: {} items", id, n);
    Ok(())
}
