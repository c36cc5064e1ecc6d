//! MPI-IO data access: the 36 read/write calls, as one path.
//!
//! Every call is (where in the view) × (read or write) × (how it
//! completes). Where: an explicit offset, the individual file pointer, the
//! shared file pointer (a fetch-and-add on a counter file, so processes
//! never wait for each other), or ordered (rank order: an exclusive prefix
//! sum of the sizes and one fetch-and-add by rank 0). The bytes then move
//! through the view's file extents (`resmpi_io::view`) to or from the store,
//! packed through the datatype's layout unless the buffer is contiguous.
//!
//! How it completes: blocking; collective (`_all`: the same transfer, and a
//! barrier after it, so that when any process returns every process's data
//! is in the file); split (`_begin` does the collective call and keeps
//! its result for `_end`); nonblocking (`MPI_File_i*`: the transfer runs at
//! once and the call returns a request that is already complete, which
//! MPI_Wait/Test/MPIO_Wait finish like any other, with the byte count in
//! its status). Nonblocking collectives do not synchronize, so they can
//! never deadlock against other work the application overlaps with them.

use std::borrow::Cow;
use std::sync::Arc;

use resmpi_core::datatype::Datatype;
use resmpi_core::request::{Operation, Request, Status};
use resmpi_core::{ErrorClass, MpiError, MpiResult};
use resmpi_io::view::Extent;

use crate::abi::*;
use crate::file::{
    barrier, broadcast_i64, exclusive_prefix_sum, file_entry, io_error, not_sequential,
    shared_position, CollectiveBuffering, OpenFile, SplitCollective, ViewDatarep,
};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Position {
    /// `_at`: this offset, in etypes.
    Explicit(MPI_Offset),
    /// The individual file pointer.
    Individual,
    /// The shared file pointer.
    Shared,
    /// The shared file pointer, in rank order (collective).
    Ordered,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Completion {
    Blocking,
    Collective,
    SplitBegin,
    Nonblocking,
    NonblockingCollective,
}

/// One access, checked and mapped onto the file.
pub(crate) struct Prepared {
    layout: Arc<Datatype>,
    count: usize,
    base: *mut u8,
    /// The view's data representation.
    datarep: ViewDatarep,
    /// The access's datatype (a user representation's functions get it).
    datatype: MPI_Datatype,
    /// Bytes of data.
    pub total_bytes: usize,
    /// Where they go in the file, in view order.
    pub extents: Vec<Extent>,
}

/// Check an access of `count` elements of `datatype` at `buffer` starting
/// at view position `position_etypes`, and map it onto file extents.
pub(crate) unsafe fn prepare(
    file: &OpenFile,
    position_etypes: u64,
    buffer: *mut c_void,
    count: usize,
    datatype: MPI_Datatype,
) -> MpiResult<Prepared> {
    let layout = crate::datatype::committed_layout(datatype)?;
    crate::file::view_can_hold(file.datarep, datatype, &layout, "the access's datatype")?;
    let total = layout.packed_bytes(count).ok_or_else(|| {
        MpiError::new(
            ErrorClass::Count,
            format!("{count} elements are more bytes than memory holds"),
        )
    })?;
    let etype = file.view.etype_size_bytes() as usize;
    if total % etype != 0 {
        return Err(MpiError::new(
            ErrorClass::Type,
            format!("{total} bytes of data are not a whole number of {etype}-byte etypes"),
        ));
    }
    if total > 0 && buffer.is_null() && layout.true_lb_bytes == 0 {
        return Err(MpiError::new(ErrorClass::Buffer, "buffer is NULL"));
    }
    let start = position_etypes
        .checked_mul(etype as u64)
        .ok_or_else(|| MpiError::new(ErrorClass::Arg, "offset overflows the file"))?;
    let extents = file.view.extents(start, total as u64);
    Ok(Prepared {
        layout,
        count,
        base: buffer as *mut u8,
        datarep: file.datarep,
        datatype,
        total_bytes: total,
        extents,
    })
}

impl Prepared {
    /// The data to write, packed, in the view's representation (borrowed
    /// when the buffer is contiguous and the representation native).
    pub(crate) unsafe fn packed(&self) -> MpiResult<Cow<'_, [u8]>> {
        let contiguous = self
            .layout
            .contiguous_span(self.count)
            .filter(|_| self.datarep == ViewDatarep::Native);
        if let Some((offset, length)) = contiguous {
            // SAFETY: the application promises `count` elements at `buffer`.
            return Ok(Cow::Borrowed(unsafe {
                std::slice::from_raw_parts(self.base.wrapping_offset(offset), length)
            }));
        }
        let mut bytes = vec![0u8; self.total_bytes];
        let converted = match self.datarep {
            // SAFETY: as above; `bytes` holds the packed size.
            ViewDatarep::User(index) => unsafe {
                crate::datarep::get(index).convert(
                    crate::datarep::Direction::Write,
                    self.base,
                    self.datatype,
                    self.count,
                    &mut bytes,
                )?
            },
            _ => false,
        };
        if !converted {
            // SAFETY: as above.
            unsafe { self.layout.pack(self.base, self.count, 0, &mut bytes) };
            if self.datarep == ViewDatarep::External32 {
                crate::external32::reverse_elements(&self.layout, &mut bytes);
            }
        }
        Ok(Cow::Owned(bytes))
    }

    /// Run `fill` on the packed bytes a read delivers, then scatter them
    /// into the buffer (in place when it is contiguous). `fill` returns how
    /// many bytes it delivered.
    pub(crate) unsafe fn read_into(
        &self,
        fill: impl FnOnce(&mut [u8]) -> MpiResult<usize>,
    ) -> MpiResult<usize> {
        let contiguous = self
            .layout
            .contiguous_span(self.count)
            .filter(|_| self.datarep == ViewDatarep::Native);
        match contiguous {
            Some((offset, length)) => {
                // SAFETY: the application promises `count` writable elements.
                let target = unsafe {
                    std::slice::from_raw_parts_mut(self.base.wrapping_offset(offset), length)
                };
                fill(target)
            }
            None => {
                let mut staging = vec![0u8; self.total_bytes];
                let delivered = fill(&mut staging)?;
                // Whole elements only: a partial one at the end of the file
                // stays as read.
                let whole_elements = delivered / self.layout.size_bytes.max(1);
                let whole = whole_elements * self.layout.size_bytes;
                match self.datarep {
                    ViewDatarep::Native => {}
                    ViewDatarep::External32 => {
                        crate::external32::reverse_elements(&self.layout, &mut staging[..whole])
                    }
                    ViewDatarep::User(index) => {
                        let datarep = crate::datarep::get(index);
                        // SAFETY: the application promises `count` writable
                        // elements; the staging holds their packed bytes.
                        let converted = unsafe {
                            datarep.convert(
                                crate::datarep::Direction::Read,
                                self.base,
                                self.datatype,
                                whole_elements,
                                &mut staging[..whole],
                            )?
                        };
                        if converted {
                            // The conversion function wrote the buffer; a
                            // partial last element is not the application's.
                            return Ok(whole);
                        }
                    }
                }
                // SAFETY: the application promises `count` writable elements.
                unsafe {
                    self.layout
                        .unpack(self.base, self.count, 0, &staging[..delivered])
                };
                Ok(delivered)
            }
        }
    }
}

/// Each process on its own: one `pwrite` or `pread` per extent; the bytes
/// moved (fewer than asked on a read that reaches the end of the file).
pub(crate) unsafe fn independent(
    file: &mut OpenFile,
    prepared: &Prepared,
    direction: Direction,
) -> MpiResult<usize> {
    if prepared.total_bytes == 0 {
        return Ok(0);
    }
    // Atomic mode: one lock over every byte the access touches, so another
    // process sees all of it or none of it.
    let _atomic_lock = match (
        file.atomic,
        prepared.extents.first(),
        prepared.extents.last(),
    ) {
        (true, Some(first), Some(last)) => {
            let start = first.offset_bytes.min(last.offset_bytes);
            let end = prepared
                .extents
                .iter()
                .map(|extent| extent.offset_bytes + extent.length_bytes)
                .max()
                .unwrap_or(start);
            Some(
                file.store
                    .lock_range(start, end - start, direction == Direction::Write)
                    .map_err(|error| io_error("atomic-mode lock", &error))?,
            )
        }
        _ => None,
    };
    match direction {
        Direction::Write => {
            // SAFETY: the caller's buffer.
            let packed = unsafe { prepared.packed()? };
            let mut cursor = 0usize;
            let pieces: Vec<(u64, &[u8])> = prepared
                .extents
                .iter()
                .map(|extent| {
                    let length = extent.length_bytes as usize;
                    let piece = (extent.offset_bytes, &packed[cursor..cursor + length]);
                    cursor += length;
                    piece
                })
                .collect();
            file.store
                .write_pieces(&pieces)
                .map_err(|error| io_error("write failed", &error))?;
            Ok(prepared.total_bytes)
        }
        Direction::Read => {
            let sieve_bytes = match file.hints.data_sieving_read {
                CollectiveBuffering::Disable => 0,
                _ => file.hints.sieve_buffer_bytes,
            };
            let store = &mut file.store;
            // SAFETY: the caller's buffer.
            unsafe {
                prepared
                    .read_into(|packed| sieved_read(store, &prepared.extents, packed, sieve_bytes))
            }
        }
    }
}

/// Read `extents` into `packed`, in groups that span at most
/// `sieve_bytes` of the file with one `pread` each (data sieving: a
/// non-contiguous view costs a few large reads, not one per run); the
/// bytes delivered, up to the end of the file.
fn sieved_read(
    store: &mut resmpi_io::store::Store,
    extents: &[Extent],
    packed: &mut [u8],
    sieve_bytes: u64,
) -> MpiResult<usize> {
    let mut cursor = 0usize;
    let mut index = 0;
    let mut span = Vec::new();
    while index < extents.len() {
        // The group: extents[index..next], from `low` to `high`.
        let (low, mut high) = (
            extents[index].offset_bytes,
            extents[index].offset_bytes + extents[index].length_bytes,
        );
        let mut next = index + 1;
        while next < extents.len() {
            let extent = extents[next];
            let end = extent.offset_bytes + extent.length_bytes;
            if extent.offset_bytes < high || end - low > sieve_bytes {
                break;
            }
            high = end;
            next += 1;
        }
        if next == index + 1 {
            let length = extents[index].length_bytes as usize;
            let read = store
                .read_at(low, &mut packed[cursor..cursor + length])
                .map_err(|error| io_error("read failed", &error))?;
            cursor += read;
            if read < length {
                return Ok(cursor);
            }
        } else {
            span.resize((high - low) as usize, 0);
            let read = store
                .read_at(low, &mut span)
                .map_err(|error| io_error("read failed", &error))? as u64;
            for extent in &extents[index..next] {
                let start = extent.offset_bytes - low;
                let available = read.saturating_sub(start).min(extent.length_bytes) as usize;
                packed[cursor..cursor + available]
                    .copy_from_slice(&span[start as usize..start as usize + available]);
                cursor += available;
                if available < extent.length_bytes as usize {
                    return Ok(cursor);
                }
            }
        }
        index = next;
    }
    Ok(cursor)
}

unsafe fn transfer(
    file: &mut OpenFile,
    position_etypes: u64,
    buffer: *mut c_void,
    count: usize,
    datatype: MPI_Datatype,
    direction: Direction,
) -> MpiResult<usize> {
    // SAFETY: the caller's buffer.
    let prepared = unsafe { prepare(file, position_etypes, buffer, count, datatype) }?;
    // SAFETY: as above.
    unsafe { independent(file, &prepared, direction) }
}

/// Check the access and say how many elements and etypes it asks for.
fn check_access(
    file: &OpenFile,
    count: MPI_Count,
    datatype: MPI_Datatype,
    direction: Direction,
) -> MpiResult<(usize, u64)> {
    let count = crate::datatype::check_count(count)?;
    match direction {
        Direction::Read if file.amode & MPI_MODE_WRONLY != 0 => {
            return Err(MpiError::new(
                ErrorClass::Access,
                "read from a file opened MPI_MODE_WRONLY",
            ))
        }
        Direction::Write if file.amode & MPI_MODE_RDONLY != 0 => {
            return Err(MpiError::new(
                ErrorClass::ReadOnly,
                "write to a file opened MPI_MODE_RDONLY",
            ))
        }
        _ => {}
    }
    let layout = crate::datatype::committed_layout(datatype)?;
    Ok((
        count,
        (layout.size_bytes as u64 * count as u64) / file.view.etype_size_bytes(),
    ))
}

/// Where the access starts and the pointer update it makes. A collective
/// access takes part in its collectives even when its own arguments are
/// bad, so that no other process waits for it forever.
unsafe fn access(
    file: &mut OpenFile,
    position: Position,
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    direction: Direction,
    collective: bool,
) -> MpiResult<usize> {
    let checked = check_access(file, count, datatype, direction);
    match position {
        Position::Explicit(offset) => {
            let start = checked.and_then(|(count, _)| {
                not_sequential(file, "an explicit-offset access")?;
                let offset = u64::try_from(offset).map_err(|_| {
                    MpiError::new(ErrorClass::Arg, format!("offset {offset} is negative"))
                })?;
                Ok((count, offset))
            });
            if collective {
                // SAFETY: the caller's buffer.
                return unsafe {
                    crate::file_collective::collective_transfer(
                        file, start, buffer, datatype, direction,
                    )
                };
            }
            let (count, offset) = start?;
            // SAFETY: the caller's buffer.
            unsafe { transfer(file, offset, buffer, count, datatype, direction) }
        }
        Position::Individual => {
            let start_etypes = file.position_etypes;
            let start = checked.and_then(|(count, _)| {
                not_sequential(file, "an individual file pointer access")?;
                Ok((count, start_etypes))
            });
            let moved = if collective {
                // SAFETY: the caller's buffer.
                unsafe {
                    crate::file_collective::collective_transfer(
                        file, start, buffer, datatype, direction,
                    )
                }
            } else {
                let (count, _) = start?;
                // SAFETY: the caller's buffer.
                unsafe { transfer(file, start_etypes, buffer, count, datatype, direction) }
            }?;
            file.position_etypes = start_etypes + moved as u64 / file.view.etype_size_bytes();
            Ok(moved)
        }
        Position::Shared => {
            let (count, requested_etypes) = checked?;
            let start = shared_position(file, requested_etypes)?;
            // SAFETY: the caller's buffer.
            unsafe { transfer(file, start, buffer, count, datatype, direction) }
        }
        Position::Ordered => {
            let comm = file.comm;
            let requested_etypes = checked.as_ref().map_or(0, |(_, requested)| *requested);
            let below = exclusive_prefix_sum(comm, file.rank, requested_etypes as i64)?;
            let total = crate::file::allreduce_i64(comm, requested_etypes as i64, MPI_SUM)?;
            let base = if file.rank == 0 {
                shared_position(file, total as u64).map(|base| base as i64)
            } else {
                Ok(0)
            };
            // Everyone learns whether rank 0 got the pointer.
            let base = broadcast_i64(comm, base.as_ref().map_or(-1, |base| *base))?;
            let (count, _) = checked?;
            if base < 0 {
                return Err(MpiError::new(
                    ErrorClass::Io,
                    "the shared file pointer is unavailable",
                ));
            }
            // SAFETY: the caller's buffer.
            unsafe {
                transfer(
                    file,
                    base as u64 + below as u64,
                    buffer,
                    count,
                    datatype,
                    direction,
                )
            }
        }
    }
}

fn status_of(bytes: usize) -> Status {
    Status {
        source: MPI_ANY_SOURCE,
        tag: MPI_ANY_TAG,
        error: 0,
        count_bytes: bytes,
        cancelled: false,
    }
}

/// A request that is already complete with `bytes` in its status.
fn completed_request(bytes: usize) -> MpiResult<MPI_Request> {
    let mut guard = crate::global::lock();
    let mpi = guard
        .mpi
        .as_mut()
        .ok_or_else(|| MpiError::new(ErrorClass::Other, "MPI is not initialized"))?;
    let index = mpi.engine.insert_request(Request {
        operation: Operation::Nothing,
        comm: resmpi_core::WORLD,
        complete: true,
        status: status_of(bytes),
        generation: 0,
        persistent: None,
        free_when_complete: false,
        inner: None,
    })?;
    Ok(crate::handles::request_handle(index))
}

/// One data access call, start to finish. `out` is the status (blocking,
/// collective) or the request (nonblocking); unused for split begins.
unsafe fn data_call(
    name: &str,
    fh: MPI_File,
    position: Position,
    direction: Direction,
    completion: Completion,
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    status: *mut MPI_Status,
    request: *mut MPI_Request,
) -> c_int {
    file_entry(name, fh, |file| {
        if matches!(
            completion,
            Completion::Nonblocking | Completion::NonblockingCollective
        ) {
            crate::global::out_pointer(request, "request")?;
        }
        if completion == Completion::SplitBegin && file.split.is_some() {
            return Err(MpiError::new(
                ErrorClass::Io,
                "a split collective is already in progress on this file",
            ));
        }
        let collective = matches!(completion, Completion::Collective | Completion::SplitBegin);
        // SAFETY: the caller's buffer.
        let result = unsafe {
            access(
                file, position, buffer, count, datatype, direction, collective,
            )
        };
        if collective && position == Position::Ordered {
            // Every process's bytes are in the file when any returns (the
            // other collective accesses synchronize in their exchange).
            let agreed = barrier(file.comm);
            if result.is_ok() {
                agreed?;
            }
        }
        match completion {
            Completion::Blocking | Completion::Collective => {
                let bytes = result?;
                // SAFETY: the caller's status pointer (NULL and IGNORE allowed).
                unsafe { crate::requests::write_status(status, &status_of(bytes)) };
                Ok(())
            }
            Completion::SplitBegin => {
                file.split = Some(SplitCollective { result });
                Ok(())
            }
            Completion::Nonblocking | Completion::NonblockingCollective => {
                let bytes = result?;
                let handle = completed_request(bytes)?;
                // SAFETY: checked non-null.
                unsafe { *request = handle };
                Ok(())
            }
        }
    })
}

/// The `_end` of a split collective: the status of its `_begin`.
unsafe fn split_end(name: &str, fh: MPI_File, status: *mut MPI_Status) -> c_int {
    file_entry(name, fh, |file| {
        let split = file.split.take().ok_or_else(|| {
            MpiError::new(ErrorClass::Io, "no split collective was begun on this file")
        })?;
        let bytes = split.result?;
        // SAFETY: the caller's status pointer.
        unsafe { crate::requests::write_status(status, &status_of(bytes)) };
        Ok(())
    })
}

macro_rules! blocking {
    // The int form and the `_c` one.
    ($function:ident, $check:ident, $label:literal, $function_c:ident, $check_c:ident,
     $label_c:literal, $position:expr, $direction:expr, $completion:expr, $const_buffer:ty) => {
        blocking!(@one $function, $check, $label, c_int, $position, $direction, $completion, $const_buffer);
        blocking!(@one $function_c, $check_c, $label_c, MPI_Count, $position, $direction, $completion, $const_buffer);
    };
    (@one $function:ident, $check:ident, $label:literal, $count:ty, $position:expr, $direction:expr, $completion:expr, $const_buffer:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $function(
            fh: MPI_File,
            buf: $const_buffer,
            count: $count,
            datatype: MPI_Datatype,
            status: *mut MPI_Status,
        ) -> c_int {
            // SAFETY: the application's arguments.
            unsafe {
                data_call(
                    $label,
                    fh,
                    $position,
                    $direction,
                    $completion,
                    buf as *mut c_void,
                    count.into(),
                    datatype,
                    status,
                    std::ptr::null_mut(),
                )
            }
        }
        const _: fn_types::$check = $function;
    };
}

macro_rules! blocking_at {
    // The int form and the `_c` one.
    ($function:ident, $check:ident, $label:literal, $function_c:ident, $check_c:ident,
     $label_c:literal, $direction:expr, $completion:expr, $const_buffer:ty) => {
        blocking_at!(@one $function, $check, $label, c_int, $direction, $completion, $const_buffer);
        blocking_at!(@one $function_c, $check_c, $label_c, MPI_Count, $direction, $completion, $const_buffer);
    };
    (@one $function:ident, $check:ident, $label:literal, $count:ty, $direction:expr, $completion:expr, $const_buffer:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $function(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $const_buffer,
            count: $count,
            datatype: MPI_Datatype,
            status: *mut MPI_Status,
        ) -> c_int {
            // SAFETY: the application's arguments.
            unsafe {
                data_call(
                    $label,
                    fh,
                    Position::Explicit(offset),
                    $direction,
                    $completion,
                    buf as *mut c_void,
                    count.into(),
                    datatype,
                    status,
                    std::ptr::null_mut(),
                )
            }
        }
        const _: fn_types::$check = $function;
    };
}

macro_rules! nonblocking {
    // The int form and the `_c` one.
    ($function:ident, $check:ident, $label:literal, $function_c:ident, $check_c:ident,
     $label_c:literal, $position:expr, $direction:expr, $completion:expr, $const_buffer:ty) => {
        nonblocking!(@one $function, $check, $label, c_int, $position, $direction, $completion, $const_buffer);
        nonblocking!(@one $function_c, $check_c, $label_c, MPI_Count, $position, $direction, $completion, $const_buffer);
    };
    (@one $function:ident, $check:ident, $label:literal, $count:ty, $position:expr, $direction:expr, $completion:expr, $const_buffer:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $function(
            fh: MPI_File,
            buf: $const_buffer,
            count: $count,
            datatype: MPI_Datatype,
            request: *mut MPI_Request,
        ) -> c_int {
            // SAFETY: the application's arguments.
            unsafe {
                data_call(
                    $label,
                    fh,
                    $position,
                    $direction,
                    $completion,
                    buf as *mut c_void,
                    count.into(),
                    datatype,
                    std::ptr::null_mut(),
                    request,
                )
            }
        }
        const _: fn_types::$check = $function;
    };
}

macro_rules! nonblocking_at {
    // The int form and the `_c` one.
    ($function:ident, $check:ident, $label:literal, $function_c:ident, $check_c:ident,
     $label_c:literal, $direction:expr, $completion:expr, $const_buffer:ty) => {
        nonblocking_at!(@one $function, $check, $label, c_int, $direction, $completion, $const_buffer);
        nonblocking_at!(@one $function_c, $check_c, $label_c, MPI_Count, $direction, $completion, $const_buffer);
    };
    (@one $function:ident, $check:ident, $label:literal, $count:ty, $direction:expr, $completion:expr, $const_buffer:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $function(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $const_buffer,
            count: $count,
            datatype: MPI_Datatype,
            request: *mut MPI_Request,
        ) -> c_int {
            // SAFETY: the application's arguments.
            unsafe {
                data_call(
                    $label,
                    fh,
                    Position::Explicit(offset),
                    $direction,
                    $completion,
                    buf as *mut c_void,
                    count.into(),
                    datatype,
                    std::ptr::null_mut(),
                    request,
                )
            }
        }
        const _: fn_types::$check = $function;
    };
}

macro_rules! split_begin {
    // The int form and the `_c` one.
    ($function:ident, $check:ident, $label:literal, $function_c:ident, $check_c:ident,
     $label_c:literal, $position:expr, $direction:expr, $const_buffer:ty) => {
        split_begin!(@one $function, $check, $label, c_int, $position, $direction, $const_buffer);
        split_begin!(@one $function_c, $check_c, $label_c, MPI_Count, $position, $direction, $const_buffer);
    };
    (@one $function:ident, $check:ident, $label:literal, $count:ty, $position:expr, $direction:expr, $const_buffer:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $function(
            fh: MPI_File,
            buf: $const_buffer,
            count: $count,
            datatype: MPI_Datatype,
        ) -> c_int {
            // SAFETY: the application's arguments.
            unsafe {
                data_call(
                    $label,
                    fh,
                    $position,
                    $direction,
                    Completion::SplitBegin,
                    buf as *mut c_void,
                    count.into(),
                    datatype,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            }
        }
        const _: fn_types::$check = $function;
    };
}

macro_rules! split_end {
    ($function:ident, $check:ident, $label:literal, $const_buffer:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $function(
            fh: MPI_File,
            buf: $const_buffer,
            status: *mut MPI_Status,
        ) -> c_int {
            let _ = buf;
            // SAFETY: the application's status pointer.
            unsafe { split_end($label, fh, status) }
        }
        const _: fn_types::$check = $function;
    };
}

use Completion::{Blocking, Collective, Nonblocking, NonblockingCollective};
use Direction::{Read, Write};
use Position::{Individual, Ordered, Shared};

blocking!(
    PMPI_File_read,
    MPI_File_read,
    "MPI_File_read",
    PMPI_File_read_c,
    MPI_File_read_c,
    "MPI_File_read_c",
    Individual,
    Read,
    Blocking,
    *mut c_void
);
blocking!(
    PMPI_File_write,
    MPI_File_write,
    "MPI_File_write",
    PMPI_File_write_c,
    MPI_File_write_c,
    "MPI_File_write_c",
    Individual,
    Write,
    Blocking,
    *const c_void
);
blocking!(
    PMPI_File_read_all,
    MPI_File_read_all,
    "MPI_File_read_all",
    PMPI_File_read_all_c,
    MPI_File_read_all_c,
    "MPI_File_read_all_c",
    Individual,
    Read,
    Collective,
    *mut c_void
);
blocking!(
    PMPI_File_write_all,
    MPI_File_write_all,
    "MPI_File_write_all",
    PMPI_File_write_all_c,
    MPI_File_write_all_c,
    "MPI_File_write_all_c",
    Individual,
    Write,
    Collective,
    *const c_void
);
blocking!(
    PMPI_File_read_shared,
    MPI_File_read_shared,
    "MPI_File_read_shared",
    PMPI_File_read_shared_c,
    MPI_File_read_shared_c,
    "MPI_File_read_shared_c",
    Shared,
    Read,
    Blocking,
    *mut c_void
);
blocking!(
    PMPI_File_write_shared,
    MPI_File_write_shared,
    "MPI_File_write_shared",
    PMPI_File_write_shared_c,
    MPI_File_write_shared_c,
    "MPI_File_write_shared_c",
    Shared,
    Write,
    Blocking,
    *const c_void
);
blocking!(
    PMPI_File_read_ordered,
    MPI_File_read_ordered,
    "MPI_File_read_ordered",
    PMPI_File_read_ordered_c,
    MPI_File_read_ordered_c,
    "MPI_File_read_ordered_c",
    Ordered,
    Read,
    Collective,
    *mut c_void
);
blocking!(
    PMPI_File_write_ordered,
    MPI_File_write_ordered,
    "MPI_File_write_ordered",
    PMPI_File_write_ordered_c,
    MPI_File_write_ordered_c,
    "MPI_File_write_ordered_c",
    Ordered,
    Write,
    Collective,
    *const c_void
);
blocking_at!(
    PMPI_File_read_at,
    MPI_File_read_at,
    "MPI_File_read_at",
    PMPI_File_read_at_c,
    MPI_File_read_at_c,
    "MPI_File_read_at_c",
    Read,
    Blocking,
    *mut c_void
);
blocking_at!(
    PMPI_File_write_at,
    MPI_File_write_at,
    "MPI_File_write_at",
    PMPI_File_write_at_c,
    MPI_File_write_at_c,
    "MPI_File_write_at_c",
    Write,
    Blocking,
    *const c_void
);
blocking_at!(
    PMPI_File_read_at_all,
    MPI_File_read_at_all,
    "MPI_File_read_at_all",
    PMPI_File_read_at_all_c,
    MPI_File_read_at_all_c,
    "MPI_File_read_at_all_c",
    Read,
    Collective,
    *mut c_void
);
blocking_at!(
    PMPI_File_write_at_all,
    MPI_File_write_at_all,
    "MPI_File_write_at_all",
    PMPI_File_write_at_all_c,
    MPI_File_write_at_all_c,
    "MPI_File_write_at_all_c",
    Write,
    Collective,
    *const c_void
);

nonblocking!(
    PMPI_File_iread,
    MPI_File_iread,
    "MPI_File_iread",
    PMPI_File_iread_c,
    MPI_File_iread_c,
    "MPI_File_iread_c",
    Individual,
    Read,
    Nonblocking,
    *mut c_void
);
nonblocking!(
    PMPI_File_iwrite,
    MPI_File_iwrite,
    "MPI_File_iwrite",
    PMPI_File_iwrite_c,
    MPI_File_iwrite_c,
    "MPI_File_iwrite_c",
    Individual,
    Write,
    Nonblocking,
    *const c_void
);
nonblocking!(
    PMPI_File_iread_all,
    MPI_File_iread_all,
    "MPI_File_iread_all",
    PMPI_File_iread_all_c,
    MPI_File_iread_all_c,
    "MPI_File_iread_all_c",
    Individual,
    Read,
    NonblockingCollective,
    *mut c_void
);
nonblocking!(
    PMPI_File_iwrite_all,
    MPI_File_iwrite_all,
    "MPI_File_iwrite_all",
    PMPI_File_iwrite_all_c,
    MPI_File_iwrite_all_c,
    "MPI_File_iwrite_all_c",
    Individual,
    Write,
    NonblockingCollective,
    *const c_void
);
nonblocking!(
    PMPI_File_iread_shared,
    MPI_File_iread_shared,
    "MPI_File_iread_shared",
    PMPI_File_iread_shared_c,
    MPI_File_iread_shared_c,
    "MPI_File_iread_shared_c",
    Shared,
    Read,
    Nonblocking,
    *mut c_void
);
nonblocking!(
    PMPI_File_iwrite_shared,
    MPI_File_iwrite_shared,
    "MPI_File_iwrite_shared",
    PMPI_File_iwrite_shared_c,
    MPI_File_iwrite_shared_c,
    "MPI_File_iwrite_shared_c",
    Shared,
    Write,
    Nonblocking,
    *const c_void
);
nonblocking_at!(
    PMPI_File_iread_at,
    MPI_File_iread_at,
    "MPI_File_iread_at",
    PMPI_File_iread_at_c,
    MPI_File_iread_at_c,
    "MPI_File_iread_at_c",
    Read,
    Nonblocking,
    *mut c_void
);
nonblocking_at!(
    PMPI_File_iwrite_at,
    MPI_File_iwrite_at,
    "MPI_File_iwrite_at",
    PMPI_File_iwrite_at_c,
    MPI_File_iwrite_at_c,
    "MPI_File_iwrite_at_c",
    Write,
    Nonblocking,
    *const c_void
);
nonblocking_at!(
    PMPI_File_iread_at_all,
    MPI_File_iread_at_all,
    "MPI_File_iread_at_all",
    PMPI_File_iread_at_all_c,
    MPI_File_iread_at_all_c,
    "MPI_File_iread_at_all_c",
    Read,
    NonblockingCollective,
    *mut c_void
);
nonblocking_at!(
    PMPI_File_iwrite_at_all,
    MPI_File_iwrite_at_all,
    "MPI_File_iwrite_at_all",
    PMPI_File_iwrite_at_all_c,
    MPI_File_iwrite_at_all_c,
    "MPI_File_iwrite_at_all_c",
    Write,
    NonblockingCollective,
    *const c_void
);

split_begin!(
    PMPI_File_read_all_begin,
    MPI_File_read_all_begin,
    "MPI_File_read_all_begin",
    PMPI_File_read_all_begin_c,
    MPI_File_read_all_begin_c,
    "MPI_File_read_all_begin_c",
    Individual,
    Read,
    *mut c_void
);
split_begin!(
    PMPI_File_write_all_begin,
    MPI_File_write_all_begin,
    "MPI_File_write_all_begin",
    PMPI_File_write_all_begin_c,
    MPI_File_write_all_begin_c,
    "MPI_File_write_all_begin_c",
    Individual,
    Write,
    *const c_void
);
split_begin!(
    PMPI_File_read_ordered_begin,
    MPI_File_read_ordered_begin,
    "MPI_File_read_ordered_begin",
    PMPI_File_read_ordered_begin_c,
    MPI_File_read_ordered_begin_c,
    "MPI_File_read_ordered_begin_c",
    Ordered,
    Read,
    *mut c_void
);
split_begin!(
    PMPI_File_write_ordered_begin,
    MPI_File_write_ordered_begin,
    "MPI_File_write_ordered_begin",
    PMPI_File_write_ordered_begin_c,
    MPI_File_write_ordered_begin_c,
    "MPI_File_write_ordered_begin_c",
    Ordered,
    Write,
    *const c_void
);
split_end!(
    PMPI_File_read_all_end,
    MPI_File_read_all_end,
    "MPI_File_read_all_end",
    *mut c_void
);
split_end!(
    PMPI_File_write_all_end,
    MPI_File_write_all_end,
    "MPI_File_write_all_end",
    *const c_void
);
split_end!(
    PMPI_File_read_ordered_end,
    MPI_File_read_ordered_end,
    "MPI_File_read_ordered_end",
    *mut c_void
);
split_end!(
    PMPI_File_write_ordered_end,
    MPI_File_write_ordered_end,
    "MPI_File_write_ordered_end",
    *const c_void
);
split_end!(
    PMPI_File_read_at_all_end,
    MPI_File_read_at_all_end,
    "MPI_File_read_at_all_end",
    *mut c_void
);
split_end!(
    PMPI_File_write_at_all_end,
    MPI_File_write_at_all_end,
    "MPI_File_write_at_all_end",
    *const c_void
);

macro_rules! split_begin_at {
    // The int form and the `_c` one.
    ($function:ident, $check:ident, $label:literal, $function_c:ident, $check_c:ident,
     $label_c:literal, $direction:expr, $const_buffer:ty) => {
        split_begin_at!(@one $function, $check, $label, c_int, $direction, $const_buffer);
        split_begin_at!(@one $function_c, $check_c, $label_c, MPI_Count, $direction, $const_buffer);
    };
    (@one $function:ident, $check:ident, $label:literal, $count:ty, $direction:expr, $const_buffer:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $function(
            fh: MPI_File,
            offset: MPI_Offset,
            buf: $const_buffer,
            count: $count,
            datatype: MPI_Datatype,
        ) -> c_int {
            // SAFETY: the application's arguments.
            unsafe {
                data_call(
                    $label,
                    fh,
                    Position::Explicit(offset),
                    $direction,
                    Completion::SplitBegin,
                    buf as *mut c_void,
                    count.into(),
                    datatype,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            }
        }
        const _: fn_types::$check = $function;
    };
}

split_begin_at!(
    PMPI_File_read_at_all_begin,
    MPI_File_read_at_all_begin,
    "MPI_File_read_at_all_begin",
    PMPI_File_read_at_all_begin_c,
    MPI_File_read_at_all_begin_c,
    "MPI_File_read_at_all_begin_c",
    Read,
    *mut c_void
);
split_begin_at!(
    PMPI_File_write_at_all_begin,
    MPI_File_write_at_all_begin,
    "MPI_File_write_at_all_begin",
    PMPI_File_write_at_all_begin_c,
    MPI_File_write_at_all_begin_c,
    "MPI_File_write_at_all_begin_c",
    Write,
    *const c_void
);
