//! The safe API against a real server, embedded in the test process
//! through engram_server_start (other processes attach to it as to engramd).
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use engram::{bytes, Client, Column, Dtype, RateLimiter, SampleInfo, SampleOptions, Selector, Server, TableOptions,
             WriterOptions};
use engram_sys as sys;

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A server on a fresh socket, and that socket's path.
fn server() -> (Server, String) {
    let path = format!("/tmp/engram-rust-{}-{}.sock", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
    let _ = std::fs::remove_file(&path);
    (Server::start(&path).expect("server"), path)
}

fn walk_columns() -> Vec<Column> {
    vec![Column::new("obs", Dtype::F32, &[4]), Column::new("step", Dtype::I64, &[])]
}

#[test]
fn items_round_trip_copied_and_zero_copy() {
    let (_s, path) = server();
    let client = Client::connect(Some(&path)).unwrap();
    let mut o = TableOptions::new("t", walk_columns(), 100);
    o.sampler = Selector::Fifo;
    o.max_times_sampled = 1;
    client.create_table(&o).unwrap();
    let table = client.open_table("t").unwrap();
    assert_eq!(table.columns(), &walk_columns()[..]);
    let mut w = client.writer(&WriterOptions::new(walk_columns())).unwrap();
    for i in 0..10i64 {
        let obs = [i as f32; 4];
        w.append(&[bytes(&obs), bytes(&[i])]).unwrap();
        w.create_item(&table, 1, 1.0).unwrap();
    }
    w.flush(5000).unwrap();
    let s = table.sample(&SampleOptions::new(4)).unwrap();
    assert_eq!(s.len(), 4);
    assert_eq!(s.column::<i64>(1).unwrap(), &[0, 1, 2, 3], "FIFO, each item once");
    assert_eq!(&s.column::<f32>(0).unwrap()[4..8], &[1.0; 4]);
    assert!(s.column::<f64>(0).is_err(), "the column's type is checked");
    let batch = table.sample_view(&SampleOptions::new(2)).unwrap();
    assert_eq!(batch.len(), 2);
    for k in 0..2 {
        let step = batch.views::<i64>(k, 1).unwrap()[0][0];
        assert_eq!(step, 4 + k as i64);
        assert_eq!(batch.views::<f32>(k, 0).unwrap(), vec![&[step as f32; 4][..]]);
        assert_eq!(batch.info(k).unwrap().times_sampled, 1);
    }
    // A batch this process cannot hold is an error, not an abort in vec!
    // (the server would refuse it too, but only once the buffers exist).
    // Where the kernel grants any allocation (vm.overcommit_memory 1) the
    // buffers exist and the server refuses the batch size instead.
    let code = table.sample(&SampleOptions::new(u32::MAX)).err().map(|e| e.code());
    let always = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").map_or(false, |m| m.trim() == "1");
    assert_eq!(code, Some(if always { sys::ENGRAM_E_RANGE } else { sys::ENGRAM_E_NOMEM }));
    // An index past the batch is refused, not cut to 32 bits (2^32 + 1 was
    // item 1 before the check).
    for item in [2usize, (1usize << 32) + 1] {
        assert_eq!(batch.info(item).unwrap_err().code(), sys::ENGRAM_E_RANGE, "info of item {}", item);
        assert_eq!(batch.view_bytes(item, 0).unwrap_err().code(), sys::ENGRAM_E_RANGE, "views of item {}", item);
    }
}

#[test]
fn every_dtype_round_trips_as_bytes() {
    let (_s, path) = server();
    let client = Client::connect(Some(&path)).unwrap();
    let dtypes = [Dtype::U8, Dtype::I8, Dtype::U16, Dtype::I16, Dtype::U32, Dtype::I32, Dtype::U64, Dtype::I64,
                  Dtype::F16, Dtype::F32, Dtype::F64, Dtype::Bool];
    for (k, &d) in dtypes.iter().enumerate() {
        let cols = vec![Column::new("x", d, &[2, 3])];
        let name = format!("t{}", k);
        client.create_table(&TableOptions::new(&name, cols.clone(), 10)).unwrap();
        let table = client.open_table(&name).unwrap();
        let mut w = client.writer(&WriterOptions::new(cols.clone())).unwrap();
        let value: Vec<u8> = (0..cols[0].step_bytes()).map(|i| if d == Dtype::Bool { (i % 2) as u8 } else { (i * 7 + k) as u8 }).collect();
        w.append(&[&value]).unwrap();
        w.create_item(&table, 1, 1.0).unwrap();
        w.flush(5000).unwrap();
        let s = table.sample(&SampleOptions::new(1)).unwrap();
        assert_eq!(s.column_bytes(0), &value[..], "{:?}", d);
        let mut buf = vec![0u8; value.len()];
        let mut infos = [SampleInfo::default()];
        assert_eq!(table.sample_into(&SampleOptions::new(1), &mut [&mut buf[..]], &mut infos).unwrap(), 1);
        assert_eq!(buf, value);
        let b = table.sample_view(&SampleOptions::new(1)).unwrap();
        assert_eq!(b.view_bytes(0, 0).unwrap(), vec![&value[..]]);
    }
}

#[test]
fn errors_carry_the_code_and_the_message() {
    let (_s, path) = server();
    let client = Client::connect(Some(&path)).unwrap();
    let e = client.open_table("missing").err().unwrap();
    assert_eq!(e.code(), sys::ENGRAM_E_NOT_FOUND);
    assert!(e.message().contains("missing"), "{}", e);
    client.create_table(&TableOptions::new("t", walk_columns(), 10)).unwrap();
    assert_eq!(client.create_table(&TableOptions::new("t", walk_columns(), 10)).unwrap_err().code(), sys::ENGRAM_E_EXISTS);
    assert_eq!(client.create_table(&TableOptions::new("bad name!", walk_columns(), 10)).unwrap_err().code(),
               sys::ENGRAM_E_INVALID);
    let table = client.open_table("t").unwrap();
    let mut w = client.writer(&WriterOptions::new(walk_columns())).unwrap();
    let e = w.append(&[bytes(&[0.0f32; 3]), bytes(&[0i64])]).unwrap_err();
    assert_eq!(e.code(), sys::ENGRAM_E_RANGE, "a short column is refused before the C call: {}", e);
    let mut o = SampleOptions::new(1);
    o.timeout_ms = 0;
    assert_eq!(table.sample(&o).err().unwrap().code(), sys::ENGRAM_E_RATE_LIMITED);
    o.timeout_ms = 100;
    let t0 = Instant::now();
    assert_eq!(table.sample(&o).err().unwrap().code(), sys::ENGRAM_E_TIMEOUT);
    assert!(t0.elapsed() >= Duration::from_millis(100));
    let mut small = [0u8; 4];
    let e = table.sample_into(&SampleOptions::new(1), &mut [&mut small[..], &mut [0u8; 8][..]], &mut [SampleInfo::default()]);
    assert_eq!(e.unwrap_err().code(), sys::ENGRAM_E_RANGE, "a buffer too small is refused");
    assert_eq!(table.update_priorities(&[1], &[f64::NAN]).unwrap_err().code(), sys::ENGRAM_E_PRIORITY);
}

// Table "t" of 10 walk steps, sampled by priority.
fn create_prioritized(client: &Client) {
    let mut o = TableOptions::new("t", walk_columns(), 10);
    o.sampler = Selector::Prioritized;
    client.create_table(&o).unwrap();
}

#[test]
fn priorities_and_deletes_by_key() {
    let (_s, path) = server();
    let client = Client::connect(Some(&path)).unwrap();
    create_prioritized(&client);
    let table = client.open_table("t").unwrap();
    let mut wo = WriterOptions::new(walk_columns());
    wo.keep_keys = true;
    let mut w = client.writer(&wo).unwrap();
    for i in 0..3i64 {
        w.append(&[bytes(&[i as f32; 4]), bytes(&[i])]).unwrap();
        w.create_item(&table, 1, 1.0).unwrap();
    }
    w.flush(5000).unwrap();
    let keys = w.take_keys().unwrap();
    assert_eq!(keys.len(), 3);
    assert_eq!(table.update_priorities(&keys, &[0.0, 0.0, 1.0]).unwrap(), vec![0, 0, 0]);
    assert_eq!(table.delete_items(&[keys[0], 12345]).unwrap(), vec![0, sys::ENGRAM_E_UNKNOWN_KEY]);
    let s = table.sample(&SampleOptions::new(8)).unwrap();
    assert!(s.column::<i64>(1).unwrap().iter().all(|&x| x == 2), "zero priority is never drawn");
    table.update_priorities_async(&[keys[1], keys[2], 12345], &[3.0, 0.0, 1.0]).unwrap(); // unknown key skipped
    let s = table.sample(&SampleOptions::new(8)).unwrap();
    assert!(s.column::<i64>(1).unwrap().iter().all(|&x| x == 1), "the next sample sees the async update");
    assert_eq!(table.update_priorities_async(&[keys[1]], &[-1.0]).unwrap_err().code(), sys::ENGRAM_E_PRIORITY);
    assert!(table.update_priorities(&[], &[]).unwrap().is_empty()); // waits for every async answer
    // Begun now, collected later: drawn after the update sent before it.
    table.update_priorities_async(&[keys[1], keys[2]], &[0.0, 1.0]).unwrap();
    table.sample_begin(&SampleOptions::new(8)).unwrap();
    assert_eq!(table.sample_begin(&SampleOptions::new(8)).unwrap_err().code(), sys::ENGRAM_E_INVALID, "one at a time");
    table.update_priorities_async(&[keys[1], keys[2]], &[1.0, 0.0]).unwrap();
    let s = table.sample_end().unwrap();
    assert_eq!(s.len(), 8);
    assert!(s.column::<i64>(1).unwrap().iter().all(|&x| x == 2), "drawn before the later update");
    assert_eq!(table.sample_end().err().map(|e| e.code()), Some(sys::ENGRAM_E_INVALID), "nothing begun");
    let info = client.table_info("t").unwrap();
    assert_eq!(info.size, 2);
    assert_eq!((info.max_priority, info.min_priority), (1.0, 0.0), "the two items' priorities now");
}

#[test]
fn batches_without_repeats() {
    let (_s, path) = server();
    let client = Client::connect(Some(&path)).unwrap();
    create_prioritized(&client);
    let table = client.open_table("t").unwrap();
    let mut w = client.writer(&WriterOptions::new(walk_columns())).unwrap();
    for i in 0..6i64 {
        w.append(&[bytes(&[i as f32; 4]), bytes(&[i])]).unwrap();
        w.create_item(&table, 1, 1.0).unwrap();
    }
    w.flush(5000).unwrap();
    let mut o = SampleOptions::new(6);
    o.no_repeats = true;
    for _ in 0..50 {
        let mut steps = table.sample(&o).unwrap().column::<i64>(1).unwrap().to_vec();
        steps.sort();
        assert_eq!(steps, vec![0, 1, 2, 3, 4, 5], "each item once");
    }
    o.batch_size = 7;
    assert_eq!(table.sample(&o).err().map(|e| e.code()), Some(sys::ENGRAM_E_RANGE), "fewer items than the batch");
}

#[test]
fn items_are_listed_oldest_or_highest_first() {
    let (_s, path) = server();
    let client = Client::connect(Some(&path)).unwrap();
    create_prioritized(&client);
    let table = client.open_table("t").unwrap();
    let mut w = client.writer(&WriterOptions::new(walk_columns())).unwrap();
    for (i, p) in [2.0, 7.0, 1.0].iter().enumerate() {
        w.append(&[bytes(&[i as f32; 4]), bytes(&[i as i64])]).unwrap();
        w.create_item(&table, 1, *p).unwrap();
    }
    w.flush(5000).unwrap();
    let old: Vec<f64> = client.items("t", false).unwrap().iter().map(|i| i.priority).collect();
    assert_eq!(old, vec![2.0, 7.0, 1.0]);
    let high: Vec<f64> = client.items("t", true).unwrap().iter().map(|i| i.priority).collect();
    assert_eq!(high, vec![7.0, 2.0, 1.0]);
    assert_eq!(client.items("none", false).err().map(|e| e.code()), Some(sys::ENGRAM_E_NOT_FOUND));
}

#[test]
fn a_table_exports_to_a_file_and_imports_back() {
    let (_s, path) = server();
    let client = Client::connect(Some(&path)).unwrap();
    create_prioritized(&client);
    let table = client.open_table("t").unwrap();
    let mut w = client.writer(&WriterOptions::new(walk_columns())).unwrap();
    for i in 0..5 {
        w.append(&[bytes(&[i as f32; 4]), bytes(&[i as i64])]).unwrap();
        w.create_item(&table, 1, 1.0 + i as f64).unwrap();
    }
    w.flush(5000).unwrap();
    let file = format!("/tmp/engram-rust-{}-export.npz", std::process::id());
    assert_eq!(table.export(&file).unwrap(), 5);
    client.create_table(&TableOptions::new("u", walk_columns(), 100)).unwrap();
    let u = client.open_table("u").unwrap();
    assert_eq!(u.import(&file, -1).unwrap(), 5);
    let back: Vec<f64> = client.items("u", false).unwrap().iter().map(|i| i.priority).collect();
    assert_eq!(back, vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    std::fs::remove_file(&file).unwrap();
    assert_eq!(u.import(&file, -1).err().map(|e| e.code()), Some(sys::ENGRAM_E_SYSTEM), "the file is gone");
}

#[test]
fn writers_on_several_threads_each_with_its_client() {
    let (_s, path) = server();
    let admin = Client::connect(Some(&path)).unwrap();
    admin.create_table(&TableOptions::new("t", walk_columns(), 10_000)).unwrap();
    const THREADS: i64 = 4;
    const ITEMS: i64 = 500;
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let path = &path;
            scope.spawn(move || {
                let client = Client::connect(Some(path)).unwrap();
                let table = client.open_table("t").unwrap();
                let mut w = client.writer(&WriterOptions::new(walk_columns())).unwrap();
                for i in 0..ITEMS {
                    let step = t * ITEMS + i;
                    w.append(&[bytes(&[step as f32; 4]), bytes(&[step])]).unwrap();
                    w.create_item(&table, 1, 1.0).unwrap();
                }
                w.flush(10_000).unwrap();
            });
        }
    });
    assert_eq!(admin.table_info("t").unwrap().size, (THREADS * ITEMS) as u64);
    let table = admin.open_table("t").unwrap();
    let s = table.sample(&SampleOptions::new(256)).unwrap();
    let (obs, steps) = (s.column::<f32>(0).unwrap(), s.column::<i64>(1).unwrap());
    for (k, &step) in steps.iter().enumerate() {
        assert!((0..THREADS * ITEMS).contains(&step));
        assert_eq!(&obs[4 * k..4 * k + 4], &[step as f32; 4], "every byte as its writer wrote it");
    }
}

#[test]
fn an_interrupter_ends_a_blocked_sample_from_another_thread() {
    let (_s, path) = server();
    let client = Client::connect(Some(&path)).unwrap();
    let mut o = TableOptions::new("q", walk_columns(), 10);
    o.rate_limiter = Some(RateLimiter::queue(10).unwrap());
    o.sampler = Selector::Fifo;
    o.max_times_sampled = 1;
    client.create_table(&o).unwrap();
    let table = client.open_table("q").unwrap();
    let interrupter = client.interrupter();
    let t0 = Instant::now();
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            interrupter.interrupt();
        });
        table.sample(&SampleOptions::new(1))
    });
    assert_eq!(result.err().unwrap().code(), sys::ENGRAM_E_INTERRUPTED);
    assert!(t0.elapsed() < Duration::from_millis(700));
}

#[test]
fn a_stopped_server_disconnects_its_clients() {
    let (s, path) = server();
    let client = Client::connect(Some(&path)).unwrap();
    client.create_table(&TableOptions::new("t", walk_columns(), 10)).unwrap();
    drop(s);
    assert_eq!(client.table_info("t").unwrap_err().code(), sys::ENGRAM_E_DISCONNECTED);
    assert_eq!(Client::connect(Some(&path)).err().unwrap().code(), sys::ENGRAM_E_DISCONNECTED);
}

#[test]
fn items_at_the_maximum_get_the_largest_priority_held() {
    let (_s, path) = server();
    let client = Client::connect(Some(&path)).unwrap();
    create_prioritized(&client);
    let table = client.open_table("t").unwrap();
    let mut w = client.writer(&WriterOptions::new(walk_columns())).unwrap();
    for (i, p) in [None, Some(3.0), None].iter().enumerate() {
        w.append(&[bytes(&[i as f32; 4]), bytes(&[i as i64])]).unwrap();
        match p {
            Some(p) => w.create_item(&table, 1, *p).unwrap(),
            None => w.create_item_at_max(&table, 1).unwrap(),
        }
        w.flush(5000).unwrap();
    }
    let info = client.table_info("t").unwrap();
    // 1.0 (an empty table's), 3.0, then 3.0 again (the largest held).
    assert_eq!((info.size, info.max_priority, info.min_priority), (3, 3.0, 1.0));
}

#[test]
fn append_items_writes_a_batch_in_one_call() {
    let (_s, path) = server();
    let client = Client::connect(Some(&path)).unwrap();
    let mut o = TableOptions::new("t", walk_columns(), 100);
    o.sampler = Selector::Fifo;
    o.max_times_sampled = 1;
    client.create_table(&o).unwrap();
    let table = client.open_table("t").unwrap();
    let mut w = client.writer(&WriterOptions::new(walk_columns())).unwrap();
    let obs: Vec<f32> = (0..40).map(|x| x as f32).collect();
    let steps: Vec<i64> = (0..10).collect();
    assert_eq!(w.append_items(&[bytes(&obs), bytes(&steps)], 10, &table, 1, Some(&[1.0])).unwrap_err().code(),
               sys::ENGRAM_E_RANGE, "one priority per step");
    w.append_items(&[bytes(&obs), bytes(&steps)], 10, &table, 1, None).unwrap();
    w.flush(5000).unwrap();
    let s = table.sample(&SampleOptions::new(10)).unwrap();
    assert_eq!(s.column::<i64>(1).unwrap(), &steps[..]);
    assert_eq!(&s.column::<f32>(0).unwrap()[36..40], &[36.0, 37.0, 38.0, 39.0]);
}

#[test]
fn reconnect_is_one_call_after_a_server_restart() {
    let (s, path) = server();
    let mut client = Client::connect(Some(&path)).unwrap();
    client.create_table(&TableOptions::new("t", walk_columns(), 10)).unwrap();
    drop(s);
    assert_eq!(client.table_info("t").unwrap_err().code(), sys::ENGRAM_E_DISCONNECTED);
    let _again = Server::start(&path).unwrap();
    client.reconnect(Some(&path)).unwrap();
    client.create_table(&TableOptions::new("t", walk_columns(), 10)).unwrap();
    assert_eq!(client.table_info("t").unwrap().size, 0);
}
