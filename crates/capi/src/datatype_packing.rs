//! Packing: MPI_Pack/Unpack/Pack_size, and the staging copies of
//! non-contiguous collective buffers.
//!
//! Point-to-point needs no staging: the engine gathers a non-contiguous
//! message straight into its frames and scatters arriving payloads straight
//! into the application's buffer (`resmpi_core::user_bytes`), one copy
//! with the checksum fused into it.
//!
//! Collective schedules move raw byte spans, so a nonblocking collective's
//! non-contiguous output blocks are received into staging buffers kept
//! with its request and unpacked when the application completes the
//! request (Wait/Test families, MPI_Request_free of a finished request, or
//! the sweep after every call for requests freed while pending).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use resmpi_core::datatype::Datatype;
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use crate::abi::*;
use crate::datatype::{builtin_info, check_count, committed_layout, layout_of, PackedBuffer};
use crate::global::entry;
use crate::large_count::{int_and_large_count, Count};
use crate::p2p::comm_of;

/// Packed bytes waiting to be unpacked into a user buffer.
pub struct StagedPart {
    /// Where the engine (or a collective schedule) writes the packed data.
    pub staging: Vec<u8>,
    /// Where it is unpacked to.
    pub target: PackedBuffer,
}

impl StagedPart {
    /// A zeroed staging buffer for `target`'s packed bytes.
    pub fn new(target: PackedBuffer) -> StagedPart {
        StagedPart {
            staging: vec![0u8; target.length_bytes],
            target,
        }
    }

    /// Unpack the first `bytes` staged bytes.
    pub fn unpack(&self, bytes: usize) {
        self.target
            .unpack(&self.staging[..bytes.min(self.staging.len())]);
    }
}

/// A request whose data must be unpacked when it completes.
struct StagedReceive {
    /// Generation of the request slot, so a recycled slot is never confused with it.
    generation: u32,
    /// The staged data, every part filled by completion.
    parts: Vec<StagedPart>,
    /// MPI_Request_free was called before completion.
    orphaned: bool,
}

// SAFETY: the raw user pointer inside is only used under the library lock.
unsafe impl Send for StagedReceive {}

static STAGED_RECEIVES: Mutex<Option<HashMap<u32, StagedReceive>>> = Mutex::new(None);
/// Receives freed while pending; checked without the lock on every call.
static ORPHANED_RECEIVES: AtomicUsize = AtomicUsize::new(0);

fn with_staged<T>(body: impl FnOnce(&mut HashMap<u32, StagedReceive>) -> T) -> T {
    let mut guard = STAGED_RECEIVES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    body(guard.get_or_insert_with(HashMap::new))
}

fn insert_staged(index: u32, generation: u32, parts: Vec<StagedPart>) {
    with_staged(|staged| {
        staged.insert(
            index,
            StagedReceive {
                generation,
                parts,
                orphaned: false,
            },
        )
    });
}

/// Nonblocking collective `index` writes packed data into `parts`: keep
/// them with the request and unpack them when it is completed.
pub fn stage_collective(mpi: &Mpi, index: u32, parts: Vec<StagedPart>) {
    if parts.is_empty() {
        return;
    }
    if let Some(request) = mpi.engine.state.requests.get(index) {
        insert_staged(index, request.generation, parts);
    }
}

/// Request `index` of `generation` has been taken out of the request
/// table: unpack what it staged.
pub fn finish_staged_receive(index: u32, generation: u32) {
    let Some(staged) = with_staged(|staged| {
        if staged
            .get(&index)
            .is_some_and(|entry| entry.generation == generation)
        {
            staged.remove(&index)
        } else {
            None
        }
    }) else {
        return;
    };
    if staged.orphaned {
        ORPHANED_RECEIVES.fetch_sub(1, Ordering::Relaxed);
    }
    for part in &staged.parts {
        part.unpack(part.staging.len());
    }
}

/// MPI_Request_free on receive `index` still pending: if it is staged,
/// keep the request until it completes (the sweep unpacks and releases
/// it) and return true; false lets the engine release it by itself.
pub fn orphan_staged_receive(index: u32) -> bool {
    with_staged(|staged| match staged.get_mut(&index) {
        Some(entry) if !entry.orphaned => {
            entry.orphaned = true;
            ORPHANED_RECEIVES.fetch_add(1, Ordering::Relaxed);
            true
        }
        Some(_) => true,
        None => false,
    })
}

/// Unpack and release the freed receives that have completed. Called
/// after every entry point; costs one atomic load when there are none.
#[inline]
pub fn sweep_orphaned_receives(mpi: &mut Mpi) {
    if ORPHANED_RECEIVES.load(Ordering::Relaxed) != 0 {
        sweep_orphaned_receives_now(mpi);
    }
}

/// [`sweep_orphaned_receives`] when there is something to sweep.
#[cold]
fn sweep_orphaned_receives_now(mpi: &mut Mpi) {
    let finished: Vec<u32> = with_staged(|staged| {
        staged
            .iter()
            .filter(|(index, entry)| {
                entry.orphaned
                    && mpi
                        .engine
                        .state
                        .requests
                        .get(**index)
                        .is_none_or(|request| request.complete)
            })
            .map(|(index, _)| *index)
            .collect()
    });
    for index in finished {
        match mpi.engine.state.requests.remove(index) {
            Some(request) => finish_staged_receive(index, request.generation),
            None => {
                // The slot went away without us: nothing can be unpacked.
                if with_staged(|staged| staged.remove(&index)).is_some() {
                    ORPHANED_RECEIVES.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }
}

// ----- MPI_Pack / MPI_Unpack -------------------------------------------------

/// MPI_Pack_size (int or `_c`): the int form answers MPI_UNDEFINED for a
/// size that does not fit an int, as MPI_Type_size does (and MPICH).
unsafe fn pack_size<C: Count>(
    name: &str,
    incount: C,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
    size: *mut C,
) -> c_int {
    entry(name, comm, |mpi, _| {
        comm_of(mpi, comm)?;
        let count = check_count(incount)?;
        let layout = layout_of(datatype)?;
        let bytes = layout
            .packed_bytes(count)
            .ok_or_else(|| MpiError::new(ErrorClass::Count, "packed size overflows"))?;
        let undefined = C::try_from(MPI_UNDEFINED as MPI_Count).unwrap_or_else(|_| unreachable!());
        let bytes = C::try_from(bytes as MPI_Count).unwrap_or(undefined);
        if size.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "size pointer is NULL"));
        }
        // SAFETY: checked non-null.
        unsafe { *size = bytes };
        Ok(())
    })
}
int_and_large_count!(PMPI_Pack_size = MPI_Pack_size, PMPI_Pack_size_c = MPI_Pack_size_c, pack_size, (
    incount: Count, datatype: MPI_Datatype, comm: MPI_Comm, size: *mut Count));

/// Check a pack/unpack window: `bytes` from `*position` within `limit`
/// (positions are `int` for MPI_Pack, `MPI_Aint` for the external forms).
unsafe fn pack_window<T: Copy + Into<i64>>(
    position: *mut T,
    bytes: usize,
    limit: T,
    what: &str,
) -> MpiResult<usize> {
    if position.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "position pointer is NULL"));
    }
    // SAFETY: checked non-null.
    let start: i64 = unsafe { *position }.into();
    let limit: i64 = limit.into();
    if start < 0 || limit < 0 || start as u64 + bytes as u64 > limit as u64 {
        return Err(MpiError::new(
            ErrorClass::Truncate,
            format!("{what}: {bytes} bytes at position {start} exceed the buffer of {limit} bytes"),
        ));
    }
    Ok(start as usize)
}

/// The user buffer must not be NULL for predefined types with data
/// (derived types may address absolute memory from MPI_BOTTOM).
pub(crate) fn check_user_buffer(
    buffer: *const c_void,
    count: usize,
    datatype: MPI_Datatype,
) -> MpiResult<()> {
    if buffer.is_null()
        && count > 0
        && builtin_info(datatype).is_some_and(|info| info.size_bytes > 0)
    {
        return Err(MpiError::new(
            ErrorClass::Buffer,
            format!("buffer is NULL but count is {count}"),
        ));
    }
    Ok(())
}

/// A position argument: `int` for MPI_Pack, `MPI_Aint` for the external forms.
pub(crate) trait Position: Copy + Into<i64> {
    /// The position after `bytes` more (fits: the window check passed).
    fn from_bytes(bytes: usize) -> Self;
}

impl Position for c_int {
    fn from_bytes(bytes: usize) -> c_int {
        bytes as c_int
    }
}

impl Position for MPI_Aint {
    fn from_bytes(bytes: usize) -> MPI_Aint {
        bytes as MPI_Aint
    }
}

/// The form of packed bytes: MPI_Pack's (native) or MPI_Pack_external's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Representation {
    /// The native packed form.
    Native,
    /// "external32": big-endian, with the external32 sizes.
    External32,
}

impl Representation {
    /// Packed bytes of `count` elements of `layout`, or MPI_ERR_COUNT.
    pub(crate) fn packed_bytes(self, layout: &Datatype, count: usize) -> MpiResult<usize> {
        let overflow = || MpiError::new(ErrorClass::Count, "packed size overflows");
        let native_bytes = layout.packed_bytes(count).ok_or_else(overflow)?;
        match self {
            Representation::External32 if layout.narrows_in_external32() => layout
                .external32_size_bytes()
                .checked_mul(count)
                .ok_or_else(overflow),
            _ => Ok(native_bytes),
        }
    }
}

/// MPI_Pack's work, shared with MPI_Pack_external: pack `incount`
/// elements of `datatype` at `inbuf` into `outbuf` at `*position` in
/// `representation`, advance `*position` (left as it was on an error).
///
/// # Safety
/// The caller's buffers and position pointer, as MPI_Pack takes them.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn pack_message<P: Position>(
    name: &str,
    inbuf: *const c_void,
    incount: impl Into<MPI_Count>,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: P,
    position: *mut P,
    representation: Representation,
) -> MpiResult<()> {
    let count = check_count(incount)?;
    let layout = committed_layout(datatype)?;
    check_user_buffer(inbuf, count, datatype)?;
    let bytes = representation.packed_bytes(&layout, count)?;
    // SAFETY: position checked inside; buffers are the caller's.
    unsafe {
        let start = pack_window(position, bytes, outsize, name)?;
        if bytes > 0 {
            if outbuf.is_null() {
                return Err(MpiError::new(ErrorClass::Buffer, "outbuf is NULL"));
            }
            let window = std::slice::from_raw_parts_mut((outbuf as *mut u8).add(start), bytes);
            match representation {
                Representation::Native => layout.pack(inbuf.cast(), count, 0, window),
                Representation::External32 if layout.narrows_in_external32() => {
                    let native_bytes = layout.packed_bytes(count).unwrap_or(0);
                    let mut native = vec![0u8; native_bytes];
                    layout.pack(inbuf.cast(), count, 0, &mut native);
                    crate::external32::to_external32(&layout, &native, window)?;
                }
                Representation::External32 => {
                    layout.pack(inbuf.cast(), count, 0, window);
                    crate::external32::reverse_elements(&layout, window);
                }
            }
        }
        *position = P::from_bytes(start + bytes);
    }
    Ok(())
}

/// MPI_Unpack's work, shared with MPI_Unpack_external: the packed bytes
/// at `*position` are in `representation`.
///
/// # Safety
/// The caller's buffers and position pointer, as MPI_Unpack takes them.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn unpack_message<P: Position>(
    name: &str,
    inbuf: *const c_void,
    insize: P,
    position: *mut P,
    outbuf: *mut c_void,
    outcount: impl Into<MPI_Count>,
    datatype: MPI_Datatype,
    representation: Representation,
) -> MpiResult<()> {
    let count = check_count(outcount)?;
    let layout = committed_layout(datatype)?;
    check_user_buffer(outbuf, count, datatype)?;
    let bytes = representation.packed_bytes(&layout, count)?;
    // SAFETY: position checked inside; buffers are the caller's.
    unsafe {
        let start = pack_window(position, bytes, insize, name)?;
        if bytes > 0 {
            if inbuf.is_null() {
                return Err(MpiError::new(ErrorClass::Buffer, "inbuf is NULL"));
            }
            let window = std::slice::from_raw_parts((inbuf as *const u8).add(start), bytes);
            match representation {
                Representation::Native => layout.unpack(outbuf.cast(), count, 0, window),
                Representation::External32 => {
                    let native_bytes = layout.packed_bytes(count).unwrap_or(0);
                    let mut native = vec![0u8; native_bytes];
                    crate::external32::from_external32(&layout, window, &mut native);
                    layout.unpack(outbuf.cast(), count, 0, &native);
                }
            }
        }
        *position = P::from_bytes(start + bytes);
    }
    Ok(())
}

unsafe fn pack<C: Count + Position>(
    name: &str,
    inbuf: *const c_void,
    incount: C,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: C,
    position: *mut C,
    comm: MPI_Comm,
) -> c_int {
    entry(name, comm, |mpi, _| {
        comm_of(mpi, comm)?;
        // SAFETY: the caller's arguments, checked inside.
        unsafe {
            pack_message(
                name,
                inbuf,
                incount,
                datatype,
                outbuf,
                outsize,
                position,
                Representation::Native,
            )
        }
    })
}
int_and_large_count!(PMPI_Pack = MPI_Pack, PMPI_Pack_c = MPI_Pack_c, pack, (
    inbuf: *const c_void,
    incount: Count,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: Count,
    position: *mut Count,
    comm: MPI_Comm,
));

unsafe fn unpack<C: Count + Position>(
    name: &str,
    inbuf: *const c_void,
    insize: C,
    position: *mut C,
    outbuf: *mut c_void,
    outcount: C,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    entry(name, comm, |mpi, _| {
        comm_of(mpi, comm)?;
        // SAFETY: the caller's arguments, checked inside.
        unsafe {
            unpack_message(
                name,
                inbuf,
                insize,
                position,
                outbuf,
                outcount,
                datatype,
                Representation::Native,
            )
        }
    })
}
int_and_large_count!(PMPI_Unpack = MPI_Unpack, PMPI_Unpack_c = MPI_Unpack_c, unpack, (
    inbuf: *const c_void,
    insize: Count,
    position: *mut Count,
    outbuf: *mut c_void,
    outcount: Count,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
));
