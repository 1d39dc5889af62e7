//! Finds libengram for the linker: $ENGRAM_LIB_DIR, else the directories
//! pkg-config names for engram (its search path), else this source tree's
//! build/release/capi, else the system's library path; and libengram-server
//! (the embedded server, linked as needed) the same way: $ENGRAM_SERVER_LIB_DIR,
//! pkg-config's engram-server, the tree's build/release/embedded. The
//! directories go to dependents as DEP_ENGRAM_LIB_DIR and
//! DEP_ENGRAM_SERVER_LIB_DIR, so that their tests and examples can find
//! the libraries at run time (rpath).
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn pkg_config_dirs(package: &str) -> Vec<String> {
    let out = match Command::new("pkg-config").args(["--libs-only-L", package]).output() {
        Ok(o) if o.status.success() => o,
        _ => return Vec::new(),
    };
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-L").map(str::to_string))
        .collect()
}

// The directory of `file` (libengram.so or libengram-server.so): $env_var,
// else pkg-config's for `package`, else the tree's build/release/`tree_dir`;
// None for the system's library path (libengram-dev).
fn find(env_var: &str, package: &str, tree_dir: &str, file: &str) -> Option<String> {
    println!("cargo:rerun-if-env-changed={}", env_var);
    let tree = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../../build/release").join(tree_dir);
    if let Ok(d) = env::var(env_var) {
        Some(d)
    } else if let Some(d) = pkg_config_dirs(package).into_iter().next() {
        Some(d)
    } else if tree.join(file).exists() {
        Some(tree.canonicalize().unwrap().display().to_string())
    } else {
        None
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    if let Some(d) = find("ENGRAM_LIB_DIR", "engram", "capi", "libengram.so") {
        println!("cargo:rustc-link-search=native={}", d);
        println!("cargo:lib_dir={}", d);
    }
    if let Some(d) = find("ENGRAM_SERVER_LIB_DIR", "engram-server", "embedded", "libengram-server.so") {
        println!("cargo:rustc-link-search=native={}", d);
        println!("cargo:server_lib_dir={}", d);
    }
    println!("cargo:rustc-link-lib=dylib=engram");
}
