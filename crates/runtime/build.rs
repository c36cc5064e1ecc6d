//! Compiles the PMIx shim (csrc/pmix_shim.c). With pmix.h (Debian's
//! libpmix-dev, found through pkg-config or its usual directory) the shim
//! loads libpmix at run time; without it every PMIx call says the library
//! was built without PMIx.
use std::path::Path;
use std::process::Command;

fn pmix_include_directory() -> Option<String> {
    let from_pkg_config = Command::new("pkg-config")
        .args(["--variable=includedir", "pmix"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string());
    [
        from_pkg_config,
        Some("/usr/lib/x86_64-linux-gnu/pmix2/include".to_string()),
        Some("/usr/include/pmix".to_string()),
        Some("/usr/include".to_string()),
    ]
    .into_iter()
    .flatten()
    .find(|directory| Path::new(directory).join("pmix.h").exists())
}

fn main() {
    println!("cargo:rerun-if-changed=csrc/pmix_shim.c");
    let mut build = cc::Build::new();
    build.file("csrc/pmix_shim.c").opt_level(2);
    if let Some(directory) = pmix_include_directory() {
        build.include(directory).define("RESMPI_HAVE_PMIX", None);
    } else {
        println!("cargo:warning=pmix.h not found: resmpi is built without a PMIx client");
    }
    build.compile("resmpi_pmix_shim");
}
