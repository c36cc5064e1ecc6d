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
//! came from (from its progress thread, whatever the application does).
//!
//! Silence is judged *relative to the other rails* (issue 3: "acks stop
//! while other rails still work"): a rail is marked down when it has been
//! silent for the silence timeout during a period in which another live
//! rail kept working, i.e. had no gap in its evidence longer than half the
//! timeout. A rail dies alone; a peer that is merely slow (descheduled
//! on an oversubscribed node, stopped in a debugger, swapping) goes quiet on
//! every rail at once and comes back on them one after the other, and must
//! not lose its rails for it. Only when every live rail has been silent for
//! the much longer peer silence timeout are they all marked down (the peer
//! is then unreachable). So the silence timeout can be short (100 ms on real
//! processes) without false alarms under load. A down rail is probed at a slower pace (sooner if traffic
//! arrives on it) and comes back up when a probe is answered on it: inbound
//! traffic alone does not prove that our frames get through. With one rail
//! nothing is watched: the link behaves as a single-path link.
//!
//! This module decides; the link (`link.rs`) builds the frames, moves unacked
//! frames off a failed rail and reports events.

use crate::config::{ReliableConfig, StripePolicy, RAIL_COUNT_MAX};
use crate::rtt::RttEstimator;

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
    /// Start of the current run of evidence without a gap longer than half
    /// the silence timeout: since when the rail has worked continuously.
    working_since_ns: u64,
    /// Round-trip time measured on the rail.
    rtt: RttEstimator,
}

/// State of every rail of one link.
#[derive(Debug)]
pub(crate) struct RailSet {
    rails: Vec<Rail>,
    policy: StripePolicy,
    watched: bool,
    heartbeat_interval_ns: u64,
    silence_timeout_ns: u64,
    peer_silence_timeout_ns: u64,
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
            working_since_ns: 0,
            rtt: RttEstimator::default(),
        };
        RailSet {
            rails: vec![rail; config.rail_count as usize],
            policy: config.stripe_policy,
            watched: config.rails_are_watched(),
            heartbeat_interval_ns: config.heartbeat_interval_ns.max(1),
            silence_timeout_ns: config.rail_silence_timeout_ns.max(1),
            peer_silence_timeout_ns: config
                .peer_silence_timeout_ns
                .max(config.rail_silence_timeout_ns)
                .max(1),
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
            rail.working_since_ns = now_ns;
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

    /// Longest gap in a working rail's evidence: half the silence timeout,
    /// room for a few heartbeats (a fifth of it on real processes) to be
    /// lost or late.
    fn working_gap_ns(&self) -> u64 {
        self.silence_timeout_ns / 2
    }

    /// The round-trip time measured on `rail`.
    pub fn rtt(&self, rail: u32) -> &RttEstimator {
        &self.rails[rail as usize].rtt
    }

    /// An acknowledgement timed a round trip of `rtt_ns` on `rail`.
    pub fn note_rtt_sample(&mut self, rail: u32, rtt_ns: u64) {
        self.rails[rail as usize].rtt.sample(rtt_ns);
    }

    /// A valid frame arrived on `rail`.
    pub fn note_inbound(&mut self, now_ns: u64, rail: u32) {
        let gap_ns = self.working_gap_ns();
        let rail = &mut self.rails[rail as usize];
        let before_ns = Self::evidence_ns(rail);
        rail.last_inbound_ns = rail.last_inbound_ns.max(now_ns);
        Self::note_evidence(rail, before_ns, gap_ns);
        if !rail.up {
            rail.inbound_while_down = true;
        }
    }

    /// The peer acknowledged a frame sent once, on `rail`.
    pub fn note_outbound_proof(&mut self, now_ns: u64, rail: u32) {
        let gap_ns = self.working_gap_ns();
        let rail = &mut self.rails[rail as usize];
        let before_ns = Self::evidence_ns(rail);
        rail.last_outbound_proof_ns = rail.last_outbound_proof_ns.max(now_ns);
        Self::note_evidence(rail, before_ns, gap_ns);
    }

    /// The rail's evidence moved on from `before_ns`: a jump of more than
    /// `gap_ns` means it had stopped working meanwhile, and works again
    /// from now.
    fn note_evidence(rail: &mut Rail, before_ns: u64, gap_ns: u64) {
        let evidence_ns = Self::evidence_ns(rail);
        if evidence_ns > before_ns.saturating_add(gap_ns) {
            rail.working_since_ns = evidence_ns;
        }
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
        rail.working_since_ns = now_ns;
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

    /// Live rails to mark down now, lowest first: those silent for the
    /// silence timeout while another live rail was heard from after it, or,
    /// when every live rail is that silent, all of them once the peer
    /// silence timeout passed. Nothing when rails are not watched.
    pub fn silent_rails(&self, now_ns: u64) -> Vec<u32> {
        if !self.watched || !self.started {
            return Vec::new();
        }
        (0..self.count())
            .filter(|&rail| {
                self.silence_deadline_ns(rail)
                    .is_some_and(|deadline_ns| deadline_ns <= now_ns)
            })
            .collect()
    }

    /// Oldest of a rail's two kinds of evidence: when it was last known to
    /// work both ways.
    fn evidence_ns(rail: &Rail) -> u64 {
        rail.last_inbound_ns.min(rail.last_outbound_proof_ns)
    }

    /// When live rail `index` is to be marked down if nothing new arrives
    /// (new evidence on any rail re-evaluates it):
    /// - once it has been silent for the silence timeout within a period in
    ///   which another live rail worked: that rail worked continuously from
    ///   before the silent stretch began (or from when the rail fell
    ///   silent, whichever is later) and still had fresh evidence (no older
    ///   than the working gap) when the stretch reached the timeout;
    /// - else once it has been silent for the peer silence timeout.
    ///
    /// A peer that stops on every rail at once leaves no rail working during
    /// the others' silence: when it comes back, each rail's run of evidence
    /// starts anew, so the rail it answers on last is not singled out.
    fn silence_deadline_ns(&self, index: u32) -> Option<u64> {
        let rail = &self.rails[index as usize];
        if !self.watched || !self.started || !rail.up {
            return None;
        }
        let evidence_ns = Self::evidence_ns(rail);
        let fresh_ns = self.working_gap_ns();
        let relative_ns = (0..self.count())
            .filter(|&other| other != index && self.is_up(other))
            .map(|other| &self.rails[other as usize])
            .filter_map(|other| {
                let silent_from_ns = evidence_ns.max(other.working_since_ns);
                let candidate_ns = silent_from_ns.saturating_add(self.silence_timeout_ns);
                (candidate_ns < Self::evidence_ns(other).saturating_add(fresh_ns))
                    .then_some(candidate_ns)
            })
            .min();
        let absolute_ns = evidence_ns.saturating_add(self.peer_silence_timeout_ns);
        Some(relative_ns.map_or(absolute_ns, |relative_ns| relative_ns.min(absolute_ns)))
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
            .flat_map(|rail| [rail.answer_due.then_some(0), self.probe_due_ns(rail)])
            .chain((0..self.count()).map(|index| self.silence_deadline_ns(index)))
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
            peer_silence_timeout_ns: 500,
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
        set.note_inbound(12, 0);
        set.note_inbound(25, 0);
        set.note_outbound_proof(25, 0);
        // Rail 0's evidence is too old to vouch for it working at 50.
        assert_eq!(set.silent_rails(60), Vec::<u32>::new());
        set.note_inbound(40, 0);
        set.note_outbound_proof(40, 0);
        assert_eq!(set.silent_rails(49), Vec::<u32>::new());
        assert_eq!(set.silent_rails(50), vec![1]);
    }

    #[test]
    fn every_rail_silent_at_once_is_a_slow_peer_until_the_peer_timeout() {
        let mut set = rails(2, StripePolicy::RoundRobin);
        set.note_inbound(20, 0);
        set.note_outbound_proof(20, 0);
        set.note_inbound(30, 1);
        set.note_outbound_proof(30, 1);
        // Both quiet far beyond the rail timeout: a descheduled peer.
        assert_eq!(set.silent_rails(400), Vec::<u32>::new());
        // The peer comes back on rail 0 first: not yet a verdict on rail 1,
        // whose answer may be a moment behind.
        set.note_inbound(410, 0);
        set.note_outbound_proof(410, 0);
        assert_eq!(set.silent_rails(412), Vec::<u32>::new());
        // Rail 0 keeps working for a silence timeout, rail 1 does not.
        for at_ns in [420, 430, 440, 450] {
            set.note_inbound(at_ns, 0);
            set.note_outbound_proof(at_ns, 0);
        }
        assert_eq!(set.silent_rails(459), Vec::<u32>::new());
        assert_eq!(set.silent_rails(460), vec![1]);
        // Nothing at all for the peer timeout: every rail goes down.
        let quiet = rails(2, StripePolicy::RoundRobin);
        assert_eq!(quiet.silent_rails(499), Vec::<u32>::new());
        assert_eq!(quiet.silent_rails(500), vec![0, 1]);
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
