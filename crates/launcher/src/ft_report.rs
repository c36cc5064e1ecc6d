//! The end-of-job fault-tolerance report.
//!
//! In `MPI_Finalize` each rank puts PMI key `resmpi-report-<rank>` with a
//! value `name=N;name=N;...` (unsigned 64-bit counters). At the end of the
//! job, failed or not, the supervisor reads those keys from the PMI server's
//! key-value space, sums them per name (names it does not know are kept and
//! summed too; a name ending in `_max` keeps the largest rank's value),
//! prints one line to stderr and, with `--report-json`, writes the sums as
//! JSON. Under `--msglog` the line says what message logging did, not a
//! row of network zeros.
//!
//! Four numbers come from mpiexec itself, not from the ranks (a dead rank
//! reports nothing): processes lost, failure notices sent, the longest
//! detection latency of an injected kill (SIGKILL to notices written), and
//! under `--replicas` the replicas given up after a death. They
//! are named on the line only when non-zero, and are always in the JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The PMI key rank `rank` reports under.
pub fn report_key(rank: u32) -> String {
    format!("resmpi-report-{rank}")
}

/// The counters the line names, in the order they are printed and written.
pub const KNOWN_COUNTERS: [&str; 14] = [
    "frames_sent",
    "frames_retransmitted",
    "corrupt_caught",
    "duplicates_dropped",
    "rails_failed",
    "rails_recovered",
    "failover_time_ns",
    "injected_dropped",
    "injected_corrupted",
    "injected_duplicated",
    "injected_delayed",
    "injected_swallowed_rail_down",
    "tail_loss_probes",
    "spurious_retransmissions",
];

/// Parses one rank's report, `name=N;name=N;...`. Blanks around items and
/// empty items (a trailing `;`) are ignored; a name given twice is summed.
/// An item that is not `name=N` with N an unsigned 64-bit number makes the
/// whole report invalid.
pub fn parse_report(value: &str) -> Result<Vec<(String, u64)>, String> {
    let mut counters = Vec::new();
    for raw in value.split(';') {
        let item = raw.trim();
        if item.is_empty() {
            continue;
        }
        let (name, number) = item
            .split_once('=')
            .ok_or_else(|| format!("item '{item}' is not name=N"))?;
        let name = name.trim();
        let valid_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        if !valid_name {
            return Err(format!("item '{item}': bad counter name '{name}'"));
        }
        let number = number
            .trim()
            .parse::<u64>()
            .map_err(|_| format!("item '{item}': '{}' is not a u64", number.trim()))?;
        counters.push((name.to_string(), number));
    }
    Ok(counters)
}

/// What mpiexec counted itself about process failures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LauncherCounters {
    /// Ranks that died before `MPI_Finalize` (each once).
    pub processes_lost: u64,
    /// `cmd=resmpi_failure` lines written to watching ranks.
    pub failure_notices_sent: u64,
    /// Longest time from an injected SIGKILL to the victim's notices being
    /// written, in microseconds.
    pub detection_latency_us_max: u64,
    /// Under `--replicas`: replicas given up after one of their processes
    /// died (the job went on with the others).
    pub replicas_given_up: u64,
    /// Under `--replica-recovery now`: lost replicas forked back that
    /// re-joined, and the longest time from a replica's death to its
    /// successor's re-join, in microseconds.
    pub replicas_recovered: u64,
    pub recovery_us_max: u64,
}

impl LauncherCounters {
    /// (JSON name, value), in the order written.
    fn named(&self) -> [(&'static str, u64); 6] {
        [
            ("processes_lost", self.processes_lost),
            ("failure_notices_sent", self.failure_notices_sent),
            ("detection_latency_us_max", self.detection_latency_us_max),
            ("replicas_given_up", self.replicas_given_up),
            ("replicas_recovered", self.replicas_recovered),
            ("recovery_us_max", self.recovery_us_max),
        ]
    }
}

/// The sum of the reports of every rank that sent one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FtReport {
    /// How many ranks sent a valid report.
    pub ranks_reported: u32,
    /// Sums per counter name (saturating).
    pub counters: BTreeMap<String, u64>,
    /// What mpiexec counted itself.
    pub launcher: LauncherCounters,
}

impl FtReport {
    /// Adds one rank's parsed report: summed, except a `_max` counter,
    /// whose largest value is kept (a per-rank peak).
    pub fn add(&mut self, counters: &[(String, u64)]) {
        self.ranks_reported += 1;
        for (name, number) in counters {
            let sum = self.counters.entry(name.clone()).or_insert(0);
            *sum = if name.ends_with("_max") {
                (*sum).max(*number)
            } else {
                sum.saturating_add(*number)
            };
        }
    }

    /// Whether the job ran under `--msglog` (mpiexec adds the event
    /// logger's counters then; ranks add theirs).
    fn message_logging(&self) -> bool {
        self.counters
            .keys()
            .any(|name| name.starts_with("eventlog_") || name.starts_with("msglog_"))
    }

    /// What message logging did, for the line.
    fn message_logging_text(&self) -> String {
        let mut text = format!(
            "message logging: {} messages ({} bytes) logged, log memory per rank max {} bytes \
             ({} mapped), {} bytes trimmed",
            self.get("msglog_logged_messages"),
            self.get("msglog_logged_bytes"),
            self.get("msglog_memory_bytes_max"),
            self.get("msglog_mapped_bytes_max"),
            self.get("msglog_trimmed_bytes"),
        );
        if self.get("msglog_spilled_bytes") != 0 {
            let _ = write!(text, ", {} spilled", self.get("msglog_spilled_bytes"));
        }
        let _ = write!(
            text,
            "; determinants {} ({} stored by the event logger)",
            self.get("msglog_determinants"),
            self.get("eventlog_determinants_stored")
        );
        if self.get("msglog_replayed_messages") != 0 {
            let _ = write!(
                text,
                "; messages replayed {}",
                self.get("msglog_replayed_messages")
            );
        }
        text
    }

    /// Sums the reports found under [`report_key`] for ranks
    /// `0..rank_count`; `lookup` reads the key-value space. A malformed
    /// report is named on stderr and left out.
    pub fn collect(rank_count: u32, lookup: impl Fn(&str) -> Option<String>) -> FtReport {
        let mut report = FtReport::default();
        for rank in 0..rank_count {
            let Some(value) = lookup(&report_key(rank)) else {
                continue;
            };
            match parse_report(&value) {
                Ok(counters) => report.add(&counters),
                Err(problem) => {
                    eprintln!(
                        "mpiexec: rank {rank} sent a malformed FT report ({problem}); left out"
                    )
                }
            }
        }
        report
    }

    /// A counter's sum, 0 when no rank reported it.
    pub fn get(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// Whether any counter a rank reported is non-zero (mpiexec's own
    /// counters do not count: a job without FT options that loses a rank
    /// prints what it printed before they existed).
    pub fn any_nonzero(&self) -> bool {
        self.counters.values().any(|&number| number != 0)
    }

    /// Every counter: the known ones in [`KNOWN_COUNTERS`] order (0 when
    /// absent), then the others in name order.
    pub fn all_counters(&self) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> = KNOWN_COUNTERS
            .iter()
            .map(|name| (name.to_string(), self.get(name)))
            .collect();
        all.extend(
            self.counters
                .iter()
                .filter(|(name, _)| !KNOWN_COUNTERS.contains(&name.as_str()))
                .map(|(name, &number)| (name.clone(), number)),
        );
        all
    }

    /// The line printed to stderr (without a newline).
    pub fn line(&self) -> String {
        let ranks = match self.ranks_reported {
            1 => "1 rank reported".to_string(),
            count => format!("{count} ranks reported"),
        };
        let mut line = format!(
            "mpiexec: FT report: {ranks}; fragments sent {}, retransmitted {}, corrupt caught {}, \
             duplicates dropped {}, rails failed {}, recovered {}, failover {} s; \
             injected: dropped {}, corrupted {}, duplicated {}, delayed {}, rail-down swallowed {}",
            self.get("frames_sent"),
            self.get("frames_retransmitted"),
            self.get("corrupt_caught"),
            self.get("duplicates_dropped"),
            self.get("rails_failed"),
            self.get("rails_recovered"),
            seconds_text(self.get("failover_time_ns")),
            self.get("injected_dropped"),
            self.get("injected_corrupted"),
            self.get("injected_duplicated"),
            self.get("injected_delayed"),
            self.get("injected_swallowed_rail_down"),
        );
        let (probes, spurious) = (
            self.get("tail_loss_probes"),
            self.get("spurious_retransmissions"),
        );
        if probes != 0 || spurious != 0 {
            let _ = write!(
                line,
                "; loss recovery: tail-loss probes {probes}, spurious retransmissions {spurious}"
            );
        }
        let launcher = self.launcher;
        let mut failures = Vec::new();
        if launcher.processes_lost != 0 {
            failures.push(format!("processes lost {}", launcher.processes_lost));
        }
        if launcher.failure_notices_sent != 0 {
            failures.push(format!(
                "failure notices sent {}",
                launcher.failure_notices_sent
            ));
        }
        if launcher.detection_latency_us_max != 0 {
            failures.push(format!(
                "detection latency max {}.{:03} ms",
                launcher.detection_latency_us_max / 1000,
                launcher.detection_latency_us_max % 1000
            ));
        }
        if launcher.replicas_given_up != 0 {
            failures.push(format!("replicas given up {}", launcher.replicas_given_up));
        }
        if launcher.replicas_recovered != 0 {
            failures.push(format!(
                "replicas recovered {} (death to re-join max {}.{:03} ms)",
                launcher.replicas_recovered,
                launcher.recovery_us_max / 1000,
                launcher.recovery_us_max % 1000
            ));
        }
        let network_zero = KNOWN_COUNTERS.iter().all(|name| self.get(name) == 0);
        let network_quiet = self.ranks_reported == 0 && network_zero;
        if self.message_logging() {
            // What logging did; the network's numbers only when non-zero.
            let logging = self.message_logging_text();
            if network_zero {
                line = format!("mpiexec: FT report: {ranks}; {logging}");
            } else {
                let _ = write!(line, "; {logging}");
            }
            if !failures.is_empty() {
                line.push_str("; ");
                line.push_str(&failures.join(", "));
            }
        } else if network_quiet && !failures.is_empty() {
            // Only process faults to report: leave out a line of zeros.
            line = format!("mpiexec: FT report: {}", failures.join(", "));
        } else if !failures.is_empty() {
            line.push_str("; ");
            line.push_str(&failures.join(", "));
        }
        // Zeros are left out (the JSON has every counter).
        let others: Vec<String> = self
            .counters
            .iter()
            .filter(|(name, number)| !KNOWN_COUNTERS.contains(&name.as_str()) && **number != 0)
            .map(|(name, number)| format!("{name} {number}"))
            .collect();
        if !others.is_empty() {
            line.push_str("; other: ");
            line.push_str(&others.join(", "));
        }
        line
    }

    /// `{"ranks_reported": N, "counters": {...}, "exit_code": C}` and a
    /// newline; the counters are [`FtReport::all_counters`] then mpiexec's
    /// own (`processes_lost`, `failure_notices_sent`,
    /// `detection_latency_us_max`).
    pub fn json(&self, exit_code: i32) -> String {
        let mut text = format!(
            "{{\"ranks_reported\": {}, \"counters\": {{",
            self.ranks_reported
        );
        let launcher = self
            .launcher
            .named()
            .map(|(name, number)| (name.to_string(), number));
        for (index, (name, number)) in self.all_counters().iter().chain(&launcher).enumerate() {
            if index > 0 {
                text.push_str(", ");
            }
            let _ = write!(text, "{}: {number}", json_string(name));
        }
        let _ = writeln!(text, "}}, \"exit_code\": {exit_code}}}");
        text
    }

    /// Writes [`FtReport::json`] to `path` (through a temporary file beside
    /// it, so a reader never sees half a report).
    pub fn write_json(&self, path: &Path, exit_code: i32) -> std::io::Result<()> {
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(format!(".tmp-{}", std::process::id()));
        let temporary = std::path::PathBuf::from(temporary);
        std::fs::write(&temporary, self.json(exit_code))?;
        std::fs::rename(&temporary, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&temporary);
        })
    }
}

/// Nanoseconds as seconds with three decimals, rounded to the millisecond.
fn seconds_text(nanoseconds: u64) -> String {
    let milliseconds = nanoseconds / 1_000_000 + u64::from(nanoseconds % 1_000_000 >= 500_000);
    format!("{}.{:03}", milliseconds / 1000, milliseconds % 1000)
}

/// `text` as a JSON string literal.
fn json_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(quoted, "\\u{:04x}", c as u32);
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn pairs(list: &[(&str, u64)]) -> Vec<(String, u64)> {
        list.iter()
            .map(|(name, number)| (name.to_string(), *number))
            .collect()
    }

    #[test]
    fn reports_parse_with_blanks_trailing_separators_and_unknown_names() {
        assert_eq!(
            parse_report("frames_sent=10; corrupt_caught=2;;future_counter=7;").unwrap(),
            pairs(&[
                ("frames_sent", 10),
                ("corrupt_caught", 2),
                ("future_counter", 7)
            ])
        );
        assert_eq!(parse_report("").unwrap(), pairs(&[]));
        assert_eq!(
            parse_report(&format!("frames_sent={}", u64::MAX)).unwrap(),
            pairs(&[("frames_sent", u64::MAX)])
        );
    }

    #[test]
    fn malformed_reports_are_refused_naming_the_item() {
        for (value, needle) in [
            ("frames_sent", "not name=N"),
            ("frames_sent=-1", "not a u64"),
            ("frames_sent=1.5", "not a u64"),
            ("frames_sent=18446744073709551616", "not a u64"),
            ("=3", "bad counter name"),
            ("a b=3", "bad counter name"),
            ("x\"y=3", "bad counter name"),
        ] {
            let problem = parse_report(value).unwrap_err();
            assert!(problem.contains(needle), "{value}: {problem}");
        }
    }

    #[test]
    fn collect_sums_every_rank_keeps_unknown_names_and_skips_bad_reports() {
        let store: HashMap<String, String> = [
            (0, "frames_sent=100;injected_dropped=3;future=1"),
            (
                1,
                "frames_sent=20;frames_retransmitted=4;future=2;frames_sent=1",
            ),
            (2, "frames_sent=oops"),
            (5, "frames_sent=1000"), // not a rank of this job
        ]
        .iter()
        .map(|(rank, value)| (report_key(*rank), value.to_string()))
        .collect();
        let report = FtReport::collect(4, |key| store.get(key).cloned());
        assert_eq!(report.ranks_reported, 2);
        assert_eq!(report.get("frames_sent"), 121);
        assert_eq!(report.get("frames_retransmitted"), 4);
        assert_eq!(report.get("injected_dropped"), 3);
        assert_eq!(report.get("future"), 3);
        assert_eq!(report.get("rails_failed"), 0);
        assert!(report.any_nonzero());
    }

    #[test]
    fn sums_saturate_and_zero_reports_are_not_nonzero() {
        let mut report = FtReport::default();
        report.add(&pairs(&[("frames_sent", u64::MAX)]));
        report.add(&pairs(&[("frames_sent", 5)]));
        assert_eq!(report.get("frames_sent"), u64::MAX);
        let mut zeros = FtReport::default();
        zeros.add(&pairs(&[("frames_sent", 0), ("other", 0)]));
        assert_eq!(zeros.ranks_reported, 1);
        assert!(!zeros.any_nonzero());
        assert!(!FtReport::default().any_nonzero());
    }

    #[test]
    fn the_line_names_every_counter_in_order() {
        let mut report = FtReport::default();
        for _ in 0..4 {
            report.add(&pairs(&[("frames_sent", 1)]));
        }
        report.add(&pairs(&[
            ("frames_sent", 1230),
            ("frames_retransmitted", 12),
            ("tail_loss_probes", 2),
            ("spurious_retransmissions", 1),
            ("corrupt_caught", 3),
            ("duplicates_dropped", 5),
            ("rails_failed", 1),
            ("rails_recovered", 1),
            ("failover_time_ns", 119_600_000),
            ("injected_dropped", 10),
            ("injected_corrupted", 3),
        ]));
        report.ranks_reported = 4;
        assert_eq!(
            report.line(),
            "mpiexec: FT report: 4 ranks reported; fragments sent 1234, retransmitted 12, \
             corrupt caught 3, duplicates dropped 5, rails failed 1, recovered 1, failover 0.120 s; \
             injected: dropped 10, corrupted 3, duplicated 0, delayed 0, rail-down swallowed 0; \
             loss recovery: tail-loss probes 2, spurious retransmissions 1"
        );
        let mut single = FtReport::default();
        single.add(&pairs(&[("zeta", 2), ("alpha", 1)]));
        let line = single.line();
        assert!(
            line.starts_with("mpiexec: FT report: 1 rank reported;"),
            "{line}"
        );
        assert!(line.ends_with("; other: alpha 1, zeta 2"), "{line}");
    }

    #[test]
    fn launcher_counters_are_named_only_when_non_zero_and_do_not_force_the_line() {
        let mut report = FtReport::default();
        report.launcher.processes_lost = 2;
        assert!(!report.any_nonzero());
        // Nothing from the network layer: no line of zeros before it.
        assert_eq!(report.line(), "mpiexec: FT report: processes lost 2");
        report.launcher.replicas_given_up = 1;
        assert_eq!(
            report.line(),
            "mpiexec: FT report: processes lost 2, replicas given up 1"
        );
        report.launcher.replicas_given_up = 0;
        report.launcher.failure_notices_sent = 5;
        report.launcher.detection_latency_us_max = 12_345;
        report.add(&pairs(&[("zeta", 1)]));
        let line = report.line();
        assert!(
            line.ends_with(
                "; processes lost 2, failure notices sent 5, detection latency max 12.345 ms; \
                 other: zeta 1"
            ),
            "{line}"
        );
        let json = report.json(137);
        assert!(
            json.ends_with(
                "\"zeta\": 1, \"processes_lost\": 2, \"failure_notices_sent\": 5, \
                 \"detection_latency_us_max\": 12345, \"replicas_given_up\": 0, \
                 \"replicas_recovered\": 0, \"recovery_us_max\": 0}, \
                 \"exit_code\": 137}\n"
            ),
            "{json}"
        );
    }

    #[test]
    fn a_fault_free_message_logging_run_says_what_logging_did_not_network_zeros() {
        let mut report = FtReport::default();
        // What mpiexec adds under --msglog, zeros included.
        report
            .counters
            .insert("eventlog_determinants_stored".into(), 0);
        report.counters.insert("eventlog_restarts".into(), 0);
        report.add(&pairs(&[
            ("msglog_logged_messages", 10),
            ("msglog_logged_bytes", 1000),
            ("msglog_memory_bytes_max", 700),
            ("msglog_mapped_bytes_max", 4 << 20),
            ("msglog_determinants", 3),
        ]));
        report.add(&pairs(&[
            ("msglog_logged_messages", 5),
            ("msglog_logged_bytes", 500),
            ("msglog_memory_bytes_max", 900),
            ("msglog_mapped_bytes_max", 4 << 20),
        ]));
        // A peak is the largest rank's, not a sum.
        assert_eq!(report.get("msglog_memory_bytes_max"), 900);
        assert_eq!(report.get("msglog_logged_bytes"), 1500);
        let line = report.line();
        assert!(
            line.starts_with(
                "mpiexec: FT report: 2 ranks reported; message logging: 15 messages \
                 (1500 bytes) logged, log memory per rank max 900 bytes (4194304 mapped), \
                 0 bytes trimmed; determinants 3 (0 stored by the event logger); other: "
            ),
            "{line}"
        );
        assert!(!line.contains("fragments sent"), "{line}");
        assert!(!line.contains(" 0,") && !line.ends_with(" 0"), "{line}");
        // Zero ranks reporting (nothing sent) still reads as logging's line.
        let mut quiet = FtReport::default();
        quiet
            .counters
            .insert("eventlog_determinants_stored".into(), 0);
        assert_eq!(
            quiet.line(),
            "mpiexec: FT report: 0 ranks reported; message logging: 0 messages (0 bytes) \
             logged, log memory per rank max 0 bytes (0 mapped), 0 bytes trimmed; \
             determinants 0 (0 stored by the event logger)"
        );
        // A fault is still named, and network numbers that are not zero.
        report.launcher.processes_lost = 1;
        report.add(&pairs(&[
            ("frames_sent", 4),
            ("msglog_replayed_messages", 2),
        ]));
        let line = report.line();
        assert!(line.starts_with("mpiexec: FT report: 3 ranks reported; fragments sent 4,"));
        assert!(
            line.contains("; messages replayed 2; processes lost 1; other: "),
            "{line}"
        );
    }

    #[test]
    fn failover_time_is_seconds_rounded_to_the_millisecond() {
        assert_eq!(seconds_text(0), "0.000");
        assert_eq!(seconds_text(499_999), "0.000");
        assert_eq!(seconds_text(500_000), "0.001");
        assert_eq!(seconds_text(120_000_000), "0.120");
        assert_eq!(seconds_text(61_234_567_890), "61.235");
        assert_eq!(seconds_text(u64::MAX), "18446744073.710");
    }

    #[test]
    fn json_has_every_known_counter_then_the_others() {
        let mut report = FtReport::default();
        report.add(&pairs(&[
            ("frames_sent", 7),
            ("rails_failed", 1),
            ("new_one", 9),
        ]));
        report.add(&pairs(&[("frames_sent", 3)]));
        let text = report.json(3);
        assert_eq!(
            text,
            "{\"ranks_reported\": 2, \"counters\": {\"frames_sent\": 10, \
             \"frames_retransmitted\": 0, \"corrupt_caught\": 0, \"duplicates_dropped\": 0, \
             \"rails_failed\": 1, \"rails_recovered\": 0, \"failover_time_ns\": 0, \
             \"injected_dropped\": 0, \"injected_corrupted\": 0, \"injected_duplicated\": 0, \
             \"injected_delayed\": 0, \"injected_swallowed_rail_down\": 0, \
             \"tail_loss_probes\": 0, \"spurious_retransmissions\": 0, \"new_one\": 9, \
             \"processes_lost\": 0, \"failure_notices_sent\": 0, \"detection_latency_us_max\": 0, \
             \"replicas_given_up\": 0, \"replicas_recovered\": 0, \"recovery_us_max\": 0}, \
             \"exit_code\": 3}\n"
        );
        let empty = FtReport::default().json(-1);
        assert!(empty.starts_with("{\"ranks_reported\": 0, "), "{empty}");
        assert!(empty.ends_with(", \"exit_code\": -1}\n"), "{empty}");
        // ranks_reported, every known counter and mpiexec's six.
        assert_eq!(empty.matches(": 0").count(), 1 + KNOWN_COUNTERS.len() + 6);
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("plain_name"), "\"plain_name\"");
        assert_eq!(json_string("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    }

    #[test]
    fn write_json_replaces_the_file_whole() {
        let directory =
            std::env::temp_dir().join(format!("resmpi-ft-report-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join("report.json");
        std::fs::write(
            &path,
            "old contents that are longer than the new ones ............",
        )
        .unwrap();
        let mut report = FtReport::default();
        report.add(&pairs(&[("frames_sent", 1)]));
        report.write_json(&path, 0).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), report.json(0));
        assert_eq!(std::fs::read_dir(&directory).unwrap().count(), 1);
        assert!(report
            .write_json(&directory.join("missing").join("r.json"), 0)
            .is_err());
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
