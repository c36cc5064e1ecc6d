//! `mpiexec` (also installed as `mpirun`): starts an MPI job on this host,
//! or on several hosts through a launcher program such as `ssh` that starts
//! one proxy per remote host (`mpiexec --proxy`, this same executable).
//!
//! It owns the job's life: fork/exec of N ranks, the PMI-1 server they wire
//! up through, forwarding of their output, and a teardown that leaves no
//! process and no shared-memory segment behind, whatever way the job ends.
//! It knows nothing of MPI messages: ranks talk to each other directly.
//!
//! Layout: `options` (command line), `hosts` (host lists, placement),
//! `spawn` (one rank's process and environment), `pmi_server` (one
//! socketpair per rank), `proxy` (the per-host proxy process),
//! `proxy_protocol` (its frames), `proxy_link` (mpiexec's end of each
//! proxy), `output` (line forwarding), `supervisor` (the job loop and exit
//! code),
//! `ft_report` (the end-of-job fault-tolerance report), `process_faults`
//! (the kills `--inject` schedules), `event_logger` (the `--msglog`
//! event logger's process), `signals`.

mod dynamic_spawn;
mod event_logger;
mod ft_report;
mod hosts;
mod options;
mod output;
mod pmi_server;
mod preflight;
mod process_faults;
mod proxy;
mod proxy_link;
mod replica_recovery;
mod replicated_output;
mod signals;
mod spawn;
mod supervisor;

// One decoder for the binary, the library and the fuzz target.
use resmpi_launcher::proxy_protocol;

use options::Request;

/// Exit code for a bad command line.
pub(crate) const EXIT_USAGE: i32 = 2;

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    // Started by mpiexec on another host: a proxy, not a job.
    if arguments.len() == 1 && arguments[0] == proxy::PROXY_FLAG {
        std::process::exit(proxy::main());
    }
    // Started by mpiexec under --msglog: the job's event logger.
    if arguments.first().map(String::as_str) == Some(event_logger::EVENT_LOGGER_FLAG) {
        std::process::exit(event_logger::main(&arguments));
    }
    let code = match options::parse(&arguments, |name| std::env::var(name).ok()) {
        Ok(Request::Help) => {
            print!("{}", options::USAGE);
            0
        }
        Ok(Request::Version) => {
            println!("mpiexec (resmpi) {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Ok(Request::Run(options)) => match preflight::check(&options) {
            Ok(()) => supervisor::run(&options),
            Err(message) => {
                eprintln!("mpiexec: {message}");
                EXIT_USAGE
            }
        },
        Err(message) => {
            eprintln!("mpiexec: {message}");
            EXIT_USAGE
        }
    };
    std::process::exit(code);
}
