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
use crate::network::{Network, NetworkStats};
use crate::rng::SplitMix64;
use crate::workload::{encode, PlannedMessage, Workload};
use resmpi_matching::{Envelope, Matcher, ReceivePattern};
use resmpi_reliable::{LinkStats, PeerLink, ReliableConfig};
use resmpi_wire::{FrameHeader, FrameKind};
use std::collections::VecDeque;

/// Link settings scaled to the simulated network (µs latencies): 20 µs first
/// timeout, 640 µs cap, 8-frame window (so back-pressure happens often),
/// 2 µs ack delay, 24 retries (about 13 ms of silence before giving up).
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
        max_backoff_ns: 640_000,
        send_window_frames: 8,
        ack_delay_ns: 2_000,
        max_retries: 24,
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
        // Generous against infinite loops; real jobs take a few thousand.
        let step_limit =
            1_000 + 200 * self.report.message_count as u64 * u64::from(self.config.rank_count);
        loop {
            self.report.step_count += 1;
            if self.report.step_count > step_limit {
                return Err(format!("no termination after {step_limit} steps"));
            }
            self.issue_sends();
            self.transmit()?;
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
                while let Some(frame) = link.poll_transmit(self.now_ns) {
                    let header = FrameHeader::parse(&frame)
                        .map_err(|error| format!("link emitted bad frame: {error}"))?;
                    let is_pure_ack = header.kind == FrameKind::Ack;
                    self.network.transmit(
                        self.now_ns,
                        &mut self.rng,
                        rank_index as u32,
                        peer as u32,
                        frame,
                        is_pure_ack,
                    );
                }
            }
        }
        Ok(())
    }

    /// Bounded memory, and no unexpected give-up.
    fn check_links(&mut self) -> Result<(), String> {
        let window_frames = self.config.link.send_window_frames;
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
                let already_noted =
                    self.report
                        .unreachable_links
                        .iter()
                        .any(|&(source, destination, _)| {
                            (source, destination) == (rank_index as u32, peer as u32)
                        });
                if let Err(unreachable) = link.status() {
                    if self.config.faults.cut_links.is_empty() {
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
        self.ranks.iter().all(|rank| {
            rank.unissued.is_empty()
                && rank
                    .links
                    .iter()
                    .zip(&rank.pending_sends)
                    .all(|(link, pending)| match link {
                        // Sends to a dead peer stay pending for good.
                        Some(link) => {
                            link.status().is_err() || (link.is_idle() && pending.is_empty())
                        }
                        None => pending.is_empty(),
                    })
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
        self.network
            .next_arrival_ns()
            .into_iter()
            .chain(link_timeouts)
            .chain(issues)
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
        while let Some((source, destination, frame)) = self.network.pop_arrived(self.now_ns) {
            let link = self.ranks[destination as usize].links[source as usize]
                .as_mut()
                .ok_or("frame to self")?;
            link.handle_receive(self.now_ns, &frame).map_err(|error| {
                format!("link {destination}<-{source} rejected a frame: {error}")
            })?;
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
        if let Some((token, message)) =
            matcher.handle_arrival(envelope, ArrivedMessage { index, frame })
        {
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
                    index: message.index,
                    was_waiting: true,
                },
                &message.frame,
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

    /// Everything sent was delivered and matched (except over cut links), and
    /// cut links were declared unreachable in bounded time.
    fn check_end(&self) -> Result<(), String> {
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
        if self.config.faults.cut_links.is_empty()
            && self.checker.matched_count() != self.checker.message_count()
        {
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
            })
    }
}
