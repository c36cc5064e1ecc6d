//! The direct path of one-sided communication on one host: Put, Get and
//! the accumulates are loads and stores in the target's window, which
//! every member has mapped, instead of active messages its engine applies
//! and answers (`engine/rma.rs`).
//!
//! Why: on one host an active message costs a frame each way and a turn
//! of the target's engine (2.7 µs for an 8-byte put under lock + flush,
//! where Open MPI's `osc/sm` stores in 0.04), and a large get is copied
//! into frames and out of them again. A window whose memory the library
//! allocates (`MPI_Win_allocate`, `MPI_Win_allocate_shared`) can live in a
//! shared segment, so the origin moves the bytes itself, once, packing and
//! unpacking derived datatypes on the way, and an operation is complete
//! (locally and at the target) when the call returns.
//!
//! Which windows: decided collectively when the window is created (`rma.rs`,
//! `direct_agreed`), from what every member can judge alike: the flavor,
//! every member on this host over shared memory, a build whose
//! fault-tolerance protocol has no hooks (replication or message logging
//! must see every operation as a frame: those builds keep the active
//! messages), and `RESMPI_RMA_SHM` (`0` turns the path off, for
//! comparison). The minimum over the members is taken, so one member's
//! `0` turns it off everywhere; never timing.
//!
//! Atomicity: every accumulate-like operation (Accumulate, Get_accumulate,
//! Fetch_and_op, Compare_and_swap) on a target holds that target's
//! accumulate lock, a word in the segment's control block of the target
//! (after the window memory), for the whole operation. So accumulates are
//! atomic per element with respect to each other whatever their op and
//! type, as MPI asks of same-op, same-type ones. The lock word names its
//! holder (world rank + 1): a waiter that finds the holder dead (the
//! engine knows; waiting keeps the engine progressing so it learns)
//! takes the lock over, so a death inside an accumulate never wedges the
//! other processes.
//!
//! Synchronisation: no operation is ever outstanding, so flush is a
//! memory fence; fence is a fence, the window communicator's barrier and
//! a fence. Passive-target locks are in shared memory too (`Direct::lock`:
//! a writer-preferring reader-writer lock per target, an exclusive claim
//! word and a shared flag per origin), so an epoch needs nothing from the
//! target's engine and a target computing outside MPI is served without
//! the progress thread. Post/complete keep the engine's notices (one per
//! epoch, not per operation), with fences around them. A lock holder or
//! reader found dead is dropped, and lock/unlock toward a target known to
//! have failed end with `MPIX_ERR_PROC_FAILED` (`rma_ops.rs`), as on the
//! active messages.

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use resmpi_core::datatype::TypeInfo;
use resmpi_core::op::{reduce_predefined, Op};
use resmpi_core::{ErrorClass, MpiError, MpiResult};

/// The environment variable that turns the direct path off (`0`) or on
/// (`1`, the default).
pub(crate) const ENVIRONMENT_VARIABLE: &str = "RESMPI_RMA_SHM";

/// Bytes of one rank's control block (a cache line of its own).
pub(crate) const CONTROL_BYTES: usize = 64;

/// Bytes of a direct window's control area for `ranks` members: a
/// control block per member, then a shared-lock flag per (target,
/// origin) pair.
pub(crate) fn control_area_bytes(ranks: usize) -> usize {
    ranks * CONTROL_BYTES + (ranks * ranks).next_multiple_of(ALIGNMENT_BYTES)
}

/// Alignment of each rank's memory in an `MPI_Win_allocate` segment and
/// of the control blocks.
pub(crate) const ALIGNMENT_BYTES: usize = 64;

/// Whether `RESMPI_RMA_SHM` leaves the direct path on; an error for a
/// value other than `0` or `1`.
pub(crate) fn enabled_by_environment() -> Result<bool, String> {
    match std::env::var(ENVIRONMENT_VARIABLE) {
        Err(_) => Ok(true),
        Ok(value) => match value.trim() {
            "1" | "" => Ok(true),
            "0" => Ok(false),
            other => Err(format!("{ENVIRONMENT_VARIABLE}={other:?}: expected 0 or 1")),
        },
    }
}

/// One rank's control block in the segment.
#[repr(C, align(64))]
struct Control {
    /// The accumulate lock: 0 free, else the holder's world rank + 1.
    accumulate: AtomicU32,
    /// The passive-target exclusive lock (MPI_Win_lock): 0 free, else the
    /// holder's (or the waiting writer's) world rank + 1.
    exclusive: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<Control>() == CONTROL_BYTES);

/// A window on the direct path, as this process sees it.
pub(crate) struct Direct {
    /// Every window rank's base address in this process's mapping.
    bases: Vec<usize>,
    /// The control blocks, one per window rank, in the segment; then the
    /// shared-lock flags, `flags[target * ranks + origin]` (1: held).
    controls: *const Control,
    /// World rank of each window rank.
    group: Vec<u32>,
    /// This process's world rank.
    me: u32,
    /// This process's window rank.
    rank: usize,
}

/// Copy the bytes of the `from` runs into the `to` runs, in order (both
/// hold the same number of bytes; runs may overlap: memmove).
///
/// # Safety
/// Every run must be valid memory for its side (reads, writes).
pub(crate) unsafe fn copy_runs(from: &[(usize, usize)], to: &[(usize, usize)]) {
    let (mut i, mut j, mut within_from, mut within_to) = (0, 0, 0, 0);
    while i < from.len() && j < to.len() {
        let (from_address, from_length) = from[i];
        let (to_address, to_length) = to[j];
        let length = (from_length - within_from).min(to_length - within_to);
        // SAFETY: inside both runs (the caller's promise).
        unsafe {
            std::ptr::copy(
                (from_address + within_from) as *const u8,
                (to_address + within_to) as *mut u8,
                length,
            )
        };
        within_from += length;
        within_to += length;
        if within_from == from_length {
            i += 1;
            within_from = 0;
        }
        if within_to == to_length {
            j += 1;
            within_to = 0;
        }
    }
}

/// Held accumulate lock of one target; released when dropped.
struct AccumulateGuard<'a>(&'a AtomicU32);

impl Drop for AccumulateGuard<'_> {
    fn drop(&mut self) {
        // Release: the target's bytes written under the lock are seen by
        // the next holder.
        self.0.store(0, Ordering::Release);
    }
}

/// How a waiter learns that a lock holder died: progresses the engine
/// once and says whether the world rank given has failed.
pub(crate) type HolderDead<'a> = &'a mut dyn FnMut(u32) -> MpiResult<bool>;

/// Spins before a waiter yields the CPU (ranks may outnumber cores).
const SPINS: u32 = 64;
/// Rounds between two looks at the holder's liveness (each looks through
/// the engine, under the library lock, and progresses it).
const ROUNDS_PER_CHECK: u32 = 64;
/// Rounds after which a waiter sleeps instead of yielding (a lock held
/// across an application's computation).
const YIELD_ROUNDS: u32 = 20_000;
/// That sleep.
const SLEEP: std::time::Duration = std::time::Duration::from_micros(50);

/// A waiter's pacing: spin, then yield, then sleep; every
/// [`ROUNDS_PER_CHECK`] rounds it asks whether the process it waits for
/// died (which also keeps the engine progressing).
#[derive(Default)]
struct Backoff {
    rounds: u32,
}

impl Backoff {
    /// One round of waiting for world rank `holder`; true when it is
    /// known to have failed.
    fn pause(&mut self, holder: u32, holder_dead: HolderDead) -> MpiResult<bool> {
        self.rounds = if self.rounds == u32::MAX {
            YIELD_ROUNDS
        } else {
            self.rounds + 1
        };
        if self.rounds <= SPINS {
            std::hint::spin_loop();
            return Ok(false);
        }
        if self.rounds.is_multiple_of(ROUNDS_PER_CHECK) && holder_dead(holder)? {
            return Ok(true);
        }
        if self.rounds < YIELD_ROUNDS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(SLEEP);
        }
        Ok(false)
    }
}

impl Direct {
    /// The direct view of a window: `bases` of every rank in this mapping,
    /// `controls` the first control block (`group.len()` of them).
    ///
    /// # Safety
    /// The mapping must hold every base's memory and the control blocks
    /// until the window is freed (and this value with it).
    pub(crate) unsafe fn new(bases: Vec<usize>, controls: usize, group: Vec<u32>, me: u32) -> Self {
        let rank = group.iter().position(|&member| member == me).unwrap_or(0);
        Direct {
            bases,
            controls: controls as *const Control,
            group,
            me,
            rank,
        }
    }

    /// Target runs (offsets in `rank`'s window, checked against its size
    /// by the caller) as addresses in this process.
    fn addresses(&self, rank: usize, runs: &[(isize, usize)]) -> Vec<(usize, usize)> {
        let base = self.bases[rank];
        runs.iter()
            .map(|&(offset, length)| (base.wrapping_add_signed(offset), length))
            .collect()
    }

    fn control(&self, rank: usize) -> &Control {
        assert!(rank < self.group.len());
        // SAFETY: one of the group's control blocks in the mapping (new's
        // contract); only atomics are touched.
        unsafe { &*self.controls.add(rank) }
    }

    /// The shared-lock flags of target `rank`, one per origin.
    fn flags(&self, rank: usize) -> &[AtomicU8] {
        let ranks = self.group.len();
        assert!(rank < ranks);
        // SAFETY: the flags follow the control blocks in the mapping
        // (control_area_bytes); only atomics are touched.
        unsafe {
            let first = self.controls.add(ranks).cast::<AtomicU8>();
            std::slice::from_raw_parts(first.add(rank * ranks), ranks)
        }
    }

    /// MPI_Win_lock on window rank `rank`, in shared memory: a reader-
    /// writer lock that prefers writers. A reader raises its flag and then
    /// looks for a writer (backing off if there is one); a writer claims
    /// the exclusive word and then waits for the raised flags to fall.
    /// Both sides store before they load, in one total order (SeqCst), so
    /// one of them always sees the other. A holder found dead (the
    /// engine's verdict) loses its claim or its flag.
    pub(crate) fn lock(
        &self,
        rank: usize,
        exclusive: bool,
        holder_dead: HolderDead,
    ) -> MpiResult<()> {
        let word = &self.control(rank).exclusive;
        let mut backoff = Backoff::default();
        if !exclusive {
            let flag = &self.flags(rank)[self.rank];
            loop {
                let holder = word.load(Ordering::SeqCst);
                if holder == 0 {
                    flag.store(1, Ordering::SeqCst);
                    if word.load(Ordering::SeqCst) == 0 {
                        return Ok(());
                    }
                    flag.store(0, Ordering::SeqCst);
                    continue;
                }
                if backoff.pause(holder - 1, holder_dead)? {
                    let _ = word.compare_exchange(holder, 0, Ordering::SeqCst, Ordering::Relaxed);
                }
            }
        }
        loop {
            match word.compare_exchange(0, self.me + 1, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => break,
                Err(0) => continue,
                Err(holder) => {
                    if backoff.pause(holder - 1, holder_dead)? {
                        let _ =
                            word.compare_exchange(holder, 0, Ordering::SeqCst, Ordering::Relaxed);
                    }
                }
            }
        }
        let mut backoff = Backoff::default();
        for (origin, flag) in self.flags(rank).iter().enumerate() {
            while flag.load(Ordering::SeqCst) != 0 {
                if backoff.pause(self.group[origin], holder_dead)? {
                    flag.store(0, Ordering::SeqCst);
                }
            }
        }
        Ok(())
    }

    /// MPI_Win_unlock on window rank `rank` (after [`Direct::lock`]).
    pub(crate) fn unlock(&self, rank: usize, exclusive: bool) {
        if exclusive {
            // Only this process's claim (a survivor may have taken a
            // claim over that it thought dead: never clear another's).
            let _ = self.control(rank).exclusive.compare_exchange(
                self.me + 1,
                0,
                Ordering::Release,
                Ordering::Relaxed,
            );
        } else {
            self.flags(rank)[self.rank].store(0, Ordering::Release);
        }
    }

    /// MPI_Put: the origin runs into `rank`'s window at `target` offsets.
    ///
    /// # Safety
    /// `origin` must be readable memory of the application (MPI's
    /// contract), `target` inside the target's window (checked by the
    /// caller).
    pub(crate) unsafe fn put(
        &self,
        rank: usize,
        origin: &[(usize, usize)],
        target: &[(isize, usize)],
    ) {
        let target = self.addresses(rank, target);
        // SAFETY: as promised by the caller.
        unsafe { copy_runs(origin, &target) };
    }

    /// MPI_Get: `rank`'s window at `target` offsets into the origin runs.
    ///
    /// # Safety
    /// As [`Direct::put`], with `origin` writable.
    pub(crate) unsafe fn get(
        &self,
        rank: usize,
        origin: &[(usize, usize)],
        target: &[(isize, usize)],
    ) {
        let target = self.addresses(rank, target);
        // SAFETY: as promised by the caller.
        unsafe { copy_runs(&target, origin) };
    }

    /// Take `rank`'s accumulate lock.
    fn lock_accumulate(
        &self,
        rank: usize,
        holder_dead: HolderDead,
    ) -> MpiResult<AccumulateGuard<'_>> {
        let word = &self.control(rank).accumulate;
        let mut backoff = Backoff::default();
        loop {
            match word.compare_exchange_weak(0, self.me + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Ok(AccumulateGuard(word)),
                Err(0) => continue,
                Err(holder) => {
                    if backoff.pause(holder - 1, holder_dead)? {
                        // Its operation ends nowhere: take the lock over
                        // (once; another waiter may have done it first).
                        let _ =
                            word.compare_exchange(holder, 0, Ordering::AcqRel, Ordering::Relaxed);
                    }
                }
            }
        }
    }

    /// Accumulate or Get_accumulate at `rank` (`target`: offsets of whole
    /// elements of `unit`): the previous contents go to the `result` runs
    /// (when any), then `data` (the origin's elements, packed) is combined
    /// in with `op`, all under the target's accumulate lock.
    ///
    /// # Safety
    /// `result` must be writable memory of the application, `target`
    /// inside the target's window (checked by the caller).
    pub(crate) unsafe fn accumulate(
        &self,
        rank: usize,
        op: Op,
        unit: &TypeInfo,
        target: &[(isize, usize)],
        data: &[u8],
        result: &[(usize, usize)],
        holder_dead: HolderDead,
    ) -> MpiResult<()> {
        let target = self.addresses(rank, target);
        let total: usize = target.iter().map(|&(_, length)| length).sum();
        let combine = !matches!(op, Op::NoOp);
        if combine && data.len() != total {
            return Err(MpiError::new(
                ErrorClass::Intern,
                "accumulate origin and target sizes differ",
            ));
        }
        // The kernels read typed elements (long double with aligned
        // loads): origin bytes that are not 16-byte aligned (a gathered
        // derived type, an odd buffer) are copied to aligned memory first,
        // as the engine does with a frame's; aligned ones are read in place.
        let mut aligned = Vec::new();
        let input: &[u8] = if !combine || (data.as_ptr() as usize).is_multiple_of(16) {
            data
        } else {
            aligned.resize(total.div_ceil(16), 0u128);
            // SAFETY: `aligned` holds at least `total` bytes.
            let bytes =
                unsafe { std::slice::from_raw_parts_mut(aligned.as_mut_ptr().cast::<u8>(), total) };
            bytes.copy_from_slice(data);
            bytes
        };
        let _guard = self.lock_accumulate(rank, holder_dead)?;
        if !result.is_empty() {
            // SAFETY: the caller's promise.
            unsafe { copy_runs(&target, result) };
        }
        if combine {
            let mut consumed = 0;
            for &(address, length) in &target {
                let count = length / unit.extent_bytes;
                // SAFETY: inside the target's window (the caller's promise).
                let bytes = unsafe { std::slice::from_raw_parts_mut(address as *mut u8, length) };
                reduce_predefined(op, unit, &input[consumed..consumed + length], bytes, count)?;
                consumed += length;
            }
        }
        Ok(())
    }

    /// Compare_and_swap at `rank`, one element of `size` bytes at offset
    /// `target`: the previous value goes to `result`; `origin` replaces it
    /// if it equals `compare`.
    ///
    /// # Safety
    /// `origin`, `compare` readable and `result` writable for `size` bytes;
    /// the element inside the target's window (checked by the caller).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn compare_and_swap(
        &self,
        rank: usize,
        target: isize,
        size: usize,
        origin: *const u8,
        compare: *const u8,
        result: *mut u8,
        holder_dead: HolderDead,
    ) -> MpiResult<()> {
        let address = self.bases[rank].wrapping_add_signed(target) as *mut u8;
        let mut previous = [0u8; 32];
        let previous = &mut previous[..size];
        // SAFETY: the caller's promise (an element is at most 16 bytes).
        let (origin, compare) = unsafe {
            (
                std::slice::from_raw_parts(origin, size).to_vec(),
                std::slice::from_raw_parts(compare, size).to_vec(),
            )
        };
        {
            let _guard = self.lock_accumulate(rank, holder_dead)?;
            // SAFETY: the caller's promise.
            unsafe {
                std::ptr::copy(address, previous.as_mut_ptr(), size);
                if *previous == *compare {
                    std::ptr::copy(origin.as_ptr(), address, size);
                }
            }
        }
        // SAFETY: the caller's promise.
        unsafe { std::ptr::copy(previous.as_ptr(), result, size) };
        Ok(())
    }
}

/// A full memory fence: what a synchronisation call on a direct window
/// orders (this process's loads and stores against every other member's).
pub(crate) fn memory_fence() {
    std::sync::atomic::fence(Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_runs_moves_bytes_across_differently_split_runs() {
        let source: Vec<u8> = (0..10).collect();
        let mut destination = [0u8; 12];
        let base = source.as_ptr() as usize;
        let to = destination.as_mut_ptr() as usize;
        // 3 + 7 bytes into 4 + 1 + 5 (skipping bytes 4 and 6 of the destination).
        // SAFETY: all runs inside the two arrays.
        unsafe {
            copy_runs(
                &[(base, 3), (base + 3, 7)],
                &[(to, 4), (to + 5, 1), (to + 7, 5)],
            )
        };
        assert_eq!(destination, [0, 1, 2, 3, 0, 4, 0, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn a_dead_holder_s_accumulate_lock_is_taken_over() {
        let controls = [
            Control {
                accumulate: AtomicU32::new(0),
                exclusive: AtomicU32::new(0),
            },
            Control {
                accumulate: AtomicU32::new(0),
                exclusive: AtomicU32::new(0),
            },
        ];
        // World rank 7 holds rank 1's lock and has died.
        controls[1].accumulate.store(8, Ordering::Relaxed);
        let mut window = [0i64; 2];
        let bases = vec![0, window.as_mut_ptr() as usize];
        // SAFETY: the bases and controls outlive `direct`.
        let direct = unsafe { Direct::new(bases, controls.as_ptr() as usize, vec![3, 7], 3) };
        let mut asked = Vec::new();
        let mut dead = |rank: u32| {
            asked.push(rank);
            Ok(rank == 7)
        };
        let one = 5i64.to_ne_bytes();
        let unit = TypeInfo::basic(8, resmpi_core::datatype::BasicKind::I64);
        let mut old = 0i64;
        // SAFETY: inside `window` and `old`.
        unsafe {
            direct.accumulate(
                1,
                Op::Sum,
                &unit,
                &[(8, 8)],
                &one,
                &[(&mut old as *mut i64 as usize, 8)],
                &mut dead,
            )
        }
        .unwrap();
        assert_eq!(window, [0, 5]);
        assert_eq!(old, 0);
        assert!(asked.contains(&7), "the waiter asked about the holder");
        assert_eq!(
            controls[1].accumulate.load(Ordering::Relaxed),
            0,
            "released"
        );
    }
}
