//! The fault-injection language of `mpiexec --inject SPEC`, parsed into a
//! [`FaultSpec`] that [`crate::faulty::FaultyPath`] applies to a path.
//!
//! A spec holds two kinds of fault. Frame faults (drop, corrupt, duplicate,
//! delay, rail-down) act on the frames a path carries and are carried out by
//! [`crate::faulty::FaultyPath`]. Process faults (kill, host-down) end whole
//! processes: `mpiexec` carries out the timed ones and the library the
//! `sends=N` one; the path wrapper never sees them (they live in
//! [`FaultSpec::processes`], apart from [`FaultSpec::rules`]).
//!
//! The language lives apart from the wrapper so that `mpiexec` can check a
//! spec (and report a mistake naming the item) before it starts a single
//! rank, and so that the spec travels to every rank as its canonical text:
//! [`FaultSpec`]'s `Display` writes a string that `from_str` reads back to an
//! equal value.
//!
//! # Grammar
//!
//! ```text
//! spec     = "" | item ("," item)*
//! item     = fault [ "@ranks=" RANK "-" RANK ]     (not on seed)
//!          | process
//! fault    = "drop:" RATE          drop the frame
//!          | "corrupt:" RATE       flip one bit of header or payload
//!          | "duplicate:" RATE     send the frame twice
//!          | "delay:" DELAY        hold every frame this long
//!          | "rail-down:" RAIL "@" TIME [ "+" DURATION ]
//!          | "seed:" U64
//! process  = "kill:" TARGET "@" TIME          SIGKILL TARGET at TIME
//!          | "kill:" TARGET "@sends=" N       SIGKILL after its N-th send
//!          | "host-down:" HOST "@" TIME       SIGKILL every process on HOST
//! TARGET   = RANK [ "." REPLICA ]             (REPLICA 0 when absent)
//! N        = an integer >= 1
//! HOST     = a host name as given to --hosts (no `,` or blanks)
//! RATE     = a float in [0, 1]: 0.01, 1e-3, 1
//! DELAY    = a plain number of milliseconds (5, 0.25) or a duration
//! TIME, DURATION = NUMBER UNIT, NUMBER = digits ["." digits],
//!            UNIT = "s" | "ms" | "us" | "ns"          (2s, 500ms, 1.5s)
//! ```
//!
//! `@ranks=A-B` limits an item to traffic between ranks A and B, both
//! directions; A must not exceed B (`5-1` reads like a range written
//! backwards, so it is refused rather than guessed at). Without a DURATION a rail goes down for good. Blanks around
//! items are ignored. Without `seed:` the seed is 0, so a spec alone already
//! reproduces its faults run after run.
//!
//! # Several items of one kind
//!
//! For the per-frame faults (drop, corrupt, duplicate, delay) the *last*
//! matching item wins, like repeated command-line options:
//! `drop:1e-3,drop:0.1@ranks=0-1` drops 10 % between ranks 0 and 1 and 0.1 %
//! everywhere else. Rail-down windows add up: every matching window applies.

use std::fmt;
use std::str::FromStr;

/// An unordered pair of ranks: an item with this filter applies to traffic
/// from `first` to `second` and from `second` to `first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankPair {
    /// One end, as written in the spec.
    pub first: u32,
    /// The other end, as written in the spec.
    pub second: u32,
}

impl RankPair {
    /// Whether traffic between `local` and `peer` (either direction) is
    /// between this pair.
    pub fn contains(&self, local: u32, peer: u32) -> bool {
        (self.first == local && self.second == peer) || (self.first == peer && self.second == local)
    }
}

/// One fault of the language, without its rank filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// Drop each frame with this probability.
    Drop {
        /// Probability in `[0, 1]`.
        rate: f64,
    },
    /// Flip one bit of each frame (header or payload) with this probability.
    Corrupt {
        /// Probability in `[0, 1]`.
        rate: f64,
    },
    /// Send each frame twice with this probability.
    Duplicate {
        /// Probability in `[0, 1]`.
        rate: f64,
    },
    /// Hold every frame this long before it enters the path.
    Delay {
        /// Extra latency of every frame.
        delay_ns: u64,
    },
    /// Take rail `rail` down from `start_ns` (on the wrapper's clock) for
    /// `duration_ns`, or for good when that is `None`.
    RailDown {
        /// Rail index (the order of `--rails`).
        rail: u32,
        /// When the rail goes down.
        start_ns: u64,
        /// How long it stays down; `None` = until the end of the job.
        duration_ns: Option<u64>,
    },
}

/// One process of the job: a rank and, under replication, which copy of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessTarget {
    /// The MPI rank.
    pub rank: u32,
    /// The replica index; 0 (the only one) when the spec does not say.
    pub replica: u32,
}

/// When a `kill:` item strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillTrigger {
    /// This long after `mpiexec` started every rank (`kill:R@1.5s`).
    AfterTime {
        /// Time since the job started.
        at_ns: u64,
    },
    /// Right after the process's `send_count`-th send (`kill:R@sends=N`);
    /// the library raises SIGKILL on itself.
    AfterSends {
        /// N, at least 1.
        send_count: u64,
    },
}

/// A fault that ends processes rather than touching frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessFault {
    /// SIGKILL one process.
    Kill {
        /// Which process.
        target: ProcessTarget,
        /// When.
        trigger: KillTrigger,
    },
    /// SIGKILL every process placed on `host` at the same instant.
    HostDown {
        /// The host name, as given to `--hosts`.
        host: String,
        /// Time since the job started.
        at_ns: u64,
    },
}

/// One item of a spec: a fault and the pair of ranks it is limited to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultRule {
    /// What happens.
    pub fault: Fault,
    /// Between which ranks; `None` = between every pair.
    pub ranks: Option<RankPair>,
}

impl FaultRule {
    fn applies_to(&self, local: u32, peer: u32) -> bool {
        self.ranks.is_none_or(|pair| pair.contains(local, peer))
    }
}

/// A parsed `--inject` spec: the seed, the frame faults and the process
/// faults, each in spec order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultSpec {
    /// `seed:N`, if given. [`FaultSpec::seed_or_default`] gives 0 otherwise.
    pub seed: Option<u64>,
    /// Every frame-fault item, in the order written.
    pub rules: Vec<FaultRule>,
    /// Every process-fault item (kill, host-down), in the order written.
    pub processes: Vec<ProcessFault>,
}

/// The per-frame faults that apply to one (local, peer) pair after the
/// last-match-wins rule; all zero means "leave this pair alone".
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PairFaults {
    /// Probability that a frame is dropped.
    pub drop_rate: f64,
    /// Probability that a frame has one bit flipped.
    pub corrupt_rate: f64,
    /// Probability that a frame is sent twice.
    pub duplicate_rate: f64,
    /// Extra latency of every frame.
    pub delay_ns: u64,
}

impl PairFaults {
    /// Whether any per-frame fault is active.
    pub fn is_active(&self) -> bool {
        self.drop_rate > 0.0
            || self.corrupt_rate > 0.0
            || self.duplicate_rate > 0.0
            || self.delay_ns > 0
    }
}

/// A half-open interval `[start_ns, end_ns)` of the wrapper's clock during
/// which a rail carries nothing; `end_ns` = `None` means forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RailDownWindow {
    /// First instant the rail is down.
    pub start_ns: u64,
    /// First instant it is up again.
    pub end_ns: Option<u64>,
}

impl RailDownWindow {
    /// Whether `now_ns` falls inside the window.
    pub fn contains(&self, now_ns: u64) -> bool {
        now_ns >= self.start_ns && self.end_ns.is_none_or(|end_ns| now_ns < end_ns)
    }
}

impl FaultSpec {
    /// The seed to use: `seed:N`, or 0 when the spec has none.
    pub fn seed_or_default(&self) -> u64 {
        self.seed.unwrap_or(0)
    }

    /// Whether the spec injects nothing at all.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.processes.is_empty()
    }

    /// Whether the spec has a frame fault, i.e. anything for a path
    /// wrapper to do.
    pub fn has_frame_faults(&self) -> bool {
        !self.rules.is_empty()
    }

    /// The N of `kill:RANK@sends=N` for replica 0 of `rank`: the process
    /// kills itself right after its N-th send. The smallest N when several
    /// items name it; `None` when none does.
    pub fn kill_after_sends(&self, rank: u32) -> Option<u64> {
        self.kill_after_sends_of(ProcessTarget { rank, replica: 0 })
    }

    /// [`FaultSpec::kill_after_sends`] for any process.
    pub fn kill_after_sends_of(&self, target: ProcessTarget) -> Option<u64> {
        self.processes
            .iter()
            .filter_map(|fault| match fault {
                ProcessFault::Kill {
                    target: killed,
                    trigger: KillTrigger::AfterSends { send_count },
                } if *killed == target => Some(*send_count),
                _ => None,
            })
            .min()
    }

    /// The per-frame faults between `local` and `peer`: for each kind, the
    /// last item whose rank filter matches.
    pub fn faults_for_pair(&self, local: u32, peer: u32) -> PairFaults {
        let mut faults = PairFaults::default();
        for rule in self
            .rules
            .iter()
            .filter(|rule| rule.applies_to(local, peer))
        {
            match rule.fault {
                Fault::Drop { rate } => faults.drop_rate = rate,
                Fault::Corrupt { rate } => faults.corrupt_rate = rate,
                Fault::Duplicate { rate } => faults.duplicate_rate = rate,
                Fault::Delay { delay_ns } => faults.delay_ns = delay_ns,
                Fault::RailDown { .. } => {}
            }
        }
        faults
    }

    /// Every window during which `rail` is down between `local` and `peer`.
    pub fn rail_down_windows(&self, rail: u32, local: u32, peer: u32) -> Vec<RailDownWindow> {
        self.rules
            .iter()
            .filter(|rule| rule.applies_to(local, peer))
            .filter_map(|rule| match rule.fault {
                Fault::RailDown {
                    rail: down_rail,
                    start_ns,
                    duration_ns,
                } if down_rail == rail => Some(RailDownWindow {
                    start_ns,
                    end_ns: duration_ns.map(|duration_ns| start_ns.saturating_add(duration_ns)),
                }),
                _ => None,
            })
            .collect()
    }
}

/// Why a spec could not be parsed: which item, and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// 1-based position of the offending item among the comma-separated
    /// items.
    pub item_number: usize,
    /// The item as written (trimmed).
    pub item: String,
    /// What was wrong and what was expected.
    pub reason: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "--inject item {} `{}`: {}",
            self.item_number, self.item, self.reason
        )
    }
}

impl std::error::Error for SpecError {}

const KINDS_EXPECTED: &str = "expected one of drop:RATE, corrupt:RATE, duplicate:RATE, delay:MS, \
     rail-down:RAIL@TIME[+DURATION], kill:RANK[.REPLICA]@TIME, kill:RANK[.REPLICA]@sends=N, \
     host-down:HOST@TIME, seed:N";

impl FromStr for FaultSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<FaultSpec, SpecError> {
        let mut spec = FaultSpec::default();
        if text.trim().is_empty() {
            return Ok(spec);
        }
        for (index, raw_item) in text.split(',').enumerate() {
            let item = raw_item.trim();
            let error = |reason: String| SpecError {
                item_number: index + 1,
                item: item.to_string(),
                reason,
            };
            if item.is_empty() {
                return Err(error(format!("empty item; {KINDS_EXPECTED}")));
            }
            let (body, ranks) = match item.split_once("@ranks=") {
                Some((body, ranks_text)) => {
                    (body, Some(parse_rank_pair(ranks_text).map_err(error)?))
                }
                None => (item, None),
            };
            let Some((kind, value)) = body.split_once(':') else {
                return Err(error(format!(
                    "missing `:` after the fault kind; {KINDS_EXPECTED}"
                )));
            };
            let fault = match kind {
                "drop" => Fault::Drop {
                    rate: parse_rate(value).map_err(error)?,
                },
                "corrupt" => Fault::Corrupt {
                    rate: parse_rate(value).map_err(error)?,
                },
                "duplicate" => Fault::Duplicate {
                    rate: parse_rate(value).map_err(error)?,
                },
                "delay" => Fault::Delay {
                    delay_ns: parse_delay(value).map_err(error)?,
                },
                "rail-down" => parse_rail_down(value).map_err(error)?,
                "kill" | "host-down" => {
                    if ranks.is_some() {
                        return Err(error(format!(
                            "{kind} names its process and takes no @ranks= filter"
                        )));
                    }
                    let process = if kind == "kill" {
                        parse_kill(value)
                    } else {
                        parse_host_down(value)
                    };
                    spec.processes.push(process.map_err(error)?);
                    continue;
                }
                "seed" => {
                    if ranks.is_some() {
                        return Err(error(
                            "seed applies to the whole job and takes no @ranks= filter".into(),
                        ));
                    }
                    if spec.seed.is_some() {
                        return Err(error("seed given twice; give one seed:N".into()));
                    }
                    let seed = value.parse::<u64>().map_err(|_| {
                        error(format!(
                            "seed `{value}` is not an unsigned 64-bit integer; expected e.g. seed:42"
                        ))
                    })?;
                    spec.seed = Some(seed);
                    continue;
                }
                _ => {
                    return Err(error(format!(
                        "unknown fault kind `{kind}`; {KINDS_EXPECTED}"
                    )))
                }
            };
            spec.rules.push(FaultRule { fault, ranks });
        }
        Ok(spec)
    }
}

fn parse_rank_pair(text: &str) -> Result<RankPair, String> {
    let expected = "expected @ranks=A-B with two ranks, e.g. @ranks=0-1";
    let (first, second) = text
        .split_once('-')
        .ok_or_else(|| format!("rank filter `{text}` has no `-`; {expected}"))?;
    let parse = |rank: &str| {
        rank.parse::<u32>()
            .map_err(|_| format!("`{rank}` in rank filter `{text}` is not a rank; {expected}"))
    };
    let (first, second) = (parse(first)?, parse(second)?);
    // `A-B` reads like a range, and `5-1` is most often a range written
    // backwards: the filter names a pair, so the order is fixed to make
    // the spelling say one thing.
    if first > second {
        return Err(format!(
            "rank filter `{text}` names the higher rank first; write @ranks={second}-{first} \
             (a pair of ranks: traffic between {second} and {first}, both directions, not a range)"
        ));
    }
    Ok(RankPair { first, second })
}

fn parse_rate(text: &str) -> Result<f64, String> {
    let expected = "expected a probability in [0, 1] such as 0.01 or 1e-3";
    let rate = text
        .parse::<f64>()
        .map_err(|_| format!("rate `{text}` is not a number; {expected}"))?;
    // NaN fails both comparisons, so it lands here too.
    if !(0.0..=1.0).contains(&rate) {
        return Err(format!("rate `{text}` is outside [0, 1]; {expected}"));
    }
    Ok(rate)
}

/// `delay:` takes a plain number of milliseconds (the documented `delay:MS`)
/// or any duration with a unit.
fn parse_delay(text: &str) -> Result<u64, String> {
    if text.ends_with(|character: char| character.is_ascii_digit()) {
        return parse_decimal_scaled(text, 1_000_000).map_err(|reason| {
            format!("delay `{text}` {reason}; expected milliseconds (5, 0.5) or a duration (250us)")
        });
    }
    parse_duration_ns(text)
}

fn parse_rail_down(text: &str) -> Result<Fault, String> {
    let expected = "expected rail-down:RAIL@TIME[+DURATION], e.g. rail-down:1@2s+500ms";
    let (rail_text, when) = text
        .split_once('@')
        .ok_or_else(|| format!("no `@TIME` after the rail; {expected}"))?;
    let rail = rail_text
        .parse::<u32>()
        .map_err(|_| format!("rail `{rail_text}` is not a rail index; {expected}"))?;
    let (start_text, duration_text) = match when.split_once('+') {
        Some((start, duration)) => (start, Some(duration)),
        None => (when, None),
    };
    let start_ns = parse_duration_ns(start_text)?;
    let duration_ns = duration_text.map(parse_duration_ns).transpose()?;
    Ok(Fault::RailDown {
        rail,
        start_ns,
        duration_ns,
    })
}

fn parse_kill(text: &str) -> Result<ProcessFault, String> {
    let expected = "expected kill:RANK[.REPLICA]@TIME or kill:RANK[.REPLICA]@sends=N, \
                    e.g. kill:2@1.5s, kill:1.0@300ms, kill:3@sends=100";
    let (target_text, when) = text
        .split_once('@')
        .ok_or_else(|| format!("no `@TIME` or `@sends=N` after the rank; {expected}"))?;
    let (rank_text, replica_text) = match target_text.split_once('.') {
        Some((rank, replica)) => (rank, Some(replica)),
        None => (target_text, None),
    };
    let rank = rank_text
        .parse::<u32>()
        .map_err(|_| format!("rank `{rank_text}` is not a rank; {expected}"))?;
    let replica = match replica_text {
        Some(replica) => replica
            .parse::<u32>()
            .map_err(|_| format!("replica `{replica}` is not a replica index; {expected}"))?,
        None => 0,
    };
    let trigger = match when.strip_prefix("sends=") {
        Some(count_text) => {
            let send_count = count_text
                .parse::<u64>()
                .ok()
                .filter(|&count| count >= 1)
                .ok_or_else(|| {
                    format!("send count `{count_text}` is not an integer >= 1; {expected}")
                })?;
            KillTrigger::AfterSends { send_count }
        }
        None => KillTrigger::AfterTime {
            at_ns: parse_duration_ns(when)?,
        },
    };
    Ok(ProcessFault::Kill {
        target: ProcessTarget { rank, replica },
        trigger,
    })
}

fn parse_host_down(text: &str) -> Result<ProcessFault, String> {
    let expected = "expected host-down:HOST@TIME, e.g. host-down:node2@2s";
    // The last `@`: a host may be written user@host, as for ssh.
    let (host, when) = text
        .rsplit_once('@')
        .ok_or_else(|| format!("no `@TIME` after the host; {expected}"))?;
    let valid_host = !host.is_empty()
        && host
            .chars()
            .all(|character| character.is_ascii_graphic() && character != ',');
    if !valid_host {
        return Err(format!("`{host}` is not a host name; {expected}"));
    }
    Ok(ProcessFault::HostDown {
        host: host.to_string(),
        at_ns: parse_duration_ns(when)?,
    })
}

/// `NUMBER UNIT` with UNIT one of s, ms, us, ns, exactly (no float rounding).
fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let expected = "expected a time with a unit: s, ms, us or ns (2s, 500ms, 1.5s)";
    let digits_end = text
        .find(|character: char| !(character.is_ascii_digit() || character == '.'))
        .ok_or_else(|| format!("time `{text}` has no unit; {expected}"))?;
    let (number, unit) = text.split_at(digits_end);
    let nanoseconds_per_unit = match unit {
        "s" => 1_000_000_000,
        "ms" => 1_000_000,
        "us" => 1_000,
        "ns" => 1,
        _ => {
            return Err(format!(
                "time `{text}` has unknown unit `{unit}`; {expected}"
            ))
        }
    };
    parse_decimal_scaled(number, nanoseconds_per_unit)
        .map_err(|reason| format!("time `{text}` {reason}; {expected}"))
}

/// `digits[.digits]` times `scale`, exactly, as whole nanoseconds.
fn parse_decimal_scaled(number: &str, scale: u64) -> Result<u64, String> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let all_digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) || number.ends_with('.') {
        return Err("is not a plain decimal number".into());
    }
    let too_large = || "is too large".to_string();
    let whole_value: u64 = whole.parse().map_err(|_| too_large())?;
    let mut total = whole_value.checked_mul(scale).ok_or_else(too_large)?;
    let mut place = scale;
    for digit in fraction.bytes() {
        if !place.is_multiple_of(10) {
            return Err("is finer than a nanosecond".into());
        }
        place /= 10;
        total = total
            .checked_add(u64::from(digit - b'0') * place)
            .ok_or_else(too_large)?;
    }
    Ok(total)
}

/// The largest unit that writes `duration_ns` exactly.
struct DurationText(u64);

impl fmt::Display for DurationText {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanoseconds = self.0;
        for (scale, unit) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
            if nanoseconds != 0 && nanoseconds.is_multiple_of(scale) {
                return write!(formatter, "{}{unit}", nanoseconds / scale);
            }
        }
        write!(formatter, "{nanoseconds}ns")
    }
}

impl fmt::Display for FaultRule {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `{}` on f64 writes the shortest text that parses back to the same
        // value, so rates round-trip exactly.
        match self.fault {
            Fault::Drop { rate } => write!(formatter, "drop:{rate}")?,
            Fault::Corrupt { rate } => write!(formatter, "corrupt:{rate}")?,
            Fault::Duplicate { rate } => write!(formatter, "duplicate:{rate}")?,
            Fault::Delay { delay_ns } => write!(formatter, "delay:{}", DurationText(delay_ns))?,
            Fault::RailDown {
                rail,
                start_ns,
                duration_ns,
            } => {
                write!(formatter, "rail-down:{rail}@{}", DurationText(start_ns))?;
                if let Some(duration_ns) = duration_ns {
                    write!(formatter, "+{}", DurationText(duration_ns))?;
                }
            }
        }
        if let Some(pair) = self.ranks {
            write!(formatter, "@ranks={}-{}", pair.first, pair.second)?;
        }
        Ok(())
    }
}

impl fmt::Display for ProcessTarget {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.rank)?;
        if self.replica != 0 {
            write!(formatter, ".{}", self.replica)?;
        }
        Ok(())
    }
}

impl fmt::Display for ProcessFault {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessFault::Kill {
                target,
                trigger: KillTrigger::AfterTime { at_ns },
            } => write!(formatter, "kill:{target}@{}", DurationText(*at_ns)),
            ProcessFault::Kill {
                target,
                trigger: KillTrigger::AfterSends { send_count },
            } => write!(formatter, "kill:{target}@sends={send_count}"),
            ProcessFault::HostDown { host, at_ns } => {
                write!(formatter, "host-down:{host}@{}", DurationText(*at_ns))
            }
        }
    }
}

impl fmt::Display for FaultSpec {
    /// The canonical text: the seed, then the frame faults, then the
    /// process faults, each group in spec order.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut separator = "";
        if let Some(seed) = self.seed {
            write!(formatter, "seed:{seed}")?;
            separator = ",";
        }
        for rule in &self.rules {
            write!(formatter, "{separator}{rule}")?;
            separator = ",";
        }
        for process in &self.processes {
            write!(formatter, "{separator}{process}")?;
            separator = ",";
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> FaultSpec {
        text.parse()
            .unwrap_or_else(|error| panic!("`{text}` should parse: {error}"))
    }

    fn parse_error(text: &str) -> SpecError {
        match text.parse::<FaultSpec>() {
            Ok(spec) => panic!("`{text}` should not parse, got {spec:?}"),
            Err(error) => error,
        }
    }

    #[test]
    fn every_fault_kind_parses_to_its_value() {
        let spec = parse(
            "drop:1e-2@ranks=0-1, corrupt:0.001 ,duplicate:1,delay:5,\
             rail-down:1@2s+500ms,rail-down:0@1.5s,seed:42",
        );
        assert_eq!(spec.seed, Some(42));
        let pair = Some(RankPair {
            first: 0,
            second: 1,
        });
        assert_eq!(
            spec.rules,
            vec![
                FaultRule {
                    fault: Fault::Drop { rate: 0.01 },
                    ranks: pair
                },
                FaultRule {
                    fault: Fault::Corrupt { rate: 0.001 },
                    ranks: None
                },
                FaultRule {
                    fault: Fault::Duplicate { rate: 1.0 },
                    ranks: None
                },
                FaultRule {
                    fault: Fault::Delay {
                        delay_ns: 5_000_000
                    },
                    ranks: None
                },
                FaultRule {
                    fault: Fault::RailDown {
                        rail: 1,
                        start_ns: 2_000_000_000,
                        duration_ns: Some(500_000_000)
                    },
                    ranks: None
                },
                FaultRule {
                    fault: Fault::RailDown {
                        rail: 0,
                        start_ns: 1_500_000_000,
                        duration_ns: None
                    },
                    ranks: None
                },
            ]
        );
    }

    #[test]
    fn delay_takes_milliseconds_or_a_duration_with_a_unit() {
        let delay_of = |text: &str| match parse(text).rules[0].fault {
            Fault::Delay { delay_ns } => delay_ns,
            other => panic!("{other:?}"),
        };
        assert_eq!(delay_of("delay:0.25"), 250_000);
        assert_eq!(delay_of("delay:250us"), 250_000);
        assert_eq!(delay_of("delay:2s"), 2_000_000_000);
        assert_eq!(delay_of("delay:7ns"), 7);
    }

    #[test]
    fn rail_down_with_a_rank_filter_keeps_both_at_signs_apart() {
        let spec = parse("rail-down:2@10ms+1us@ranks=3-5");
        assert_eq!(
            spec.rules[0],
            FaultRule {
                fault: Fault::RailDown {
                    rail: 2,
                    start_ns: 10_000_000,
                    duration_ns: Some(1_000)
                },
                ranks: Some(RankPair {
                    first: 3,
                    second: 5
                }),
            }
        );
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "",
            "seed:7",
            "drop:0.01@ranks=0-1,corrupt:1e-3,duplicate:0.5,delay:5,seed:9",
            "rail-down:1@2s+500ms,rail-down:0@1.5s,rail-down:3@0ns+1ns@ranks=1-2",
            "delay:1.000001,drop:0,corrupt:1,duplicate:0.1234567890123",
            "drop:1e-300",
            "kill:2@1.5s,kill:1@300ms,kill:0.1@0ns,kill:3@sends=1,kill:4.2@sends=99",
            "seed:1,host-down:node-2@2s,drop:0.1,kill:0@1us,host-down:me@[fe80::1]@10ms",
        ] {
            let spec = parse(text);
            let written = spec.to_string();
            assert_eq!(parse(&written), spec, "`{text}` was written as `{written}`");
            assert_eq!(parse(&written).to_string(), written);
        }
        assert_eq!(
            parse("seed:3,drop:1e-3@ranks=0-1,rail-down:1@1500ms+60s,delay:0.5").to_string(),
            "seed:3,drop:0.001@ranks=0-1,rail-down:1@1500ms+60s,delay:500us"
        );
    }

    #[test]
    fn bad_specs_name_the_item_and_what_was_expected() {
        let cases: &[(&str, usize, &str)] = &[
            ("drop:2", 1, "outside [0, 1]"),
            ("drop:-0.1", 1, "outside [0, 1]"),
            ("drop:NaN", 1, "outside [0, 1]"),
            ("drop:abc", 1, "is not a number"),
            ("drop:0.1,,corrupt:0.1", 2, "empty item"),
            ("drop:0.1,", 2, "empty item"),
            ("drop", 1, "missing `:`"),
            ("lose:0.1", 1, "unknown fault kind `lose`"),
            ("delay:5parsecs", 1, "unknown unit `parsecs`"),
            ("delay:-5", 1, "not a plain decimal"),
            ("delay:1.ms", 1, "not a plain decimal"),
            ("delay:0.0000001", 1, "finer than a nanosecond"),
            ("delay:99999999999999999999", 1, "too large"),
            ("rail-down:1", 1, "no `@TIME`"),
            ("rail-down:x@1s", 1, "not a rail index"),
            ("rail-down:1@2", 1, "has no unit"),
            ("rail-down:1@2s+", 1, "has no unit"),
            ("rail-down:1@2s+3h", 1, "unknown unit `h`"),
            ("drop:0.1@ranks=0", 1, "has no `-`"),
            ("drop:0.1@ranks=0-x", 1, "`x` in rank filter"),
            ("drop:0.1@ranks=5-1", 1, "write @ranks=1-5"),
            ("drop:0,delay:5@ranks=2-0", 2, "names the higher rank first"),
            ("seed:1@ranks=0-1", 1, "no @ranks= filter"),
            ("seed:1,seed:2", 2, "seed given twice"),
            ("seed:-1", 1, "not an unsigned 64-bit integer"),
            ("kill:1", 1, "no `@TIME` or `@sends=N`"),
            ("kill:x@1s", 1, "rank `x` is not a rank"),
            ("kill:-1@1s", 1, "rank `-1` is not a rank"),
            ("kill:1.x@1s", 1, "replica `x` is not a replica index"),
            ("kill:1.@1s", 1, "replica `` is not a replica index"),
            ("kill:1@2", 1, "has no unit"),
            ("kill:1@sends=0", 1, "not an integer >= 1"),
            ("kill:1@sends=", 1, "not an integer >= 1"),
            ("kill:1@sends=-3", 1, "not an integer >= 1"),
            ("drop:0,kill:1@1s@ranks=0-1", 2, "takes no @ranks= filter"),
            ("host-down:node1", 1, "no `@TIME` after the host"),
            ("host-down:@1s", 1, "is not a host name"),
            ("host-down:a b@1s", 1, "is not a host name"),
            ("host-down:node1@soon", 1, "unknown unit `soon`"),
            ("host-down:n@1s@ranks=0-1", 1, "takes no @ranks= filter"),
        ];
        for (text, item_number, reason_fragment) in cases {
            let error = parse_error(text);
            assert_eq!(error.item_number, *item_number, "{text}: {error}");
            assert!(
                error.reason.contains(reason_fragment),
                "`{text}` gave `{error}`, expected it to mention `{reason_fragment}`"
            );
            assert!(error.to_string().starts_with("--inject item "), "{error}");
        }
    }

    #[test]
    fn process_faults_parse_apart_from_the_frame_rules() {
        let spec = parse("kill:2@1.5s, kill:1.3@sends=40,host-down:user@node7@300ms,drop:0.5");
        assert_eq!(spec.rules.len(), 1);
        assert_eq!(
            spec.processes,
            vec![
                ProcessFault::Kill {
                    target: ProcessTarget {
                        rank: 2,
                        replica: 0
                    },
                    trigger: KillTrigger::AfterTime {
                        at_ns: 1_500_000_000
                    },
                },
                ProcessFault::Kill {
                    target: ProcessTarget {
                        rank: 1,
                        replica: 3
                    },
                    trigger: KillTrigger::AfterSends { send_count: 40 },
                },
                ProcessFault::HostDown {
                    host: "user@node7".to_string(),
                    at_ns: 300_000_000,
                },
            ]
        );
        assert!(spec.has_frame_faults());
        let only_processes = parse("kill:0@1s");
        assert!(!only_processes.has_frame_faults());
        assert!(!only_processes.is_empty());
        // Frame faults between any pair are untouched by process items.
        assert!(!only_processes.faults_for_pair(0, 1).is_active());
        assert!(only_processes.rail_down_windows(0, 0, 1).is_empty());
    }

    #[test]
    fn kill_after_sends_is_the_smallest_n_for_replica_zero_of_that_rank() {
        let spec =
            parse("kill:1@sends=50,kill:1@sends=7,kill:1.1@sends=2,kill:2@1s,kill:0@sends=3");
        assert_eq!(spec.kill_after_sends(1), Some(7));
        assert_eq!(spec.kill_after_sends(0), Some(3));
        assert_eq!(spec.kill_after_sends(2), None);
        assert_eq!(spec.kill_after_sends(5), None);
        assert_eq!(
            spec.kill_after_sends_of(ProcessTarget {
                rank: 1,
                replica: 1
            }),
            Some(2)
        );
        assert_eq!(
            parse("kill:1.0@sends=4").to_string(),
            "kill:1@sends=4",
            "replica 0 is the default and is not written"
        );
    }

    #[test]
    fn last_matching_item_wins_and_filters_apply_both_ways() {
        let spec = parse("drop:1e-3,drop:0.1@ranks=0-1,delay:5@ranks=1-2,corrupt:0.2");
        let pair_0_1 = spec.faults_for_pair(1, 0);
        assert_eq!(pair_0_1.drop_rate, 0.1);
        assert_eq!(pair_0_1.corrupt_rate, 0.2);
        assert_eq!(pair_0_1.delay_ns, 0);
        let pair_0_2 = spec.faults_for_pair(0, 2);
        assert_eq!(pair_0_2.drop_rate, 1e-3);
        assert_eq!(spec.faults_for_pair(2, 1).delay_ns, 5_000_000);
        assert!(!parse("").faults_for_pair(0, 1).is_active());
    }

    #[test]
    fn rail_down_windows_are_half_open_and_filtered_by_rail_and_pair() {
        let spec = parse("rail-down:1@1ms+2ms,rail-down:1@10ms@ranks=0-1,rail-down:0@0ns");
        let windows = spec.rail_down_windows(1, 1, 0);
        assert_eq!(windows.len(), 2);
        assert!(!windows[0].contains(999_999));
        assert!(windows[0].contains(1_000_000));
        assert!(windows[0].contains(2_999_999));
        assert!(!windows[0].contains(3_000_000));
        assert!(windows[1].contains(u64::MAX));
        assert_eq!(spec.rail_down_windows(1, 0, 2).len(), 1);
        assert_eq!(spec.rail_down_windows(0, 5, 6).len(), 1);
        assert!(spec.rail_down_windows(2, 0, 1).is_empty());
    }
}
