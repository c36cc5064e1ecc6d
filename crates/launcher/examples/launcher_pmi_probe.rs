//! The runtime's PMI probe, built again inside this package so the
//! launcher's integration tests can run it under the `mpiexec` they test
//! (cargo builds a package's own examples before its tests, not those of
//! its dependencies).

#[path = "../../runtime/examples/pmi_probe.rs"]
mod pmi_probe;

fn main() {
    pmi_probe::main();
}
