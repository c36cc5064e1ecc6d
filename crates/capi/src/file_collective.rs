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
//! `resmpi_io::aggregation`; this module moves the bytes with MPI_Alltoall
//! and MPI_Alltoallv on the file's communicator.
//!
//! Every process takes part in every exchange even when its own arguments
//! were bad (the first allreduce tells everyone, and all return an error),
//! so a bad argument on one rank never leaves the others waiting.

use resmpi_core::{ErrorClass, MpiError, MpiResult};
use resmpi_io::aggregation::{Access, Piece, Plan};

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

unsafe fn two_phase_write(
    file: &mut OpenFile,
    prepared: &Prepared,
    access: &Access,
    plan: &Plan,
) -> MpiResult<usize> {
    // SAFETY: the caller's buffer.
    let packed = unsafe { prepared.packed() };
    let mine = my_aggregator(file, plan);
    let size = file.size as usize;
    let mut buffers = std::mem::take(&mut file.exchange_buffers);
    let mut local: MpiResult<()> = Ok(());
    for round in 0..plan.rounds {
        buffers.start_round(size);
        for (index, rank) in plan.aggregators.iter().enumerate() {
            let (low, high) = plan.window(index, round);
            let pieces = access.pieces_in(low, high);
            if pieces.is_empty() {
                continue;
            }
            let mut message = buffers.message_for(*rank);
            let bytes = message.bytes();
            push_u64(bytes, pieces.len() as u64);
            for piece in &pieces {
                push_u64(bytes, piece.offset_bytes);
                push_u64(bytes, piece.length_bytes);
            }
            for piece in &pieces {
                let start = piece.packed_offset_bytes as usize;
                bytes.extend_from_slice(&packed[start..start + piece.length_bytes as usize]);
            }
        }
        if let Err(error) = exchange(file.comm, &mut buffers) {
            file.exchange_buffers = buffers;
            return Err(error);
        }
        let Some(index) = mine else { continue };
        let (low, high) = plan.window(index, round);
        if low >= high || local.is_err() {
            continue;
        }
        local = write_window(file, &mut buffers, low, high);
    }
    file.exchange_buffers = buffers;
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

/// An aggregator's part of a write round: place every received piece in
/// the window `[low, high)` and write the covered runs.
fn write_window(
    file: &mut OpenFile,
    buffers: &mut ExchangeBuffers,
    low: u64,
    high: u64,
) -> MpiResult<()> {
    let malformed = || MpiError::new(ErrorClass::Intern, "malformed collective I/O message");
    let window_length = (high - low) as usize;
    if buffers.window.len() < window_length {
        buffers.window.resize(window_length, 0);
    }
    let mut covered: Vec<(u64, u64)> = Vec::new();
    for range in &buffers.received {
        let message = &buffers.incoming[range.clone()];
        if message.is_empty() {
            continue;
        }
        let mut at = 0;
        let pieces = read_pieces(message, &mut at)?;
        for (offset, length) in pieces {
            if offset < low || offset + length > high {
                return Err(malformed());
            }
            let data = message
                .get(at..at + length as usize)
                .ok_or_else(malformed)?;
            buffers.window[(offset - low) as usize..][..length as usize].copy_from_slice(data);
            at += length as usize;
            covered.push((offset, offset + length));
        }
    }
    covered.sort_unstable();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (start, end) in covered {
        match runs.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => runs.push((start, end)),
        }
    }
    for (start, end) in runs {
        file.store
            .write_at(
                start,
                &buffers.window[(start - low) as usize..(end - low) as usize],
            )
            .map_err(|error| io_error("collective write failed", &error))?;
    }
    Ok(())
}

unsafe fn two_phase_read(
    file: &mut OpenFile,
    prepared: &Prepared,
    access: &Access,
    plan: &Plan,
) -> MpiResult<usize> {
    let mine = my_aggregator(file, plan);
    let size = file.size as usize;
    let mut buffers = std::mem::take(&mut file.exchange_buffers);
    let mut local: MpiResult<()> = Ok(());
    // SAFETY: the caller's buffer.
    let result = unsafe {
        prepared.read_into(|packed| {
            for round in 0..plan.rounds {
                // 1. Tell each aggregator which pieces this process wants.
                buffers.start_round(size);
                let mut wanted: Vec<(usize, Vec<Piece>)> = Vec::new();
                for (index, rank) in plan.aggregators.iter().enumerate() {
                    let (low, high) = plan.window(index, round);
                    let pieces = access.pieces_in(low, high);
                    if pieces.is_empty() {
                        continue;
                    }
                    let mut message = buffers.message_for(*rank);
                    let bytes = message.bytes();
                    push_u64(bytes, pieces.len() as u64);
                    for piece in &pieces {
                        push_u64(bytes, piece.offset_bytes);
                        push_u64(bytes, piece.length_bytes);
                    }
                    drop(message);
                    wanted.push((*rank, pieces));
                }
                exchange(file.comm, &mut buffers)?;
                // 2. An aggregator reads the span the requests cover once
                //    (data sieving) and answers each process in rank order.
                let mut lists: Vec<Vec<(u64, u64)>> = Vec::with_capacity(size);
                for range in &buffers.received {
                    let message = &buffers.incoming[range.clone()];
                    let mut at = 0;
                    lists.push(if message.is_empty() {
                        Vec::new()
                    } else {
                        read_pieces(message, &mut at)?
                    });
                }
                buffers.start_round(size);
                if let Some(index) = mine {
                    let (low, _) = plan.window(index, round);
                    let first = lists
                        .iter()
                        .flatten()
                        .map(|piece| piece.0)
                        .min()
                        .unwrap_or(low);
                    let last = lists
                        .iter()
                        .flatten()
                        .map(|piece| piece.0 + piece.1)
                        .max()
                        .unwrap_or(low);
                    let span_length = last.saturating_sub(first) as usize;
                    if buffers.window.len() < span_length {
                        buffers.window.resize(span_length, 0);
                    }
                    if span_length > 0 && local.is_ok() {
                        match file
                            .store
                            .read_at(first, &mut buffers.window[..span_length])
                        {
                            // Past the end of the file reads as zeros.
                            Ok(read) => buffers.window[read..span_length].fill(0),
                            Err(error) => local = Err(io_error("collective read failed", &error)),
                        }
                    }
                    let ExchangeBuffers {
                        outgoing,
                        send_counts,
                        window,
                        ..
                    } = &mut buffers;
                    for (source, list) in lists.iter().enumerate() {
                        for (offset, length) in list {
                            let start = (offset - first) as usize;
                            outgoing.extend_from_slice(&window[start..start + *length as usize]);
                            send_counts[source] += *length as c_int;
                        }
                    }
                }
                exchange(file.comm, &mut buffers)?;
                // 3. Place the answers where the pieces belong.
                for (rank, pieces) in &wanted {
                    let answer = &buffers.incoming[buffers.received[*rank].clone()];
                    let mut at = 0usize;
                    for piece in pieces {
                        let length = piece.length_bytes as usize;
                        let data = answer.get(at..at + length).ok_or_else(|| {
                            MpiError::new(ErrorClass::Intern, "short collective I/O reply")
                        })?;
                        let start = piece.packed_offset_bytes as usize;
                        packed[start..start + length].copy_from_slice(data);
                        at += length;
                    }
                }
            }
            let failed = allreduce_many(file.comm, &[local.is_err() as i64], MPI_MAX)?[0];
            local.clone()?;
            if failed != 0 {
                return Err(MpiError::new(
                    ErrorClass::Io,
                    "a collective read failed on an aggregator",
                ));
            }
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
