//! One simulated job: N ranks, a `PeerLink` from every rank to every other,
//! a matching engine per rank, a faulty network and a virtual clock, all
//! driven by one seed.
//!
//! The loop is event-driven: the clock jumps to the next frame arrival, link
//! deadline or send issue time, so a job of thousands of frames runs in
//! milliseconds even in debug builds. Each event is checked by the
//! [`Checker`] as it happens, and the job must end (every message matched,
//! every link idle) before `virtual_time_limit_ns`.

use crate::checker::{Checker, ObservedMatch};
use crate::faults::FaultModel;
use crate::faults::RailOutage;
use crate::network::{Network, NetworkStats, TransmitOutcome, SIM_RAIL_COUNT_MAX};
use crate::rng::SplitMix64;
use crate::workload::{encode, PlannedMessage, Workload};
use resmpi_matching::{Envelope, Matcher, ReceivePattern};
use resmpi_reliable::{LinkEvent, LinkStats, PeerLink, ReliableConfig, StripePolicy};
use resmpi_wire::{FrameHeader, FrameKind};
use std::collections::VecDeque;

/// Link settings scaled to the simulated network (µs latencies): 20 µs first
/// timeout, 640 µs cap, 8-frame window (so back-pressure happens often),
/// 2 µs ack delay, 24 retries (about 13 ms of silence before giving up);
/// one rail. With more rails: 25 µs heartbeats, a rail silent for 1 ms is
/// down, down rails probed every 100 µs.
///
/// The silence timeout is 40 heartbeats because the sweep's worst mixes lose
/// about 60 % of probe round trips (20 % loss each way plus 20 % pure-ack
/// loss each way): 0.6^40 ≈ 1e-9 per window of a false rail-down, and a
/// false rail-down only costs a failover.
///
/// The retry budget is a probability budget: a tail frame (no later frame to
/// carry its ack) is given up when all `max_retries + 1` transmissions fail.
/// With the sweep's worst mixes (20 % loss plus 20 % ack loss) a
/// transmission fails about 40 % of the time; 12 retries gave a false
/// "unreachable" about once in 50 000 jobs (seed 42098, 6 ranks), 24 retries
/// push it below 1e-9 per frame.
pub fn simulation_link_config() -> ReliableConfig {
    ReliableConfig {
        ack_timeout_ns: 20_000,
        min_rto_ns: 20_000,
        timer_granularity_ns: 1_000,
        max_backoff_ns: 640_000,
        send_window_frames: 8,
        ack_delay_ns: 2_000,
        max_retries: 24,
        rail_count: 1,
        stripe_policy: StripePolicy::RoundRobin,
        heartbeat_interval_ns: 25_000,
        rail_silence_timeout_ns: 1_000_000,
        peer_silence_timeout_ns: 10_000_000,
        down_rail_probe_interval_ns: 100_000,
    }
}

/// Everything that defines a job; equal configs give identical runs.
#[derive(Clone, Debug)]
pub struct JobConfig {
    /// Seed of every random choice (workload, faults, receive patterns).
    pub seed: u64,
    /// Number of ranks.
    pub rank_count: u32,
    /// Messages each rank sends.
    pub messages_per_rank: usize,
    /// What the network does to frames.
    pub faults: FaultModel,
    /// Settings of every link.
    pub link: ReliableConfig,
    /// Largest gap between two sends of one rank.
    pub issue_gap_ns_max: u64,
    /// Probability, per rank and event, that the rank posts a receive while
    /// messages are in flight (the rest are received when the network drains).
    pub receive_post_rate: f64,
    /// Receives a rank keeps waiting at most.
    pub posted_receives_max: usize,
    /// The job must end before this virtual time.
    pub virtual_time_limit_ns: u64,
    /// One rank's application stops consuming for a while (its link keeps
    /// running, as a progress thread would).
    pub consumer_stall: Option<ConsumerStall>,
    /// The receiver checks frame checksums (CRC32C on real paths), so a
    /// frame with a flipped bit is dropped before its link sees it. Off only
    /// to show that the oracle would catch the corruption.
    pub checksum_check: bool,
}

/// A rank whose application does not consume messages between two times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsumerStall {
    /// The busy rank.
    pub rank: u32,
    /// When it stops consuming.
    pub from_ns: u64,
    /// When it consumes again.
    pub until_ns: u64,
}

impl JobConfig {
    /// A job of `rank_count` ranks, 40 messages each, over `faults`.
    pub fn new(seed: u64, rank_count: u32, faults: FaultModel) -> JobConfig {
        JobConfig {
            seed,
            rank_count,
            messages_per_rank: 40,
            faults,
            link: simulation_link_config(),
            issue_gap_ns_max: 3_000,
            receive_post_rate: 0.3,
            posted_receives_max: 4,
            virtual_time_limit_ns: 1_000_000_000,
            consumer_stall: None,
            checksum_check: true,
        }
    }

    /// Everything drawn from `seed`: 2 to `rank_count_max` ranks and a random
    /// mix of every fault kind ([`FaultModel::random`]).
    pub fn random(seed: u64, rank_count_max: u32) -> JobConfig {
        let mut rng = SplitMix64::new(seed ^ 0x5EED_C0DE);
        let rank_count = rng.between(2, u64::from(rank_count_max.max(2))) as u32;
        let faults = FaultModel::random(&mut rng);
        let mut config = JobConfig::new(seed, rank_count, faults);
        config.messages_per_rank = rng.between(1, 60) as usize;
        config
    }

    /// [`JobConfig::random`] plus, from a second stream of the same seed (so
    /// the rest of the job is the same): 1 to `rail_count_max` rails, a
    /// stripe policy, bit flips (up to 5 % of frames, in two jobs of three)
    /// and, with two rails or more, sends spread over up to a few ms in half
    /// the jobs and up to three rail outages at random
    /// times, some for good, some for one pair of ranks, some reported by
    /// the sender's path. Outages on different rails are kept apart by
    /// [`JobConfig::rail_outage_gap_ns`], so that one rail is always live.
    pub fn random_with_rails(seed: u64, rank_count_max: u32, rail_count_max: u32) -> JobConfig {
        let mut config = JobConfig::random(seed, rank_count_max);
        let mut rng = SplitMix64::new(seed ^ 0x0AA1_5EED);
        let rail_count_max = rail_count_max.clamp(1, SIM_RAIL_COUNT_MAX as u32);
        config.link.rail_count = rng.between(1, u64::from(rail_count_max)) as u32;
        config.link.stripe_policy = match rng.below(3) {
            0 => StripePolicy::RoundRobin,
            1 => StripePolicy::Fragments,
            _ => StripePolicy::Off,
        };
        if rng.below(3) != 0 {
            config.faults.bit_flip_rate = rng.uniform(0.0, 0.05);
        }
        if config.link.rail_count < 2 {
            return config;
        }
        // Half the jobs send for longer (up to ~3 ms), so that outages hit
        // them mid-stream and last past the detection bound.
        if rng.chance(0.5) {
            config.issue_gap_ns_max = rng.between(3_000, 100_000);
        }
        let gap_ns = config.rail_outage_gap_ns();
        for _ in 0..rng.below(4) {
            let down_at_ns = rng.between(0, 400_000);
            let up_at_ns = (!rng.chance(0.2)).then(|| down_at_ns + rng.between(20_000, 3_000_000));
            let pair = rng.chance(0.5).then(|| {
                let first = rng.below(u64::from(config.rank_count)) as u32;
                let second = (first + 1 + rng.below(u64::from(config.rank_count) - 1) as u32)
                    % config.rank_count;
                (first, second)
            });
            let outage = RailOutage {
                rail: rng.below(u64::from(config.link.rail_count)) as u32,
                down_at_ns,
                up_at_ns,
                pair,
                sender_sees_errors: rng.chance(0.3),
            };
            let clashes = config.faults.rail_outages.iter().any(|other| {
                other.rail != outage.rail
                    && outage.down_at_ns < other.end_ns().saturating_add(gap_ns)
                    && other.down_at_ns < outage.end_ns().saturating_add(gap_ns)
            });
            if !clashes {
                config.faults.rail_outages.push(outage);
            }
        }
        config
    }

    /// Least time between outages of two different rails for the job to keep
    /// a live rail: the later one may be detected (silence timeout plus a
    /// heartbeat) only after the earlier rail was probed back up, which takes
    /// a few slow probes when probes are lost.
    pub fn rail_outage_gap_ns(&self) -> u64 {
        self.link.rail_down_detected_within_ns() + 20 * self.link.down_rail_probe_interval_ns
    }

    /// Whether the link from `source` to `destination` may end unreachable:
    /// it is cut either way (a cut reverse direction loses its acks), or
    /// every rail between the two fails for good.
    pub fn link_may_be_lost(&self, source: u32, destination: u32) -> bool {
        self.faults.cut_links.contains(&(source, destination))
            || self.faults.cut_links.contains(&(destination, source))
            || self
                .faults
                .all_rails_lost_at_ns(self.link.rail_count, source, destination)
                .is_some()
    }
}

/// A rail of a directed link marked down or up, as the link reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RailEvent {
    /// The rank owning the link.
    pub rank: u32,
    /// The link's peer.
    pub peer: u32,
    /// The rail.
    pub rail: u32,
    /// True: marked down; false: back up.
    pub down: bool,
    /// When.
    pub at_ns: u64,
}

/// What a successful job did.
#[derive(Clone, Debug, Default)]
pub struct JobReport {
    /// The seed that reproduces the run.
    pub seed: u64,
    /// Ranks in the job.
    pub rank_count: u32,
    /// Messages sent (and, unless a link was cut, received).
    pub message_count: usize,
    /// Virtual time at which the job ended.
    pub virtual_time_ns: u64,
    /// Event-loop iterations.
    pub step_count: u64,
    /// What the network did.
    pub network: NetworkStats,
    /// All links' counters summed (buffer fields: maxima over links).
    pub links: LinkStats,
    /// Receives posted before their message arrived.
    pub receives_posted_early: u64,
    /// Receives with MPI_ANY_SOURCE or MPI_ANY_TAG.
    pub wildcard_receives: u64,
    /// Directed links that declared their peer unreachable, with the time.
    pub unreachable_links: Vec<(u32, u32, u64)>,
    /// Rails per link.
    pub rail_count: u32,
    /// Frames with a flipped bit dropped by the receiver's checksum check.
    pub corrupt_caught: u64,
    /// Every rail marked down or up, in order.
    pub rail_events: Vec<RailEvent>,
    /// Last time a data frame was put on each rail (0: never).
    pub last_data_frame_ns_per_rail: [u64; SIM_RAIL_COUNT_MAX],
    /// (link, rail outage) pairs whose detection time was checked.
    pub rail_detections_checked: u64,
    /// When the application issued its last send (virtual time).
    pub last_send_issued_ns: u64,
}

/// A violated invariant, with the seed that reproduces it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobFailure {
    /// Seed of the failing run.
    pub seed: u64,
    /// Virtual time of the violation.
    pub virtual_time_ns: u64,
    /// What went wrong.
    pub description: String,
}

impl std::fmt::Display for JobFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} failed at virtual time {} ns: {}",
            self.seed, self.virtual_time_ns, self.description
        )
    }
}

impl std::error::Error for JobFailure {}

/// A message as the matching engine keeps it while unexpected.
#[derive(Debug)]
struct ArrivedMessage {
    index: u64,
    frame: Vec<u8>,
}

struct Rank {
    /// `links[peer]`; `None` at the rank's own index.
    links: Vec<Option<PeerLink>>,
    /// `pending_sends[peer]`: issued sends the link has not accepted yet,
    /// in send order (one FIFO per peer keeps MPI order per pair while one
    /// full window does not block other peers).
    pending_sends: Vec<VecDeque<PlannedMessage>>,
    /// Sends not yet issued by the application, in issue order.
    unissued: VecDeque<PlannedMessage>,
    matcher: Matcher<ArrivedMessage>,
    next_receive_token: u64,
}

struct Job {
    config: JobConfig,
    rng: SplitMix64,
    now_ns: u64,
    ranks: Vec<Rank>,
    network: Network,
    checker: Checker,
    report: JobReport,
}

/// Run one job to completion; `Err` describes the first violated invariant.
pub fn run_job(config: &JobConfig) -> Result<JobReport, JobFailure> {
    let mut job = Job::new(config.clone());
    match job.run() {
        Ok(()) => Ok(job.report),
        Err(description) => Err(JobFailure {
            seed: config.seed,
            virtual_time_ns: job.now_ns,
            description,
        }),
    }
}

impl Job {
    fn new(config: JobConfig) -> Job {
        let mut rng = SplitMix64::new(config.seed);
        let workload = Workload::random(
            &mut rng,
            config.rank_count,
            config.messages_per_rank,
            config.issue_gap_ns_max,
        );
        let ranks = (0..config.rank_count)
            .map(|rank| Rank {
                links: (0..config.rank_count)
                    .map(|peer| (peer != rank).then(|| PeerLink::new(rank, peer, config.link)))
                    .collect(),
                pending_sends: vec![VecDeque::new(); config.rank_count as usize],
                unissued: workload.outgoing[rank as usize].iter().copied().collect(),
                matcher: Matcher::new(),
                next_receive_token: 1,
            })
            .collect();
        let report = JobReport {
            seed: config.seed,
            rank_count: config.rank_count,
            message_count: workload.message_count(),
            rail_count: config.link.rail_count,
            ..JobReport::default()
        };
        Job {
            checker: Checker::new(&workload),
            network: Network::new(config.faults.clone()),
            config,
            rng,
            now_ns: 0,
            ranks,
            report,
        }
    }

    fn run(&mut self) -> Result<(), String> {
        // Generous against infinite loops; real jobs take a few thousand,
        // plus a few per heartbeat of every rail of every link.
        let link_rail_count = u64::from(self.config.rank_count)
            * u64::from(self.config.rank_count - 1)
            * u64::from(self.config.link.rail_count);
        loop {
            self.report.step_count += 1;
            let heartbeat_steps = if self.config.link.rails_are_watched() {
                (self.now_ns / self.config.link.heartbeat_interval_ns + 1) * link_rail_count * 4
            } else {
                0
            };
            let step_limit = 1_000
                + 200 * self.report.message_count as u64 * u64::from(self.config.rank_count)
                + heartbeat_steps;
            if self.report.step_count > step_limit {
                return Err(format!("no termination after {step_limit} steps"));
            }
            self.issue_sends();
            self.transmit()?;
            self.collect_link_events();
            self.deliver_ready()?;
            self.check_links()?;
            self.post_receives_at_random()?;
            if self.network_done() {
                break;
            }
            let Some(next_ns) = self.next_event_ns() else {
                return Err(
                    "stuck: nothing in flight, no timer, yet links are not idle".to_string()
                );
            };
            self.now_ns = self.now_ns.max(next_ns);
            if self.now_ns > self.config.virtual_time_limit_ns {
                return Err(format!(
                    "job did not finish within {} ns of virtual time",
                    self.config.virtual_time_limit_ns
                ));
            }
            self.fire_timeouts();
            self.receive_arrivals()?;
        }
        self.drain_receives()?;
        self.check_end()?;
        self.report.virtual_time_ns = self.now_ns;
        self.report.network = self.network.stats();
        self.report.links = self.summed_link_stats();
        Ok(())
    }

    /// Hand issued sends to their links, until a window is full.
    fn issue_sends(&mut self) {
        let now_ns = self.now_ns;
        for rank in &mut self.ranks {
            while rank
                .unissued
                .front()
                .is_some_and(|message| message.issue_ns <= now_ns)
            {
                let message = rank.unissued.pop_front().expect("front checked");
                self.report.last_send_issued_ns = self.report.last_send_issued_ns.max(now_ns);
                rank.pending_sends[message.destination as usize].push_back(message);
            }
            for (peer, pending) in rank.pending_sends.iter_mut().enumerate() {
                let Some(link) = rank.links[peer].as_mut() else {
                    continue;
                };
                while let Some(message) = pending.front() {
                    if link.status().is_err() || link.handle_send(now_ns, encode(message)).is_err()
                    {
                        break; // Back-pressure (or a dead link): retry later.
                    }
                    pending.pop_front();
                }
            }
        }
    }

    fn transmit(&mut self) -> Result<(), String> {
        for (rank_index, rank) in self.ranks.iter_mut().enumerate() {
            for (peer, link) in rank.links.iter_mut().enumerate() {
                let Some(link) = link.as_mut() else { continue };
                while let Some((rail, frame)) = link.poll_transmit_on_rail(self.now_ns) {
                    let header = FrameHeader::parse(&frame)
                        .map_err(|error| format!("link emitted bad frame: {error}"))?;
                    if !link.rail_is_up(rail) {
                        // Only probes and answers may use a rail marked down.
                        if header.kind != FrameKind::Ack {
                            return Err(format!(
                                "link {rank_index}->{peer} sent data on rail {rail}, which it marked down"
                            ));
                        }
                    }
                    let is_pure_ack = header.kind == FrameKind::Ack;
                    if !is_pure_ack {
                        self.report.last_data_frame_ns_per_rail
                            [rail as usize % SIM_RAIL_COUNT_MAX] = self.now_ns;
                    }
                    let outcome = self.network.transmit(
                        self.now_ns,
                        &mut self.rng,
                        rank_index as u32,
                        peer as u32,
                        rail,
                        frame,
                        is_pure_ack,
                    );
                    if outcome == TransmitOutcome::RailError {
                        link.handle_rail_error(self.now_ns, rail);
                    }
                }
            }
        }
        Ok(())
    }

    /// Record what links report (rails down and up; unreachable peers are
    /// read from `status()`).
    fn collect_link_events(&mut self) {
        for (rank_index, rank) in self.ranks.iter_mut().enumerate() {
            for (peer, link) in rank.links.iter_mut().enumerate() {
                let Some(link) = link.as_mut() else { continue };
                while let Some(event) = link.poll_event() {
                    let (rail, down, at_ns) = match event {
                        LinkEvent::RailDown { rail, at_ns } => (rail, true, at_ns),
                        LinkEvent::RailUp { rail, at_ns } => (rail, false, at_ns),
                        LinkEvent::PeerUnreachable(_) => continue,
                    };
                    self.report.rail_events.push(RailEvent {
                        rank: rank_index as u32,
                        peer: peer as u32,
                        rail,
                        down,
                        at_ns,
                    });
                }
            }
        }
    }

    fn is_consuming(&self, rank: u32) -> bool {
        self.config.consumer_stall.is_none_or(|stall| {
            stall.rank != rank || self.now_ns < stall.from_ns || self.now_ns >= stall.until_ns
        })
    }

    /// Applications that consume take what their links delivered.
    fn deliver_ready(&mut self) -> Result<(), String> {
        for destination in 0..self.config.rank_count {
            if !self.is_consuming(destination) {
                continue;
            }
            for source in 0..self.config.rank_count {
                while let Some(frame) = self.ranks[destination as usize].links[source as usize]
                    .as_mut()
                    .and_then(PeerLink::poll_deliver)
                {
                    self.deliver(destination, source, frame)?;
                }
            }
        }
        Ok(())
    }

    /// Bounded memory, and no unexpected give-up.
    fn check_links(&mut self) -> Result<(), String> {
        let window_frames = self.config.link.send_window_frames;
        // Frames in flight: each link sends at most a window of data frames
        // per retransmission round plus a few acks and heartbeats per rail;
        // a generous constant factor still catches runaway growth.
        let link_count = (self.config.rank_count * (self.config.rank_count - 1)) as usize;
        let in_flight_max =
            link_count * (window_frames + 8 * self.config.link.rail_count as usize) * 8;
        if self.network.in_flight_count() > in_flight_max {
            return Err(format!(
                "{} frames in flight, more than {in_flight_max}",
                self.network.in_flight_count()
            ));
        }
        for (rank_index, rank) in self.ranks.iter().enumerate() {
            for (peer, link) in rank.links.iter().enumerate() {
                let Some(link) = link else { continue };
                let stats = link.stats();
                if stats.send_buffered_frames > window_frames
                    || stats.receive_buffered_frames > window_frames
                {
                    return Err(format!(
                        "link {rank_index}->{peer} buffers {} sent / {} received frames, window is {window_frames}",
                        stats.send_buffered_frames, stats.receive_buffered_frames
                    ));
                }
                if stats.events_dropped > 0 {
                    return Err(format!("link {rank_index}->{peer} dropped events"));
                }
                let already_noted =
                    self.report
                        .unreachable_links
                        .iter()
                        .any(|&(source, destination, _)| {
                            (source, destination) == (rank_index as u32, peer as u32)
                        });
                if let Err(unreachable) = link.status() {
                    if !self.config.link_may_be_lost(rank_index as u32, peer as u32) {
                        return Err(format!("link {rank_index}->{peer}: {unreachable}"));
                    }
                    if !already_noted {
                        self.report.unreachable_links.push((
                            rank_index as u32,
                            peer as u32,
                            self.now_ns,
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// While messages fly, ranks post receives derived from messages still to
    /// come, some with MPI_ANY_SOURCE / MPI_ANY_TAG.
    fn post_receives_at_random(&mut self) -> Result<(), String> {
        for destination in 0..self.config.rank_count {
            if self.checker.posted(destination).len() >= self.config.posted_receives_max
                || !self.rng.chance(self.config.receive_post_rate)
            {
                continue;
            }
            let candidates = self.checker.unmatched_candidates(destination, 3);
            if candidates.is_empty() {
                continue;
            }
            let target = candidates[self.rng.below(candidates.len() as u64) as usize];
            let any_source = self.rng.chance(0.3);
            let any_tag = self.rng.chance(0.3);
            let pattern = ReceivePattern {
                context: target.context,
                source: (!any_source).then_some(target.source),
                tag: (!any_tag).then_some(target.tag),
            };
            if any_source || any_tag {
                self.report.wildcard_receives += 1;
            }
            self.post_receive(destination, pattern)?;
        }
        Ok(())
    }

    /// Post a receive; check the match if a message was already waiting.
    /// Returns whether it matched at once.
    fn post_receive(&mut self, destination: u32, pattern: ReceivePattern) -> Result<bool, String> {
        let rank = &mut self.ranks[destination as usize];
        let token = rank.next_receive_token;
        rank.next_receive_token += 1;
        match rank.matcher.post_receive(pattern, token) {
            Some((envelope, message)) => {
                self.checker.check_match(
                    ObservedMatch {
                        destination,
                        token,
                        pattern,
                        envelope,
                        index: message.index,
                        was_waiting: false,
                    },
                    &message.frame,
                )?;
                Ok(true)
            }
            None => {
                self.report.receives_posted_early += 1;
                self.checker.note_posted(destination, token, pattern);
                Ok(false)
            }
        }
    }

    fn network_done(&self) -> bool {
        let stall_over = self
            .config
            .consumer_stall
            .is_none_or(|stall| self.now_ns >= stall.until_ns);
        stall_over
            && self.ranks.iter().all(|rank| {
                rank.unissued.is_empty()
                    && rank.links.iter().zip(&rank.pending_sends).all(
                        |(link, pending)| match link {
                            // Sends to a dead peer stay pending for good.
                            Some(link) => {
                                link.status().is_err() || (link.is_idle() && pending.is_empty())
                            }
                            None => pending.is_empty(),
                        },
                    )
            })
    }

    fn next_event_ns(&self) -> Option<u64> {
        let link_timeouts = self.ranks.iter().flat_map(|rank| {
            rank.links
                .iter()
                .flatten()
                .filter_map(PeerLink::poll_timeout)
        });
        let issues = self
            .ranks
            .iter()
            .filter_map(|rank| rank.unissued.front().map(|message| message.issue_ns));
        let stall_end = self
            .config
            .consumer_stall
            .map(|stall| stall.until_ns)
            .filter(|&until_ns| until_ns > self.now_ns);
        self.network
            .next_arrival_ns()
            .into_iter()
            .chain(link_timeouts)
            .chain(issues)
            .chain(stall_end)
            .min()
    }

    fn fire_timeouts(&mut self) {
        for rank in &mut self.ranks {
            for link in rank.links.iter_mut().flatten() {
                if link
                    .poll_timeout()
                    .is_some_and(|deadline_ns| deadline_ns <= self.now_ns)
                {
                    link.handle_timeout(self.now_ns);
                }
            }
        }
    }

    fn receive_arrivals(&mut self) -> Result<(), String> {
        while let Some(arrival) = self.network.pop_arrived(self.now_ns) {
            let (source, destination) = (arrival.source, arrival.destination);
            if arrival.corrupted && self.config.checksum_check {
                // The checksum (CRC32C, which catches every single-bit error)
                // fails: the path drops the frame; the sender resends it.
                self.report.corrupt_caught += 1;
                continue;
            }
            let link = self.ranks[destination as usize].links[source as usize]
                .as_mut()
                .ok_or("frame to self")?;
            link.handle_receive_on_rail(self.now_ns, arrival.rail, &arrival.frame)
                .map_err(|error| {
                    format!(
                        "link {destination}<-{source} rejected a frame on rail {}: {error}",
                        arrival.rail
                    )
                })?;
            if !self.is_consuming(destination) {
                continue;
            }
            while let Some(frame) = self.ranks[destination as usize].links[source as usize]
                .as_mut()
                .and_then(PeerLink::poll_deliver)
            {
                self.deliver(destination, source, frame)?;
            }
        }
        Ok(())
    }

    /// The link delivered a message: check it, then give it to matching.
    fn deliver(&mut self, destination: u32, source: u32, frame: Vec<u8>) -> Result<(), String> {
        let index = self.checker.check_delivery(destination, source, &frame)?;
        let header = FrameHeader::parse(&frame).map_err(|error| error.to_string())?;
        let envelope = Envelope {
            source: header.source,
            context: header.context,
            tag: header.tag,
        };
        let matcher = &mut self.ranks[destination as usize].matcher;
        // The engine's arrival function: the frame is only moved into the
        // unexpected queue when no posted receive takes it.
        let mut arrived = Some(frame);
        let matched = matcher.handle_arrival_with(envelope, || ArrivedMessage {
            index,
            frame: arrived.take().expect("built once"),
        });
        if let Some(token) = matched {
            let frame = arrived.expect("a matched message is not queued");
            let pattern = self
                .checker
                .posted(destination)
                .iter()
                .find(|&&(posted_token, _)| posted_token == token)
                .map(|&(_, pattern)| pattern)
                .ok_or_else(|| {
                    format!("rank {destination}: matcher returned unknown receive {token}")
                })?;
            self.checker.check_match(
                ObservedMatch {
                    destination,
                    token,
                    pattern,
                    envelope,
                    index,
                    was_waiting: true,
                },
                &frame,
            )?;
        }
        Ok(())
    }

    /// The network is quiet: withdraw receives no message will satisfy, then
    /// receive every unexpected message with an exact receive, oldest first.
    fn drain_receives(&mut self) -> Result<(), String> {
        for destination in 0..self.config.rank_count {
            let waiting: Vec<u64> = self
                .checker
                .posted(destination)
                .iter()
                .map(|&(token, _)| token)
                .collect();
            for token in waiting {
                if !self.ranks[destination as usize]
                    .matcher
                    .cancel_receive(token)
                {
                    return Err(format!(
                        "rank {destination}: receive {token} vanished from the matcher"
                    ));
                }
                self.checker.note_cancelled(destination, token);
            }
            for message in self.checker.unmatched_delivered(destination) {
                let pattern = ReceivePattern {
                    context: message.context,
                    source: Some(message.source),
                    tag: Some(message.tag),
                };
                if !self.post_receive(destination, pattern)? {
                    return Err(format!(
                        "rank {destination}: delivered message {} from rank {} is not in the unexpected queue",
                        message.index, message.source
                    ));
                }
            }
            let matcher = &self.ranks[destination as usize].matcher;
            if matcher.unexpected_len() != 0 || matcher.posted_len() != 0 {
                return Err(format!(
                    "rank {destination}: matcher still holds {} unexpected / {} posted",
                    matcher.unexpected_len(),
                    matcher.posted_len()
                ));
            }
        }
        Ok(())
    }

    /// Every rail outage long enough to be noticed, while another rail of
    /// the link kept working, was noticed in time by both ends of every link
    /// it hit: within the silence timeout plus one heartbeat interval; and
    /// links that lost every rail for good declared their peer unreachable
    /// within the peer silence timeout plus a heartbeat of the last loss
    /// (silence on every rail at once is first taken for a slow peer).
    fn check_rail_detection(&mut self) -> Result<(), String> {
        if !self.config.link.rails_are_watched() {
            return Ok(());
        }
        let bound_ns = self.config.link.rail_down_detected_within_ns();
        let outages = &self.config.faults.rail_outages;
        for outage in outages {
            let deadline_ns = outage.down_at_ns + bound_ns;
            if outage.rail >= self.config.link.rail_count
                || outage.end_ns() < deadline_ns
                || self.now_ns < deadline_ns
            {
                continue;
            }
            for rank in 0..self.config.rank_count {
                for peer in (0..self.config.rank_count).filter(|&peer| peer != rank) {
                    if !outage.covers(rank, peer) {
                        continue;
                    }
                    // Another rail of this link out during the window: no
                    // working rail to compare with; the peer bound applies.
                    let another_rail_out = outages.iter().any(|other| {
                        other.rail != outage.rail
                            && other.covers(rank, peer)
                            && other.down_at_ns <= deadline_ns
                            && other.end_ns() >= outage.down_at_ns
                    });
                    if another_rail_out {
                        continue;
                    }
                    self.report.rail_detections_checked += 1;
                    let unreachable_in_time = self
                        .report
                        .unreachable_links
                        .iter()
                        .any(|link| (link.0, link.1) == (rank, peer) && link.2 <= deadline_ns);
                    if unreachable_in_time
                        || self.rail_was_down(
                            rank,
                            peer,
                            outage.rail,
                            outage.down_at_ns,
                            deadline_ns,
                        )
                    {
                        continue;
                    }
                    return Err(format!(
                        "link {rank}->{peer}: rail {} out from {} ns, not marked down by {deadline_ns} ns",
                        outage.rail, outage.down_at_ns
                    ));
                }
            }
        }
        for rank in 0..self.config.rank_count {
            for peer in (0..self.config.rank_count).filter(|&peer| peer != rank) {
                let Some(lost_at_ns) = self.config.faults.all_rails_lost_at_ns(
                    self.config.link.rail_count,
                    rank,
                    peer,
                ) else {
                    continue;
                };
                let deadline_ns =
                    lost_at_ns + self.config.link.every_rail_down_detected_within_ns();
                if self.now_ns < deadline_ns {
                    continue;
                }
                let noted = self
                    .report
                    .unreachable_links
                    .iter()
                    .find(|link| (link.0, link.1) == (rank, peer));
                match noted {
                    Some(&(_, _, at_ns)) if at_ns <= deadline_ns => {}
                    _ => {
                        return Err(format!(
                            "link {rank}->{peer} lost every rail at {lost_at_ns} ns, not unreachable by {deadline_ns} ns ({noted:?})"
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether `rail` of link `rank`->`peer` was marked down at some time in
    /// `from_ns..=until_ns`.
    fn rail_was_down(&self, rank: u32, peer: u32, rail: u32, from_ns: u64, until_ns: u64) -> bool {
        let mut down_since_ns: Option<u64> = None;
        for event in &self.report.rail_events {
            if (event.rank, event.peer, event.rail) != (rank, peer, rail) {
                continue;
            }
            if event.down {
                down_since_ns = Some(event.at_ns);
            } else {
                if down_since_ns.is_some_and(|down_ns| down_ns <= until_ns)
                    && event.at_ns >= from_ns
                {
                    return true;
                }
                down_since_ns = None;
            }
        }
        down_since_ns.is_some_and(|down_ns| down_ns <= until_ns)
    }

    /// Everything sent was delivered and matched (except over lost links),
    /// and cut links were declared unreachable in bounded time.
    fn check_end(&mut self) -> Result<(), String> {
        self.check_rail_detection()?;
        for destination in 0..self.config.rank_count {
            for source in 0..self.config.rank_count {
                let delivered_count = self.checker.delivered_count(destination, source);
                let planned_count = self.checker.planned_count(destination, source);
                let link_dead = self.ranks[source as usize].links[destination as usize]
                    .as_ref()
                    .is_some_and(|link| link.status().is_err());
                if delivered_count != planned_count && !link_dead {
                    return Err(format!(
                        "rank {destination} got {delivered_count} of {planned_count} messages from rank {source}"
                    ));
                }
            }
        }
        let unreachable_after_ns = self.config.link.unreachable_after_ns();
        for &(source, destination) in &self.config.faults.cut_links {
            let sent_any = self.checker.planned_count(destination, source) > 0;
            let noted = self
                .report
                .unreachable_links
                .iter()
                .find(|link| (link.0, link.1) == (source, destination));
            match noted {
                None if sent_any => {
                    return Err(format!(
                        "cut link {source}->{destination} never declared unreachable"
                    ))
                }
                Some(&(_, _, at_ns))
                    if at_ns
                        > self.config.issue_gap_ns_max * self.config.messages_per_rank as u64
                            + unreachable_after_ns =>
                {
                    return Err(format!(
                        "cut link {source}->{destination} declared unreachable late, at {at_ns} ns"
                    ))
                }
                _ => {}
            }
        }
        let any_link_lost = (0..self.config.rank_count).any(|source| {
            (0..self.config.rank_count)
                .any(|destination| self.config.link_may_be_lost(source, destination))
        });
        if !any_link_lost && self.checker.matched_count() != self.checker.message_count() {
            return Err(format!(
                "{} of {} messages matched",
                self.checker.matched_count(),
                self.checker.message_count()
            ));
        }
        Ok(())
    }

    fn summed_link_stats(&self) -> LinkStats {
        self.ranks
            .iter()
            .flat_map(|rank| rank.links.iter().flatten())
            .map(PeerLink::stats)
            .fold(LinkStats::default(), |sum, stats| LinkStats {
                frames_sent: sum.frames_sent + stats.frames_sent,
                frames_retransmitted: sum.frames_retransmitted + stats.frames_retransmitted,
                acks_sent: sum.acks_sent + stats.acks_sent,
                frames_received: sum.frames_received + stats.frames_received,
                frames_delivered: sum.frames_delivered + stats.frames_delivered,
                duplicates_dropped: sum.duplicates_dropped + stats.duplicates_dropped,
                frames_dropped_beyond_window: sum.frames_dropped_beyond_window
                    + stats.frames_dropped_beyond_window,
                send_buffered_frames: sum.send_buffered_frames.max(stats.send_buffered_frames),
                send_buffered_frames_max: sum
                    .send_buffered_frames_max
                    .max(stats.send_buffered_frames_max),
                receive_buffered_frames: sum
                    .receive_buffered_frames
                    .max(stats.receive_buffered_frames),
                bytes_buffered: sum.bytes_buffered.max(stats.bytes_buffered),
                heartbeats_sent: sum.heartbeats_sent + stats.heartbeats_sent,
                rails_failed: sum.rails_failed + stats.rails_failed,
                rails_recovered: sum.rails_recovered + stats.rails_recovered,
                failover_time_ns: sum.failover_time_ns + stats.failover_time_ns,
                fast_retransmits: sum.fast_retransmits + stats.fast_retransmits,
                tail_loss_probes: sum.tail_loss_probes + stats.tail_loss_probes,
                spurious_retransmits: sum.spurious_retransmits + stats.spurious_retransmits,
                rtt_samples: sum.rtt_samples + stats.rtt_samples,
                smoothed_rtt_ns: sum.smoothed_rtt_ns.max(stats.smoothed_rtt_ns),
                events_dropped: sum.events_dropped + stats.events_dropped,
            })
    }
}
