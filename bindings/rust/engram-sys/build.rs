//! Finds libengram for the linker: $ENGRAM_LIB_DIR, else the directories
//! pkg-config names for engram (its search path), else this source tree's
//! build/release/capi, else the system's library path. The directory goes
//! to dependents as DEP_ENGRAM_LIB_DIR, so that their tests and examples
//! can find the library at run time (rpath).
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn pkg_config_dirs() -> Vec<String> {
    let out = match Command::new("pkg-config").args(["--libs-only-L", "engram"]).output() {
        Ok(o) if o.status.success() => o,
        _ => return Vec::new(),
    };
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-L").map(str::to_string))
        .collect()
}

fn main() {
    println!("cargo:rerun-if-env-changed=ENGRAM_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let tree = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../../build/release/capi");
    let dir = if let Ok(d) = env::var("ENGRAM_LIB_DIR") {
        Some(d)
    } else if let Some(d) = pkg_config_dirs().into_iter().next() {
        Some(d)
    } else if tree.join("libengram.so").exists() {
        Some(tree.canonicalize().unwrap().display().to_string())
    } else {
        None // the system's: /usr/lib/<triplet>/libengram.so from libengram-dev
    };
    if let Some(d) = &dir {
        println!("cargo:rustc-link-search=native={}", d);
        println!("cargo:lib_dir={}", d);
    }
    println!("cargo:rustc-link-lib=dylib=engram");
}
