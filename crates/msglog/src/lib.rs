//! Pessimistic message logging (issue 13, first slice): the protocol that
//! lets one failed rank restart from `MPI_Init` and replay its whole
//! history while the others go on, as a sans-IO interceptor the engine
//! drives (`Engine<MessageLog>`, the library `make` builds into
//! `build/lib/msglog`).
//!
//! What it keeps, per process:
//! - the **sender log** ([`sender_log::SenderLog`]): every message sent,
//!   keyed by (destination, logical number), bounded;
//! - its **determinants**: for the n-th ANY_SOURCE receive it posted, the
//!   source it matched. They are sent to the job's *event logger*
//!   ([`event_logger`], a process `mpiexec` starts outside
//!   `MPI_COMM_WORLD`), which appends them to a file, syncs it, and only
//!   then acks them. Pessimistic: the engine starts no send while one is
//!   not acked ([`Interceptor::send_may_start`]), so nothing another
//!   process sees depends on a determinant that could be lost;
//! - its **completion choices and probe outcomes** (same list, same
//!   logger, same acks), counted together: for the n-th Test, Testany,
//!   Testsome, Testall, Request_get_status, Waitany or Waitsome over
//!   several requests (Waitany/Waitsome over one cannot choose and are not
//!   counted), the positions it reported; for the n-th Iprobe or Improbe,
//!   or Probe or Mprobe with MPI_ANY_SOURCE, the message it found (source,
//!   tag, length). A failed test or probe is logged lazily, as the paper
//!   does: consecutive failed tests and probes are one run-length entry,
//!   kept here and made stable only when a send is about to start
//!   ([`Interceptor::before_send`]) or another determinant follows, so a
//!   polling loop neither floods the logger nor waits for acks.
//!
//! The logger is reached through a [`LoggerLink`] (the socket, in
//! `logger_link.rs`); without one (the engine tests) the harness moves the
//! frames itself ([`MessageLog::poll_logger_frame`],
//! [`MessageLog::handle_logger_frame`]), so the protocol stays sans-IO.
//! Each connection starts with a `Hello`; after it the rank sends again
//! what the logger has not acked (a restarted logger lost nothing it
//! acked: it reads its file back).
//!
//! Restart: the new incarnation of a rank says hello asking for a replay,
//! and the logger hands it its determinants (`Replay` frames); until the
//! last one is in, the
//! new incarnation posts no ANY_SOURCE receive (`Defer`), and from then on
//! it pins the n-th one to the logged source while the log lasts. Every
//! survivor re-sends it, from its sender log, each message it had numbered
//! for the rank that the log still holds (all of them unless a checkpoint
//! of the rank covered some: it starts over from `MPI_Init`, or resumes
//! from that checkpoint's position), and
//! drops as duplicates the messages the rank sends again (the engine's
//! part, see `LOGS_MESSAGES`). Since no determinant lives only in another
//! rank, any set of ranks can die together and each restarts alone; the
//! messages a dead rank had sent to another dead one are sent again by
//! its own re-execution.
//!
//! Checkpoints (`VELOC_Checkpoint`): a restartable checkpoint's position
//! covers, per peer, the messages delivered before it; the process tells
//! each peer so (`Covered`), and the peer drops them from its log
//! ([`sender_log::SenderLog::trim`]). A replacement that resumes from the
//! checkpoint's position ([`Interceptor::resume_at`]) continues the
//! ordinals from there, and its own log starts after the messages its
//! earlier incarnation sent before the checkpoint.
//!
//! Leaving: a process keeps its log until every rank has passed
//! `MPI_Finalize`'s barrier (`Finished` frames; [`Interceptor::may_leave`]),
//! since a rank that dies before then replays from `MPI_Init` and needs
//! every message ever sent to it.
//!
//! **Optimistic logging (O2P)**, [`MessageLog::optimistic`]: the same
//! determinants go to the logger at once, but sends do not wait for their
//! acks. What another process sees may then depend on a determinant the
//! logger could lose, so each process keeps a *dependency vector*: per
//! rank, how many of that rank's determinants its state depends on
//! (its own: all it made; another's: the most any message it took in said).
//! It piggybacks, just before an application message
//! ([`Interceptor::piggyback`], a `Depend` frame on the same channel),
//! the entries changed since its last message to that destination and not
//! known stable (Singhal and Kshemkalyani's vector-clock compression:
//! one clock per entry and per destination, no n × n table); with none,
//! nothing at all is sent. The logger's acks carry its *stable vector*
//! (per rank, determinants on disk), and entries at or below it are
//! dropped: they can never be lost. When rank f dies, a process that
//! depends on more of f's determinants than it knows stable asks the
//! logger for its vector now (`Query`); if the logger holds them, it
//! goes on (f replays them); if not, it is an *orphan*: its state
//! depends on choices f's re-execution may make differently. While it
//! waits for that answer it starts no send and sends nothing to f's
//! replacement (nothing it sends may carry the lost dependency to a
//! process that cannot tell). An orphan **rolls back**: it asks the
//! logger to cut its own list where it first depended on a lost
//! determinant (`Truncate`), and once the cut is on disk
//! (`Truncated`) and no peer is restarting (a replacement's wire-up
//! waits for every live process) it is ready to die
//! ([`MessageLog::rollback_ready`]; in the library the exit given by
//! [`MessageLog::with_rollback_exit`]);
//! its replacement replays the list as cut, and every process that took
//! in something it decided after the cut depends on the same lost
//! determinant, or on its cut determinants, and is found an orphan the
//! same way (entries carry the incarnation they count, so one that
//! arrives after the dead rank's replacement re-joined is still checked
//! against its own incarnation's end).
//!
//! Bounds: the sender log and the determinant lists share the byte bound
//! given at construction (`RESMPI_MSGLOG_MEM`). Past it the log is
//! incomplete and every later death ends the job ([`MessageLog`]'s
//! `on_peer_failure` says `AbortJob`) rather than replaying with holes.
#![warn(missing_docs)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;

use resmpi_ft::{
    probe_is_nondeterministic, CompletionCall, CompletionChoice, Interceptor, MatchEvent, Payload,
    PeerFailureAction, ProbeOutcome, ReceivePattern, ReplayedChoice, SentMessage, WildcardDecision,
};

pub mod arena;
pub mod dependency;
pub mod event_logger;
pub mod frames;
pub mod logger_link;
pub mod sender_log;
pub mod server;
pub mod spill;

use frames::{
    Choice, Determinant, Entry, Frame, Probed, ENTRIES_PER_FRAME_MAX, ENTRY_BYTES_PER_FRAME_MAX,
};
use sender_log::{MessageKey, SenderLog};

/// The exit status of an orphan that rolled back (optimistic logging):
/// the launcher starts it again like any dead rank (`EX_TEMPFAIL`).
pub const ROLLBACK_EXIT_CODE: i32 = 75;

/// Set to `1`, the sender log keeps its payloads in transparent huge
/// pages (see [`arena`] for when that pays; off by default).
pub const HUGE_PAGES_VARIABLE: &str = "RESMPI_MSGLOG_HUGEPAGES";

/// Default bound of one process's logs (`RESMPI_MSGLOG_MEM`): 1 GiB.
pub const LOG_BYTES_MAX_DEFAULT: usize = 1 << 30;

/// Bytes a determinant is charged against the bound.
const DETERMINANT_COST_BYTES: usize = 16;

/// What a [`LoggerLink`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkEvent {
    /// A connection to the event logger is up (a first one, or a new one
    /// after the logger restarted).
    Connected,
    /// A frame from the logger.
    Frame(Vec<u8>),
    /// The connection broke; the link tries again by itself.
    Lost,
}

/// The way to the event logger: moves frames, knows nothing of them.
pub trait LoggerLink: Send {
    /// Send `frame` on the current connection (dropped when there is none:
    /// the protocol sends again after the next [`LinkEvent::Connected`]).
    fn send(&mut self, frame: Vec<u8>);
    /// The next event, without blocking.
    fn poll(&mut self) -> Option<LinkEvent>;
}

/// The message-logging protocol of one process.
pub struct MessageLog {
    rank: u32,
    size: u32,
    incarnation: u32,
    log: SenderLog,
    /// This process's determinants, in the order they were made, from
    /// position `own_base` of its list (the ones before were covered by
    /// its checkpoint and dropped, or, in a replacement, trimmed by the
    /// logger before its replay).
    own: Vec<Entry>,
    /// Where `own` starts in the list.
    own_base: usize,
    /// Restarted incarnation: where the logger's replay started (above 0:
    /// it trimmed the list, and only a resume from the checkpoint that
    /// covers the rest replays right).
    replay_first: usize,
    /// Restarted incarnation: it resumes from a checkpoint's position.
    resumed: bool,
    /// The list length the newest restartable checkpoint covers (`Trim`).
    trim_position: u64,
    /// Optimistic: a checkpoint asked the logger for its stable vector (an
    /// empty `Determinants` frame, answered with an ack) and waits for it.
    stable_asked: bool,
    /// How many of `own` the event logger has acknowledged (durable).
    own_acknowledged: usize,
    /// A connection to the event logger is up and has been greeted.
    logger_connected: bool,
    /// The logger has not answered this connection's hello yet.
    hello_unanswered: bool,
    /// Frames for the event logger, oldest first.
    logger_out: VecDeque<Vec<u8>>,
    /// The socket to the logger; `None` when a harness moves the frames.
    link: Option<Box<dyn LoggerLink>>,
    /// Restarted incarnation: the determinants of the earlier ones, by
    /// ordinal; `replay_complete` once the logger sent the last of them.
    replay: BTreeMap<u64, u32>,
    /// Restarted incarnation: the completion choices and probe outcomes
    /// of the earlier ones, by first ordinal: (repeat, outcome).
    replay_choices: BTreeMap<u64, (u64, Replayed)>,
    replay_complete: bool,
    /// Completion calls and probes counted so far (the next one's ordinal).
    next_choice_ordinal: u64,
    /// Failed tests and probes not logged yet (lazy): first ordinal, how many.
    failed_run: Option<(u64, u32)>,
    /// Completion-choice and probe entries made (a run of failed tests
    /// and probes counts once).
    pub choices_logged: u64,
    /// ANY_SOURCE receives posted, by the engine's receive id: their ordinal.
    wildcard_ordinals: HashMap<u64, u64>,
    next_ordinal: u64,
    /// Receives deferred until the replay is in.
    deferred: Vec<u64>,
    released: VecDeque<(u64, Option<u32>)>,
    /// Peers dead and not yet re-joined.
    restarting: Vec<bool>,
    frames_out: VecDeque<(u32, Vec<u8>)>,
    /// Bytes the determinant lists are charged.
    determinant_bytes: usize,
    /// Past `MPI_Finalize`'s barrier.
    finishing: bool,
    /// Per rank: it has passed `MPI_Finalize`'s barrier (in its current
    /// incarnation).
    finished: Vec<bool>,
    /// A frame that could not be parsed, or from the wrong sender.
    pub protocol_errors: u64,
    /// Connections to the event logger made (more than one: it restarted,
    /// or the link broke).
    pub logger_connections: u64,
    /// Optimistic logging (O2P): sends do not wait for acks, dependencies
    /// are tracked and piggybacked instead.
    optimistic: bool,
    /// Optimistic: the dependency tracking.
    dependencies: dependency::Dependencies,
    /// Optimistic: dead incarnations (rank, incarnation) on whose
    /// unstable determinants this process may depend, until the logger's
    /// answer to the `Query` says. Sends wait meanwhile.
    suspected_orphan_of: Vec<(u32, u32)>,
    /// Optimistic: per rank, its newest incarnation known (joined or dead).
    peer_incarnation: Vec<u32>,
    /// Optimistic: where dead incarnations' lists ended, as answered.
    ends: BTreeMap<(u32, u32), u64>,
    /// Optimistic: determinants replayed from earlier incarnations (a
    /// rollback never cuts below them: they were not this one's choice).
    replayed_count: usize,
    /// Optimistic: this process is an orphan rolling back.
    rollback: Option<Rollback>,
    /// Optimistic: what ends the process once its rollback is durable
    /// (the library's; a harness without one polls `rollback_ready`).
    rollback_exit: Option<fn(&str)>,
    /// Optimistic: the gate of the process's standard output (output
    /// commit), and whether it holds now.
    output_gate: Option<fn(bool)>,
    output_held: bool,
    /// Optimistic: this process is an orphan that cannot roll back
    /// (taken once as a fatal error).
    orphan_error: Option<String>,
    /// Optimistic: the orphan's report line (stays).
    orphan_line: Option<String>,
}

/// An orphan's rollback: where its list is cut, and whether the logger
/// said the cut is durable.
#[derive(Clone, Debug)]
struct Rollback {
    /// Its own determinants kept.
    keep_count: u64,
    /// The logger has the cut on disk.
    durable: bool,
    /// The dead incarnations (rank, incarnation) it is an orphan of: it
    /// dies only once each one's replacement, and every other dead
    /// peer's, has re-joined it (a replacement's wire-up waits for every
    /// process alive when it started, this one included).
    orphan_of: Vec<(u32, u32)>,
    /// Why, for the log line.
    reason: String,
}

impl fmt::Debug for MessageLog {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("MessageLog")
            .field("rank", &self.rank)
            .field("incarnation", &self.incarnation)
            .field("own", &self.own_count())
            .field("own_acknowledged", &self.own_acknowledged)
            .field("logger_connected", &self.logger_connected)
            .field("replay_complete", &self.replay_complete)
            .finish_non_exhaustive()
    }
}

/// A logged outcome, as a restarted incarnation replays it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Replayed {
    /// Positions a completion call reported (empty: nothing, for a probe
    /// too).
    Completed(Vec<usize>),
    /// The message a probe found: source, tag, length.
    Probed(u32, i32, usize),
}

impl MessageLog {
    /// The protocol of world rank `rank` of a job of `size` ranks, in its
    /// incarnation `incarnation` (0 at the start of the job), with logs of
    /// at most `log_bytes_max` bytes.
    pub fn new(rank: u32, size: u32, incarnation: u32, log_bytes_max: usize) -> MessageLog {
        MessageLog {
            rank,
            size,
            incarnation,
            log: SenderLog::new(size, log_bytes_max),
            own: Vec::new(),
            own_base: 0,
            replay_first: 0,
            resumed: false,
            trim_position: 0,
            stable_asked: false,
            own_acknowledged: 0,
            logger_connected: false,
            hello_unanswered: false,
            logger_out: VecDeque::new(),
            link: None,
            replay: BTreeMap::new(),
            replay_choices: BTreeMap::new(),
            next_choice_ordinal: 0,
            failed_run: None,
            choices_logged: 0,
            replay_complete: incarnation == 0,
            wildcard_ordinals: HashMap::new(),
            next_ordinal: 0,
            deferred: Vec::new(),
            released: VecDeque::new(),
            restarting: vec![false; size as usize],
            frames_out: VecDeque::new(),
            determinant_bytes: 0,
            finishing: false,
            finished: vec![false; size as usize],
            protocol_errors: 0,
            logger_connections: 0,
            optimistic: false,
            dependencies: dependency::Dependencies::new(rank, incarnation, size),
            suspected_orphan_of: Vec::new(),
            peer_incarnation: vec![0; size as usize],
            ends: BTreeMap::new(),
            replayed_count: 0,
            rollback: None,
            rollback_exit: None,
            output_gate: None,
            output_held: false,
            orphan_error: None,
            orphan_line: None,
        }
    }

    /// Log optimistically (O2P): sends do not wait for acks; dependencies
    /// are tracked, piggybacked, and checked when a peer dies.
    pub fn optimistic(mut self) -> MessageLog {
        self.optimistic = true;
        self
    }

    /// Whether this process logs optimistically.
    pub fn is_optimistic(&self) -> bool {
        self.optimistic
    }

    /// The dependency tracking (optimistic logging).
    pub fn dependencies(&self) -> &dependency::Dependencies {
        &self.dependencies
    }

    /// Whether this process found itself an orphan of a dead peer.
    pub fn is_orphan(&self) -> bool {
        self.orphan_line.is_some() || self.rollback.is_some()
    }

    /// Whether this process is an orphan whose rollback is durable: it
    /// must die now (its replacement replays the cut list).
    pub fn rollback_ready(&self) -> bool {
        // Not while a peer is restarting either: its replacement's
        // wire-up waits for this process, alive when it started.
        self.rollback.as_ref().is_some_and(|rollback| {
            rollback.durable
                && !self.restarting.iter().any(|&restarting| restarting)
                && rollback
                    .orphan_of
                    .iter()
                    .all(|&(rank, incarnation)| self.peer_incarnation[rank as usize] > incarnation)
        })
    }

    /// Where an orphan's list is cut (its own determinants kept).
    pub fn rollback_keep_count(&self) -> Option<u64> {
        self.rollback.as_ref().map(|rollback| rollback.keep_count)
    }

    /// End the process with `exit` (given the reason) once a rollback is
    /// durable (the library's exit; without one, a harness polls
    /// [`rollback_ready`](Self::rollback_ready)).
    pub fn with_rollback_exit(mut self, exit: fn(&str)) -> MessageLog {
        self.rollback_exit = Some(exit);
        self
    }

    /// Reach the event logger through `link` (the process's socket).
    pub fn with_logger_link(mut self, link: Box<dyn LoggerLink>) -> MessageLog {
        self.link = Some(link);
        self
    }

    /// Keep the sender log's payloads in transparent huge pages
    /// (`RESMPI_MSGLOG_HUGEPAGES=1`).
    pub fn with_huge_pages(mut self, huge_pages: bool) -> MessageLog {
        let log = std::mem::replace(&mut self.log, SenderLog::new(0, 0));
        self.log = log.with_huge_pages(huge_pages);
        self
    }

    /// Spill the sender log past its memory bound as `config` says.
    pub fn with_spill(mut self, config: spill::SpillConfig) -> MessageLog {
        let log = std::mem::replace(&mut self.log, SenderLog::new(0, 0));
        self.log = log.with_spill(config, self.rank);
        self
    }

    /// Whether every message sent so far is in the sender log.
    pub fn log_complete(&self) -> bool {
        self.log.is_complete()
    }

    /// Bytes the sender log holds in memory (payloads plus per-entry cost).
    pub fn log_bytes(&self) -> usize {
        self.log.bytes_logged()
    }

    /// Bytes the sender log spilled to disk.
    pub fn log_bytes_spilled(&self) -> u64 {
        self.log.bytes_spilled()
    }

    /// Determinants made by this process (its earlier incarnations'
    /// included): the length of its list.
    pub fn determinant_count(&self) -> usize {
        self.own_count()
    }

    /// Determinants this process holds in memory (its list less what its
    /// checkpoint covered).
    pub fn determinants_held(&self) -> usize {
        self.own.len()
    }

    /// The length of this process's list, from its start.
    fn own_count(&self) -> usize {
        self.own_base + self.own.len()
    }

    /// Whether the replay of the earlier incarnations' determinants is in.
    pub fn replay_complete(&self) -> bool {
        self.replay_complete
    }

    fn queue(&mut self, peer: u32, frame: Frame) {
        if peer != self.rank && !self.restarting[peer as usize] {
            self.frames_out.push_back((peer, frame.encode()));
        }
    }

    /// Send `own[from..]` to the event logger (nothing while no
    /// connection is up: the next one sends from what is acked).
    fn send_own_from(&mut self, from: usize) {
        // After a reconnect, before the hello's answer, the logger's length
        // is unknown (a restarted one lost what was in flight): the answer
        // sends everything from there, and a frame sent now would leave a
        // gap the logger refuses. (On the first connection nothing can be
        // lost yet, and an optimistic rank's determinants go at once.)
        let length_unknown = self.hello_unanswered && self.logger_connections > 1;
        if !self.logger_connected || length_unknown {
            return;
        }
        // An orphan sends nothing past its cut.
        let sendable = self.rollback.as_ref().map_or(self.own_count(), |rollback| {
            self.own_count().min(rollback.keep_count as usize)
        });
        let held = &self.own[..sendable.saturating_sub(self.own_base)];
        // What is not held any more was acked and trimmed: the logger
        // never asks for it (it acks at least its trimmed length).
        let mut first = from.max(self.own_base) - self.own_base;
        while first < held.len() {
            let end = frame_end(held, first);
            let frame = Frame::Determinants {
                first: (self.own_base + first) as u64,
                entries: held[first..end].to_vec(),
            };
            self.logger_out.push_back(frame.encode());
            first = end;
        }
    }

    /// A connection to the event logger is up: say who this is; its
    /// answer (an ack of what it has on disk) says where to send from.
    pub fn handle_logger_connected(&mut self) {
        self.logger_connected = true;
        self.hello_unanswered = true;
        self.logger_connections += 1;
        self.logger_out.clear();
        if !self.replay_complete {
            // A replay cut off by the lost connection comes again whole.
            self.own.clear();
            self.own_base = 0;
            self.replay.clear();
            self.replay_choices.clear();
        }
        let hello = Frame::Hello {
            rank: self.rank,
            incarnation: self.incarnation,
            replay: !self.replay_complete,
            optimistic: self.optimistic,
        };
        self.logger_out.push_back(hello.encode());
        // A query lost with the connection is asked again.
        for (peer, incarnation) in self.suspected_orphan_of.clone() {
            self.send_query(peer, incarnation);
        }
    }

    /// Ask the logger where dead `peer`'s incarnation `incarnation`'s
    /// list ends (optimistic logging).
    fn send_query(&mut self, peer: u32, incarnation: u32) {
        if self.logger_connected {
            let query = Frame::Query {
                rank: peer,
                incarnation,
            };
            self.logger_out.push_back(query.encode());
        }
    }

    /// Dead `peer`'s incarnation `incarnation` may have left this process
    /// an orphan: ask the logger (or settle it with an answer known).
    fn suspect(&mut self, peer: u32, incarnation: u32) {
        if let Some(&end) = self.ends.get(&(peer, incarnation)) {
            self.settle(peer, incarnation, end);
            return;
        }
        if !self.suspected_orphan_of.contains(&(peer, incarnation)) {
            self.suspected_orphan_of.push((peer, incarnation));
            self.send_query(peer, incarnation);
        }
    }

    /// Whether `rank`'s incarnation `incarnation` is dead (a newer one
    /// joined, or it died and none did yet).
    fn is_dead_incarnation(&self, rank: u32, incarnation: u32) -> bool {
        let newest = self.peer_incarnation[rank as usize];
        incarnation < newest || (incarnation == newest && self.restarting[rank as usize])
    }

    /// The logger's own acks: `count` of this process's determinants are
    /// on disk (`first_answer`: the answer to this connection's hello).
    fn handle_ack(&mut self, count: u64) {
        self.stable_asked = false;
        let count = (count as usize).min(self.own_count());
        if self.hello_unanswered {
            // What the logger has: a restarted one read its file back.
            // If it has less than it once acked (its file was lost or
            // damaged), this process, the source of its own list,
            // sends the rest again, and its sends wait for the acks.
            self.hello_unanswered = false;
            self.own_acknowledged = count;
            self.send_own_from(count);
            // A cut lost with a connection is asked again, after the
            // list up to it.
            if self
                .rollback
                .as_ref()
                .is_some_and(|rollback| !rollback.durable)
            {
                self.send_truncate();
            }
            // A trim lost with a connection (the logger restarted before
            // its record was on disk) is asked again.
            self.send_trim();
        } else {
            self.own_acknowledged = self.own_acknowledged.max(count);
        }
        self.drop_covered_own();
        self.dependencies
            .handle_stable(self.rank, self.own_acknowledged as u64);
    }

    /// The logger's stable vector came with an ack (optimistic): drop
    /// what is stable. Not for a dead peer's entry while its answer is
    /// awaited: the counts may be its replacement's by then.
    fn handle_stable_vector(&mut self, stable: &[(u32, u64)]) {
        for &(rank, count) in stable {
            let settled = rank < self.size
                && rank != self.rank
                && !self.restarting[rank as usize]
                && !self
                    .suspected_orphan_of
                    .iter()
                    .any(|&(dead, _)| dead == rank);
            if settled {
                self.dependencies.handle_stable(rank, count);
            }
        }
    }

    /// Dead `peer`'s incarnation `incarnation`'s list ends at `count`
    /// (what its replacement replays).
    fn handle_answer(&mut self, peer: u32, incarnation: u32, count: u64) {
        if peer >= self.size {
            self.protocol_errors += 1;
            return;
        }
        self.ends.insert((peer, incarnation), count);
        self.suspected_orphan_of
            .retain(|&suspected| suspected != (peer, incarnation));
        self.settle(peer, incarnation, count);
    }

    /// `peer`'s incarnation `incarnation` ended at `end`: depending on
    /// more of it makes this process an orphan, which rolls back.
    fn settle(&mut self, peer: u32, incarnation: u32, end: u64) {
        let beyond = self.dependencies.beyond(peer, incarnation, end);
        self.dependencies.handle_end(peer, incarnation);
        let Some((depends, own_position)) = beyond else {
            // The first `end` of its list are on disk, whichever
            // incarnation this process's entry counts.
            self.dependencies.handle_stable(peer, end);
            return;
        };
        let keep_count = own_position.max(self.replayed_count as u64);
        let reason = format!(
            "rank {}: optimistic message logging: this rank is an orphan of rank {peer}: \
             it depends on {depends} of the determinants of that rank's incarnation \
             {incarnation}, and the event logger has only {end} of them",
            self.rank
        );
        if !self.log.is_complete() {
            // Its replacement could not be served what it must replay.
            let line =
                format!("{reason}; this rank's sender log is incomplete, so it cannot roll back");
            self.orphan_error.get_or_insert_with(|| line.clone());
            self.orphan_line.get_or_insert(line);
            return;
        }
        match &mut self.rollback {
            Some(rollback) if rollback.keep_count <= keep_count => {
                rollback.orphan_of.push((peer, incarnation));
                return;
            }
            Some(rollback) => {
                rollback.keep_count = keep_count;
                rollback.durable = false;
                rollback.orphan_of.push((peer, incarnation));
            }
            None => {
                self.rollback = Some(Rollback {
                    keep_count,
                    durable: false,
                    orphan_of: vec![(peer, incarnation)],
                    reason,
                })
            }
        }
        self.send_truncate();
    }

    /// An orphan whose rollback is ready dies (through the library's
    /// exit; a harness without one polls `rollback_ready`).
    fn exit_if_rolled_back(&self) {
        let (Some(exit), Some(rollback)) = (self.rollback_exit, &self.rollback) else {
            return;
        };
        if !self.rollback_ready() {
            return;
        }
        let line = format!(
            "{}; it rolls back: its list is cut to its first {} determinants, and it \
             exits (code {ROLLBACK_EXIT_CODE}) to be started again and replay them",
            rollback.reason, rollback.keep_count
        );
        exit(&line);
    }

    /// Ask the logger to cut this orphan's list (again after a reconnect).
    fn send_truncate(&mut self) {
        let Some(rollback) = &self.rollback else {
            return;
        };
        if self.logger_connected && !self.hello_unanswered {
            let truncate = Frame::Truncate {
                count: rollback.keep_count,
            };
            self.logger_out.push_back(truncate.encode());
        }
    }

    /// The logger has this orphan's list cut to `count` on disk.
    fn handle_truncated(&mut self, count: u64) {
        let Some(rollback) = &mut self.rollback else {
            self.protocol_errors += 1;
            return;
        };
        if count > rollback.keep_count {
            // An earlier cut, superseded by a deeper one on its way.
            return;
        }
        rollback.durable = true;
        self.exit_if_rolled_back();
    }

    /// Tell the logger how much of this process's list its newest
    /// restartable checkpoint covers.
    fn send_trim(&mut self) {
        if self.trim_position > 0 && self.logger_connected && !self.hello_unanswered {
            let trim = Frame::Trim {
                count: self.trim_position,
            };
            self.logger_out.push_back(trim.encode());
        }
    }

    /// Drop from memory what the newest checkpoint covers and the logger
    /// has acked (it never asks for it again, and a restart from the
    /// checkpoint never looks at it).
    fn drop_covered_own(&mut self) {
        let covered = (self.trim_position as usize)
            .min(self.own_acknowledged)
            .min(self.own_count());
        if covered > self.own_base {
            let dropped = covered - self.own_base;
            for entry in self.own.drain(..dropped) {
                self.determinant_bytes = self
                    .determinant_bytes
                    .saturating_sub(DETERMINANT_COST_BYTES + entry.encoded_len());
            }
            self.own_base = covered;
        }
    }

    /// The connection to the event logger broke.
    pub fn handle_logger_lost(&mut self) {
        self.logger_connected = false;
        self.logger_out.clear();
        self.stable_asked = false;
    }

    /// A frame from the event logger.
    pub fn handle_logger_frame(&mut self, bytes: &[u8]) {
        match Frame::decode(bytes) {
            Ok(Frame::Ack { count }) => self.handle_ack(count),
            Ok(Frame::Stable { count, stable }) => {
                self.handle_ack(count);
                self.handle_stable_vector(&stable);
            }
            Ok(Frame::Answer {
                rank,
                incarnation,
                count,
            }) => self.handle_answer(rank, incarnation, count),
            Ok(Frame::Truncated { count }) => self.handle_truncated(count),
            Ok(Frame::Replay {
                first,
                last,
                entries,
            }) => self.handle_replay(first, last, entries),
            _ => self.protocol_errors += 1,
        }
    }

    /// The next frame for the event logger (for a harness without a link).
    pub fn poll_logger_frame(&mut self) -> Option<Vec<u8>> {
        self.logger_out.pop_front()
    }

    /// How many of this process's determinants the logger has acked.
    pub fn determinants_acknowledged(&self) -> usize {
        self.own_acknowledged
    }

    /// Move frames between the protocol and its link, if it has one.
    fn pump_link(&mut self) {
        // Acks come only for determinants sent: with everything acked (and
        // the replay in), no read is needed, and a progress round costs no
        // system call. A logger lost meanwhile is found at the next send.
        let idle = self.logger_connected
            && !self.hello_unanswered
            && self.replay_complete
            && self.own_acknowledged == self.own_count()
            && self.suspected_orphan_of.is_empty()
            && self.rollback.is_none()
            && !self.stable_asked
            && self.logger_out.is_empty();
        if idle {
            return;
        }
        let Some(mut link) = self.link.take() else {
            return;
        };
        while let Some(event) = link.poll() {
            match event {
                LinkEvent::Connected => self.handle_logger_connected(),
                LinkEvent::Frame(bytes) => self.handle_logger_frame(&bytes),
                LinkEvent::Lost => self.handle_logger_lost(),
            }
        }
        while let Some(frame) = self.logger_out.pop_front() {
            link.send(frame);
        }
        self.link = Some(link);
    }

    fn charge_determinant(&mut self, entry: &Entry) {
        self.determinant_bytes += DETERMINANT_COST_BYTES + entry.encoded_len();
    }

    /// Append a determinant this incarnation made and send it to the
    /// event logger (a run of failed tests before it goes first: order).
    fn push_own(&mut self, entry: Entry) {
        self.flush_failed_run();
        self.push_own_now(entry);
    }

    fn push_own_now(&mut self, entry: Entry) {
        let position = self.own_count();
        self.charge_determinant(&entry);
        self.own.push(entry);
        self.dependencies.handle_own(self.own_count() as u64);
        self.send_own_from(position);
        self.update_output_gate();
        if self.optimistic {
            // Active optimistic logging: on its way before the send that
            // may depend on it (which does not wait), so that a death
            // right after that send rarely loses it.
            self.flush_link();
        }
    }

    /// Optimistic: hold the output while the state rests on a determinant
    /// not on disk, let it pass once none is left (output commit).
    fn update_output_gate(&mut self) {
        let Some(gate) = self.output_gate else {
            return;
        };
        let hold = !self.dependencies.is_all_stable() || self.rollback.is_some();
        if hold != self.output_held {
            self.output_held = hold;
            gate(hold);
        }
    }

    /// Hand the frames for the logger to the link now, reading nothing.
    fn flush_link(&mut self) {
        if let Some(link) = self.link.as_mut() {
            while let Some(frame) = self.logger_out.pop_front() {
                link.send(frame);
            }
        }
    }

    /// Make the lazily kept run of failed tests a determinant.
    fn flush_failed_run(&mut self) {
        if let Some((ordinal, repeat)) = self.failed_run.take() {
            self.choices_logged += 1;
            self.push_own_now(Entry::Choice(Choice {
                ordinal,
                repeat,
                completed: Vec::new(),
            }));
        }
    }

    /// The replayed outcome of non-deterministic call `ordinal`, if logged.
    fn replayed_choice(&self, ordinal: u64) -> Option<&Replayed> {
        let (&first, (repeat, outcome)) = self.replay_choices.range(..=ordinal).next_back()?;
        (ordinal - first < *repeat).then_some(outcome)
    }

    /// What the replay dictates for the next non-deterministic call.
    fn replayed_next(&self) -> ReplayedChoice {
        if !self.replay_complete {
            return ReplayedChoice::NotYetKnown;
        }
        match self.replayed_choice(self.next_choice_ordinal) {
            Some(Replayed::Completed(positions)) => ReplayedChoice::Logged(positions.clone()),
            Some(&Replayed::Probed(source, tag, length_bytes)) => ReplayedChoice::Probed {
                source,
                tag,
                length_bytes,
            },
            None => ReplayedChoice::Free,
        }
    }

    /// Count non-deterministic call outcome number `ordinal` that
    /// reported nothing: it joins (or starts) the lazily kept run.
    fn note_failed(&mut self, ordinal: u64) {
        match &mut self.failed_run {
            Some((first, repeat))
                if *first + u64::from(*repeat) == ordinal && *repeat < u32::MAX =>
            {
                *repeat += 1;
            }
            _ => {
                self.flush_failed_run();
                self.failed_run = Some((ordinal, 1));
            }
        }
    }

    /// The ordinal of the next non-deterministic call, and whether its
    /// outcome is replayed (stable already: not logged again).
    fn next_call(&mut self) -> (u64, bool) {
        self.refuse_trimmed_replay();
        let ordinal = self.next_choice_ordinal;
        self.next_choice_ordinal += 1;
        let replayed = self.replayed_choice(ordinal).is_some();
        // Every counted call's outcome is logged in order (a failed run is
        // made an entry before any later one), so a replay that has a
        // later call's and not this one's lacks entries (trimmed too far,
        // or a damaged list): it would diverge unseen.
        if !replayed
            && self.orphan_error.is_none()
            && self.replay_choices.range(ordinal + 1..).next().is_some()
        {
            self.orphan_error = Some(format!(
                "rank {}: message logging: the replay holds no outcome of non-deterministic \
                 call {ordinal} but holds later ones: this rank's determinant list lacks \
                 entries, and the replay would diverge; the restart is refused",
                self.rank
            ));
        }
        (ordinal, replayed)
    }

    /// A replacement served a trimmed list that does not resume from a
    /// checkpoint (its newest one is damaged, or gone) would replay the
    /// trimmed part freely and diverge: refused, with the reason.
    fn refuse_trimmed_replay(&mut self) {
        if self.replay_first > 0 && !self.resumed && self.orphan_error.is_none() {
            self.orphan_error = Some(format!(
                "rank {}: message logging: the event logger trimmed this rank's first {} \
                 determinants (a checkpoint of it covered them), but this restart does not \
                 resume from that checkpoint, so it cannot replay them; the restart is refused",
                self.rank, self.replay_first
            ));
        }
    }

    fn over_bound(&self) -> bool {
        !self.log.is_complete()
    }

    fn handle_replay(&mut self, first: u64, last: bool, entries: Vec<Entry>) {
        if self.replay_complete {
            return;
        }
        let first = usize::try_from(first).unwrap_or(usize::MAX);
        if self.own.is_empty() && self.own_base == 0 {
            // The logger trimmed the list before `first`: a checkpoint of
            // this rank covers it, and this replacement resumes from it.
            self.own_base = first;
            self.replay_first = first;
        }
        if first != self.own_count() {
            self.protocol_errors += 1;
            return;
        }
        for entry in entries {
            match &entry {
                Entry::Wildcard(determinant) => {
                    self.replay.insert(determinant.ordinal, determinant.source);
                }
                Entry::Choice(choice) => {
                    self.replay_choices.insert(
                        choice.ordinal,
                        (
                            u64::from(choice.repeat),
                            Replayed::Completed(
                                choice.completed.iter().map(|&p| p as usize).collect(),
                            ),
                        ),
                    );
                }
                Entry::Probe(probed) => {
                    let length_bytes = usize::try_from(probed.length_bytes).unwrap_or(usize::MAX);
                    self.replay_choices.insert(
                        probed.ordinal,
                        (1, Replayed::Probed(probed.source, probed.tag, length_bytes)),
                    );
                }
            }
            self.charge_determinant(&entry);
            self.own.push(entry);
        }
        if !last {
            return;
        }
        self.replay_complete = true;
        self.replayed_count = self.own_count();
        self.own_acknowledged = self.own_count();
        self.dependencies.handle_own(self.own_count() as u64);
        self.dependencies
            .handle_stable(self.rank, self.own_acknowledged as u64);
        for receive in std::mem::take(&mut self.deferred) {
            let source = self
                .wildcard_ordinals
                .get(&receive)
                .and_then(|ordinal| self.replay.get(ordinal))
                .copied();
            self.released.push_back((receive, source));
        }
    }
}

impl Interceptor for MessageLog {
    const WANTS_PAYLOADS: bool = true;
    const PINS_WILDCARDS: bool = true;
    const SENDS_PROTOCOL_FRAMES: bool = true;
    const LOGS_MESSAGES: bool = true;
    const WANTS_NONDETERMINISM: bool = true;

    fn name(&self) -> &'static str {
        if self.optimistic {
            "msglog-optimistic"
        } else {
            "msglog-pessimistic"
        }
    }

    /// What the log took and what it cost: bytes and messages logged,
    /// the most memory it held (`_max`: mpiexec reports the largest rank's
    /// figure, not a sum), what it trimmed, and its disk use once it
    /// spilled or stopped.
    fn report_counters(&self) -> Vec<(&'static str, u64)> {
        let (trimmed_bytes, trimmed_messages) = self.log.trimmed();
        let (logged_bytes, logged_messages) = self.log.logged();
        let (memory_bytes_peak, mapped_bytes_peak) = self.log.peaks();
        let mut counters = vec![
            ("msglog_logged_bytes", logged_bytes),
            ("msglog_logged_messages", logged_messages),
            ("msglog_memory_bytes_max", memory_bytes_peak as u64),
            ("msglog_mapped_bytes_max", mapped_bytes_peak as u64),
            ("msglog_determinants", self.determinant_count() as u64),
            ("msglog_mappings_made", self.log.arena_chunks().0),
            ("msglog_mappings_reused", self.log.arena_chunks().1),
            ("msglog_trimmed_bytes", trimmed_bytes),
            ("msglog_trimmed_messages", trimmed_messages),
            (
                "msglog_logger_reconnects",
                self.logger_connections.saturating_sub(1),
            ),
        ];
        if self.optimistic {
            counters.push((
                "msglog_piggybacked_frames",
                self.dependencies.piggybacked_frames,
            ));
            counters.push((
                "msglog_piggybacked_entries",
                self.dependencies.piggybacked_entries,
            ));
            counters.push(("msglog_orphans", u64::from(self.is_orphan())));
        }
        if self.log.bytes_spilled() > 0 || !self.log.is_complete() {
            counters.push(("msglog_memory_bytes", self.log.bytes_logged() as u64));
            counters.push(("msglog_spilled_bytes", self.log.bytes_spilled()));
        }
        counters
    }

    fn report_lines(&self) -> Vec<String> {
        self.log
            .incomplete_reason()
            .map(|reason| {
                format!(
                    "rank {}: this rank's sender log lacks messages it would have to replay \
                     (message log incomplete: {reason})",
                    self.rank
                )
            })
            .into_iter()
            .chain(self.orphan_line.clone())
            .collect()
    }

    fn wants_match_events(&self) -> bool {
        true
    }

    fn on_send_payload(&mut self, message: &SentMessage, payload: Payload<'_>) {
        if self.log.is_complete() {
            let key = MessageKey {
                logical_seq: message.logical_seq,
                context: message.context,
                tag: message.tag,
            };
            // Copied (or packed) once, straight into the log's memory.
            self.log.record_with(message.destination, key, payload);
        }
    }

    fn on_wildcard_receive(&mut self, receive: u64, _pattern: &ReceivePattern) -> WildcardDecision {
        self.refuse_trimmed_replay();
        let ordinal = self.next_ordinal;
        self.next_ordinal += 1;
        self.wildcard_ordinals.insert(receive, ordinal);
        if !self.replay_complete {
            self.deferred.push(receive);
            return WildcardDecision::Defer;
        }
        match self.replay.get(&ordinal) {
            Some(&source) => WildcardDecision::Pin(source),
            None => WildcardDecision::AnySource,
        }
    }

    fn poll_released_receive(&mut self) -> Option<(u64, Option<u32>)> {
        self.released.pop_front()
    }

    fn on_match(&mut self, event: &MatchEvent) {
        let Some(ordinal) = self.wildcard_ordinals.remove(&event.receive_token) else {
            return;
        };
        if self.replay.contains_key(&ordinal) {
            // Replayed: its determinant is stable already.
            return;
        }
        self.push_own(Entry::Wildcard(Determinant {
            ordinal,
            source: event.envelope.source,
        }));
    }

    fn on_probe(&mut self, outcome: &ProbeOutcome) {
        if !probe_is_nondeterministic(&outcome.pattern, outcome.blocking) {
            return;
        }
        let (ordinal, replayed) = self.next_call();
        if replayed {
            // Replayed: its determinant is stable already.
            return;
        }
        let Some(envelope) = outcome.found else {
            self.note_failed(ordinal);
            return;
        };
        self.choices_logged += 1;
        self.push_own(Entry::Probe(Probed {
            ordinal,
            source: envelope.source,
            tag: envelope.tag,
            length_bytes: outcome.length_bytes as u64,
        }));
    }

    fn replayed_probe(&self, pattern: &ReceivePattern, blocking: bool) -> ReplayedChoice {
        if !probe_is_nondeterministic(pattern, blocking) {
            return ReplayedChoice::Free;
        }
        self.replayed_next()
    }

    fn on_completion_choice(&mut self, choice: &CompletionChoice<'_>) {
        if !chooses(choice.call, choice.offered) {
            return;
        }
        let (ordinal, replayed) = self.next_call();
        if replayed {
            // Replayed: its determinant is stable already.
            return;
        }
        if choice.completed.is_empty() {
            self.note_failed(ordinal);
            return;
        }
        self.choices_logged += 1;
        self.push_own(Entry::Choice(Choice {
            ordinal,
            repeat: 1,
            completed: choice.completed.iter().map(|&p| p as u32).collect(),
        }));
    }

    fn replayed_completion_choice(&self, call: CompletionCall, offered: usize) -> ReplayedChoice {
        if !chooses(call, offered) {
            return ReplayedChoice::Free;
        }
        self.replayed_next()
    }

    fn before_send(&mut self) {
        self.flush_failed_run();
    }

    fn send_may_start(&self) -> bool {
        if self.optimistic {
            // Never wait for an ack (what the send depends on travels with
            // it), only while this process may be an orphan: what it
            // sends then could carry a lost dependency to a process that
            // cannot tell (the dead rank's replacement).
            return self.suspected_orphan_of.is_empty() && self.rollback.is_none();
        }
        self.own_acknowledged == self.own_count()
    }

    fn holds_replay_to(&self, _peer: u32) -> bool {
        // As `send_may_start`: a re-joined peer gets nothing from a
        // process that may be an orphan (its log holds what it sent after
        // its orphan point); held until the answer, for ever by an orphan.
        self.optimistic && !self.send_may_start()
    }

    fn piggyback(&mut self, destination: u32) -> Option<Vec<u8>> {
        if !self.optimistic || destination >= self.size {
            return None;
        }
        let entries = self.dependencies.piggyback(destination)?;
        Some(Frame::Depend { entries }.encode())
    }

    fn set_output_gate(&mut self, gate: fn(bool)) {
        if self.optimistic {
            self.output_gate = Some(gate);
            self.output_held = false;
            self.update_output_gate();
        }
    }

    fn take_fatal_error(&mut self) -> Option<String> {
        self.orphan_error.take()
    }

    fn replay_message(
        &self,
        destination: u32,
        logical_seq: u64,
    ) -> Result<(u32, i32, Vec<u8>), String> {
        self.log
            .message(destination, logical_seq)
            .map(|message| (message.context, message.tag, message.payload))
    }

    fn on_peer_failure(&mut self, peer: u32) -> PeerFailureAction {
        if self.over_bound() || peer >= self.size {
            return PeerFailureAction::AbortJob;
        }
        self.restarting[peer as usize] = true;
        self.finished[peer as usize] = false;
        if self.optimistic {
            self.dependencies.forget_sent(peer);
            // Maybe an orphan: the logger's answer settles it.
            if !self.dependencies.is_stable_on(peer) {
                let dead = self.peer_incarnation[peer as usize]
                    .max(self.dependencies.dependency_incarnation(peer));
                self.peer_incarnation[peer as usize] = dead;
                self.suspect(peer, dead);
            }
        }
        PeerFailureAction::Handled
    }

    fn replay_first(&self, destination: u32) -> u64 {
        self.log.first_held(destination)
    }

    fn checkpoint_ordinals(&self) -> [u64; 3] {
        [
            self.next_ordinal,
            self.next_choice_ordinal,
            self.own_count() as u64,
        ]
    }

    fn checkpoint_log(&self) -> Result<Vec<u8>, String> {
        if self.optimistic && (!self.dependencies.is_stable_on_others() || !self.send_may_start()) {
            // A rollback cuts this process back to where it first
            // depended on a lost determinant: a checkpoint it could resume
            // from must lie before any such point, so only one taken while
            // everything it depends on is on the logger's disk counts.
            return Err(
                "optimistic message logging: this rank depends on determinants of \
                        other ranks not yet on the event logger's disk"
                    .to_string(),
            );
        }
        self.log.export()
    }

    fn checkpoint_may_wait(&mut self) -> bool {
        if !self.optimistic || !self.send_may_start() || self.dependencies.is_stable_on_others() {
            return false;
        }
        // The logger may have on disk what this rank depends on: its acks
        // say so, and an optimistic rank reads them only when it must.
        // Nothing new from position `own_count`: the logger answers with
        // an ack (once what it has of this rank is durable).
        if !self.stable_asked && self.logger_connected && !self.hello_unanswered {
            self.stable_asked = true;
            let ask = Frame::Determinants {
                first: self.own_count() as u64,
                entries: Vec::new(),
            };
            self.logger_out.push_back(ask.encode());
        }
        true
    }

    fn resume_at(&mut self, ordinals: [u64; 3], log: &[u8]) -> Result<(), String> {
        self.next_ordinal = ordinals[0];
        self.next_choice_ordinal = ordinals[1];
        self.resumed = true;
        self.failed_run = None;
        self.log.import(log)
    }

    fn on_checkpoint(&mut self, delivered: &[u64], ordinals: [u64; 3]) {
        for (peer, &last) in delivered.iter().enumerate().take(self.size as usize) {
            if last > 0 {
                self.queue(peer as u32, Frame::Covered { last });
            }
        }
        // A restart from this checkpoint looks up ordinals from its own
        // on, which every determinant before `ordinals[2]` is below: the
        // event logger may drop them, and so may this process.
        if ordinals[2] > self.trim_position {
            self.trim_position = ordinals[2];
            self.send_trim();
            self.drop_covered_own();
        }
    }

    fn on_peer_rejoin(&mut self, peer: u32, incarnation: u32) {
        if peer >= self.size || peer == self.rank {
            return;
        }
        self.restarting[peer as usize] = false;
        let known = &mut self.peer_incarnation[peer as usize];
        *known = (*known).max(incarnation);
        self.exit_if_rolled_back();
        self.finished[peer as usize] = false;
        // Its new incarnation learns every dependency again with the
        // first message (the re-sends from the log included).
        self.dependencies.forget_sent(peer);
        if self.finishing {
            self.queue(peer, Frame::Finished);
        }
    }

    fn on_protocol_frame(&mut self, peer: u32, bytes: &[u8]) {
        match Frame::decode(bytes) {
            Ok(Frame::Finished) if peer < self.size => self.finished[peer as usize] = true,
            Ok(Frame::Covered { last }) if peer < self.size => {
                self.log.trim(peer, last);
            }
            Ok(Frame::Depend { entries }) if self.optimistic && peer < self.size => {
                let own_position = self.own_count() as u64;
                if !self.dependencies.handle_piggyback(&entries, own_position) {
                    self.protocol_errors += 1;
                    return;
                }
                self.update_output_gate();
                // A dependency on an incarnation already dead (the peer
                // heard of it later, or sent it before the replacement
                // re-joined): settled like one held at the death, against
                // that incarnation's end.
                for entry in entries {
                    let lost_maybe = entry.rank != self.rank
                        && entry.count > 0
                        && self.is_dead_incarnation(entry.rank, entry.incarnation);
                    if lost_maybe {
                        self.suspect(entry.rank, entry.incarnation);
                    }
                }
            }
            _ => self.protocol_errors += 1,
        }
    }

    fn poll_protocol_frame(&mut self) -> Option<(u32, Vec<u8>)> {
        // Called on every progress round: the logger's acks and replay
        // come in here too.
        self.pump_link();
        self.update_output_gate();
        self.frames_out.pop_front()
    }

    fn on_finalize(&mut self) {
        self.finishing = true;
        self.finished[self.rank as usize] = true;
        for peer in 0..self.size {
            self.queue(peer, Frame::Finished);
        }
    }

    fn may_leave(&self) -> bool {
        // A peer that restarts now replays from MPI_Init and needs this
        // process's log: nobody leaves until every rank is through.
        self.finished.iter().all(|&finished| finished)
    }

    fn supersedes(&self, _new: u32, _current: u32) -> bool {
        // A re-sent announcement comes from the sender's new incarnation:
        // frames of the old one are dropped by the incarnation check.
        true
    }
}

/// Whether `call` over `offered` requests can choose (and is counted):
/// a Waitany or Waitsome over one request cannot.
fn chooses(call: CompletionCall, offered: usize) -> bool {
    match call {
        CompletionCall::Waitany | CompletionCall::Waitsome => offered > 1,
        CompletionCall::Test
        | CompletionCall::Testany
        | CompletionCall::Testsome
        | CompletionCall::Testall
        | CompletionCall::RequestGetStatus => true,
    }
}

/// The end of the frame that carries `entries[first..]`: at most
/// [`ENTRIES_PER_FRAME_MAX`] entries and [`ENTRY_BYTES_PER_FRAME_MAX`]
/// bytes of them, but always one (the event logger's replies are cut the
/// same way).
pub(crate) fn frame_end(entries: &[Entry], first: usize) -> usize {
    let mut end = first;
    let mut bytes = 0;
    while end < entries.len() && end - first < ENTRIES_PER_FRAME_MAX {
        bytes += entries[end].encoded_len();
        if end > first && bytes > ENTRY_BYTES_PER_FRAME_MAX {
            break;
        }
        end += 1;
    }
    end
}

#[cfg(test)]
mod tests;
