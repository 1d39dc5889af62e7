//! Samples table "walk" (see the writer example): a copied batch, then a
//! zero-copy one whose slices borrow it.
//!
//!     cargo run --example sampler -- [SOCKET]
use engram::{Client, SampleOptions};

fn main() -> Result<(), engram::Error> {
    let socket = std::env::args().nth(1);
    let client = Client::connect(socket.as_deref())?;
    let table = client.open_table("walk")?;
    let sample = table.sample(&SampleOptions::new(4))?;
    let (positions, steps) = (sample.column::<f32>(0)?, sample.column::<i64>(1)?);
    for (k, info) in sample.infos().iter().enumerate() {
        println!("item {:#x}: step {}, position {:?}", info.key, steps[k], &positions[2 * k..2 * k + 2]);
    }
    let batch = table.sample_view(&SampleOptions::new(4))?;
    let zero_copy: Vec<i64> = (0..batch.len()).map(|k| batch.views::<i64>(k, 1).map(|v| v[0][0])).collect::<Result<_, _>>()?;
    println!("zero-copy: {:?}", zero_copy);
    Ok(())
}
