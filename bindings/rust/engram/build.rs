//! Tests and examples find libengram at run time where engram-sys found it
//! for the linker (an rpath), so that they run without LD_LIBRARY_PATH.
fn main() {
    if let Ok(dir) = std::env::var("DEP_ENGRAM_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
