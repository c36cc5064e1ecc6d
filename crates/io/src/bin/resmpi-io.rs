//! `resmpi-io`: look after replicated MPI-IO files outside any job.
//!
//! Read-repair fixes only the copies a read happens to look at; a copy
//! nobody reads (a replica, while the primary is healthy) can rot or vanish
//! unnoticed until it is needed. `check` reads every copy of every block
//! and reports; `scrub` also repairs, and rebuilds every copy a replaced
//! (empty) target should hold. Exit status: 0 when every copy is (now)
//! intact, 1 when damage remains (check: any damage; scrub: what could not
//! be repaired), 2 on a usage or I/O error.

use std::path::Path;
use std::process::ExitCode;

use resmpi_io::store::{read_metadata, OpenRequest, Store};

const USAGE: &str = "\
usage: resmpi-io info FILE     the replication layout of FILE
       resmpi-io check FILE    verify every copy of every block, repair nothing
       resmpi-io scrub FILE    verify every copy and repair or rebuild the bad ones";

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let [command, file] = arguments.as_slice() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let path = Path::new(file);
    let layout = match read_metadata(path) {
        Ok(Some(layout)) => layout,
        Ok(None) => {
            eprintln!("resmpi-io: {file} is not a replicated file (no metadata beside it)");
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("resmpi-io: {file}: {error}");
            return ExitCode::from(2);
        }
    };
    let repair = match command.as_str() {
        "info" => {
            print!("{}", layout.encode());
            return ExitCode::SUCCESS;
        }
        "check" => false,
        "scrub" => true,
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let request = OpenRequest {
        read: true,
        write: repair,
        ..OpenRequest::default()
    };
    let mut store = match Store::open(path, &request) {
        Ok(store) => store,
        Err(error) => {
            eprintln!("resmpi-io: cannot open {file}: {error}");
            return ExitCode::from(2);
        }
    };
    let found = match store.scrub(repair) {
        Ok(found) => found,
        Err(error) => {
            eprintln!("resmpi-io: {file}: {error}");
            return ExitCode::from(2);
        }
    };
    for repair in &found {
        println!("{repair}");
    }
    let length = store.len().unwrap_or(0);
    let blocks = length.div_ceil(layout.block_size_bytes);
    let remaining = found.iter().filter(|repair| !repair.repaired).count();
    println!(
        "{file}: {blocks} blocks x {} copies checked, {} damaged, {} repaired, {remaining} remaining",
        layout.replication_factor,
        found.len(),
        found.len() - remaining
    );
    if remaining == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
