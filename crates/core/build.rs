//! Compiles the C reduction kernels for `long double`.
fn main() {
    println!("cargo:rerun-if-changed=kernels/long_double.c");
    cc::Build::new()
        .file("kernels/long_double.c")
        .opt_level(2)
        .compile("resmpi_kernels");
}
