//! The shared-memory fast path of small blocking collectives.
//!
//! Why: on one host a collective of a few bytes costs nothing but its
//! bookkeeping, and a schedule (a request, steps, a tagged message per step,
//! matching at every receiver) is a lot of bookkeeping. Here a rank
//! publishes its contribution once in its own collective area
//! (`resmpi_path::collective_area`, at the end of its shared-memory
//! segment, which every local peer has mapped) and reads the contributions
//! it needs straight from the peers' areas: barrier, bcast, reduce,
//! allreduce, gather, scatter, allgather, alltoall, scan, exscan and
//! reduce_scatter(_block) with equal blocks each become one publication
//! (or none) and a few reads, with no message at all.
//!
//! Which path a collective takes depends only on what every member agrees
//! on: the communicator (intra, every member reached over shared memory, a
//! context and sequence number that fit a tag), the byte counts of the call
//! (at most one slot's payload published per rank), `RESMPI_COLL_SHM` and
//! the fault-tolerance protocol (`none` only: nothing here is logged or
//! replicated). Never on timing or on what has arrived. Blocking
//! collectives never match nonblocking ones in MPI, so the `I` forms keep
//! their schedules and both kinds may interleave on one communicator.
//!
//! From [`TREE_MIN_MEMBERS`] members on, the rooted reductions and gathers
//! go along a binomial tree, and from [`CHAIN_MIN_MEMBERS`] scans along a
//! chain (each member reads at most log2 n publications, or one, instead
//! of a root or the last rank reading n - 1), still one publication per
//! member per call.
//!
//! Reductions fold in rank order from the right (`c0 op (c1 op (... op
//! c_{n-1}))`), the same on every rank: the results are bit-identical
//! everywhere (floating point included), and non-commutative ops get the
//! rank order MPI asks for.
//!
//! Failures: a collective on a communicator with a member known to have
//! failed ends with `MPIX_ERR_PROC_FAILED` at once; a rank waiting for a
//! contribution keeps the engine progressing (point-to-point traffic and
//! nonblocking collectives go on, launcher notices arrive) and ends the
//! same way when a member's death becomes known, so a death never leaves
//! a rank waiting. A slot whose readers gave up that way is reclaimed by
//! its owner once it knows of the death too (see the area's module
//! comment), so communicators without the dead rank keep working.
//!
//! `--inject kill:RANK@sends=N` counts each publication as one send (the
//! process dies right after it publishes); reads are not sends.
//!
//! Waiting spins briefly, then yields the CPU (ranks may outnumber cores),
//! then sleeps on the path's doorbell for at most [`SLEEP_US`] at a time:
//! publications ring no doorbell, so that bounds the latency of a long wait.

use std::sync::Arc;

use resmpi_ft::Interceptor;
use resmpi_path::collective_area::{
    collective_tag, Found, COLLECTIVE_SLOTS, COLLECTIVE_SLOT_PAYLOAD_BYTES, MAX_COMMUNICATOR_KEY,
    MAX_SEQUENCE,
};

use super::Reduction;
use crate::engine::{peer_failed_error, Engine, Pause};
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::transport::Route;

/// The most bytes one rank publishes in one collective on the fast path.
pub const MAX_PUBLISHED_BYTES: usize = COLLECTIVE_SLOT_PAYLOAD_BYTES;
/// Reductions (reduce, allreduce, scan, exscan) whose vector times the
/// communicator size exceeds this take the schedules: every rank folding
/// every contribution costs `size` times the vector, which a ring or tree
/// spreads out better beyond it (64 KiB at 4 ranks, 16 KiB at 16).
pub const MAX_REDUCTION_FOLD_BYTES: usize = 256 << 10;
/// The environment variable that turns the fast path off (`0`) or on (`1`,
/// the default).
pub const ENVIRONMENT_VARIABLE: &str = "RESMPI_COLL_SHM";
/// Waiting rounds that only spin (checking between them) before yielding,
/// when every local rank has a core of its own (see
/// [`SharedMemoryCollectives::spin_rounds`]).
pub const SPIN_ROUNDS: u32 = 16;
/// While spinning, the engine progresses every this many rounds.
const PROGRESS_EVERY_ROUNDS: u32 = 8;
/// How long a waiter yields before it sleeps.
const YIELD_PHASE: std::time::Duration = std::time::Duration::from_millis(2);
/// Receipts a reader keeps before it writes them (at most this many of an
/// owner's slots look busy to the owner a little longer; see
/// `unsent_receipts`). Half the slots: the owner still has half of them
/// to run ahead into.
pub const RECEIPT_BATCH: usize = COLLECTIVE_SLOTS / 2;
/// Communicators of at least this many members reduce and gather along a
/// binomial tree (see [`Engine::shared_reduce`]) instead of having the root
/// read every other member's contribution: at 16 ranks a root that folded
/// 15 contributions spent ~1.3 µs per 8 B reduce where Open MPI's tree
/// took 0.7. Chosen from an A/B of the thresholds on a 16-core machine
/// (docs/benchmarks.md): at 4 members one parallel read of each member is
/// shorter than the tree's hops (8 B reduce 0.34 against 0.38-0.45 µs), at
/// 6 the tree wins by a quarter (0.43 against 0.56-0.67).
pub const TREE_MIN_MEMBERS: u32 = 5;
/// Communicators of at least this many members scan along a chain (see
/// [`Engine::shared_scan`]): at 4 members it already beats every member
/// reading all those before it (8 B scan 0.39 against 0.45 µs).
pub const CHAIN_MIN_MEMBERS: u32 = 4;
/// The environment variable that sets both [`TREE_MIN_MEMBERS`] and
/// [`CHAIN_MIN_MEMBERS`] (a positive integer; tests use it to take the
/// tree and the chain with few ranks).
pub const TREE_ENVIRONMENT_VARIABLE: &str = "RESMPI_COLL_SHM_TREE";

/// The member count from which trees and chains are used when
/// `RESMPI_COLL_SHM_TREE` sets it (None: the defaults); an error for a
/// value that is not a positive integer.
pub fn tree_min_members_by_environment() -> Result<Option<u32>, String> {
    match std::env::var(TREE_ENVIRONMENT_VARIABLE) {
        Err(_) => Ok(None),
        Ok(value) => match value.trim().parse::<u32>() {
            Ok(members) if members >= 1 => Ok(Some(members)),
            _ => Err(format!(
                "{TREE_ENVIRONMENT_VARIABLE}={value:?}: expected a positive number of members"
            )),
        },
    }
}

/// Longest sleep of a long wait (publications ring no doorbell).
pub const SLEEP_US: u64 = 100;

/// Whether `RESMPI_COLL_SHM` leaves the fast path on; an error for a value
/// other than `0` or `1`.
pub fn enabled_by_environment() -> Result<bool, String> {
    match std::env::var(ENVIRONMENT_VARIABLE) {
        Err(_) => Ok(true),
        Ok(value) => match value.trim() {
            "1" | "" => Ok(true),
            "0" => Ok(false),
            other => Err(format!("{ENVIRONMENT_VARIABLE}={other:?}: expected 0 or 1")),
        },
    }
}

/// The first spin budget on a host with `local_ranks` ranks of this job
/// (see [`SharedMemoryCollectives::spin_rounds`]): none when they outnumber
/// the cores.
pub fn spin_rounds_for(local_ranks: usize) -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
    if local_ranks > cores {
        0
    } else {
        SPIN_ROUNDS
    }
}

/// This process's side of the fast path.
#[derive(Debug, Default)]
pub struct SharedMemoryCollectives {
    /// The fast path may be taken (RESMPI_COLL_SHM, protocol `none`, shared
    /// memory present).
    pub enabled: bool,
    /// Waiting rounds spent spinning before yielding: [`SPIN_ROUNDS`], or
    /// none when this host's ranks outnumber its cores (a spinning rank
    /// would only hold the core the rank it waits for needs). Short on
    /// purpose: a peer running on another core answers within a few
    /// hundred nanoseconds, and one that does not (it shares this core, or
    /// the host is busy) can only answer once this process lets go.
    /// Measured on a busy 2-core host with unpinned ranks (the scheduler
    /// often puts both on one core): time per call grew linearly with the
    /// spin, 90 µs per barrier at 4096 rounds, 1-2 µs at 16; ranks pinned
    /// to their own cores did 0.31 µs at 4096 (docs/benchmarks.md).
    pub spin_rounds: u32,
    /// `RESMPI_COLL_SHM_TREE`: the member count from which reduce and
    /// gather go along a tree and scan along a chain, instead of
    /// [`TREE_MIN_MEMBERS`] and [`CHAIN_MIN_MEMBERS`].
    pub tree_min_members: Option<u32>,
    /// A buffer for partial results of the tree and the chain, kept to
    /// avoid an allocation per call.
    scratch: Vec<u8>,
    /// What each own slot last published, and who reads it: the slot is
    /// reused once each reader's receipt names that publication, or
    /// reclaimed without waiting when its group has lost a member.
    published: [Option<Published>; COLLECTIVE_SLOTS],
    /// Per world rank: its receipts for this process's slots as last read
    /// from its area (one line read shows all of them; re-read only when a
    /// slot's receipt is not there yet).
    receipts_seen: Vec<[u32; COLLECTIVE_SLOTS]>,
    /// Receipts this process owes, not yet written to its area: (owner's
    /// world rank, slot, publication). Written [`RECEIPT_BATCH`] at a time,
    /// and all of them before this process waits for anything
    /// ([`Engine::write_receipts`]), so an owner that keeps ahead reads a
    /// reader's row once per batch instead of once per call.
    unsent_receipts: Vec<(u32, u8, u32)>,
    /// Per world rank: the slot of its area where its next contribution
    /// is expected (after the last one found there).
    next_slot_of: Vec<u8>,
}

/// Who reads a publication, by rank in the call's communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Readers {
    /// Every member but the publisher `owner`.
    AllOthers { owner: u32 },
    /// One member (the root of a reduce or a gather).
    Member(u32),
    /// The members after `owner` (a scan).
    After { owner: u32 },
}

impl Readers {
    /// The readers among `size` members.
    fn members(self, size: u32) -> impl Iterator<Item = u32> {
        let (range, skip) = match self {
            Readers::AllOthers { owner } => (0..size, Some(owner)),
            Readers::Member(member) => (member..member + 1, None),
            Readers::After { owner } => (owner + 1..size, None),
        };
        range.filter(move |&member| Some(member) != skip)
    }
}

/// One of this process's publications.
#[derive(Debug)]
struct Published {
    /// World rank of each member of the communicator it was for.
    group: Arc<Vec<u32>>,
    readers: Readers,
    /// The number each reader's receipt must carry.
    publication: u32,
    /// The communicator's context (a revoked one's readers gave up).
    context: u32,
}

/// The group of a call's communicator, borrowed for the call without
/// touching its reference count (two locked instructions per call, a
/// tenth of a small broadcast's time).
///
/// Sound because a [`Call`] lives inside one blocking collective on its
/// communicator: the application cannot free a communicator while it is in
/// a collective on it, and the engine never replaces a communicator's
/// group (shrinking makes a new communicator).
#[derive(Clone, Copy, Debug)]
struct GroupRef(*const Vec<u32>);

impl std::ops::Deref for GroupRef {
    type Target = [u32];
    #[inline]
    fn deref(&self) -> &[u32] {
        // SAFETY: see the type's comment.
        unsafe { &*self.0 }
    }
}

/// One blocking collective on the fast path.
#[derive(Debug)]
pub struct Call {
    /// World rank of each member.
    group: GroupRef,
    /// This process's rank in the communicator.
    rank: u32,
    /// Tag of every contribution of this collective.
    tag: u64,
    /// The communicator (table index) and its context: a revoked one ends
    /// the call with `MPIX_ERR_REVOKED` (ULFM).
    comm: usize,
    context: u32,
}

impl Call {
    /// Members of the communicator.
    #[inline]
    pub fn size(&self) -> u32 {
        self.group.len() as u32
    }

    /// This process's rank in the communicator.
    pub fn rank(&self) -> u32 {
        self.rank
    }
}

/// Member `me`'s place in the binomial tree over `size` members in rank
/// order (rooted at 0) that the reduce and gather trees share: the distance
/// to its parent (`me` minus it; its lowest set bit, or the tree's whole
/// width for member 0) and its children (`me + 1`, `me + 2`, `me + 4`, ...
/// below that distance), the child at distance `d` covering the members up
/// to `me + 2d`. The children come as a range (no allocation on the
/// collective's path), lowest first.
fn binomial_tree_node(
    me: u32,
    size: u32,
) -> (
    u32,
    impl DoubleEndedIterator<Item = u32> + ExactSizeIterator + Clone,
) {
    let parent_distance = if me == 0 {
        size.next_power_of_two()
    } else {
        1 << me.trailing_zeros()
    };
    let mut child_count = 0;
    while (1 << child_count) < parent_distance && me + (1 << child_count) < size {
        child_count += 1;
    }
    (
        parent_distance,
        (0..child_count).map(move |exponent| me + (1 << exponent)),
    )
}

/// A read that was overtaken by a reclaim: a member died and the
/// contribution's owner gave up on this reader.
fn reclaimed_error(call: &Call, failed: Option<u32>) -> MpiError {
    match failed {
        Some(peer) => peer_failed_error(peer),
        None => MpiError::new(
            ErrorClass::ProcFailed,
            format!(
                "a member of the communicator (world ranks {:?}) has failed",
                call.group
            ),
        ),
    }
}

impl<F: Interceptor> Engine<F> {
    /// Begin a blocking collective on communicator `comm` in which each rank
    /// publishes at most `published_bytes` (the largest over the ranks, the
    /// same on all): `Some` when it takes the fast path, `None` when it
    /// must take the schedules. A member known to have failed is an error.
    pub fn shared_memory_call(
        &mut self,
        comm: usize,
        published_bytes: usize,
    ) -> MpiResult<Option<Call>> {
        if !self.shared_memory.enabled || published_bytes > MAX_PUBLISHED_BYTES {
            return Ok(None);
        }
        let Some(shm) = self.transports.shm.as_ref() else {
            return Ok(None);
        };
        let Some(Some(communicator)) = self.state.comms.get_mut(comm) else {
            return Err(MpiError::new(ErrorClass::Comm, "invalid communicator"));
        };
        let key = communicator.context as u64 >> 1;
        if communicator.is_inter()
            || !communicator.context.is_multiple_of(2)
            || key > MAX_COMMUNICATOR_KEY
            || communicator.shared_memory_sequence >= MAX_SEQUENCE
        {
            return Ok(None);
        }
        let routes = &self.transports.routes;
        let on_shared_memory = *communicator
            .members_on_shared_memory
            .get_or_insert_with(|| {
                communicator.group.iter().all(|&peer| {
                    matches!(routes[peer as usize], Route::Shm | Route::Loopback)
                        && shm.collective_area(peer).is_some()
                })
            });
        if !on_shared_memory {
            return Ok(None);
        }
        // Counted even when revoked: a member that has not seen the revoke
        // yet counts this call too, and the sequences must stay equal.
        communicator.shared_memory_sequence += 1;
        if communicator.revoked {
            return Err(crate::engine::revoked_error());
        }
        let call = Call {
            group: GroupRef(Arc::as_ptr(&communicator.group)),
            rank: communicator.rank,
            tag: collective_tag(key, communicator.shared_memory_sequence),
            comm,
            context: communicator.context,
        };
        if self.check_members(&call).is_err() {
            // Failing at once without a look at the paths would let a loop
            // of such calls spin for ever without seeing what a member sent
            // meanwhile (a revoke: ulfm-testing's api/revoke): progress
            // once, then judge.
            self.progress()?;
            self.check_members(&call)?;
        }
        Ok(Some(call))
    }

    /// The first member of `group` known to have failed.
    fn failed_member(&self, group: &[u32]) -> Option<u32> {
        if self.state.failed_count == 0 {
            return None;
        }
        group
            .iter()
            .copied()
            .find(|&peer| self.state.is_failed(peer))
    }

    /// `MPIX_ERR_PROC_FAILED` when a member of `call` is known to have failed.
    fn check_members(&self, call: &Call) -> MpiResult<()> {
        if self.state.comm_revoked(call.comm) {
            return Err(crate::engine::revoked_error());
        }
        match self.failed_member(&call.group) {
            Some(peer) => Err(peer_failed_error(peer)),
            None => Ok(()),
        }
    }

    /// Write the receipts this process owes into its area. Called before
    /// it waits for anything (here and in every progress round), so no
    /// owner ever waits on a receipt held back by a process that waits too.
    #[cold]
    pub(crate) fn write_receipts(&mut self) {
        let Some(own) = self
            .transports
            .shm
            .as_ref()
            .and_then(|shm| shm.collective_area(self.state.rank))
        else {
            return;
        };
        for (owner, index, publication) in self.shared_memory.unsent_receipts.drain(..) {
            own.write_receipt(owner, index as usize, publication);
        }
    }

    /// Whether receipts wait to be written.
    #[inline]
    pub(crate) fn owes_receipts(&self) -> bool {
        !self.shared_memory.unsent_receipts.is_empty()
    }

    /// Wait until `ready`, keeping the engine progressing and giving up
    /// when a member of `call` fails.
    fn wait_for_shared(
        &mut self,
        call: &Call,
        mut ready: impl FnMut(&mut Engine<F>) -> bool,
    ) -> MpiResult<()> {
        let mut rounds = 0u32;
        let mut since: Option<std::time::Instant> = None;
        if self.owes_receipts() {
            self.write_receipts();
        }
        loop {
            if ready(self) {
                return Ok(());
            }
            rounds = rounds.saturating_add(1);
            if rounds < self.shared_memory.spin_rounds {
                if rounds.is_multiple_of(PROGRESS_EVERY_ROUNDS) {
                    self.progress()?;
                    self.check_members(call)?;
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            if self.progress()? {
                // Something else moved (a message, a notice): check again
                // at once.
                self.check_members(call)?;
                self.between_rounds(Pause::None, SLEEP_US);
                continue;
            }
            self.check_members(call)?;
            let idle = since.get_or_insert_with(std::time::Instant::now).elapsed();
            if idle < YIELD_PHASE {
                self.between_rounds(Pause::Yield, SLEEP_US);
            } else {
                self.between_rounds(Pause::Sleep, SLEEP_US);
                self.while_idle(idle)?;
            }
        }
    }

    /// Whether every reader of own slot `index`'s last publication has a
    /// receipt for it (a slot never published is free). A reader's row is
    /// read again only when the receipts seen so far fall short.
    fn slot_received(&mut self, index: usize) -> bool {
        let SharedMemoryCollectives {
            published,
            receipts_seen,
            ..
        } = &mut self.shared_memory;
        let Some(last) = &published[index] else {
            return true;
        };
        let shm = self
            .transports
            .shm
            .as_ref()
            .expect("a fast-path call has shared memory");
        let me = self.state.rank;
        for member in last.readers.members(last.group.len() as u32) {
            let reader = last.group[member as usize] as usize;
            if receipts_seen.len() <= reader {
                receipts_seen.resize(reader + 1, [0; COLLECTIVE_SLOTS]);
            }
            if receipts_seen[reader][index] != last.publication {
                receipts_seen[reader] = shm
                    .collective_area(reader as u32)
                    .expect("every reader's area is mapped")
                    .receipts_for(me);
                if receipts_seen[reader][index] != last.publication {
                    return false;
                }
            }
        }
        true
    }

    /// Publish this rank's contribution of `length_bytes`, written by
    /// `fill`, for `readers` (nothing when there are none).
    fn publish_shared(
        &mut self,
        call: &Call,
        readers: Readers,
        length_bytes: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> MpiResult<()> {
        if readers.members(call.size()).next().is_none() {
            return Ok(());
        }
        debug_assert!(length_bytes <= MAX_PUBLISHED_BYTES);
        let shm = self
            .transports
            .shm
            .as_mut()
            .expect("a fast-path call has shared memory");
        let index = shm.take_collective_slot();
        let slot = shm
            .collective_area(self.state.rank)
            .expect("the own area is mapped")
            .slot(index);
        if !self.slot_received(index) {
            // Readers of the slot's last contribution that gave up (a member
            // of that communicator died) will never receipt it.
            self.wait_for_shared(call, |engine| {
                engine.slot_received(index)
                    || engine.shared_memory.published[index]
                        .as_ref()
                        .is_some_and(|last| {
                            engine.failed_member(&last.group).is_some()
                                // ULFM: readers of a revoked communicator
                                // gave up with MPIX_ERR_REVOKED.
                                || (engine.state.revoked_count > 0
                                    && engine.state.ulfm.is_revoked(last.context))
                        })
            })?;
        }
        // SAFETY: this process owns the area and publishes from this thread
        // only (the library lock is held); every reader receipted the slot
        // or gave up (checked just above).
        let publication =
            unsafe { slot.publish(call.tag, |payload| fill(&mut payload[..length_bytes])) };
        match &mut self.shared_memory.published[index] {
            Some(last) if std::ptr::eq(Arc::as_ptr(&last.group), call.group.0) => {
                last.readers = readers;
                last.publication = publication;
                last.context = call.context;
            }
            entry => {
                let Some(Some(communicator)) = self.state.comms.get(call.comm) else {
                    return Err(MpiError::new(ErrorClass::Comm, "invalid communicator"));
                };
                *entry = Some(Published {
                    group: communicator.group.clone(),
                    readers,
                    publication,
                    context: call.context,
                })
            }
        }
        self.count_send_for_kill();
        Ok(())
    }

    /// Publish `length_bytes` from `source`.
    fn publish_bytes(
        &mut self,
        call: &Call,
        readers: Readers,
        source: *const u8,
        length_bytes: usize,
    ) -> MpiResult<()> {
        self.publish_shared(call, readers, length_bytes, |payload| {
            if length_bytes > 0 {
                // SAFETY: the caller's `length_bytes` readable bytes, copied
                // into the slot's payload (a distinct mapping).
                unsafe {
                    std::ptr::copy_nonoverlapping(source, payload.as_mut_ptr(), length_bytes)
                };
            }
        })
    }

    /// The contribution of member `member` (not this process) to `call`,
    /// once it is published.
    fn take_shared(&mut self, call: &Call, member: u32) -> MpiResult<Found> {
        let area = self
            .transports
            .shm
            .as_ref()
            .and_then(|shm| shm.collective_area(call.group[member as usize]))
            .expect("every member's area is mapped (checked at the call's start)");
        let owner = call.group[member as usize] as usize;
        if self.shared_memory.next_slot_of.len() <= owner {
            self.shared_memory.next_slot_of.resize(owner + 1, 0);
        }
        let first = self.shared_memory.next_slot_of[owner] as usize;
        let found = match area.find(call.tag, first) {
            Some(found) => found,
            None => {
                let mut found = None;
                self.wait_for_shared(call, |_| {
                    found = area.find(call.tag, first);
                    found.is_some()
                })?;
                found.expect("ready means found")
            }
        };
        let next = (found.index + 1) % COLLECTIVE_SLOTS;
        self.shared_memory.next_slot_of[owner] = next as u8;
        // Where this owner's next contribution will be: by the next call
        // (back-to-back collectives, or an owner running ahead) the line
        // is here.
        area.prefetch(next);
        Ok(found)
    }

    /// Prefetch where the contributions of `members` to the coming reads
    /// are expected (see [`CollectiveArea::prefetch`]), so that a rank
    /// that reads several members waits for their lines at once rather
    /// than for one miss after another.
    fn prefetch_contributions(&self, call: &Call, members: impl Iterator<Item = u32>) {
        let Some(shm) = self.transports.shm.as_ref() else {
            return;
        };
        for member in members {
            let owner = call.group[member as usize];
            if let (Some(area), Some(&next)) = (
                shm.collective_area(owner),
                self.shared_memory.next_slot_of.get(owner as usize),
            ) {
                area.prefetch(next as usize);
            }
        }
    }

    /// Done reading `found`: an error when its owner reclaimed it meanwhile
    /// (what was read may be torn; a member has failed).
    fn finish_shared(&mut self, call: &Call, member: u32, found: Found) -> MpiResult<()> {
        if found.finish() {
            let owner = call.group[member as usize];
            let unsent = &mut self.shared_memory.unsent_receipts;
            unsent.push((owner, found.index as u8, found.publication()));
            if unsent.len() >= RECEIPT_BATCH {
                self.write_receipts();
            }
            return Ok(());
        }
        Err(reclaimed_error(call, self.failed_member(&call.group)))
    }

    /// The contribution of `member`, copied to `target` (`length_bytes`).
    fn copy_shared(
        &mut self,
        call: &Call,
        member: u32,
        offset_bytes: usize,
        target: *mut u8,
        length_bytes: usize,
    ) -> MpiResult<()> {
        let found = self.take_shared(call, member)?;
        if length_bytes > 0 {
            // SAFETY: the contribution holds `offset_bytes + length_bytes`
            // (every member publishes the agreed size); `target` is the
            // caller's `length_bytes` writable bytes, in private memory.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    found.payload(offset_bytes + length_bytes).add(offset_bytes),
                    target,
                    length_bytes,
                )
            };
        }
        self.finish_shared(call, member, found)
    }

    /// `target = contribution(member)[offset..] op target` over `count`
    /// elements.
    #[allow(clippy::too_many_arguments)]
    fn fold_shared(
        &mut self,
        call: &Call,
        member: u32,
        offset_bytes: usize,
        reduction: &Reduction,
        target: *mut u8,
        length_bytes: usize,
        count: usize,
    ) -> MpiResult<()> {
        let found = self.take_shared(call, member)?;
        if length_bytes > 0 {
            // SAFETY: the contribution holds `offset_bytes + length_bytes`;
            // `target` is the caller's `length_bytes` writable bytes, which
            // do not overlap it.
            unsafe {
                reduction.apply(
                    std::slice::from_raw_parts(
                        found.payload(offset_bytes + length_bytes).add(offset_bytes),
                        length_bytes,
                    ),
                    std::slice::from_raw_parts_mut(target, length_bytes),
                    count,
                )?
            };
        }
        self.finish_shared(call, member, found)
    }

    /// MPI_Barrier: everyone publishes an empty contribution and waits for
    /// everyone else's.
    pub fn shared_barrier(&mut self, call: &Call) -> MpiResult<()> {
        let size = call.size();
        self.publish_bytes(
            call,
            Readers::AllOthers { owner: call.rank },
            std::ptr::null(),
            0,
        )?;
        self.prefetch_contributions(call, (0..size).filter(|&member| member != call.rank));
        for member in (0..size).filter(|&member| member != call.rank) {
            let found = self.take_shared(call, member)?;
            self.finish_shared(call, member, found)?;
        }
        Ok(())
    }

    /// MPI_Bcast of `length_bytes` at `data` from `root`.
    pub fn shared_bcast(
        &mut self,
        call: &Call,
        data: *mut u8,
        length_bytes: usize,
        root: u32,
    ) -> MpiResult<()> {
        if call.rank == root {
            self.publish_bytes(call, Readers::AllOthers { owner: root }, data, length_bytes)
        } else {
            self.copy_shared(call, root, 0, data, length_bytes)
        }
    }

    /// MPI_Reduce of `count` elements (`length_bytes`) to `recv` at `root`;
    /// `send == recv` at the root is MPI_IN_PLACE.
    #[allow(clippy::too_many_arguments)]
    pub fn shared_reduce(
        &mut self,
        call: &Call,
        reduction: &Reduction,
        send: *const u8,
        recv: *mut u8,
        length_bytes: usize,
        count: usize,
        root: u32,
    ) -> MpiResult<()> {
        if call.size() >= self.tree_min_members() {
            return self.shared_reduce_tree(call, reduction, send, recv, length_bytes, count, root);
        }
        if call.rank != root {
            return self.publish_bytes(call, Readers::Member(root), send, length_bytes);
        }
        // In place, the fold overwrites the root's own contribution before
        // it is used: keep a copy.
        let own_copy: Option<Vec<u8>> = (std::ptr::eq(send, recv) && length_bytes > 0).then(|| {
            // SAFETY: the caller's `length_bytes` readable bytes.
            unsafe { std::slice::from_raw_parts(send, length_bytes) }.to_vec()
        });
        let own = own_copy.as_ref().map_or(send, |copy| copy.as_ptr());
        self.fold_in_rank_order(call, reduction, own, 0, recv, length_bytes, count)
    }

    /// The member count from which reduce and gather use trees.
    fn tree_min_members(&self) -> u32 {
        self.shared_memory
            .tree_min_members
            .unwrap_or(TREE_MIN_MEMBERS)
    }

    /// The member count from which scans use the chain.
    fn chain_min_members(&self) -> u32 {
        self.shared_memory
            .tree_min_members
            .unwrap_or(CHAIN_MIN_MEMBERS)
    }

    /// MPI_Reduce along a binomial tree over the ranks in their order:
    /// member `m` reads the partial results of its children `m + 1`,
    /// `m + 2`, `m + 4`, ... (each covering the ranks up to the next one),
    /// folds them right to left with its own contribution on the left,
    /// and publishes the result for its parent (`m` minus its lowest set
    /// bit). Every operand keeps its rank order, so non-commutative ops
    /// are right. Member 0 ends with the result; it hands it to `root`
    /// when that is another member. Each member publishes once (member 0
    /// only for another root) and reads at most log2(size) partials.
    #[allow(clippy::too_many_arguments)]
    fn shared_reduce_tree(
        &mut self,
        call: &Call,
        reduction: &Reduction,
        send: *const u8,
        recv: *mut u8,
        length_bytes: usize,
        count: usize,
        root: u32,
    ) -> MpiResult<()> {
        let me = call.rank;
        let (parent_distance, children) = binomial_tree_node(me, call.size());
        // Own contribution (the root's recv in place: kept from the fold).
        let mut partial = std::mem::take(&mut self.shared_memory.scratch);
        partial.clear();
        let result = (|| {
            let own = send;
            let partial_pointer = if children.len() == 0 {
                own
            } else {
                partial.resize(length_bytes, 0);
                let target = partial.as_mut_ptr();
                self.prefetch_contributions(call, children.clone());
                let mut rest = children.rev();
                let last = rest.next().expect("a child");
                self.copy_shared(call, last, 0, target, length_bytes)?;
                for child in rest {
                    self.fold_shared(call, child, 0, reduction, target, length_bytes, count)?;
                }
                if length_bytes > 0 {
                    // SAFETY: `own` holds `length_bytes` (the caller's send
                    // buffer, or recv in place at the root, untouched so
                    // far); `partial` is private and does not overlap it.
                    unsafe {
                        reduction.apply(
                            std::slice::from_raw_parts(own, length_bytes),
                            std::slice::from_raw_parts_mut(target, length_bytes),
                            count,
                        )?
                    };
                }
                target as *const u8
            };
            if me != 0 {
                self.publish_bytes(
                    call,
                    Readers::Member(me - parent_distance),
                    partial_pointer,
                    length_bytes,
                )?;
                if me == root {
                    self.copy_shared(call, 0, 0, recv, length_bytes)?;
                }
            } else if root == 0 {
                if length_bytes > 0 {
                    // SAFETY: `recv` holds `length_bytes`; the partial is
                    // private (or `send`, which MPI keeps apart from recv
                    // unless in place, where they are the same).
                    unsafe { std::ptr::copy(partial_pointer, recv, length_bytes) };
                }
            } else {
                self.publish_bytes(call, Readers::Member(root), partial_pointer, length_bytes)?;
            }
            Ok(())
        })();
        self.shared_memory.scratch = partial;
        result
    }

    /// `recv = c_0 op (c_1 op (... op c_{n-1}))` over the bytes at
    /// `offset_bytes` of every member's contribution `c_i`, this rank's at
    /// `own` (already offset; it must not overlap `recv` unless this rank
    /// is the last member). Every rank that folds gets the same bits.
    #[allow(clippy::too_many_arguments)]
    fn fold_in_rank_order(
        &mut self,
        call: &Call,
        reduction: &Reduction,
        own: *const u8,
        offset_bytes: usize,
        recv: *mut u8,
        length_bytes: usize,
        count: usize,
    ) -> MpiResult<()> {
        let last = call.size() - 1;
        self.prefetch_contributions(call, (0..=last).filter(|&member| member != call.rank));
        for member in (0..=last).rev() {
            let first = member == last;
            if member != call.rank {
                if first {
                    self.copy_shared(call, member, offset_bytes, recv, length_bytes)?;
                } else {
                    self.fold_shared(
                        call,
                        member,
                        offset_bytes,
                        reduction,
                        recv,
                        length_bytes,
                        count,
                    )?;
                }
            } else if length_bytes > 0 {
                // SAFETY: `own` and `recv` hold `length_bytes` each and do
                // not overlap when `apply` runs (the caller's promise).
                unsafe {
                    if first {
                        // (Alone in place, `own` is `recv`.)
                        std::ptr::copy(own, recv, length_bytes);
                    } else {
                        reduction.apply(
                            std::slice::from_raw_parts(own, length_bytes),
                            std::slice::from_raw_parts_mut(recv, length_bytes),
                            count,
                        )?;
                    }
                }
            }
        }
        Ok(())
    }

    /// MPI_Allreduce of `count` elements (`length_bytes`); `send == recv`
    /// is MPI_IN_PLACE.
    pub fn shared_allreduce(
        &mut self,
        call: &Call,
        reduction: &Reduction,
        send: *const u8,
        recv: *mut u8,
        length_bytes: usize,
        count: usize,
    ) -> MpiResult<()> {
        let size = call.size();
        self.publish_bytes(
            call,
            Readers::AllOthers { owner: call.rank },
            send,
            length_bytes,
        )?;
        // The own contribution is read from where it was published when the
        // fold would overwrite it (in place).
        let own = if std::ptr::eq(send, recv) && size > 1 {
            self.own_published(call)?
        } else {
            send
        };
        self.fold_in_rank_order(call, reduction, own, 0, recv, length_bytes, count)
    }

    /// MPI_Reduce_scatter_block of blocks of `count` elements
    /// (`block_bytes`): every member publishes its whole input (`size`
    /// blocks at `send`) and folds block `rank` of every contribution, in
    /// rank order, into `recv`. `send == recv` is MPI_IN_PLACE (the input
    /// in `recv`, the result in its first block).
    pub fn shared_reduce_scatter_block(
        &mut self,
        call: &Call,
        reduction: &Reduction,
        send: *const u8,
        recv: *mut u8,
        block_bytes: usize,
        count: usize,
    ) -> MpiResult<()> {
        let size = call.size();
        self.publish_bytes(
            call,
            Readers::AllOthers { owner: call.rank },
            send,
            size as usize * block_bytes,
        )?;
        let offset_bytes = call.rank as usize * block_bytes;
        // In place the fold overwrites the input: fold the published copy.
        let input = if std::ptr::eq(send, recv) && size > 1 {
            self.own_published(call)?
        } else {
            send
        };
        let own = input.wrapping_add(offset_bytes);
        self.fold_in_rank_order(call, reduction, own, offset_bytes, recv, block_bytes, count)
    }

    /// Where this rank's contribution to `call` was published (it stays
    /// there until every reader has consumed it, which cannot happen before
    /// this rank finishes the call: the readers are waiting for the same
    /// collective).
    fn own_published(&self, call: &Call) -> MpiResult<*const u8> {
        let area = self
            .transports
            .shm
            .as_ref()
            .and_then(|shm| shm.collective_area(self.state.rank))
            .expect("the own area is mapped");
        let found = area
            .find(call.tag, 0)
            .ok_or_else(|| reclaimed_error(call, self.failed_member(&call.group)))?;
        Ok(found.payload(0))
    }

    /// MPI_Allgather of blocks of `block_bytes`: `send` None is MPI_IN_PLACE
    /// (the own block is already in `recv`).
    pub fn shared_allgather(
        &mut self,
        call: &Call,
        send: Option<*const u8>,
        block_bytes: usize,
        recv: *mut u8,
    ) -> MpiResult<()> {
        let own_block = recv.wrapping_add(call.rank as usize * block_bytes);
        let source = send.unwrap_or(own_block);
        self.publish_bytes(
            call,
            Readers::AllOthers { owner: call.rank },
            source,
            block_bytes,
        )?;
        if let Some(send) = send {
            if block_bytes > 0 {
                // SAFETY: `send` and the own block of `recv` hold
                // `block_bytes` each; MPI forbids their overlap.
                unsafe { std::ptr::copy(send, own_block, block_bytes) };
            }
        }
        self.copy_every_other_block(call, recv, block_bytes)
    }

    /// Copy every other member's published block into its place in `recv`
    /// (block i at `i * block_bytes`): the reading half of allgather, and
    /// of gather at the root.
    fn copy_every_other_block(
        &mut self,
        call: &Call,
        recv: *mut u8,
        block_bytes: usize,
    ) -> MpiResult<()> {
        let others = (0..call.size()).filter(|&member| member != call.rank);
        self.prefetch_contributions(call, others.clone());
        for member in others {
            let target = recv.wrapping_add(member as usize * block_bytes);
            self.copy_shared(call, member, 0, target, block_bytes)?;
        }
        Ok(())
    }

    /// MPI_Gather of blocks of `block_bytes` to `recv` at `root`: every
    /// other member publishes its block for the root alone, which copies
    /// each into place; `send` None is MPI_IN_PLACE at the root (its block
    /// is already in `recv`). A non-root returns once it has published.
    pub fn shared_gather(
        &mut self,
        call: &Call,
        send: Option<*const u8>,
        block_bytes: usize,
        recv: *mut u8,
        root: u32,
    ) -> MpiResult<()> {
        if call.size() >= self.tree_min_members()
            && (call.size() as usize).saturating_mul(block_bytes) <= MAX_PUBLISHED_BYTES
        {
            return self.shared_gather_tree(call, send, block_bytes, recv, root);
        }
        if call.rank != root {
            let send = send.unwrap_or(std::ptr::null());
            return self.publish_bytes(call, Readers::Member(root), send, block_bytes);
        }
        if let Some(send) = send {
            if block_bytes > 0 {
                // SAFETY: `send` and the root's block of `recv` hold
                // `block_bytes` each; MPI forbids their overlap.
                unsafe { std::ptr::copy(send, recv.add(root as usize * block_bytes), block_bytes) };
            }
        }
        self.copy_every_other_block(call, recv, block_bytes)
    }

    /// MPI_Scatter of blocks of `block_bytes` from `send` at `root`: the
    /// root publishes its whole send buffer, every other member copies its
    /// own block out of it; `recv` None is MPI_IN_PLACE at the root.
    pub fn shared_scatter(
        &mut self,
        call: &Call,
        send: *const u8,
        block_bytes: usize,
        recv: Option<*mut u8>,
        root: u32,
    ) -> MpiResult<()> {
        let size = call.size();
        let me = call.rank as usize;
        if call.rank == root {
            self.publish_bytes(
                call,
                Readers::AllOthers { owner: call.rank },
                send,
                size as usize * block_bytes,
            )?;
            if let Some(recv) = recv {
                if block_bytes > 0 {
                    // SAFETY: `send` holds `size` blocks and `recv` one;
                    // MPI forbids their overlap.
                    unsafe { std::ptr::copy(send.add(me * block_bytes), recv, block_bytes) };
                }
            }
            return Ok(());
        }
        let recv = recv.unwrap_or(std::ptr::null_mut());
        self.copy_shared(call, root, me * block_bytes, recv, block_bytes)
    }

    /// MPI_Alltoall of blocks of `block_bytes` each: block `i` of `send`
    /// goes to member `i`, block `i` of `recv` comes from it; `send` None
    /// is MPI_IN_PLACE (the blocks to send are in `recv`).
    pub fn shared_alltoall(
        &mut self,
        call: &Call,
        send: Option<*const u8>,
        recv: *mut u8,
        block_bytes: usize,
    ) -> MpiResult<()> {
        let size = call.size();
        let me = call.rank as usize;
        // In place, publishing copies the blocks before any is overwritten.
        let source = send.unwrap_or(recv);
        self.publish_bytes(
            call,
            Readers::AllOthers { owner: call.rank },
            source,
            size as usize * block_bytes,
        )?;
        if let Some(send) = send {
            if block_bytes > 0 {
                // SAFETY: both buffers hold `size` blocks; MPI forbids
                // their overlap.
                unsafe {
                    std::ptr::copy(
                        send.add(me * block_bytes),
                        recv.add(me * block_bytes),
                        block_bytes,
                    )
                };
            }
        }
        self.prefetch_contributions(call, (0..size).filter(|&member| member != call.rank));
        for member in (0..size).filter(|&member| member != call.rank) {
            let target = recv.wrapping_add(member as usize * block_bytes);
            self.copy_shared(call, member, me * block_bytes, target, block_bytes)?;
        }
        Ok(())
    }

    /// MPI_Scan (`inclusive`) or MPI_Exscan of `count` elements
    /// (`length_bytes`); `send == recv` is MPI_IN_PLACE.
    #[allow(clippy::too_many_arguments)]
    pub fn shared_scan(
        &mut self,
        call: &Call,
        reduction: &Reduction,
        send: *const u8,
        recv: *mut u8,
        length_bytes: usize,
        count: usize,
        inclusive: bool,
    ) -> MpiResult<()> {
        let me = call.rank;
        if call.size() >= self.chain_min_members() {
            return self.shared_scan_chain(
                call,
                reduction,
                send,
                recv,
                length_bytes,
                count,
                inclusive,
            );
        }
        self.publish_bytes(call, Readers::After { owner: me }, send, length_bytes)?;
        // Fold the members before this one (and this one when inclusive),
        // right to left.
        let last = if inclusive {
            me
        } else if me == 0 {
            // Exscan leaves rank 0's buffer undefined: untouched.
            return Ok(());
        } else {
            me - 1
        };
        self.prefetch_contributions(call, 0..me);
        if last == me {
            if !std::ptr::eq(send, recv) && length_bytes > 0 {
                // SAFETY: both hold `length_bytes`; MPI forbids overlap.
                unsafe { std::ptr::copy_nonoverlapping(send, recv, length_bytes) };
            }
        } else {
            self.copy_shared(call, last, 0, recv, length_bytes)?;
        }
        for member in (0..last).rev() {
            self.fold_shared(call, member, 0, reduction, recv, length_bytes, count)?;
        }
        Ok(())
    }

    /// MPI_Scan / MPI_Exscan along a chain: member `m` reads the prefix
    /// `c_0 op ... op c_{m-1}` that member `m - 1` published, folds its own
    /// contribution on the right and publishes the new prefix for `m + 1`.
    /// One read and one publication per member, whatever the size (the
    /// linear form has the last member read every other one); back-to-back
    /// calls pipeline down the chain.
    #[allow(clippy::too_many_arguments)]
    fn shared_scan_chain(
        &mut self,
        call: &Call,
        reduction: &Reduction,
        send: *const u8,
        recv: *mut u8,
        length_bytes: usize,
        count: usize,
        inclusive: bool,
    ) -> MpiResult<()> {
        let (me, size) = (call.rank, call.size());
        let has_next = me + 1 < size;
        if me == 0 {
            if inclusive && !std::ptr::eq(send, recv) && length_bytes > 0 {
                // SAFETY: both hold `length_bytes`; MPI forbids overlap.
                unsafe { std::ptr::copy_nonoverlapping(send, recv, length_bytes) };
            }
            // (Exscan leaves rank 0's buffer undefined: untouched.)
            return if has_next {
                self.publish_bytes(call, Readers::Member(1), send, length_bytes)
            } else {
                Ok(())
            };
        }
        if inclusive {
            // recv = prefix op own, then recv is the prefix to pass on.
            if !std::ptr::eq(send, recv) && length_bytes > 0 {
                // SAFETY: as above.
                unsafe { std::ptr::copy_nonoverlapping(send, recv, length_bytes) };
            }
            self.fold_shared(call, me - 1, 0, reduction, recv, length_bytes, count)?;
            return if has_next {
                self.publish_bytes(call, Readers::Member(me + 1), recv, length_bytes)
            } else {
                Ok(())
            };
        }
        // Exscan: recv = the prefix; the next member needs prefix op own,
        // folded in a private copy of own (send may be recv in place).
        let mut next = std::mem::take(&mut self.shared_memory.scratch);
        next.clear();
        if has_next && length_bytes > 0 {
            // SAFETY: `send` holds `length_bytes`, read before recv is written.
            next.extend_from_slice(unsafe { std::slice::from_raw_parts(send, length_bytes) });
        }
        let result = (|| {
            self.copy_shared(call, me - 1, 0, recv, length_bytes)?;
            if !has_next {
                return Ok(());
            }
            if length_bytes > 0 {
                // SAFETY: recv holds the prefix (`length_bytes`); `next` is private.
                unsafe {
                    reduction.apply(
                        std::slice::from_raw_parts(recv, length_bytes),
                        &mut next,
                        count,
                    )?
                };
            }
            self.publish_bytes(call, Readers::Member(me + 1), next.as_ptr(), length_bytes)
        })();
        self.shared_memory.scratch = next;
        result
    }
    /// MPI_Gather along the binomial tree of [`Engine::shared_reduce_tree`]:
    /// member `m` gathers the blocks of the ranks it covers (`m` up to its
    /// parent's next child) in rank order, its own first and each child's
    /// publication after it, and publishes them for its parent; member 0
    /// ends with every block (in `recv` when it is the root, else it
    /// publishes them for the root). The root reads at most log2(size)
    /// publications instead of size - 1. Taken while all blocks fit one
    /// publication (the largest is member 0's for another root).
    fn shared_gather_tree(
        &mut self,
        call: &Call,
        send: Option<*const u8>,
        block_bytes: usize,
        recv: *mut u8,
        root: u32,
    ) -> MpiResult<()> {
        let (me, size) = (call.rank, call.size());
        let (parent_distance, children) = binomial_tree_node(me, size);
        let span = parent_distance.min(size - me) as usize;
        // Own block: the send buffer, or at the root in place its block of recv.
        let own = send.unwrap_or_else(|| recv.wrapping_add(me as usize * block_bytes));
        let mut gathered = std::mem::take(&mut self.shared_memory.scratch);
        gathered.clear();
        let result = (|| {
            let target: *mut u8 = if me == 0 && root == 0 {
                recv
            } else {
                gathered.resize(span * block_bytes, 0);
                gathered.as_mut_ptr()
            };
            if block_bytes > 0 && !std::ptr::eq(own, target) {
                // SAFETY: `own` holds a block; `target` holds `span` blocks
                // (private, or root 0's recv, whose block 0 it is and
                // which MPI keeps apart from send).
                unsafe { std::ptr::copy(own, target, block_bytes) };
            }
            self.prefetch_contributions(call, children.clone());
            for child in children {
                let child_span = (child - me).min(size - child) as usize;
                let offset = (child - me) as usize * block_bytes;
                self.copy_shared(
                    call,
                    child,
                    0,
                    target.wrapping_add(offset),
                    child_span * block_bytes,
                )?;
            }
            if me != 0 {
                self.publish_bytes(
                    call,
                    Readers::Member(me - parent_distance),
                    target,
                    span * block_bytes,
                )?;
                if me == root {
                    self.copy_shared(call, 0, 0, recv, size as usize * block_bytes)?;
                }
            } else if root != 0 {
                self.publish_bytes(
                    call,
                    Readers::Member(root),
                    target,
                    size as usize * block_bytes,
                )?;
            }
            Ok(())
        })();
        self.shared_memory.scratch = gathered;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::binomial_tree_node;

    #[test]
    fn the_binomial_tree_covers_every_member_once_in_rank_order() {
        let node = |me, size| {
            let (distance, children) = binomial_tree_node(me, size);
            (distance, children.collect::<Vec<u32>>())
        };
        assert_eq!(node(0, 9), (16, vec![1, 2, 4, 8]));
        assert_eq!(node(4, 9), (4, vec![5, 6]));
        assert_eq!(node(6, 9), (2, vec![7]));
        assert_eq!(node(8, 9), (8, vec![]));
        assert_eq!(node(0, 1), (1, vec![]));
        for size in 1..40u32 {
            let mut parent_of = vec![None; size as usize];
            for me in 0..size {
                let (distance, children) = binomial_tree_node(me, size);
                for child in children {
                    assert!(
                        parent_of[child as usize].replace(me).is_none(),
                        "{child} twice"
                    );
                    // The child's own parent distance brings it back here.
                    assert_eq!(binomial_tree_node(child, size).0, child - me);
                }
                if me > 0 {
                    assert!(distance <= me);
                }
            }
            assert!(parent_of[0].is_none());
            assert!(parent_of[1..].iter().all(Option::is_some), "size {size}");
        }
    }
}
