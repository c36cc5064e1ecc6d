//! Collective file access (`_all`, `_at_all`, split `_begin`): two-phase
//! I/O through aggregators when the processes' accesses interleave,
//! independent I/O and a barrier otherwise.
//!
//! Why two-phase: with an interleaved view (each process owns every
//! `size`-th run of the file) independent I/O is many small requests, and
//! on a replicated file many read-modify-writes of blocks other processes
//! are writing too. Exchanging the data first lets each aggregator write
//! one contiguous, block-aligned domain in large runs (for a replicated
//! file: whole blocks, every copy, at once), which is also what makes
//! "aggregators write the replicas". The plan (domains, rounds, pieces) is
//! `resmpi_io::aggregation`; this module exchanges each round's piece lists
//! with MPI_Alltoall and MPI_Alltoallv on the file's communicator, then
//! moves the bytes as one nonblocking message per (process, aggregator)
//! pair whose datatype on each side lists the pieces' places: straight
//! from the writer's buffer into the aggregator's window and back, as
//! ROMIO does, with no packing into a staging buffer and out again (two
//! copies of every byte that made collective writes 0.70x ROMIO's).
//!
//! Every process takes part in every exchange even when its own arguments
//! were bad (the first allreduce tells everyone, and all return an error),
//! so a bad argument on one rank never leaves the others waiting.

use std::borrow::Cow;

use resmpi_core::{ErrorClass, MpiError, MpiResult};
use resmpi_io::aggregation::{Access, Piece, Plan};
use resmpi_io::store::Store;

use crate::abi::*;
use crate::file::{barrier, checked, io_error, CollectiveBuffering, Hints, OpenFile};
use crate::file_access::{independent, prepare, Direction, Prepared};

/// Aggregators used for `size` processes: the cb_nodes hint, else one per 8.
pub(crate) fn aggregator_count(hints: &Hints, size: c_int) -> usize {
    let size = size.max(1) as usize;
    hints
        .aggregator_count
        .unwrap_or(size.div_ceil(8))
        .clamp(1, size)
}

fn allreduce_many(comm: MPI_Comm, values: &[i64], op: MPI_Op) -> MpiResult<Vec<i64>> {
    let mut result = vec![0i64; values.len()];
    // SAFETY: arrays of `values.len()` long longs.
    checked(
        unsafe {
            crate::coll::PMPI_Allreduce(
                values.as_ptr() as *const c_void,
                result.as_mut_ptr() as *mut c_void,
                values.len() as c_int,
                MPI_LONG_LONG,
                op,
                comm,
            )
        },
        "MPI_Allreduce",
    )?;
    Ok(result)
}

/// Buffers an exchange round reuses, kept with the file so that rounds
/// and calls do not pay for fresh memory (page faults on 16 MiB every
/// round cost more than the copies).
#[derive(Default)]
pub(crate) struct ExchangeBuffers {
    /// What this process sends, destination after destination.
    outgoing: Vec<u8>,
    /// Bytes for each destination.
    send_counts: Vec<c_int>,
    /// What it received, source after source.
    incoming: Vec<u8>,
    /// Where each source's bytes are in `incoming`.
    received: Vec<std::ops::Range<usize>>,
    /// The aggregator's window (writes) or sieved span (reads).
    window: Vec<u8>,
    /// The window of the round before, which a write may still be
    /// writing while this round's bytes arrive in `window`.
    window_written: Vec<u8>,
}

impl ExchangeBuffers {
    fn start_round(&mut self, size: usize) {
        self.outgoing.clear();
        self.send_counts.clear();
        self.send_counts.resize(size, 0);
    }

    /// Append a message for `destination` (destinations in increasing order).
    fn message_for(&mut self, destination: usize) -> MessageWriter<'_> {
        MessageWriter {
            start: self.outgoing.len(),
            buffers: self,
            destination,
        }
    }
}

/// Appends one message to the outgoing buffer; its length is recorded
/// when dropped.
struct MessageWriter<'a> {
    buffers: &'a mut ExchangeBuffers,
    destination: usize,
    start: usize,
}

impl MessageWriter<'_> {
    fn bytes(&mut self) -> &mut Vec<u8> {
        &mut self.buffers.outgoing
    }
}

impl Drop for MessageWriter<'_> {
    fn drop(&mut self) {
        let length = self.buffers.outgoing.len() - self.start;
        self.buffers.send_counts[self.destination] += length as c_int;
    }
}

/// Send each destination its part of `buffers.outgoing`; fill
/// `buffers.incoming` and `buffers.received`.
fn exchange(comm: MPI_Comm, buffers: &mut ExchangeBuffers) -> MpiResult<()> {
    let size = buffers.send_counts.len();
    let too_big = || {
        MpiError::new(
            ErrorClass::Intern,
            "a collective I/O exchange round exceeds 2 GiB (lower cb_buffer_size)",
        )
    };
    if buffers.outgoing.len() > i32::MAX as usize {
        return Err(too_big());
    }
    let mut receive_counts = vec![0 as c_int; size];
    // SAFETY: arrays of `size` ints.
    checked(
        unsafe {
            crate::coll::exchange::PMPI_Alltoall(
                buffers.send_counts.as_ptr() as *const c_void,
                1,
                MPI_INT,
                receive_counts.as_mut_ptr() as *mut c_void,
                1,
                MPI_INT,
                comm,
            )
        },
        "MPI_Alltoall",
    )?;
    let displacements = |counts: &[c_int]| -> MpiResult<Vec<c_int>> {
        let mut position: i64 = 0;
        counts
            .iter()
            .map(|count| {
                let start = c_int::try_from(position).map_err(|_| too_big())?;
                position += i64::from(*count);
                Ok(start)
            })
            .collect()
    };
    let send_displacements = displacements(&buffers.send_counts)?;
    let receive_displacements = displacements(&receive_counts)?;
    let total: usize = receive_counts.iter().map(|count| *count as usize).sum();
    // Grown, never shrunk or zeroed: every byte up to `total` is received.
    if buffers.incoming.len() < total {
        buffers.incoming.resize(total, 0);
    }
    // SAFETY: buffers and count/displacement arrays of the sizes given.
    checked(
        unsafe {
            crate::coll::exchange::PMPI_Alltoallv(
                buffers.outgoing.as_ptr() as *const c_void,
                buffers.send_counts.as_ptr(),
                send_displacements.as_ptr(),
                MPI_BYTE,
                buffers.incoming.as_mut_ptr() as *mut c_void,
                receive_counts.as_ptr(),
                receive_displacements.as_ptr(),
                MPI_BYTE,
                comm,
            )
        },
        "MPI_Alltoallv",
    )?;
    buffers.received = receive_counts
        .iter()
        .zip(&receive_displacements)
        .map(|(count, start)| *start as usize..*start as usize + *count as usize)
        .collect();
    Ok(())
}

fn push_u64(bytes: &mut Vec<u8>, value: u64) {
    bytes.extend_from_slice(&value.to_le_bytes());
}

fn read_u64(bytes: &[u8], at: &mut usize) -> MpiResult<u64> {
    let value = bytes
        .get(*at..*at + 8)
        .ok_or_else(|| MpiError::new(ErrorClass::Intern, "short collective I/O message"))?;
    *at += 8;
    Ok(u64::from_le_bytes(value.try_into().expect("8 bytes")))
}

/// The pieces a message lists: (file offset, length).
fn read_pieces(bytes: &[u8], at: &mut usize) -> MpiResult<Vec<(u64, u64)>> {
    let count = read_u64(bytes, at)?;
    (0..count)
        .map(|_| Ok((read_u64(bytes, at)?, read_u64(bytes, at)?)))
        .collect()
}

/// A collective access starting at `start` (elements, etypes), or the
/// error this process found in its arguments.
pub(crate) unsafe fn collective_transfer(
    file: &mut OpenFile,
    start: MpiResult<(usize, u64)>,
    buffer: *mut c_void,
    datatype: MPI_Datatype,
    direction: Direction,
) -> MpiResult<usize> {
    let comm = file.comm;
    let prepared = start.and_then(|(count, position)| {
        // SAFETY: the caller's buffer.
        unsafe { prepare(file, position, buffer, count, datatype) }
    });
    let access = prepared
        .as_ref()
        .ok()
        .map(|prepared| Access::new(prepared.extents.clone()));
    let bounds = access.as_ref().and_then(|access| access.as_ref()?.bounds());
    let (low, high) = bounds.unwrap_or((0, 0));
    let span = bounds.map_or(0, |(low, high)| (high - low) as i64);
    // One allreduce decides for everyone: the worst error class, any
    // unordered access,
    // the byte range, and whether the ranges overlap (interleave).
    let summary = allreduce_many(
        comm,
        &[
            prepared
                .as_ref()
                .err()
                .map_or(0, |error| error.class as i64),
            matches!(access, Some(None)) as i64,
            if bounds.is_some() {
                -(low as i64)
            } else {
                i64::MIN
            },
            if bounds.is_some() { high as i64 } else { -1 },
        ],
        MPI_MAX,
    )?;
    if summary[0] != 0 {
        return Err(prepared.err().unwrap_or_else(|| {
            MpiError::new(
                ErrorClass::from_i32(summary[0] as i32).unwrap_or(ErrorClass::Other),
                "a collective access failed on another process",
            )
        }));
    }
    let prepared = prepared.expect("no process failed");
    let (global_low, global_high) = (summary[2].unsigned_abs(), summary[3]);
    let mode = match direction {
        Direction::Write => file.hints.collective_buffering_write,
        Direction::Read => file.hints.collective_buffering_read,
    };
    // Atomic mode: each process's access under its own lock (independent).
    let mut aggregate = !file.atomic
        && file.size > 1
        && summary[1] == 0
        && global_high > 0
        && mode != CollectiveBuffering::Disable;
    if aggregate && mode == CollectiveBuffering::Automatic {
        // Interleaved when the ranges together are longer than their union.
        let total_span = allreduce_many(comm, &[span], MPI_SUM)?[0];
        aggregate = total_span > global_high - global_low as i64;
    }
    if !aggregate {
        // SAFETY: the caller's buffer.
        let result = unsafe { independent(file, &prepared, direction) };
        // Every process's bytes are in the file when any returns, and no
        // process's next access overtakes another's collective read.
        let agreed = barrier(comm);
        return result.and_then(|moved| agreed.map(|()| moved));
    }
    let access = access.flatten().expect("ordered, checked above");
    let alignment = file
        .store
        .layout()
        .map_or(1, |layout| layout.block_size_bytes);
    let plan = Plan::new(
        global_low,
        global_high as u64,
        file.size as usize,
        aggregator_count(&file.hints, file.size),
        alignment,
        file.hints.aggregator_buffer_bytes,
    );
    // SAFETY: the caller's buffer.
    match direction {
        Direction::Write => unsafe { two_phase_write(file, &prepared, &access, &plan) },
        Direction::Read => unsafe { two_phase_read(file, &prepared, &access, &plan) },
    }
}

/// Which aggregator index this rank is, if any.
fn my_aggregator(file: &OpenFile, plan: &Plan) -> Option<usize> {
    plan.aggregators
        .iter()
        .position(|rank| *rank == file.rank as usize)
}

/// Tag of the data messages of a two-phase round on the file's own
/// communicator (which carries nothing else point-to-point).
const PIECES_TAG: c_int = 0x10_5eed;

/// A committed datatype of byte runs `(displacement, length)` from a base
/// address, freed when dropped: one message moves every piece between a
/// process's packed data and an aggregator's window, with no staging
/// buffer on either side.
struct ByteRuns(MPI_Datatype);

impl ByteRuns {
    fn new(runs: &[(usize, usize)]) -> MpiResult<ByteRuns> {
        let too_big = || {
            MpiError::new(
                ErrorClass::Intern,
                "a collective I/O piece exceeds 2 GiB (lower cb_buffer_size)",
            )
        };
        let lengths = runs
            .iter()
            .map(|run| c_int::try_from(run.1).map_err(|_| too_big()))
            .collect::<MpiResult<Vec<c_int>>>()?;
        let displacements = runs
            .iter()
            .map(|run| MPI_Aint::try_from(run.0).map_err(|_| too_big()))
            .collect::<MpiResult<Vec<MPI_Aint>>>()?;
        let count = c_int::try_from(runs.len()).map_err(|_| too_big())?;
        let mut runs = ByteRuns(MPI_DATATYPE_NULL);
        // SAFETY: arrays of `count` elements; a datatype handle to fill.
        checked(
            unsafe {
                crate::datatype_constructors::PMPI_Type_create_hindexed(
                    count,
                    lengths.as_ptr(),
                    displacements.as_ptr(),
                    MPI_BYTE,
                    &mut runs.0,
                )
            },
            "MPI_Type_create_hindexed",
        )?;
        // SAFETY: the handle just created.
        checked(
            unsafe { crate::datatype_queries::PMPI_Type_commit(&mut runs.0) },
            "MPI_Type_commit",
        )?;
        Ok(runs)
    }
}

impl Drop for ByteRuns {
    fn drop(&mut self) {
        if self.0 != MPI_DATATYPE_NULL {
            // SAFETY: a handle this value created. Freeing a datatype that
            // pending operations use is allowed; they keep its layout.
            unsafe { crate::datatype_queries::PMPI_Type_free(&mut self.0) };
        }
    }
}

/// The data messages of one round, posted nonblocking and completed
/// together: aggregators receive straight into their window (writes) or
/// send straight from it (reads), processes send from or receive into
/// their packed data.
#[derive(Default)]
struct RoundTransfers {
    requests: Vec<MPI_Request>,
    datatypes: Vec<ByteRuns>,
}

impl RoundTransfers {
    /// Send the `runs` of `base` to `destination`.
    ///
    /// # Safety
    /// Every run lies in memory that stays readable until [`Self::wait`].
    unsafe fn send(
        &mut self,
        comm: MPI_Comm,
        base: *const u8,
        runs: &[(usize, usize)],
        destination: usize,
    ) -> MpiResult<()> {
        self.post(runs, "MPI_Isend", |datatype, request| {
            // SAFETY: the caller keeps the runs readable until `wait`.
            unsafe {
                crate::p2p::PMPI_Isend(
                    base as *const c_void,
                    1,
                    datatype,
                    destination as c_int,
                    PIECES_TAG,
                    comm,
                    request,
                )
            }
        })
    }

    /// Receive `source`'s message into the `runs` of `base`.
    ///
    /// # Safety
    /// Every run lies in memory that stays writable, and is not otherwise
    /// accessed, until [`Self::wait`].
    unsafe fn receive(
        &mut self,
        comm: MPI_Comm,
        base: *mut u8,
        runs: &[(usize, usize)],
        source: usize,
    ) -> MpiResult<()> {
        self.post(runs, "MPI_Irecv", |datatype, request| {
            // SAFETY: the caller keeps the runs writable until `wait`.
            unsafe {
                crate::p2p::PMPI_Irecv(
                    base as *mut c_void,
                    1,
                    datatype,
                    source as c_int,
                    PIECES_TAG,
                    comm,
                    request,
                )
            }
        })
    }

    /// Start one message over `runs` with `start` (given the datatype and
    /// where its request goes), keeping both until [`Self::wait`].
    fn post(
        &mut self,
        runs: &[(usize, usize)],
        what: &str,
        start: impl FnOnce(MPI_Datatype, *mut MPI_Request) -> c_int,
    ) -> MpiResult<()> {
        let datatype = ByteRuns::new(runs)?;
        let mut request = MPI_REQUEST_NULL;
        checked(start(datatype.0, &mut request), what)?;
        self.requests.push(request);
        self.datatypes.push(datatype);
        Ok(())
    }

    /// Complete every message posted.
    fn wait(mut self) -> MpiResult<()> {
        if self.requests.is_empty() {
            return Ok(());
        }
        // SAFETY: an array of `requests.len()` requests this value posted.
        checked(
            unsafe {
                crate::requests::PMPI_Waitall(
                    self.requests.len() as c_int,
                    self.requests.as_mut_ptr(),
                    MPI_STATUSES_IGNORE as *mut MPI_Status,
                )
            },
            "MPI_Waitall",
        )
    }
}

/// Runs `(offset - base, length)` of pieces `(offset, length)` that lie
/// in `[low, high)`; an error for one that does not (a malformed list).
fn window_runs(pieces: &[(u64, u64)], low: u64, high: u64) -> MpiResult<Vec<(usize, usize)>> {
    pieces
        .iter()
        .map(|&(offset, length)| {
            if offset < low || offset.checked_add(length).is_none_or(|end| end > high) {
                return Err(MpiError::new(
                    ErrorClass::Intern,
                    "malformed collective I/O message",
                ));
            }
            Ok(((offset - low) as usize, length as usize))
        })
        .collect()
}

/// The runs of `pieces` in a process's packed data.
fn packed_runs(pieces: &[Piece]) -> Vec<(usize, usize)> {
    pieces
        .iter()
        .map(|piece| {
            (
                piece.packed_offset_bytes as usize,
                piece.length_bytes as usize,
            )
        })
        .collect()
}

/// Append the list of `pieces` (count, then offset and length of each).
fn push_pieces(bytes: &mut Vec<u8>, pieces: &[Piece]) {
    push_u64(bytes, pieces.len() as u64);
    for piece in pieces {
        push_u64(bytes, piece.offset_bytes);
        push_u64(bytes, piece.length_bytes);
    }
}

/// The piece lists each source sent this round (empty for none).
fn received_lists(buffers: &ExchangeBuffers) -> MpiResult<Vec<Vec<(u64, u64)>>> {
    buffers
        .received
        .iter()
        .map(|range| {
            let message = &buffers.incoming[range.clone()];
            if message.is_empty() {
                return Ok(Vec::new());
            }
            read_pieces(message, &mut 0)
        })
        .collect()
}

/// A two-phase write. Each round: every process tells each aggregator
/// which pieces of its window it brings (offsets and lengths only, one
/// small all-to-all), then sends their bytes straight from its packed
/// data into the aggregator's window (one message per pair, a datatype of
/// byte runs on each side), and the aggregator writes the covered runs.
/// An aggregator copies its own pieces into its window itself, and writes
/// a round's window on a thread of its own while the next round's bytes
/// arrive in a second window, so the file system and the exchange work at
/// once instead of taking turns (the last round, and so a call of one
/// round, writes without a thread, as does a host with no core to spare:
/// see [`spare_core`]).
unsafe fn two_phase_write(
    file: &mut OpenFile,
    prepared: &Prepared,
    access: &Access,
    plan: &Plan,
) -> MpiResult<usize> {
    // SAFETY: the caller's buffer. A conversion that fails (a user data
    // representation's function) still takes part in every exchange, with
    // zeros for its pieces, so no other rank waits for it; all return the
    // error.
    let (packed, converted) = match unsafe { prepared.packed() } {
        Ok(packed) => (packed, Ok(())),
        Err(error) => (Cow::Owned(vec![0u8; prepared.total_bytes]), Err(error)),
    };
    let mine = my_aggregator(file, plan);
    let me = file.rank as usize;
    let size = file.size as usize;
    let comm = file.comm;
    let mut buffers = std::mem::take(&mut file.exchange_buffers);
    let mut local: MpiResult<()> = converted;
    let overlap = spare_core();
    let store = &mut file.store;
    let result = std::thread::scope(|scope| -> MpiResult<()> {
        let mut writing: Option<std::thread::ScopedJoinHandle<'_, Written<'_>>> = None;
        let mut idle_store = Some(store);
        for round in 0..plan.rounds {
            buffers.start_round(size);
            let my_window = mine
                .map(|index| plan.window(index, round))
                .filter(|(low, high)| low < high);
            if let Some((low, high)) = my_window {
                let length = (high - low) as usize;
                if buffers.window.len() < length {
                    buffers.window.resize(length, 0);
                }
            }
            let mut covered: Vec<(u64, u64)> = Vec::new();
            let mut sends: Vec<(usize, Vec<(usize, usize)>)> = Vec::new();
            for (index, rank) in plan.aggregators.iter().enumerate() {
                let (low, high) = plan.window(index, round);
                let pieces = access.pieces_in(low, high);
                if pieces.is_empty() {
                    continue;
                }
                if *rank == me {
                    for piece in &pieces {
                        let length = piece.length_bytes as usize;
                        let from = piece.packed_offset_bytes as usize;
                        buffers.window[(piece.offset_bytes - low) as usize..][..length]
                            .copy_from_slice(&packed[from..from + length]);
                        covered.push((piece.offset_bytes, piece.offset_bytes + length as u64));
                    }
                    continue;
                }
                push_pieces(buffers.message_for(*rank).bytes(), &pieces);
                sends.push((*rank, packed_runs(&pieces)));
            }
            exchange(comm, &mut buffers)?;
            let mut transfers = RoundTransfers::default();
            if let Some((low, high)) = my_window {
                let window = buffers.window.as_mut_ptr();
                for (source, list) in received_lists(&buffers)?.iter().enumerate() {
                    if list.is_empty() {
                        continue;
                    }
                    let runs = window_runs(list, low, high)?;
                    covered.extend(
                        list.iter()
                            .map(|&(offset, length)| (offset, offset + length)),
                    );
                    // SAFETY: runs inside the window (checked), which is
                    // not touched again before `wait`.
                    unsafe { transfers.receive(comm, window, &runs, source)? };
                }
            }
            for (rank, runs) in &sends {
                // SAFETY: runs of the packed data, alive until `wait`.
                unsafe { transfers.send(comm, packed.as_ptr(), runs, *rank)? };
            }
            transfers.wait()?;
            let Some((low, _)) = my_window else { continue };
            finish_write(writing.take(), &mut buffers, &mut idle_store, &mut local);
            if local.is_err() {
                continue;
            }
            let store = idle_store.take().expect("no write in progress");
            if round + 1 == plan.rounds || !overlap {
                // Nothing left to overlap with, or no core to do it on:
                // no thread.
                local = write_covered(store, &buffers.window, low, covered);
                idle_store = Some(store);
                continue;
            }
            let window = std::mem::replace(
                &mut buffers.window,
                std::mem::take(&mut buffers.window_written),
            );
            writing = Some(scope.spawn(move || {
                let written = write_covered(store, &window, low, covered);
                (store, window, written)
            }));
        }
        finish_write(writing.take(), &mut buffers, &mut idle_store, &mut local);
        Ok(())
    });
    file.exchange_buffers = buffers;
    result?;
    // Everyone learns whether every aggregator wrote.
    let failed = allreduce_many(file.comm, &[local.is_err() as i64], MPI_MAX)?[0];
    local?;
    if failed != 0 {
        return Err(MpiError::new(
            ErrorClass::Io,
            "a collective write failed on an aggregator",
        ));
    }
    Ok(prepared.total_bytes)
}

/// The environment variable that forces the aggregator's thread on (`1`)
/// or off (`0`) instead of deciding by the cores (tests use it).
pub const OVERLAP_ENVIRONMENT_VARIABLE: &str = "RESMPI_IO_OVERLAP";

/// Whether an aggregator may write (or read ahead) on a thread of its own:
/// only where a core is left beside the ranks of this host, unless
/// `RESMPI_IO_OVERLAP` says otherwise (any value but `0` or `1` is the
/// default).
fn spare_core() -> bool {
    match std::env::var(OVERLAP_ENVIRONMENT_VARIABLE).as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => crate::global::lock()
            .mpi
            .as_ref()
            .is_some_and(|mpi| mpi.has_spare_core()),
    }
}

/// What the write thread of a round gives back: the store, the window it
/// wrote, and how the write went.
type Written<'a> = (&'a mut Store, Vec<u8>, MpiResult<()>);

/// Wait for the round before's write, if one runs: its store becomes
/// idle again, its window the one to fill next, its error `local`'s.
fn finish_write<'a>(
    writing: Option<std::thread::ScopedJoinHandle<'_, Written<'a>>>,
    buffers: &mut ExchangeBuffers,
    idle_store: &mut Option<&'a mut Store>,
    local: &mut MpiResult<()>,
) {
    if let Some(handle) = writing {
        let (store, window, written) = handle.join().expect("the write thread panicked");
        *idle_store = Some(store);
        buffers.window_written = window;
        if local.is_ok() {
            *local = written;
        }
    }
}

/// Write the runs `covered` lists (file byte ranges, in any order) from
/// `window`, which holds the file from `low` on.
fn write_covered(
    store: &mut Store,
    window: &[u8],
    low: u64,
    mut covered: Vec<(u64, u64)>,
) -> MpiResult<()> {
    covered.sort_unstable();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (start, end) in covered {
        match runs.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => runs.push((start, end)),
        }
    }
    for (start, end) in runs {
        store
            .write_at(start, &window[(start - low) as usize..(end - low) as usize])
            .map_err(|error| io_error("collective write failed", &error))?;
    }
    Ok(())
}

/// A two-phase read. Each round: every process tells each aggregator
/// which pieces it wants (one small all-to-all); an aggregator reads its
/// window once (data sieving) and sends each process its pieces straight
/// from the window into the process's packed data (one message per pair,
/// a datatype of byte runs on each side), copying its own. The next
/// round's window is read on a thread of its own while this round's
/// pieces go out (so a call of one round spawns nothing; nor does a host
/// with no core to spare).
unsafe fn two_phase_read(
    file: &mut OpenFile,
    prepared: &Prepared,
    access: &Access,
    plan: &Plan,
) -> MpiResult<usize> {
    let mut buffers = std::mem::take(&mut file.exchange_buffers);
    // SAFETY: the caller's buffer.
    let result = unsafe {
        prepared.read_into(|packed| {
            read_rounds(file, &mut buffers, packed, access, plan)?;
            // What lies before the end of the file was read.
            let end = file
                .store
                .len()
                .map_err(|error| io_error("cannot read the file size", &error))?;
            let mut delivered = 0u64;
            for extent in &prepared.extents {
                if extent.offset_bytes + extent.length_bytes <= end {
                    delivered += extent.length_bytes;
                } else {
                    delivered += end.saturating_sub(extent.offset_bytes);
                    break;
                }
            }
            Ok(delivered as usize)
        })
    };
    file.exchange_buffers = buffers;
    result
}

/// What the read thread of a round gives back: the store, the window it
/// read, and how the read went.
type WindowRead<'a> = (&'a mut Store, Vec<u8>, MpiResult<()>);

/// Read `[low, high)` of the file into `window` (past the end: zeros).
fn read_window(store: &mut Store, window: &mut Vec<u8>, low: u64, high: u64) -> MpiResult<()> {
    let length = (high - low) as usize;
    if window.len() < length {
        window.resize(length, 0);
    }
    let read = store
        .read_at(low, &mut window[..length])
        .map_err(|error| io_error("collective read failed", &error))?;
    window[read..length].fill(0);
    Ok(())
}

/// Read `[low, high)` into `window` on a thread of `scope`.
fn spawn_read<'scope, 'a: 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    store: &'a mut Store,
    mut window: Vec<u8>,
    low: u64,
    high: u64,
) -> std::thread::ScopedJoinHandle<'scope, WindowRead<'a>> {
    scope.spawn(move || {
        let read = read_window(store, &mut window, low, high);
        (store, window, read)
    })
}

/// The rounds of a two-phase read into `packed`, this process's data in
/// view order.
fn read_rounds(
    file: &mut OpenFile,
    buffers: &mut ExchangeBuffers,
    packed: &mut [u8],
    access: &Access,
    plan: &Plan,
) -> MpiResult<()> {
    let mine = my_aggregator(file, plan);
    let me = file.rank as usize;
    let size = file.size as usize;
    let comm = file.comm;
    let overlap = spare_core();
    let my_window = |round: u64| {
        mine.map(|index| plan.window(index, round))
            .filter(|(low, high)| round < plan.rounds && low < high)
    };
    let mut local: MpiResult<()> = Ok(());
    std::thread::scope(|scope| -> MpiResult<()> {
        let mut idle_store = Some(&mut file.store);
        let mut reading: Option<std::thread::ScopedJoinHandle<'_, WindowRead<'_>>> = None;
        for round in 0..plan.rounds {
            // 1. Tell each aggregator which pieces this process wants.
            buffers.start_round(size);
            let mut wanted: Vec<(usize, Vec<(usize, usize)>)> = Vec::new();
            let mut own: Vec<Piece> = Vec::new();
            for (index, rank) in plan.aggregators.iter().enumerate() {
                let (low, high) = plan.window(index, round);
                let pieces = access.pieces_in(low, high);
                if pieces.is_empty() {
                    continue;
                }
                if *rank == me {
                    own = pieces;
                    continue;
                }
                push_pieces(buffers.message_for(*rank).bytes(), &pieces);
                wanted.push((*rank, packed_runs(&pieces)));
            }
            exchange(comm, buffers)?;
            let mut transfers = RoundTransfers::default();
            for (rank, runs) in &wanted {
                // SAFETY: runs of the packed data (the caller's buffer or
                // the staging), untouched until `wait`.
                unsafe { transfers.receive(comm, packed.as_mut_ptr(), runs, *rank)? };
            }
            // 2. An aggregator answers from its window, read while the
            //    round before went out, and starts reading the next one.
            if let Some((low, high)) = my_window(round) {
                match reading.take().map(|handle| handle.join()) {
                    Some(Ok((store, window, read))) => {
                        idle_store = Some(store);
                        buffers.window = window;
                        if local.is_ok() {
                            local = read;
                        }
                    }
                    Some(Err(_)) => panic!("the read thread panicked"),
                    // The first round (nothing to overlap with yet) reads
                    // here; after a failed read, the window is answered
                    // as it is and everyone learns of the failure at the end.
                    None => {
                        let store = idle_store.as_deref_mut().expect("no read in progress");
                        let read = read_window(store, &mut buffers.window, low, high);
                        if local.is_ok() {
                            local = read;
                        }
                    }
                }
                match my_window(round + 1) {
                    Some((low, high)) if local.is_ok() && overlap => {
                        let store = idle_store.take().expect("no read in progress");
                        let window = std::mem::take(&mut buffers.window_written);
                        reading = Some(spawn_read(scope, store, window, low, high));
                    }
                    _ => {}
                }
                for piece in &own {
                    let length = piece.length_bytes as usize;
                    let to = piece.packed_offset_bytes as usize;
                    packed[to..to + length].copy_from_slice(
                        &buffers.window[(piece.offset_bytes - low) as usize..][..length],
                    );
                }
                for (source, list) in received_lists(buffers)?.iter().enumerate() {
                    if list.is_empty() {
                        continue;
                    }
                    let runs = window_runs(list, low, high)?;
                    // SAFETY: runs inside the window, unchanged until `wait`.
                    unsafe { transfers.send(comm, buffers.window.as_ptr(), &runs, source)? };
                }
            }
            transfers.wait()?;
            if my_window(round).is_some() && buffers.window_written.is_empty() {
                // The window just sent from is the one to read into next.
                buffers.window_written = std::mem::take(&mut buffers.window);
            }
        }
        Ok(())
    })?;
    let failed = allreduce_many(comm, &[local.is_err() as i64], MPI_MAX)?[0];
    local?;
    if failed != 0 {
        return Err(MpiError::new(
            ErrorClass::Io,
            "a collective read failed on an aggregator",
        ));
    }
    Ok(())
}
