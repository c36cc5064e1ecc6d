//! One-sided operations (Put, Get, Accumulate, Get_accumulate,
//! Fetch_and_op, Compare_and_swap and the request-based forms) and the
//! synchronisation calls (fence, post/start/complete/wait/test, lock,
//! lock_all, flush, sync) on the windows of `rma.rs`.
//!
//! Here the datatypes are flattened: the target's into byte runs of its
//! window, the origin's into address runs; the engine moves bytes between
//! them (`engine/rma.rs`). Checks that need no target (rank, epoch,
//! displacement against the target's window size, datatypes, ops) are made
//! here, so a bad call fails in the call itself with a clear error.
//!
//! Windows on the direct path (`rma_direct.rs`: one host, memory the
//! library allocated) take the same checks, then load and store in the
//! target's mapped memory instead of issuing to the engine; their locks
//! and flushes are in shared memory too.
//!
//! Request-based operations: a put or accumulate has copied the origin's
//! bytes when it returns, so its request is complete (MPI's local
//! completion); a fetching one (Rget, Rget_accumulate) waits for its bytes
//! before it returns its already complete request.

use std::borrow::Cow;

use resmpi_core::datatype::Datatype;
use resmpi_core::engine::rma::{Access, TargetBlock};
use resmpi_core::op::Op;
use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::rma::{window_entry, Window};

/// `count` elements of `layout` starting at `start` as merged (offset, length) runs.
fn flatten(layout: &Datatype, count: usize, start: isize) -> Vec<(isize, usize)> {
    if let Some((offset, length)) = layout.contiguous_span(count) {
        return if length == 0 {
            Vec::new()
        } else {
            vec![(start + offset, length)]
        };
    }
    let extent = layout.extent_bytes();
    let mut runs: Vec<(isize, usize)> = Vec::new();
    for element in 0..count as isize {
        for segment in &layout.segments {
            let offset = start + element * extent + segment.offset_bytes;
            match runs.last_mut() {
                Some(last) if last.0 + last.1 as isize == offset => last.1 += segment.length_bytes,
                _ => runs.push((offset, segment.length_bytes)),
            }
        }
    }
    runs
}

fn count_argument(count: MPI_Count, what: &str) -> MpiResult<usize> {
    usize::try_from(count)
        .map_err(|_| MpiError::new(ErrorClass::Count, format!("{what} {count} is negative")))
}

/// The origin side of an operation: (address, length) runs.
fn origin_runs(
    address: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    what: &str,
) -> MpiResult<(Vec<(usize, usize)>, usize)> {
    let count = count_argument(count, &format!("{what} count"))?;
    let layout = crate::datatype::committed_layout(datatype)?;
    let runs = flatten(&layout, count, address as isize);
    let total: usize = runs.iter().map(|&(_, length)| length).sum();
    if address.is_null() && total > 0 && layout.true_lb_bytes == 0 {
        return Err(MpiError::new(
            ErrorClass::Buffer,
            format!("{what} buffer is NULL with {total} bytes to move"),
        ));
    }
    Ok((
        runs.into_iter()
            .map(|(offset, length)| (offset as usize, length))
            .collect(),
        total,
    ))
}

/// The origin's bytes as one slice: the application's own memory where its
/// datatype is contiguous (no staging copy: the engine copies it once, into
/// the frames), else gathered into a buffer.
///
/// # Safety
/// `runs` must describe readable memory of the application's origin buffer
/// that stays valid and unmodified for `'a` (MPI's contract: the call).
unsafe fn gather<'a>(runs: &[(usize, usize)], total: usize) -> Cow<'a, [u8]> {
    if let &[(address, length)] = runs {
        // SAFETY: by the caller's promise.
        return Cow::Borrowed(unsafe { std::slice::from_raw_parts(address as *const u8, length) });
    }
    let mut data = Vec::with_capacity(total);
    for &(address, length) in runs {
        // SAFETY: by the caller's promise.
        data.extend_from_slice(unsafe { std::slice::from_raw_parts(address as *const u8, length) });
    }
    Cow::Owned(data)
}

/// What one call needs from its window, read under the window's mutex.
struct Target {
    id: u32,
    world_rank: u32,
    /// The target's window size in bytes (None: dynamic, unchecked here).
    size_bytes: Option<usize>,
    disp_unit: isize,
    comm: MPI_Comm,
}

/// The target `rank` of `window` for an operation: in range, inside an
/// access epoch toward it. None for MPI_PROC_NULL (nothing to do).
fn target_of(window: &Window, rank: c_int) -> MpiResult<Option<Target>> {
    if rank == MPI_PROC_NULL {
        return Ok(None);
    }
    let ranks = window.group.len() as c_int;
    if !(0..ranks).contains(&rank) {
        return Err(MpiError::new(
            ErrorClass::Rank,
            format!("target rank {rank} is not in the window's group of {ranks}"),
        ));
    }
    let world_rank = window.group[rank as usize];
    let epoch = &window.epoch;
    let open = epoch.fence
        || epoch.lock_all
        || epoch.locks.contains_key(&rank)
        || epoch
            .start
            .as_ref()
            .is_some_and(|targets| targets.contains(&world_rank));
    if !open {
        return Err(MpiError::new(
            ErrorClass::RmaSync,
            format!(
                "no access epoch toward rank {rank} is open (call MPI_Win_fence, MPI_Win_start or MPI_Win_lock first)"
            ),
        ));
    }
    let dynamic = window.flavor == MPI_WIN_FLAVOR_DYNAMIC;
    Ok(Some(Target {
        id: window.id,
        world_rank,
        size_bytes: (!dynamic).then(|| window.sizes[rank as usize] as usize),
        disp_unit: if dynamic {
            1
        } else {
            window.disp_units[rank as usize] as isize
        },
        comm: window.comm,
    }))
}

/// The target side: byte runs in the target's window, checked against its size.
fn target_blocks(
    target: &Target,
    displacement: MPI_Aint,
    count: MPI_Count,
    datatype: MPI_Datatype,
) -> MpiResult<(Vec<TargetBlock>, usize)> {
    let count = count_argument(count, "target count")?;
    let layout = crate::datatype::committed_layout(datatype)?;
    let start = (displacement as isize)
        .checked_mul(target.disp_unit)
        .ok_or_else(|| MpiError::new(ErrorClass::Disp, "target displacement overflows"))?;
    let runs = flatten(&layout, count, start);
    let total = runs.iter().map(|&(_, length)| length).sum();
    check_in_window(target, &runs, displacement)?;
    Ok((
        runs.into_iter()
            .map(|(offset, length)| TargetBlock {
                offset_bytes: offset as i64,
                length_bytes: length as u64,
            })
            .collect(),
        total,
    ))
}

/// Every run lies inside the target's window (unless dynamic: the target checks).
fn check_in_window(
    target: &Target,
    runs: &[(isize, usize)],
    displacement: MPI_Aint,
) -> MpiResult<()> {
    let Some(size_bytes) = target.size_bytes else {
        return Ok(());
    };
    if displacement < 0 {
        return Err(MpiError::new(
            ErrorClass::Disp,
            format!("target displacement {displacement} is negative"),
        ));
    }
    for &(offset, length) in runs {
        if offset < 0 || offset as usize + length > size_bytes {
            return Err(MpiError::new(
                ErrorClass::RmaRange,
                format!(
                    "target bytes [{offset}, {}) lie outside the target's window of {size_bytes} bytes",
                    offset + length as isize
                ),
            ));
        }
    }
    Ok(())
}

fn same_size(origin: usize, target: usize, what: &str) -> MpiResult<()> {
    if origin != target {
        return Err(MpiError::new(
            ErrorClass::Type,
            format!("the {what} describes {origin} bytes but the target {target}: type signatures must match"),
        ));
    }
    Ok(())
}

/// Issue one operation on the engine; returns its id and target.
unsafe fn issue(
    name: &str,
    target: &Target,
    access: Access,
    blocks: &[TargetBlock],
    data: &[u8],
    destination: Vec<(usize, usize)>,
) -> MpiResult<u64> {
    let (id, world_rank) = (target.id, target.world_rank);
    let mut issued = Err(MpiError::new(ErrorClass::Intern, "not issued"));
    let _ = crate::global::with_mpi(name, MPI_COMM_WORLD, |mpi, _| {
        // SAFETY: the destination is the application's result buffer,
        // valid until the operation completes (MPI's contract).
        issued = unsafe {
            mpi.engine
                .rma_issue(id, world_rank, access, blocks, data, destination)
        };
        Ok(())
    });
    issued
}

/// Issue a put or get without a staging copy where the engine can: as a
/// single-copy transfer (the target copies between `origin`, the
/// application's runs, and its window: same host), else as data frames
/// lent from `origin` or placed into it (over the network); None: issue it
/// as request frames instead.
///
/// # Safety
/// `origin` must stay valid and untouched until the operation completes at
/// the target: MPI's contract for MPI_Put's buffer (until the epoch's
/// flush) and MPI_Get's (until done), not MPI_Rput's (free at once).
unsafe fn issue_without_copy(
    name: &str,
    target: &Target,
    access: Access,
    blocks: &[TargetBlock],
    origin: &[(usize, usize)],
) -> MpiResult<Option<u64>> {
    let (id, world_rank) = (target.id, target.world_rank);
    with_engine(name, |mpi| {
        // SAFETY (both): the caller's promise.
        let single_copy = unsafe {
            mpi.engine
                .rma_issue_single_copy(id, world_rank, access, blocks, origin)
        }?;
        match single_copy {
            Some(operation) => Ok(Some(operation)),
            None => unsafe {
                mpi.engine
                    .rma_issue_lent(id, world_rank, access, blocks, origin, None)
            },
        }
    })
}

/// Issue an MPI_Rput as data frames lent from `origin` (over the network),
/// their views made with `loan`, which the request waits for; false: it
/// must be copied instead. Not single copy: the target would read the
/// buffer after the request let the application reuse it.
///
/// # Safety
/// `origin` must stay valid and untouched until the request made with
/// `loan` completes (MPI's contract for MPI_Rput's buffer).
unsafe fn issue_rput_lent(
    target: &Target,
    blocks: &[TargetBlock],
    origin: &[(usize, usize)],
    loan: &resmpi_core::reliability::Loan,
) -> MpiResult<bool> {
    let (id, world_rank) = (target.id, target.world_rank);
    with_engine("MPI_Rput", |mpi| {
        // SAFETY: the caller's promise.
        let issued = unsafe {
            mpi.engine
                .rma_issue_lent(id, world_rank, Access::Put, blocks, origin, Some(loan))
        }?;
        Ok(issued.is_some())
    })
}

/// Run `body` inside the library with the engine; errors are returned, not raised.
fn with_engine<T>(
    name: &str,
    body: impl FnOnce(&mut resmpi_core::Mpi) -> MpiResult<T>,
) -> MpiResult<T> {
    let mut outcome = Err(MpiError::new(ErrorClass::Intern, "not run"));
    let _ = crate::global::with_mpi(name, MPI_COMM_WORLD, |mpi, _| {
        outcome = body(mpi);
        Ok(())
    });
    outcome
}

/// How a direct-path waiter for an accumulate lock learns that its
/// holder died: one round of the engine's progress (so a death becomes
/// known), then its verdict.
fn holder_dead(name: &str) -> impl FnMut(u32) -> MpiResult<bool> + '_ {
    move |world_rank| {
        with_engine(name, |mpi| {
            // A progress error is no verdict on the holder; its liveness is.
            let _ = mpi.engine.progress();
            Ok(mpi.engine.peer_failed(world_rank))
        })
    }
}

/// A direct-path epoch toward `targets` (world ranks) cannot start or end
/// well when one of them is known to have failed (ULFM: MPIX_ERR_PROC_FAILED
/// rather than loads and stores into a dead process's memory that nobody
/// will read). Progresses the engine once so that a death is learnt even
/// without the progress thread.
fn check_alive(name: &str, targets: &[u32]) -> MpiResult<()> {
    with_engine(name, |mpi| {
        let _ = mpi.engine.progress();
        match targets
            .iter()
            .find(|&&target| mpi.engine.peer_failed(target))
        {
            Some(&target) => Err(resmpi_core::engine::peer_failed_error(target)),
            None => Ok(()),
        }
    })
}

/// The direct path's shortcut for a put or get whose two datatypes are
/// the same-size predefined, gap-free types, inside the target's window:
/// (origin address, target offset, bytes). None sends the call the long
/// way (flattening both datatypes), which also reports whatever is wrong.
/// Small operations are mostly bookkeeping: this skips two layouts and
/// four run vectors per call.
fn contiguous_shortcut(
    target: &Target,
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
) -> Option<(usize, isize, usize)> {
    let origin = crate::datatype::builtin_info(origin_datatype)?;
    let target_info = crate::datatype::builtin_info(target_datatype)?;
    if origin.size_bytes != origin.extent_bytes
        || target_info.size_bytes != target_info.extent_bytes
    {
        return None;
    }
    let bytes = usize::try_from(origin_count)
        .ok()?
        .checked_mul(origin.size_bytes)?;
    let target_bytes = usize::try_from(target_count)
        .ok()?
        .checked_mul(target_info.size_bytes)?;
    let start = isize::try_from(target_disp)
        .ok()?
        .checked_mul(target.disp_unit)?;
    let size_bytes = target.size_bytes?;
    let inside = start >= 0 && (start as usize).checked_add(bytes)? <= size_bytes;
    (bytes == target_bytes && inside && (bytes == 0 || !origin_addr.is_null())).then_some((
        origin_addr as usize,
        start,
        bytes,
    ))
}

/// [`contiguous_shortcut`] for an accumulate-like call: every datatype
/// involved is the same predefined, gap-free type (the origin's unless
/// MPI_NO_OP, the result's if any), the counts agree, the op applies to
/// the type, and the target bytes lie inside the window: (the type,
/// target offset, bytes). None takes the long way, which reports errors.
fn accumulate_shortcut(
    target: &Target,
    op: Op,
    call: &AccumulateCall,
) -> Option<(resmpi_core::datatype::TypeInfo, isize, usize)> {
    let unit = crate::datatype::builtin_info(call.target_datatype)?;
    if unit.size_bytes != unit.extent_bytes {
        return None;
    }
    let bytes = usize::try_from(call.target_count)
        .ok()?
        .checked_mul(unit.size_bytes)?;
    let matches = |address: *const c_void, count: MPI_Count, datatype: MPI_Datatype| {
        let info = crate::datatype::builtin_info(datatype);
        info.is_some_and(|info| {
            info.kind == unit.kind
                && info.size_bytes == unit.size_bytes
                && info.extent_bytes == unit.extent_bytes
        }) && usize::try_from(count)
            .ok()
            .and_then(|count| count.checked_mul(unit.size_bytes))
            == Some(bytes)
            && !address.is_null()
    };
    if bytes == 0
        || (!matches!(op, Op::NoOp)
            && !matches(call.origin_addr, call.origin_count, call.origin_datatype))
        || call.result.is_some_and(|(address, count, datatype)| {
            !matches(address as *const c_void, count, datatype)
        })
        || (!matches!(op, Op::Replace | Op::NoOp)
            && resmpi_core::op::check_op_type(op, &unit).is_err())
    {
        return None;
    }
    let start = isize::try_from(call.target_disp)
        .ok()?
        .checked_mul(target.disp_unit)?;
    let inside = start >= 0 && (start as usize).checked_add(bytes)? <= target.size_bytes?;
    inside.then_some((unit, start, bytes))
}

/// Target blocks as (offset, length) runs, for the direct path.
fn block_runs(blocks: &[TargetBlock]) -> Vec<(isize, usize)> {
    blocks
        .iter()
        .map(|block| (block.offset_bytes as isize, block.length_bytes as usize))
        .collect()
}

/// The op of an accumulate: predefined, MPI_REPLACE or MPI_NO_OP.
fn accumulate_op(op: MPI_Op) -> MpiResult<Op> {
    crate::handles::builtin_op(op).ok_or_else(|| {
        MpiError::new(
            ErrorClass::Op,
            format!("op {op:#x} is not a predefined op: RMA accumulates take predefined ops, MPI_REPLACE and MPI_NO_OP"),
        )
    })
}

/// The basic element type of an accumulate's datatype, checked against the op.
fn accumulate_unit(op: Op, datatype: MPI_Datatype) -> MpiResult<resmpi_core::datatype::TypeInfo> {
    let unit = crate::datatype::committed_layout(datatype)?
        .unit
        .ok_or_else(|| {
            MpiError::new(
                ErrorClass::Type,
                "an accumulate's datatype must be made of one predefined type",
            )
        })?;
    if !matches!(op, Op::Replace | Op::NoOp) {
        resmpi_core::op::check_op_type(op, &unit)?;
    }
    Ok(unit)
}

/// Runs of whole elements of `unit` at its extent (the reduction kernels'
/// layout): for a type whose elements have holes (MPI_SHORT_INT,
/// MPI_LONG_DOUBLE_INT and types made of them), each element starts where
/// the packed stream reaches a multiple of the element's size.
fn element_runs(
    layout: &Datatype,
    count: usize,
    start: isize,
    unit: &resmpi_core::datatype::TypeInfo,
) -> Vec<(isize, usize)> {
    let runs = flatten(layout, count, start);
    if unit.size_bytes == unit.extent_bytes {
        return runs;
    }
    let mut elements: Vec<(isize, usize)> = Vec::new();
    let mut packed = 0usize;
    for (offset, length) in runs {
        let mut next = packed.next_multiple_of(unit.size_bytes);
        while next < packed + length {
            let address = offset + (next - packed) as isize;
            match elements.last_mut() {
                Some(last) if last.0 + last.1 as isize == address => last.1 += unit.extent_bytes,
                _ => elements.push((address, unit.extent_bytes)),
            }
            next += unit.size_bytes;
        }
        packed += length;
    }
    elements
}

/// Everything an accumulate-like call takes.
struct AccumulateCall {
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    result: Option<(*mut c_void, MPI_Count, MPI_Datatype)>,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
}

/// Accumulate or Get_accumulate; returns (operation, target) to wait on.
unsafe fn accumulate(
    name: &str,
    window: &mut Window,
    call: AccumulateCall,
) -> MpiResult<Option<(u64, u32, MPI_Comm)>> {
    let Some(target) = target_of(window, call.target_rank)? else {
        return Ok(None);
    };
    let op = accumulate_op(call.op)?;
    if let Some(direct) = &window.direct {
        if let Some((unit, start, bytes)) = accumulate_shortcut(&target, op, &call) {
            let mut dead = holder_dead(name);
            // SAFETY: the origin (not read under MPI_NO_OP) and result
            // buffers are the application's, `bytes` each; the target
            // bytes were checked against its window.
            unsafe {
                let data: &[u8] = if matches!(op, Op::NoOp) {
                    &[]
                } else {
                    std::slice::from_raw_parts(call.origin_addr.cast::<u8>(), bytes)
                };
                let result = call
                    .result
                    .map(|(address, _, _)| [(address as usize, bytes)]);
                direct.accumulate(
                    call.target_rank as usize,
                    op,
                    &unit,
                    &[(start, bytes)],
                    data,
                    result.as_ref().map_or(&[][..], |runs| &runs[..]),
                    &mut dead,
                )
            }?;
            return Ok(None);
        }
    }
    let target_count = count_argument(call.target_count, "target count")?;
    if crate::datatype::committed_layout(call.target_datatype)?.size_bytes * target_count == 0 {
        // Nothing at the target: nothing to combine or fetch (MPICH's rule).
        return Ok(None);
    }
    let unit = accumulate_unit(op, call.target_datatype)?;
    let target_layout = crate::datatype::committed_layout(call.target_datatype)?;
    let target_start = (call.target_disp as isize)
        .checked_mul(target.disp_unit)
        .ok_or_else(|| MpiError::new(ErrorClass::Disp, "target displacement overflows"))?;
    let target_runs = element_runs(&target_layout, target_count, target_start, &unit);
    check_in_window(&target, &target_runs, call.target_disp)?;
    let target_total: usize = target_runs.iter().map(|&(_, length)| length).sum();
    let blocks: Vec<TargetBlock> = target_runs
        .iter()
        .map(|&(offset, length)| TargetBlock {
            offset_bytes: offset as i64,
            length_bytes: length as u64,
        })
        .collect();
    let side_runs = |address: *const c_void,
                     count: MPI_Count,
                     datatype: MPI_Datatype,
                     what: &str|
     -> MpiResult<Vec<(usize, usize)>> {
        let count = count_argument(count, &format!("{what} count"))?;
        let side_unit = accumulate_unit(op, datatype)?;
        if side_unit.kind != unit.kind {
            return Err(MpiError::new(
                ErrorClass::Type,
                format!("the {what} and target datatypes of an accumulate must be made of the same predefined type"),
            ));
        }
        let layout = crate::datatype::committed_layout(datatype)?;
        let runs = element_runs(&layout, count, address as isize, &unit);
        let total: usize = runs.iter().map(|&(_, length)| length).sum();
        same_size(total, target_total, what)?;
        if address.is_null() && total > 0 && layout.true_lb_bytes == 0 {
            return Err(MpiError::new(
                ErrorClass::Buffer,
                format!("{what} buffer is NULL with {total} bytes to move"),
            ));
        }
        Ok(runs
            .into_iter()
            .map(|(offset, length)| (offset as usize, length))
            .collect())
    };
    let data = if matches!(op, Op::NoOp) {
        Cow::Borrowed(&[][..])
    } else {
        let runs = side_runs(
            call.origin_addr,
            call.origin_count,
            call.origin_datatype,
            "origin",
        )?;
        // SAFETY: the application's origin buffer, for this call.
        unsafe { gather(&runs, target_total) }
    };
    let destination = match call.result {
        None => Vec::new(),
        Some((address, count, datatype)) => side_runs(address, count, datatype, "result")?,
    };
    if let Some(direct) = &window.direct {
        let mut dead = holder_dead(name);
        // SAFETY: the target runs were checked against the target's
        // window; the result buffer is the application's.
        unsafe {
            direct.accumulate(
                call.target_rank as usize,
                op,
                &unit,
                &target_runs,
                &data,
                &destination,
                &mut dead,
            )
        }?;
        return Ok(None);
    }
    let access = Access::Accumulate {
        op,
        unit,
        fetch: call.result.is_some(),
    };
    // SAFETY: the result buffer is the application's (MPI's contract).
    let operation = unsafe { issue(name, &target, access, &blocks, &data, destination) }?;
    Ok(Some((operation, target.world_rank, target.comm)))
}

/// A request already complete, for the R* forms, on the window's communicator.
fn complete_request(comm: MPI_Comm, request: *mut MPI_Request) -> MpiResult<()> {
    hand_back_request(comm, request, |mpi, comm_index| {
        mpi.engine
            .start_nothing(comm_index, crate::requests::empty_status())
    })
}

/// Write to `request` a new request on `comm` (the window's) made by
/// `start`: complete at once, or (MPI_Rput's, its data lent) completing
/// once the links released every view of its loan.
fn hand_back_request(
    comm: MPI_Comm,
    request: *mut MPI_Request,
    start: impl FnOnce(&mut resmpi_core::Mpi, usize) -> MpiResult<u32>,
) -> MpiResult<()> {
    let comm_index = crate::handles::comm_index(comm).unwrap_or(resmpi_core::WORLD);
    let index = with_engine("MPI_Rput", |mpi| start(mpi, comm_index))?;
    // SAFETY: checked non-null by the caller.
    unsafe { *request = crate::handles::request_handle(index) };
    Ok(())
}

/// Wait for a fetching operation (the R* forms), then hand back a complete request.
fn finish_request(
    name: &str,
    issued: Option<(u64, u32, MPI_Comm)>,
    fetches: bool,
    window_comm: MPI_Comm,
    request: *mut MPI_Request,
) -> MpiResult<()> {
    if let (Some((operation, target, _)), true) = (issued, fetches) {
        with_engine(name, |mpi| mpi.engine.rma_wait_operation(operation, target))?;
    }
    complete_request(window_comm, request)
}

unsafe fn put(
    window: &mut Window,
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    rput_loan: Option<&resmpi_core::reliability::Loan>,
) -> MpiResult<bool> {
    let buffer_held = rput_loan.is_none();
    let Some(target) = target_of(window, target_rank)? else {
        return Ok(false);
    };
    if let Some(direct) = &window.direct {
        if let Some((origin, start, bytes)) = contiguous_shortcut(
            &target,
            origin_addr,
            origin_count,
            origin_datatype,
            target_disp,
            target_count,
            target_datatype,
        ) {
            // SAFETY: the application's origin buffer of `bytes`; the
            // target bytes were checked against its window.
            unsafe { direct.put(target_rank as usize, &[(origin, bytes)], &[(start, bytes)]) };
            return Ok(false);
        }
    }
    let (blocks, target_total) =
        target_blocks(&target, target_disp, target_count, target_datatype)?;
    let (runs, total) = origin_runs(origin_addr, origin_count, origin_datatype, "origin")?;
    same_size(total, target_total, "origin")?;
    if let Some(direct) = &window.direct {
        // SAFETY: the origin buffer is the application's; the target
        // blocks were checked against the target's window.
        unsafe { direct.put(target_rank as usize, &runs, &block_runs(&blocks)) };
        return Ok(false);
    }
    // SAFETY: MPI_Put's buffer stays untouched until the epoch completes
    // at the target (`buffer_held`).
    if buffer_held
        && unsafe { issue_without_copy("MPI_Put", &target, Access::Put, &blocks, &runs) }?.is_some()
    {
        return Ok(false);
    }
    // SAFETY: MPI_Rput's buffer stays untouched until its request
    // completes, which waits for `loan`.
    if let Some(loan) = rput_loan {
        if unsafe { issue_rput_lent(&target, &blocks, &runs, loan) }? {
            return Ok(true);
        }
    }
    // SAFETY: the application's origin buffer, for this call.
    let data = unsafe { gather(&runs, total) };
    // SAFETY: no destination.
    unsafe { issue("MPI_Put", &target, Access::Put, &blocks, &data, Vec::new()) }?;
    Ok(false)
}

unsafe fn get(
    window: &mut Window,
    origin_addr: *mut c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
) -> MpiResult<Option<(u64, u32, MPI_Comm)>> {
    let Some(target) = target_of(window, target_rank)? else {
        return Ok(None);
    };
    if let Some(direct) = &window.direct {
        if let Some((origin, start, bytes)) = contiguous_shortcut(
            &target,
            origin_addr,
            origin_count,
            origin_datatype,
            target_disp,
            target_count,
            target_datatype,
        ) {
            // SAFETY: the application's origin buffer of `bytes`; the
            // target bytes were checked against its window.
            unsafe { direct.get(target_rank as usize, &[(origin, bytes)], &[(start, bytes)]) };
            return Ok(None);
        }
    }
    let (blocks, target_total) =
        target_blocks(&target, target_disp, target_count, target_datatype)?;
    let (runs, total) = origin_runs(origin_addr, origin_count, origin_datatype, "origin")?;
    same_size(total, target_total, "origin")?;
    if let Some(direct) = &window.direct {
        // SAFETY: the origin buffer is the application's; the target
        // blocks were checked against the target's window.
        unsafe { direct.get(target_rank as usize, &runs, &block_runs(&blocks)) };
        return Ok(None);
    }
    // SAFETY: the origin buffer is the application's, untouched until the
    // get is done (MPI's contract).
    if let Some(operation) =
        unsafe { issue_without_copy("MPI_Get", &target, Access::Get, &blocks, &runs) }?
    {
        return Ok(Some((operation, target.world_rank, target.comm)));
    }
    // SAFETY: the origin buffer is the application's (MPI's contract).
    let operation = unsafe { issue("MPI_Get", &target, Access::Get, &blocks, &[], runs) }?;
    Ok(Some((operation, target.world_rank, target.comm)))
}

/// The body of MPI_Put and MPI_Rput (`request`), for both count widths
/// (the int forms widen their counts to MPI_Count).
#[allow(clippy::too_many_arguments)]
unsafe fn put_entry(
    name: &str,
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: Option<*mut MPI_Request>,
) -> c_int {
    window_entry(name, win, |window| {
        if let Some(request) = request {
            crate::global::out_pointer(request, "request")?;
        }
        let loan = request.map(|_| resmpi_core::reliability::Loan::default());
        // SAFETY: the caller's arguments.
        let lent = unsafe {
            put(
                window,
                origin_addr,
                origin_count,
                origin_datatype,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                loan.as_ref(),
            )
        }?;
        match (request, loan) {
            (Some(request), Some(loan)) if lent => {
                hand_back_request(window.comm, request, |mpi, comm_index| {
                    mpi.engine.start_lent_completion(comm_index, loan)
                })
            }
            (Some(request), _) => complete_request(window.comm, request),
            (None, _) => Ok(()),
        }
    })
}

/// The body of MPI_Get and MPI_Rget (`request`), for both count widths.
#[allow(clippy::too_many_arguments)]
unsafe fn get_entry(
    name: &str,
    origin_addr: *mut c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: Option<*mut MPI_Request>,
) -> c_int {
    window_entry(name, win, |window| {
        if let Some(request) = request {
            crate::global::out_pointer(request, "request")?;
        }
        // SAFETY: the caller's arguments.
        let issued = unsafe {
            get(
                window,
                origin_addr,
                origin_count,
                origin_datatype,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
            )
        }?;
        match request {
            Some(request) => finish_request(name, issued, true, window.comm, request),
            None => Ok(()),
        }
    })
}

/// The body of MPI_Accumulate, MPI_Get_accumulate and their R* forms
/// (`request`), for both count widths.
unsafe fn accumulate_entry(
    name: &str,
    call: AccumulateCall,
    win: MPI_Win,
    request: Option<*mut MPI_Request>,
) -> c_int {
    let fetches = call.result.is_some();
    window_entry(name, win, |window| {
        if let Some(request) = request {
            crate::global::out_pointer(request, "request")?;
        }
        // SAFETY: the caller's arguments.
        let issued = unsafe { accumulate(name, window, call) }?;
        match request {
            Some(request) => finish_request(name, issued, fetches, window.comm, request),
            None => Ok(()),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Put(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        put_entry(
            "MPI_Put",
            origin_addr,
            origin_count.into(),
            origin_datatype,
            target_rank,
            target_disp,
            target_count.into(),
            target_datatype,
            win,
            None,
        )
    }
}
const _: fn_types::MPI_Put = PMPI_Put;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Put_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        put_entry(
            "MPI_Put_c",
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            win,
            None,
        )
    }
}
const _: fn_types::MPI_Put_c = PMPI_Put_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get(
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        get_entry(
            "MPI_Get",
            origin_addr,
            origin_count.into(),
            origin_datatype,
            target_rank,
            target_disp,
            target_count.into(),
            target_datatype,
            win,
            None,
        )
    }
}
const _: fn_types::MPI_Get = PMPI_Get;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_c(
    origin_addr: *mut c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        get_entry(
            "MPI_Get_c",
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            win,
            None,
        )
    }
}
const _: fn_types::MPI_Get_c = PMPI_Get_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        accumulate_entry(
            "MPI_Accumulate",
            AccumulateCall {
                origin_addr,
                origin_count: origin_count.into(),
                origin_datatype,
                result: None,
                target_rank,
                target_disp,
                target_count: target_count.into(),
                target_datatype,
                op,
            },
            win,
            None,
        )
    }
}
const _: fn_types::MPI_Accumulate = PMPI_Accumulate;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        accumulate_entry(
            "MPI_Accumulate_c",
            AccumulateCall {
                origin_addr,
                origin_count,
                origin_datatype,
                result: None,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                op,
            },
            win,
            None,
        )
    }
}
const _: fn_types::MPI_Accumulate_c = PMPI_Accumulate_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: c_int,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        accumulate_entry(
            "MPI_Get_accumulate",
            AccumulateCall {
                origin_addr,
                origin_count: origin_count.into(),
                origin_datatype,
                result: Some((result_addr, result_count.into(), result_datatype)),
                target_rank,
                target_disp,
                target_count: target_count.into(),
                target_datatype,
                op,
            },
            win,
            None,
        )
    }
}
const _: fn_types::MPI_Get_accumulate = PMPI_Get_accumulate;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: MPI_Count,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        accumulate_entry(
            "MPI_Get_accumulate_c",
            AccumulateCall {
                origin_addr,
                origin_count,
                origin_datatype,
                result: Some((result_addr, result_count, result_datatype)),
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                op,
            },
            win,
            None,
        )
    }
}
const _: fn_types::MPI_Get_accumulate_c = PMPI_Get_accumulate_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Fetch_and_op(
    origin_addr: *const c_void,
    result_addr: *mut c_void,
    datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    window_entry("MPI_Fetch_and_op", win, |window| {
        if crate::datatype::builtin_info(datatype).is_none() {
            return Err(MpiError::new(
                ErrorClass::Type,
                "MPI_Fetch_and_op takes a predefined datatype",
            ));
        }
        let call = AccumulateCall {
            origin_addr,
            origin_count: 1,
            origin_datatype: datatype,
            result: Some((result_addr, 1, datatype)),
            target_rank,
            target_disp,
            target_count: 1,
            target_datatype: datatype,
            op,
        };
        // SAFETY: the caller's arguments.
        unsafe { accumulate("MPI_Fetch_and_op", window, call) }.map(|_| ())
    })
}
const _: fn_types::MPI_Fetch_and_op = PMPI_Fetch_and_op;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Compare_and_swap(
    origin_addr: *const c_void,
    compare_addr: *const c_void,
    result_addr: *mut c_void,
    datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    win: MPI_Win,
) -> c_int {
    window_entry("MPI_Compare_and_swap", win, |window| {
        let Some(target) = target_of(window, target_rank)? else {
            return Ok(());
        };
        let Some(unit) = crate::datatype::builtin_info(datatype) else {
            return Err(MpiError::new(
                ErrorClass::Type,
                "MPI_Compare_and_swap takes a predefined datatype",
            ));
        };
        use resmpi_core::datatype::BasicKind as K;
        if !matches!(
            unit.kind,
            K::I8
                | K::U8
                | K::I16
                | K::U16
                | K::I32
                | K::U32
                | K::I64
                | K::U64
                | K::Char
                | K::Bool
                | K::Byte
        ) {
            return Err(MpiError::new(
                ErrorClass::Type,
                "MPI_Compare_and_swap takes an integer, logical or byte datatype",
            ));
        }
        for (pointer, what) in [
            (origin_addr, "origin_addr"),
            (compare_addr, "compare_addr"),
            (result_addr as *const c_void, "result_addr"),
        ] {
            if pointer.is_null() {
                return Err(MpiError::new(ErrorClass::Buffer, format!("{what} is NULL")));
            }
        }
        let (blocks, _) = target_blocks(&target, target_disp, 1, datatype)?;
        if let Some(direct) = &window.direct {
            let mut dead = holder_dead("MPI_Compare_and_swap");
            // SAFETY: the three buffers are the application's (checked
            // non-null), one element each; the element was checked
            // against the target's window.
            return unsafe {
                direct.compare_and_swap(
                    target_rank as usize,
                    blocks[0].offset_bytes as isize,
                    unit.size_bytes,
                    origin_addr.cast(),
                    compare_addr.cast(),
                    result_addr.cast(),
                    &mut dead,
                )
            };
        }
        // SAFETY: the application's origin and compare buffers (checked
        // non-null above), one element each, for this call.
        let data = unsafe {
            gather(
                &[
                    (origin_addr as usize, unit.size_bytes),
                    (compare_addr as usize, unit.size_bytes),
                ],
                2 * unit.size_bytes,
            )
        };
        // SAFETY: the result buffer is the application's.
        unsafe {
            issue(
                "MPI_Compare_and_swap",
                &target,
                Access::CompareAndSwap { unit },
                &blocks,
                &data,
                vec![(result_addr as usize, unit.size_bytes)],
            )
        }?;
        Ok(())
    })
}
const _: fn_types::MPI_Compare_and_swap = PMPI_Compare_and_swap;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Rput(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        put_entry(
            "MPI_Rput",
            origin_addr,
            origin_count.into(),
            origin_datatype,
            target_rank,
            target_disp,
            target_count.into(),
            target_datatype,
            win,
            Some(request),
        )
    }
}
const _: fn_types::MPI_Rput = PMPI_Rput;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Rput_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        put_entry(
            "MPI_Rput_c",
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            win,
            Some(request),
        )
    }
}
const _: fn_types::MPI_Rput_c = PMPI_Rput_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Rget(
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        get_entry(
            "MPI_Rget",
            origin_addr,
            origin_count.into(),
            origin_datatype,
            target_rank,
            target_disp,
            target_count.into(),
            target_datatype,
            win,
            Some(request),
        )
    }
}
const _: fn_types::MPI_Rget = PMPI_Rget;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Rget_c(
    origin_addr: *mut c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        get_entry(
            "MPI_Rget_c",
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            win,
            Some(request),
        )
    }
}
const _: fn_types::MPI_Rget_c = PMPI_Rget_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Raccumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        accumulate_entry(
            "MPI_Raccumulate",
            AccumulateCall {
                origin_addr,
                origin_count: origin_count.into(),
                origin_datatype,
                result: None,
                target_rank,
                target_disp,
                target_count: target_count.into(),
                target_datatype,
                op,
            },
            win,
            Some(request),
        )
    }
}
const _: fn_types::MPI_Raccumulate = PMPI_Raccumulate;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Raccumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        accumulate_entry(
            "MPI_Raccumulate_c",
            AccumulateCall {
                origin_addr,
                origin_count,
                origin_datatype,
                result: None,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                op,
            },
            win,
            Some(request),
        )
    }
}
const _: fn_types::MPI_Raccumulate_c = PMPI_Raccumulate_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Rget_accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: c_int,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        accumulate_entry(
            "MPI_Rget_accumulate",
            AccumulateCall {
                origin_addr,
                origin_count: origin_count.into(),
                origin_datatype,
                result: Some((result_addr, result_count.into(), result_datatype)),
                target_rank,
                target_disp,
                target_count: target_count.into(),
                target_datatype,
                op,
            },
            win,
            Some(request),
        )
    }
}
const _: fn_types::MPI_Rget_accumulate = PMPI_Rget_accumulate;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Rget_accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: MPI_Count,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        accumulate_entry(
            "MPI_Rget_accumulate_c",
            AccumulateCall {
                origin_addr,
                origin_count,
                origin_datatype,
                result: Some((result_addr, result_count, result_datatype)),
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                op,
            },
            win,
            Some(request),
        )
    }
}
const _: fn_types::MPI_Rget_accumulate_c = PMPI_Rget_accumulate_c;

// ---- synchronisation ----

fn sync_error(message: impl Into<String>) -> MpiError {
    MpiError::new(ErrorClass::RmaSync, message)
}

fn in_passive_epoch(window: &Window) -> bool {
    window.epoch.lock_all || !window.epoch.locks.is_empty()
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_fence(assert: c_int, win: MPI_Win) -> c_int {
    window_entry("MPI_Win_fence", win, |window| {
        if in_passive_epoch(window) || window.epoch.start.is_some() || window.epoch.post.is_some() {
            return Err(sync_error(
                "MPI_Win_fence inside a lock or post/start epoch",
            ));
        }
        let id = window.id;
        // Everything this process started has completed at its target
        // (on the direct path: when its stores return; the fence makes
        // them visible before the barrier)...
        let flushed = if window.direct.is_some() {
            crate::rma_direct::memory_fence();
            Ok(())
        } else {
            with_engine("MPI_Win_fence", |mpi| mpi.engine.rma_flush(id, None))
        };
        // ...and, once everyone is here, everything aimed at this process.
        let synchronised = if assert & MPI_MODE_NOPRECEDE != 0 && assert & MPI_MODE_NOSUCCEED != 0 {
            Ok(())
        } else {
            crate::file::barrier(window.comm)
        };
        window.epoch.fence = assert & MPI_MODE_NOSUCCEED == 0;
        // ...whose stores this process's later loads must see. (Under
        // replication a substitute may have stood in for a dead replica in
        // the barrier, so its operations on this window are not covered.)
        crate::rma_direct::memory_fence();
        let members = &window.group;
        let intact = with_engine("MPI_Win_fence", |mpi| {
            mpi.engine.rma_members_intact(members)
        });
        flushed.and(synchronised).and(intact)
    })
}
const _: fn_types::MPI_Win_fence = PMPI_Win_fence;

/// World ranks of `group`, each a member of the window.
fn group_in_window(window: &Window, group: MPI_Group) -> MpiResult<Vec<u32>> {
    let members = {
        let guard = crate::global::lock();
        crate::group::group_members(&guard.registry, group)?
    };
    for member in members.iter() {
        if !window.group.contains(member) {
            return Err(MpiError::new(
                ErrorClass::Group,
                format!("world rank {member} of the group is not in the window"),
            ));
        }
    }
    Ok(members.to_vec())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_post(group: MPI_Group, _assert: c_int, win: MPI_Win) -> c_int {
    window_entry("MPI_Win_post", win, |window| {
        if window.epoch.post.is_some() {
            return Err(sync_error("MPI_Win_post while an exposure epoch is open"));
        }
        let origins = group_in_window(window, group)?;
        let id = window.id;
        // This process's own stores before the exposure epoch are seen by
        // the origins' direct loads after MPI_Win_start.
        crate::rma_direct::memory_fence();
        with_engine("MPI_Win_post", |mpi| mpi.engine.rma_post(id, &origins))?;
        window.epoch.fence = false;
        window.epoch.post = Some(origins);
        Ok(())
    })
}
const _: fn_types::MPI_Win_post = PMPI_Win_post;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_start(group: MPI_Group, _assert: c_int, win: MPI_Win) -> c_int {
    window_entry("MPI_Win_start", win, |window| {
        if window.epoch.start.is_some() || in_passive_epoch(window) {
            return Err(sync_error("MPI_Win_start while an access epoch is open"));
        }
        let targets = group_in_window(window, group)?;
        let id = window.id;
        // MPI_MODE_NOCHECK promises the posts happened; waiting for their
        // notices is still right (each post sends one), so it is ignored.
        with_engine("MPI_Win_start", |mpi| {
            mpi.engine.rma_wait_posts(id, &targets)
        })?;
        crate::rma_direct::memory_fence();
        window.epoch.fence = false;
        window.epoch.start = Some(targets);
        Ok(())
    })
}
const _: fn_types::MPI_Win_start = PMPI_Win_start;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_complete(win: MPI_Win) -> c_int {
    window_entry("MPI_Win_complete", win, |window| {
        let Some(targets) = window.epoch.start.take() else {
            return Err(sync_error("MPI_Win_complete without MPI_Win_start"));
        };
        let id = window.id;
        // Direct stores are complete; the fence orders them before the
        // notices.
        crate::rma_direct::memory_fence();
        with_engine("MPI_Win_complete", |mpi| {
            mpi.engine.rma_complete(id, &targets)
        })
    })
}
const _: fn_types::MPI_Win_complete = PMPI_Win_complete;

fn wait_or_test(name: &str, window: &mut Window, block: bool) -> MpiResult<bool> {
    let Some(origins) = window.epoch.post.clone() else {
        return Err(sync_error(format!("{name} without MPI_Win_post")));
    };
    let id = window.id;
    let done = with_engine(name, |mpi| {
        mpi.engine.rma_wait_completes(id, &origins, block)
    })?;
    if done {
        window.epoch.post = None;
        // The origins' direct stores are seen by this process's loads.
        crate::rma_direct::memory_fence();
    }
    Ok(done)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_wait(win: MPI_Win) -> c_int {
    window_entry("MPI_Win_wait", win, |window| {
        wait_or_test("MPI_Win_wait", window, true).map(|_| ())
    })
}
const _: fn_types::MPI_Win_wait = PMPI_Win_wait;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_test(win: MPI_Win, flag: *mut c_int) -> c_int {
    window_entry("MPI_Win_test", win, |window| {
        crate::global::out_pointer(flag, "flag")?;
        let done = wait_or_test("MPI_Win_test", window, false)?;
        // SAFETY: checked non-null.
        unsafe { *flag = done as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_Win_test = PMPI_Win_test;

/// This process's rank in the window.
fn window_rank(window: &Window) -> c_int {
    let me = crate::global::lock()
        .mpi
        .as_ref()
        .map_or(0, |mpi| mpi.rank());
    window
        .group
        .iter()
        .position(|&member| member == me)
        .map_or(-1, |rank| rank as c_int)
}

fn checked_rank(window: &Window, rank: c_int) -> MpiResult<u32> {
    let ranks = window.group.len() as c_int;
    if !(0..ranks).contains(&rank) {
        return Err(MpiError::new(
            ErrorClass::Rank,
            format!("rank {rank} is not in the window's group of {ranks}"),
        ));
    }
    Ok(window.group[rank as usize])
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_lock(
    lock_type: c_int,
    rank: c_int,
    assert: c_int,
    win: MPI_Win,
) -> c_int {
    window_entry("MPI_Win_lock", win, |window| {
        let exclusive = match lock_type {
            MPI_LOCK_EXCLUSIVE => true,
            MPI_LOCK_SHARED => false,
            _ => {
                return Err(MpiError::new(
                    ErrorClass::LockType,
                    format!(
                        "lock type {lock_type} is neither MPI_LOCK_EXCLUSIVE nor MPI_LOCK_SHARED"
                    ),
                ))
            }
        };
        if rank == MPI_PROC_NULL {
            return Ok(());
        }
        let world = checked_rank(window, rank)?;
        if window.epoch.locks.contains_key(&rank) || window.epoch.lock_all {
            return Err(sync_error(format!(
                "rank {rank} of this window is already locked by this process"
            )));
        }
        if window.epoch.start.is_some() {
            return Err(sync_error("MPI_Win_lock inside a start epoch"));
        }
        // A fence without MPI_MODE_NOSUCCEED leaves a fence epoch open that
        // may hold no operations; a lock ends it (as MPICH allows).
        window.epoch.fence = false;
        let acquire = assert & MPI_MODE_NOCHECK == 0;
        if let (true, Some(direct)) = (acquire, &window.direct) {
            check_alive("MPI_Win_lock", &[world])?;
            let mut dead = holder_dead("MPI_Win_lock");
            direct.lock(rank as usize, exclusive, &mut dead)?;
            crate::rma_direct::memory_fence();
        } else if acquire {
            let id = window.id;
            // Direct loads and stores need the lock held on return.
            let wait = rank == window_rank(window)
                || window.flavor == MPI_WIN_FLAVOR_SHARED
                || window.direct.is_some();
            // The lock may follow a barrier a substitute stood in for (see
            // Engine::rma_members_intact).
            let members = &window.group;
            with_engine("MPI_Win_lock", |mpi| {
                mpi.engine.rma_members_intact(members)?;
                mpi.engine.rma_lock(id, world, exclusive, wait)
            })?;
            crate::rma_direct::memory_fence();
        }
        window.epoch.locks.insert(rank, (exclusive, acquire));
        Ok(())
    })
}
const _: fn_types::MPI_Win_lock = PMPI_Win_lock;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_unlock(rank: c_int, win: MPI_Win) -> c_int {
    window_entry("MPI_Win_unlock", win, |window| {
        if rank == MPI_PROC_NULL {
            return Ok(());
        }
        let world = checked_rank(window, rank)?;
        let Some((exclusive, acquired)) = window.epoch.locks.remove(&rank) else {
            return Err(sync_error(format!(
                "rank {rank} of this window is not locked by this process"
            )));
        };
        if let Some(direct) = &window.direct {
            // Every direct operation is complete; the fence makes its
            // stores visible before the lock goes.
            crate::rma_direct::memory_fence();
            if acquired {
                direct.unlock(rank as usize, exclusive);
            }
            return check_alive("MPI_Win_unlock", &[world]);
        }
        let id = window.id;
        // Direct stores are complete and visible before the lock goes.
        crate::rma_direct::memory_fence();
        with_engine("MPI_Win_unlock", |mpi| {
            if acquired {
                mpi.engine.rma_unlock(id, world)
            } else {
                mpi.engine.rma_flush(id, Some(world))
            }
        })
    })
}
const _: fn_types::MPI_Win_unlock = PMPI_Win_unlock;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_lock_all(assert: c_int, win: MPI_Win) -> c_int {
    window_entry("MPI_Win_lock_all", win, |window| {
        if window.epoch.lock_all || !window.epoch.locks.is_empty() {
            return Err(sync_error(
                "MPI_Win_lock_all while this process holds locks on the window",
            ));
        }
        if window.epoch.start.is_some() {
            return Err(sync_error("MPI_Win_lock_all inside a start epoch"));
        }
        window.epoch.fence = false;
        if let (0, Some(direct)) = (assert & MPI_MODE_NOCHECK, &window.direct) {
            check_alive("MPI_Win_lock_all", &window.group)?;
            let mut dead = holder_dead("MPI_Win_lock_all");
            for rank in 0..window.group.len() {
                if let Err(error) = direct.lock(rank, false, &mut dead) {
                    (0..rank).for_each(|held| direct.unlock(held, false));
                    return Err(error);
                }
            }
        } else if assert & MPI_MODE_NOCHECK == 0 {
            let (id, members) = (window.id, window.group.clone());
            let shared = window.flavor == MPI_WIN_FLAVOR_SHARED || window.direct.is_some();
            let me = window_rank(window);
            with_engine("MPI_Win_lock_all", |mpi| {
                mpi.engine.rma_members_intact(&members)?;
                members.iter().enumerate().try_for_each(|(rank, &member)| {
                    let wait = shared || rank as c_int == me;
                    mpi.engine.rma_lock(id, member, false, wait)
                })
            })?;
        }
        crate::rma_direct::memory_fence();
        window.epoch.lock_all = true;
        // Remember whether the locks were taken, under a rank no window has.
        window.epoch.locks.clear();
        if assert & MPI_MODE_NOCHECK != 0 {
            window.epoch.locks.insert(-1, (false, false));
        }
        Ok(())
    })
}
const _: fn_types::MPI_Win_lock_all = PMPI_Win_lock_all;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_unlock_all(win: MPI_Win) -> c_int {
    window_entry("MPI_Win_unlock_all", win, |window| {
        if !window.epoch.lock_all {
            return Err(sync_error("MPI_Win_unlock_all without MPI_Win_lock_all"));
        }
        let acquired = window.epoch.locks.remove(&-1).is_none();
        window.epoch.lock_all = false;
        let (id, members) = (window.id, window.group.clone());
        crate::rma_direct::memory_fence();
        if let Some(direct) = &window.direct {
            if acquired {
                (0..members.len()).for_each(|rank| direct.unlock(rank, false));
            }
            return Ok(());
        }
        with_engine("MPI_Win_unlock_all", |mpi| {
            if acquired {
                let mut result = Ok(());
                for &member in &members {
                    let unlocked = mpi.engine.rma_unlock(id, member);
                    if result.is_ok() {
                        result = unlocked;
                    }
                }
                result
            } else {
                mpi.engine.rma_flush(id, None)
            }
        })
    })
}
const _: fn_types::MPI_Win_unlock_all = PMPI_Win_unlock_all;

fn flush(name: &str, win: MPI_Win, rank: Option<c_int>) -> c_int {
    window_entry(name, win, |window| {
        let target = match rank {
            Some(MPI_PROC_NULL) => return Ok(()),
            Some(rank) => {
                let world = checked_rank(window, rank)?;
                if !window.epoch.lock_all && !window.epoch.locks.contains_key(&rank) {
                    return Err(sync_error(format!(
                        "{name} outside a passive-target epoch toward rank {rank}"
                    )));
                }
                Some(world)
            }
            None => {
                if !in_passive_epoch(window) {
                    return Err(sync_error(format!("{name} outside a passive-target epoch")));
                }
                None
            }
        };
        if window.direct.is_some() {
            // Every direct operation completed when its call returned: a
            // flush only orders memory.
            crate::rma_direct::memory_fence();
            return Ok(());
        }
        let id = window.id;
        with_engine(name, |mpi| mpi.engine.rma_flush(id, target))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_flush(rank: c_int, win: MPI_Win) -> c_int {
    flush("MPI_Win_flush", win, Some(rank))
}
const _: fn_types::MPI_Win_flush = PMPI_Win_flush;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_flush_local(rank: c_int, win: MPI_Win) -> c_int {
    // Local completion is remote completion here: a fetch's bytes arrive
    // with its response, and a put's were copied when it was issued.
    flush("MPI_Win_flush_local", win, Some(rank))
}
const _: fn_types::MPI_Win_flush_local = PMPI_Win_flush_local;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_flush_all(win: MPI_Win) -> c_int {
    flush("MPI_Win_flush_all", win, None)
}
const _: fn_types::MPI_Win_flush_all = PMPI_Win_flush_all;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_flush_local_all(win: MPI_Win) -> c_int {
    flush("MPI_Win_flush_local_all", win, None)
}
const _: fn_types::MPI_Win_flush_local_all = PMPI_Win_flush_local_all;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_sync(win: MPI_Win) -> c_int {
    window_entry("MPI_Win_sync", win, |window| {
        // The unified model: public and private copies are the same
        // memory; a full barrier orders this process's loads and stores
        // against the engine's (and other processes' in a shared window).
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        let _ = window;
        let _ = with_engine("MPI_Win_sync", |mpi| mpi.engine.progress().map(|_| ()));
        Ok(())
    })
}
const _: fn_types::MPI_Win_sync = PMPI_Win_sync;
