//! The rails of one link: which paths to the peer are alive, which one the
//! next frame takes, and when a rail needs a heartbeat or is declared down.
//!
//! Why per rail and per peer (LA-MPI's paths, NewMadeleine's multirail): a
//! NIC, cable or switch port can die while the others carry on, and only the
//! traffic to this peer tells us. Evidence of life comes in two kinds and a
//! rail needs both:
//! - **inbound**: any valid frame received on the rail;
//! - **outbound**: an acknowledgement of a frame transmitted once, on this
//!   rail (Karn: a retransmitted frame says nothing about which copy
//!   arrived), or the answer, on this rail, to a probe sent on it.
//!
//! A live rail whose outbound direction nothing proved for a heartbeat
//! interval gets a probe; the peer answers probes at once on the rail they
//! came from (from its progress thread, whatever the application does). A
//! rail with no inbound or no outbound evidence for the silence timeout is
//! marked down. A down rail is probed at a slower pace (sooner if traffic
//! arrives on it) and comes back up when a probe is answered on it: inbound
//! traffic alone does not prove that our frames get through. With one rail
//! nothing is watched: the link behaves as a single-path link.
//!
//! This module decides; the link (`link.rs`) builds the frames, moves unacked
//! frames off a failed rail and reports events.

use crate::config::{ReliableConfig, StripePolicy, RAIL_COUNT_MAX};

#[derive(Clone, Copy, Debug)]
struct Rail {
    up: bool,
    /// Last valid frame received on the rail.
    last_inbound_ns: u64,
    /// Last proof that our frames get through on the rail.
    last_outbound_proof_ns: u64,
    /// Last probe sent on the rail (`None`: never).
    last_probe_ns: Option<u64>,
    /// The rail is down and something arrived on it since the last probe:
    /// probe again at heartbeat pace rather than the slow down-rail pace.
    inbound_while_down: bool,
    /// The peer probed us on this rail: answer on it.
    answer_due: bool,
    /// The rail went down at this time with unacked frames on it; cleared
    /// by the first acknowledgement of one of them after failover.
    failover_started_ns: Option<u64>,
}

/// State of every rail of one link.
#[derive(Debug)]
pub(crate) struct RailSet {
    rails: Vec<Rail>,
    policy: StripePolicy,
    watched: bool,
    heartbeat_interval_ns: u64,
    silence_timeout_ns: u64,
    down_probe_interval_ns: u64,
    /// Evidence clocks start at the first call that tells the time.
    started: bool,
    /// Next rail to try under round robin.
    next_rail: u32,
}

impl RailSet {
    pub fn new(config: &ReliableConfig) -> RailSet {
        assert!(
            (1..=RAIL_COUNT_MAX).contains(&config.rail_count),
            "rail_count {} outside 1..={RAIL_COUNT_MAX}",
            config.rail_count
        );
        let rail = Rail {
            up: true,
            last_inbound_ns: 0,
            last_outbound_proof_ns: 0,
            last_probe_ns: None,
            inbound_while_down: false,
            answer_due: false,
            failover_started_ns: None,
        };
        RailSet {
            rails: vec![rail; config.rail_count as usize],
            policy: config.stripe_policy,
            watched: config.rails_are_watched(),
            heartbeat_interval_ns: config.heartbeat_interval_ns.max(1),
            silence_timeout_ns: config.rail_silence_timeout_ns.max(1),
            down_probe_interval_ns: config.down_rail_probe_interval_ns.max(1),
            started: false,
            next_rail: 0,
        }
    }

    /// Start the evidence clocks at the first known time: a link created long
    /// before its first use must not find its rails silent.
    pub fn start(&mut self, now_ns: u64) {
        if self.started {
            return;
        }
        self.started = true;
        for rail in &mut self.rails {
            rail.last_inbound_ns = now_ns;
            rail.last_outbound_proof_ns = now_ns;
        }
    }

    pub fn count(&self) -> u32 {
        self.rails.len() as u32
    }

    pub fn is_up(&self, rail: u32) -> bool {
        self.rails[rail as usize].up
    }

    pub fn live_count(&self) -> u32 {
        self.rails.iter().filter(|rail| rail.up).count() as u32
    }

    /// The live rail the next frame takes, per the stripe policy, avoiding
    /// `avoid` (the rail a retransmitted frame failed on) when another rail
    /// is live. `None` when every rail is down.
    pub fn choose(&mut self, avoid: Option<u32>) -> Option<u32> {
        let count = self.count();
        let acceptable = |rail: u32, rails: &[Rail]| rails[rail as usize].up && Some(rail) != avoid;
        let chosen = match self.policy {
            StripePolicy::RoundRobin | StripePolicy::Fragments => {
                let start = self.next_rail;
                let found = (0..count)
                    .map(|offset| (start + offset) % count)
                    .find(|&rail| acceptable(rail, &self.rails));
                if let Some(rail) = found {
                    self.next_rail = (rail + 1) % count;
                }
                found
            }
            StripePolicy::Off => (0..count).find(|&rail| acceptable(rail, &self.rails)),
        };
        chosen.or_else(|| avoid.filter(|&rail| self.is_up(rail)))
    }

    /// A valid frame arrived on `rail`.
    pub fn note_inbound(&mut self, now_ns: u64, rail: u32) {
        let rail = &mut self.rails[rail as usize];
        rail.last_inbound_ns = rail.last_inbound_ns.max(now_ns);
        if !rail.up {
            rail.inbound_while_down = true;
        }
    }

    /// The peer acknowledged a frame sent once, on `rail`.
    pub fn note_outbound_proof(&mut self, now_ns: u64, rail: u32) {
        let rail = &mut self.rails[rail as usize];
        rail.last_outbound_proof_ns = rail.last_outbound_proof_ns.max(now_ns);
    }

    /// The peer probed us on `rail`: an answer is due there.
    pub fn note_probe_received(&mut self, rail: u32) {
        self.rails[rail as usize].answer_due = true;
    }

    /// The peer answered, on `rail`, a probe we sent on it: both directions
    /// work. Returns true if that brought the rail back up.
    pub fn note_probe_answered(&mut self, now_ns: u64, rail: u32) -> bool {
        self.note_outbound_proof(now_ns, rail);
        let rail = &mut self.rails[rail as usize];
        if rail.up {
            return false;
        }
        rail.up = true;
        rail.inbound_while_down = false;
        rail.failover_started_ns = None;
        rail.last_inbound_ns = now_ns;
        rail.last_outbound_proof_ns = now_ns;
        true
    }

    /// Mark `rail` down. Returns false if it already was.
    pub fn mark_down(&mut self, now_ns: u64, rail: u32) -> bool {
        let rail = &mut self.rails[rail as usize];
        if !rail.up {
            return false;
        }
        rail.up = false;
        rail.inbound_while_down = false;
        // The next probe goes out a slow interval from now.
        rail.last_probe_ns = Some(now_ns);
        true
    }

    /// Unacked frames were moved off `rail`, which went down at `now_ns`.
    pub fn note_failover_started(&mut self, now_ns: u64, rail: u32) {
        self.rails[rail as usize].failover_started_ns = Some(now_ns);
    }

    /// A frame moved off `rail` was acknowledged: the failover of `rail` is
    /// over. Returns how long it took, the first time only.
    pub fn note_failover_frame_acked(&mut self, now_ns: u64, rail: u32) -> Option<u64> {
        let started_ns = self.rails[rail as usize].failover_started_ns.take()?;
        Some(now_ns.saturating_sub(started_ns))
    }

    /// Live rails silent for the timeout (no inbound or no outbound
    /// evidence), lowest first. Nothing when rails are not watched.
    pub fn silent_rails(&self, now_ns: u64) -> Vec<u32> {
        if !self.watched || !self.started {
            return Vec::new();
        }
        (0..self.count())
            .filter(|&rail| {
                self.is_up(rail)
                    && self
                        .silence_deadline_ns(&self.rails[rail as usize])
                        .is_some_and(|deadline_ns| deadline_ns <= now_ns)
            })
            .collect()
    }

    fn silence_deadline_ns(&self, rail: &Rail) -> Option<u64> {
        if !self.watched || !self.started || !rail.up {
            return None;
        }
        let oldest_evidence_ns = rail.last_inbound_ns.min(rail.last_outbound_proof_ns);
        Some(oldest_evidence_ns.saturating_add(self.silence_timeout_ns))
    }

    fn probe_due_ns(&self, rail: &Rail) -> Option<u64> {
        if !self.watched || !self.started {
            return None;
        }
        if rail.up {
            let last_ns = rail
                .last_outbound_proof_ns
                .max(rail.last_probe_ns.unwrap_or(0));
            return Some(last_ns.saturating_add(self.heartbeat_interval_ns));
        }
        let interval_ns = if rail.inbound_while_down {
            self.heartbeat_interval_ns
        } else {
            self.down_probe_interval_ns
        };
        Some(rail.last_probe_ns.unwrap_or(0).saturating_add(interval_ns))
    }

    /// A rail owed an answer to the peer's probe, if any; the debt is paid.
    pub fn take_answer(&mut self) -> Option<u32> {
        let rail = self.rails.iter().position(|rail| rail.answer_due)?;
        self.rails[rail].answer_due = false;
        Some(rail as u32)
    }

    /// A rail due for a probe at `now_ns`, if any; the probe is noted sent.
    pub fn take_due_probe(&mut self, now_ns: u64) -> Option<u32> {
        let rail = (0..self.rails.len()).find(|&rail| {
            self.probe_due_ns(&self.rails[rail])
                .is_some_and(|due_ns| due_ns <= now_ns)
        })?;
        let rail_state = &mut self.rails[rail];
        rail_state.last_probe_ns = Some(now_ns);
        rail_state.inbound_while_down = false;
        Some(rail as u32)
    }

    /// Earliest time a rail needs attention: an answer (at once), a probe, or
    /// a silence check.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        self.rails
            .iter()
            .flat_map(|rail| {
                [
                    rail.answer_due.then_some(0),
                    self.probe_due_ns(rail),
                    self.silence_deadline_ns(rail),
                ]
            })
            .flatten()
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rails(count: u32, policy: StripePolicy) -> RailSet {
        let mut set = RailSet::new(&ReliableConfig {
            rail_count: count,
            stripe_policy: policy,
            heartbeat_interval_ns: 10,
            rail_silence_timeout_ns: 50,
            down_rail_probe_interval_ns: 30,
            ..ReliableConfig::default()
        });
        set.start(0);
        set
    }

    #[test]
    fn round_robin_skips_down_rails_and_the_rail_to_avoid() {
        let mut set = rails(3, StripePolicy::RoundRobin);
        let picks: Vec<Option<u32>> = (0..4).map(|_| set.choose(None)).collect();
        assert_eq!(picks, [Some(0), Some(1), Some(2), Some(0)]);
        assert!(set.mark_down(5, 1));
        let picks: Vec<Option<u32>> = (0..3).map(|_| set.choose(None)).collect();
        assert_eq!(picks, [Some(2), Some(0), Some(2)]);
        assert_eq!(set.choose(Some(0)), Some(2));
        assert!(set.mark_down(5, 2));
        // The only live rail is the one to avoid: use it anyway.
        assert_eq!(set.choose(Some(0)), Some(0));
        assert!(set.mark_down(5, 0));
        assert_eq!(set.choose(None), None);
    }

    #[test]
    fn stripe_off_uses_the_lowest_live_rail() {
        let mut set = rails(2, StripePolicy::Off);
        assert_eq!((set.choose(None), set.choose(None)), (Some(0), Some(0)));
        assert_eq!(set.choose(Some(0)), Some(1));
        set.mark_down(1, 0);
        assert_eq!(set.choose(None), Some(1));
    }

    #[test]
    fn unproven_rail_is_probed_then_declared_down_when_silent() {
        let mut set = rails(2, StripePolicy::RoundRobin);
        assert_eq!(set.next_deadline_ns(), Some(10));
        assert_eq!(set.take_due_probe(10), Some(0));
        assert_eq!(set.take_due_probe(10), Some(1));
        assert_eq!(set.take_due_probe(10), None);
        // Rail 0 answers and keeps receiving; rail 1 stays silent.
        set.note_probe_answered(12, 0);
        set.note_inbound(40, 0);
        set.note_outbound_proof(40, 0);
        assert_eq!(set.silent_rails(49), Vec::<u32>::new());
        assert_eq!(set.silent_rails(50), vec![1]);
    }

    #[test]
    fn down_rail_is_probed_slowly_and_comes_back_on_an_answer() {
        let mut set = rails(2, StripePolicy::RoundRobin);
        set.mark_down(100, 1);
        assert_eq!(set.probe_due_ns(&set.rails[1]), Some(130));
        // Traffic on the dead rail: probe at heartbeat pace.
        set.note_inbound(105, 1);
        assert_eq!(set.probe_due_ns(&set.rails[1]), Some(110));
        assert!(set.note_probe_answered(115, 1));
        assert!(set.is_up(1));
        assert!(!set.note_probe_answered(116, 1));
    }

    #[test]
    fn a_single_rail_is_never_probed_nor_declared_silent() {
        let set = rails(1, StripePolicy::RoundRobin);
        assert_eq!(set.next_deadline_ns(), None);
        assert!(set.silent_rails(u64::MAX).is_empty());
    }
}
