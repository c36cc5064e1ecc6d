//! A PMI client that reports fault-tolerance counters the way a rank does in
//! `MPI_Finalize`, for the launcher's FT report tests.
//!
//! `launcher_report_probe REPORT [fail RANK CODE]`: every rank puts key
//! `resmpi-report-<rank>` with value REPORT (each `{rank}` replaced by the
//! rank; `none` puts nothing), enters a barrier, then finalizes and exits 0,
//! except rank RANK, which exits with CODE without finalizing.

use resmpi_runtime::Pmi;

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let fail = |message: &str| -> ! {
        eprintln!("launcher_report_probe: {message}");
        std::process::exit(2)
    };
    let Some(report) = arguments.first() else {
        fail("usage: launcher_report_probe REPORT [fail RANK CODE]");
    };
    let failing: Option<(u32, i32)> = match arguments.get(1).map(String::as_str) {
        None => None,
        Some("fail") => {
            let number = |index: usize| -> i64 {
                arguments
                    .get(index)
                    .and_then(|text| text.parse().ok())
                    .unwrap_or_else(|| fail(&format!("argument {index} must be a number")))
            };
            Some((number(2) as u32, number(3) as i32))
        }
        Some(other) => fail(&format!("unknown mode '{other}'")),
    };
    let mut pmi = Pmi::from_env().unwrap_or_else(|error| fail(&error.to_string()));
    let rank = pmi.rank();
    if report != "none" {
        let value = report.replace("{rank}", &rank.to_string());
        pmi.put(&format!("resmpi-report-{rank}"), &value)
            .unwrap_or_else(|error| fail(&error.to_string()));
    }
    pmi.barrier()
        .unwrap_or_else(|error| fail(&error.to_string()));
    if let Some((bad_rank, code)) = failing {
        if bad_rank == rank {
            std::process::exit(code);
        }
    }
    pmi.finalize()
        .unwrap_or_else(|error| fail(&error.to_string()));
}
