//! Tests and examples find libengram at run time where engram-sys found it
//! for the linker (an rpath), so that they run without LD_LIBRARY_PATH.
fn main() {
    for var in ["DEP_ENGRAM_LIB_DIR", "DEP_ENGRAM_SERVER_LIB_DIR"] {
        if let Ok(dir) = std::env::var(var) {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
}
