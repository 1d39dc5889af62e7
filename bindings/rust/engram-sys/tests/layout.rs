//! Every mirrored struct has the C layout: sizes and field offsets as the C
//! compiler computes them from engram.h and engram/server.h.
use std::collections::HashMap;
use std::mem::{size_of, MaybeUninit};
use std::path::PathBuf;
use std::process::Command;

use engram_sys::*;

macro_rules! layout {
    ($out:ident, $t:ident, $($f:ident),*) => {{
        $out.push((format!("{} size", stringify!($t)), size_of::<$t>()));
        let u = MaybeUninit::<$t>::uninit();
        let base = u.as_ptr() as usize;
        $(
            // addr_of! takes the field's address without reading it.
            let at = unsafe { std::ptr::addr_of!((*u.as_ptr()).$f) } as usize;
            $out.push((format!("{}.{}", stringify!($t), stringify!($f)), at - base));
        )*
    }};
}

#[test]
fn structs_match_the_c_compiler() {
    let mut rust: Vec<(String, usize)> = Vec::new();
    layout!(rust, engram_column, name, dtype, rank, shape);
    layout!(rust, engram_compression, codec, level);
    layout!(rust, engram_rate_limiter, samples_per_insert, min_size_to_sample, min_diff, max_diff);
    layout!(rust, engram_server_options, struct_size, socket_path, config_path, config_toml, quiet);
    layout!(rust, engram_connect_options, struct_size, socket_path, timeout_ms);
    layout!(rust, engram_table_options, struct_size, name, max_size, sampler, remover, priority_exponent,
            max_times_sampled, max_chunks_per_item, rate_limiter, columns, num_columns, compression);
    layout!(rust, engram_table_info, struct_size, name, max_size, size, inserts, samples, deletes, updates, evictions,
            expirations, stale_requests, rate_limited, sampler, remover, max_times_sampled, num_columns, can_sample,
            can_insert, clients, rate_limiter, bytes_raw, bytes_stored, max_priority, min_priority, shards,
            shards_present);
    layout!(rust, engram_writer_options, struct_size, columns, num_columns, chunk_length, max_item_steps,
            insert_timeout_ms, keep_keys, compression);
    layout!(rust, engram_sample_options, struct_size, batch_size, num_steps, timeout_ms);
    layout!(rust, engram_sample_info, key, priority, probability, times_sampled, table_size);
    layout!(rust, engram_view, data, steps);

    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"engram/engram.h\"\n#include \"engram/server.h\"\nint main(void) {\n",
    );
    for (key, _) in &rust {
        if let Some(t) = key.strip_suffix(" size") {
            c += &format!("printf(\"{} %zu\\n\", sizeof({}));\n", key, t);
        } else {
            let (t, field) = key.split_once('.').unwrap();
            c += &format!("printf(\"{} %zu\\n\", offsetof({}, {}));\n", key, t, field);
        }
    }
    c += "return 0; }\n";
    let dir = std::env::temp_dir().join(format!("engram-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("layout.c"), c).unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let cc = Command::new("cc")
        .arg("-I")
        .arg(root.join("capi/include"))
        .arg("-I")
        .arg(root.join("embedded/include"))
        .arg(dir.join("layout.c"))
        .arg("-o")
        .arg(dir.join("layout"))
        .status()
        .expect("a C compiler (cc) to compare layouts with");
    assert!(cc.success());
    let out = Command::new(dir.join("layout")).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8(out.stdout).unwrap();
    let c_layout: HashMap<&str, usize> =
        text.lines().map(|l| { let (k, v) = l.rsplit_once(' ').unwrap(); (k, v.parse().unwrap()) }).collect();
    for (key, value) in &rust {
        assert_eq!(c_layout.get(key.as_str()), Some(value), "{}", key);
    }
}
