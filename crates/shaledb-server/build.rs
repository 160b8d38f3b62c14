//! Compiles `src/types/long_double.c`, the long-double arithmetic of INCRBYFLOAT and HINCRBYFLOAT (Redis
//! computes them in C's `long double`, which Rust lacks; see `src/types/long_double.rs`).

fn main() {
    println!("cargo:rerun-if-changed=src/types/long_double.c");
    cc::Build::new().file("src/types/long_double.c").warnings(true).compile("shaledb_long_double");
}
