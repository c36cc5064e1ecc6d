//! Datatype handles: what each predefined handle is, the table of derived
//! types, and the views the rest of the C layer takes of a type (a
//! [`TypeInfo`] for reductions, a raw or packed [`CollectiveBuffer`] for
//! collectives, a contiguous or packed [`Message`] for point-to-point).
//!
//! A derived type is an `Arc<TypeObject>`: the core layout plus how it was
//! built (for MPI_Type_get_contents). MPI_Type_free only drops the handle;
//! parents, pending requests and get_contents results keep the object
//! alive, as the standard requires.

use std::sync::{Arc, Mutex, MutexGuard};

use resmpi_core::datatype::{BasicKind as K, Datatype, External32, PairValue, TypeInfo};
use resmpi_core::user_bytes::UserBytes;
use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;

/// The [`TypeInfo`] of a predefined datatype handle: a look-up in a table
/// that [`predefined_info`] fills once (a small collective or message pays
/// for this on every call; the `match` took ~40 instructions, the table 8).
#[inline]
pub fn builtin_info(handle: MPI_Datatype) -> Option<TypeInfo> {
    let bits = handle as u32;
    let half = match bits >> 24 {
        PREDEFINED_KIND_BYTE => 0,
        PAIR_KIND_BYTE => 256,
        _ => return None,
    };
    match predefined_table()[half + (bits & 0xff) as usize] {
        Some((known, info)) if known == handle => Some(info),
        _ => None,
    }
}

/// The top byte of MPICH's predefined datatype handles
/// (`0x4c00SSII`: size in bytes `SS`, index `II`).
const PREDEFINED_KIND_BYTE: u32 = 0x4c;
/// The top byte of MPICH's handles of the pair types with holes
/// (`0x8c0000II`).
const PAIR_KIND_BYTE: u32 = 0x8c;

/// Entries of [`predefined_table`].
type PredefinedTable = [Option<(MPI_Datatype, TypeInfo)>; 512];

/// Every predefined handle with its [`TypeInfo`], by kind (first half
/// `0x4c`, second `0x8c`) and low byte, which MPICH keeps unique within a
/// kind (a unit test checks the table against [`predefined_info`]).
fn predefined_table() -> &'static PredefinedTable {
    static TABLE: std::sync::OnceLock<Box<PredefinedTable>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Box::new([None; 512]);
        let predefined = (0..=32u32).flat_map(|size| {
            (0..=0xffu32).map(move |index| PREDEFINED_KIND_BYTE << 24 | size << 8 | index)
        });
        let pairs = (0..=0xffu32).map(|index| PAIR_KIND_BYTE << 24 | index);
        for bits in predefined.chain(pairs) {
            let handle = bits as MPI_Datatype;
            if let Some(info) = predefined_info(handle) {
                let half = if bits >> 24 == PAIR_KIND_BYTE { 256 } else { 0 };
                let entry = &mut table[half + (bits & 0xff) as usize];
                assert!(
                    entry.is_none(),
                    "two predefined handles share index {bits:#x}"
                );
                *entry = Some((handle, info));
            }
        }
        table
    })
}

/// What each predefined datatype handle is (the definition behind
/// [`builtin_info`]'s table).
fn predefined_info(handle: MPI_Datatype) -> Option<TypeInfo> {
    let basic = TypeInfo::basic;
    let pair = |size_bytes, extent_bytes, value| TypeInfo {
        size_bytes,
        extent_bytes,
        basic_elements: 2,
        kind: K::Pair(value),
    };
    Some(match handle {
        MPI_CHAR | MPI_CHARACTER => basic(1, K::Char),
        MPI_SIGNED_CHAR | MPI_INT8_T | MPI_INTEGER1 => basic(1, K::I8),
        MPI_UNSIGNED_CHAR | MPI_UINT8_T => basic(1, K::U8),
        MPI_BYTE | MPI_PACKED => basic(1, K::Byte),
        // Half precision moves as bytes; arithmetic reductions refuse it.
        MPIX_C_FLOAT16 => basic(2, K::Byte),
        MPI_C_BOOL | MPI_CXX_BOOL => basic(1, K::Bool),
        MPI_SHORT | MPI_INT16_T | MPI_INTEGER2 => basic(2, K::I16),
        MPI_UNSIGNED_SHORT | MPI_UINT16_T => basic(2, K::U16),
        MPI_INT | MPI_INT32_T | MPI_INTEGER | MPI_INTEGER4 | MPI_LOGICAL => basic(4, K::I32),
        MPI_WCHAR => basic(4, K::I32),
        MPI_UNSIGNED | MPI_UINT32_T => basic(4, K::U32),
        MPI_LONG | MPI_LONG_LONG_INT | MPI_INT64_T | MPI_INTEGER8 | MPI_AINT | MPI_OFFSET
        | MPI_COUNT => basic(8, K::I64),
        MPI_UNSIGNED_LONG | MPI_UNSIGNED_LONG_LONG | MPI_UINT64_T => basic(8, K::U64),
        MPI_FLOAT | MPI_REAL | MPI_REAL4 => basic(4, K::F32),
        MPI_DOUBLE | MPI_DOUBLE_PRECISION | MPI_REAL8 => basic(8, K::F64),
        MPI_LONG_DOUBLE | MPI_REAL16 => basic(16, K::LongDouble),
        MPI_C_FLOAT_COMPLEX | MPI_COMPLEX | MPI_COMPLEX8 | MPI_CXX_FLOAT_COMPLEX => {
            basic(8, K::ComplexF32)
        }
        MPI_C_DOUBLE_COMPLEX | MPI_DOUBLE_COMPLEX | MPI_COMPLEX16 | MPI_CXX_DOUBLE_COMPLEX => {
            basic(16, K::ComplexF64)
        }
        MPI_C_LONG_DOUBLE_COMPLEX | MPI_COMPLEX32 | MPI_CXX_LONG_DOUBLE_COMPLEX => {
            basic(32, K::ComplexLongDouble)
        }
        MPI_FLOAT_INT => pair(8, 8, PairValue::F32),
        MPI_DOUBLE_INT => pair(12, 16, PairValue::F64),
        MPI_LONG_INT => pair(12, 16, PairValue::I64),
        MPI_SHORT_INT => pair(6, 8, PairValue::I16),
        MPI_2INT | MPI_2INTEGER => pair(8, 8, PairValue::I32),
        MPI_2REAL => pair(8, 8, PairValue::F32),
        MPI_2DOUBLE_PRECISION => pair(16, 16, PairValue::F64),
        MPI_LONG_DOUBLE_INT => pair(20, 32, PairValue::LongDouble),
        _ => return None,
    })
}

/// The layout of a predefined type (pair types have holes).
pub fn builtin_layout(info: TypeInfo) -> Datatype {
    match info.kind {
        K::Pair(value) => {
            let value_size_bytes = match value {
                PairValue::F32 | PairValue::I32 => 4,
                PairValue::F64 | PairValue::I64 => 8,
                PairValue::I16 => 2,
                PairValue::LongDouble => 16,
            };
            Datatype::pair(info, value_size_bytes)
        }
        K::ComplexF32 => Datatype::basic(info, 4),
        K::ComplexF64 => Datatype::basic(info, 8),
        kind => {
            let alignment_bytes = match kind {
                K::LongDouble | K::ComplexLongDouble => 16,
                _ => info.size_bytes.clamp(1, 16),
            };
            Datatype::basic(info, alignment_bytes)
        }
    }
}

/// The layout of predefined type `handle` (whose [`TypeInfo`] is `info`):
/// [`builtin_layout`], with the elements whose external32 size is not their
/// native one marked (C `long`, `unsigned long` and `wchar_t`; see
/// [`External32`]).
pub fn predefined_layout(handle: MPI_Datatype, info: TypeInfo) -> Datatype {
    let layout = builtin_layout(info);
    match handle {
        MPI_LONG | MPI_LONG_INT => layout.with_external32_first(External32::Narrow {
            bytes: 4,
            signed: true,
        }),
        MPI_UNSIGNED_LONG => layout.with_external32_first(External32::Narrow {
            bytes: 4,
            signed: false,
        }),
        MPI_WCHAR => layout.with_external32_first(External32::Narrow {
            bytes: 2,
            signed: false,
        }),
        _ => layout,
    }
}

/// A type's constituent as recorded for MPI_Type_get_contents.
#[derive(Clone, Debug)]
pub enum TypeRef {
    /// A predefined handle, returned as is.
    Predefined(MPI_Datatype),
    /// A derived type (returned as a new handle the caller must free).
    Derived(Arc<TypeObject>),
}

/// How a derived type was made (MPI_Type_get_envelope / get_contents).
#[derive(Clone, Debug)]
pub struct Contents {
    /// MPI_COMBINER_*.
    pub combiner: c_int,
    /// The integer arguments, in the standard's order.
    pub integers: Vec<c_int>,
    /// The count arguments of a type made by a large-count (`_c`)
    /// constructor, in the standard's order (then not in `integers`).
    pub large_counts: Vec<MPI_Count>,
    /// The address arguments.
    pub addresses: Vec<MPI_Aint>,
    /// The datatype arguments.
    pub datatypes: Vec<TypeRef>,
}

/// A derived datatype.
#[derive(Debug)]
pub struct TypeObject {
    /// Where its data lies.
    pub layout: Arc<Datatype>,
    /// How it was made.
    pub contents: Contents,
    /// Whether `count` elements sit in `count * extent` bytes from the
    /// buffer address with no holes: collectives then take the data where
    /// it lies (and user reduction functions can be given it).
    pub raw_span: bool,
}

struct Entry {
    object: Arc<TypeObject>,
    committed: bool,
}

/// Derived datatypes by index. Indices below `FIRST_DERIVED_INDEX` are
/// MPICH's direct handles for the pair types (`MPI_FLOAT_INT` = 0x8c000000 ...).
static DERIVED: Mutex<Vec<Option<Entry>>> = Mutex::new(Vec::new());
const FIRST_DERIVED_INDEX: usize = 16;
const DIRECT_DATATYPE: u32 = 0x8c00_0000;
const INDEX_MASK: u32 = (1 << 26) - 1;

fn table() -> MutexGuard<'static, Vec<Option<Entry>>> {
    DERIVED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Table slot of a derived-type handle (live or not).
fn derived_slot(handle: MPI_Datatype) -> Option<usize> {
    let bits = handle as u32;
    if bits & !INDEX_MASK != DIRECT_DATATYPE {
        return None;
    }
    ((bits & INDEX_MASK) as usize).checked_sub(FIRST_DERIVED_INDEX)
}

/// A derived type and whether it is committed.
fn derived(handle: MPI_Datatype) -> Option<(Arc<TypeObject>, bool)> {
    let slot = derived_slot(handle)?;
    table()
        .get(slot)
        .and_then(|entry| entry.as_ref())
        .map(|entry| (entry.object.clone(), entry.committed))
}

/// The derived type behind `handle` (None for a predefined or invalid one).
pub fn derived_object(handle: MPI_Datatype) -> Option<Arc<TypeObject>> {
    derived(handle).map(|(object, _)| object)
}

/// Give `object` a new handle.
pub fn register(object: Arc<TypeObject>) -> MPI_Datatype {
    let mut table = table();
    let slot = match table.iter().position(Option::is_none) {
        Some(slot) => slot,
        None => {
            table.push(None);
            table.len() - 1
        }
    };
    table[slot] = Some(Entry {
        object,
        committed: false,
    });
    (DIRECT_DATATYPE | (slot + FIRST_DERIVED_INDEX) as u32) as MPI_Datatype
}

fn invalid_type(handle: MPI_Datatype) -> MpiError {
    if handle == MPI_DATATYPE_NULL {
        return MpiError::new(
            ErrorClass::Type,
            "MPI_DATATYPE_NULL is not a valid datatype",
        );
    }
    if derived_slot(handle).is_some() {
        return MpiError::new(
            ErrorClass::Type,
            format!("datatype handle {handle:#x} was freed"),
        );
    }
    MpiError::new(
        ErrorClass::Type,
        format!("datatype handle {handle:#x} is not a datatype"),
    )
}

/// What a valid handle names.
pub enum Resolved {
    /// A predefined type.
    Predefined(TypeInfo),
    /// A derived type and whether it is committed.
    Derived(Arc<TypeObject>, bool),
}

/// Decode `handle`, or MPI_ERR_TYPE (null, freed, garbage).
#[inline]
pub fn resolve(handle: MPI_Datatype) -> MpiResult<Resolved> {
    if let Some(info) = builtin_info(handle) {
        return Ok(Resolved::Predefined(info));
    }
    derived(handle)
        .map(|(object, committed)| Resolved::Derived(object, committed))
        .ok_or_else(|| invalid_type(handle))
}

/// The layout of any valid handle.
pub fn layout_of(handle: MPI_Datatype) -> MpiResult<Arc<Datatype>> {
    Ok(match resolve(handle)? {
        Resolved::Predefined(info) => Arc::new(predefined_layout(handle, info)),
        Resolved::Derived(object, _) => object.layout.clone(),
    })
}

/// As [`layout_of`], for communication: a derived type must be committed.
pub fn committed_layout(handle: MPI_Datatype) -> MpiResult<Arc<Datatype>> {
    match resolve(handle)? {
        Resolved::Predefined(info) => Ok(Arc::new(predefined_layout(handle, info))),
        Resolved::Derived(object, true) => Ok(object.layout.clone()),
        Resolved::Derived(_, false) => Err(uncommitted(handle)),
    }
}

fn uncommitted(handle: MPI_Datatype) -> MpiError {
    MpiError::new(
        ErrorClass::Type,
        format!("datatype {handle:#x} is not committed (call MPI_Type_commit first)"),
    )
}

/// The constituent reference for a handle used to build a new type.
pub fn type_ref(handle: MPI_Datatype) -> MpiResult<(TypeRef, Arc<Datatype>, bool)> {
    Ok(match resolve(handle)? {
        Resolved::Predefined(info) => (
            TypeRef::Predefined(handle),
            Arc::new(predefined_layout(handle, info)),
            true,
        ),
        Resolved::Derived(object, _) => {
            let layout = object.layout.clone();
            let raw_span = object.raw_span;
            (TypeRef::Derived(object), layout, raw_span)
        }
    })
}

/// For reductions: the basic element type of `handle` and how many basic
/// elements one element of it holds.
pub fn reduction_element(handle: MPI_Datatype) -> MpiResult<(TypeInfo, usize)> {
    match resolve(handle)? {
        Resolved::Predefined(info) => Ok((info, 1)),
        Resolved::Derived(object, _) => match object.layout.unit {
            // Packed, such a type is a run of its basic elements; a pair
            // type with padding (MPI_DOUBLE_INT) is reduced at its extent,
            // so it qualifies only where it is not packed.
            Some(unit)
                if unit.size_bytes > 0
                    && (object.raw_span || unit.size_bytes == unit.extent_bytes) =>
            {
                Ok((unit, (object.layout.size_bytes / unit.size_bytes).max(1)))
            }
            _ => Err(MpiError::new(
                ErrorClass::Type,
                "reductions with predefined ops need a datatype made of one predefined type (a padded pair type only without holes between elements)",
            )),
        },
    }
}

/// Whether collectives take `handle`'s data where it lies, as one span of
/// `count * extent` bytes (what user reduction functions expect).
pub fn is_raw_span(handle: MPI_Datatype) -> MpiResult<bool> {
    Ok(match resolve(handle)? {
        Resolved::Predefined(_) => true,
        Resolved::Derived(object, _) => object.raw_span,
    })
}

/// Check `count` and compute the bytes `count` elements of `datatype` span
/// in a buffer taken as raw bytes ([`collective_buffer`]'s raw path): only
/// types without holes qualify, so nothing outside the data is written.
fn buffer_bytes(
    buffer: *const c_void,
    count: impl Into<MPI_Count>,
    datatype: MPI_Datatype,
) -> MpiResult<(usize, TypeInfo)> {
    let count = check_count(count)?;
    let info = match resolve(datatype)? {
        Resolved::Predefined(info) => info,
        Resolved::Derived(object, committed) => {
            if !committed {
                return Err(uncommitted(datatype));
            }
            if !object.raw_span {
                return Err(MpiError::new(
                    ErrorClass::Type,
                    "a datatype with holes cannot be taken as raw bytes (it must be packed)",
                ));
            }
            object.layout.info()
        }
    };
    Ok((raw_bytes(buffer, count, info)?, info))
}

/// The bytes `count` elements of `info` span at `buffer`: MPI_ERR_COUNT
/// when that overflows, MPI_ERR_BUFFER for NULL with data.
fn raw_bytes(buffer: *const c_void, count: usize, info: TypeInfo) -> MpiResult<usize> {
    let bytes = info
        .span_bytes(count)
        .ok_or_else(|| MpiError::new(ErrorClass::Count, "count times extent overflows"))?;
    if bytes > 0 && buffer.is_null() {
        return Err(MpiError::new(
            ErrorClass::Buffer,
            format!("buffer is NULL but count is {count}"),
        ));
    }
    Ok(bytes)
}

/// How a collective moves `count` elements of a datatype.
pub enum CollectiveBuffer {
    /// Taken as raw bytes where they lie: predefined types and derived
    /// types without holes (as many bytes as they span), or derived types
    /// whose data is one run of memory.
    Raw {
        /// First byte.
        pointer: *mut u8,
        /// Bytes.
        length_bytes: usize,
    },
    /// Moved through a packed copy.
    Packed(PackedBuffer),
}

/// Check `count` elements of `datatype` at `buffer` for a collective and
/// say how they move. Types the raw path always took keep it (so
/// reductions on predefined pair types still see them at their extent).
pub fn collective_buffer(
    buffer: *const c_void,
    count: impl Into<MPI_Count>,
    datatype: MPI_Datatype,
) -> MpiResult<CollectiveBuffer> {
    let count = count.into();
    let info = match resolve(datatype)? {
        // The common case, resolved once (small collectives are mostly
        // this call's cost).
        Resolved::Predefined(info) => info,
        Resolved::Derived(object, true) if !object.raw_span => {
            return Ok(match message_buffer(buffer, count, datatype)? {
                Message::Contiguous {
                    pointer,
                    length_bytes,
                } => CollectiveBuffer::Raw {
                    pointer,
                    length_bytes,
                },
                Message::Packed(packed) => CollectiveBuffer::Packed(packed),
            });
        }
        Resolved::Derived(..) => {
            let (length_bytes, _) = buffer_bytes(buffer, count, datatype)?;
            return Ok(CollectiveBuffer::Raw {
                pointer: buffer as *mut u8,
                length_bytes,
            });
        }
    };
    let length_bytes = raw_bytes(buffer, check_count(count)?, info)?;
    Ok(CollectiveBuffer::Raw {
        pointer: buffer as *mut u8,
        length_bytes,
    })
}

/// A non-negative count, or MPI_ERR_COUNT.
pub fn check_count(count: impl Into<MPI_Count>) -> MpiResult<usize> {
    let count = count.into();
    usize::try_from(count)
        .map_err(|_| MpiError::new(ErrorClass::Count, format!("count {count} is negative")))
}

/// `count` elements of a non-contiguous type at `buffer`, moved through a
/// packed copy.
#[derive(Clone, Debug)]
pub struct PackedBuffer {
    /// The type's layout.
    pub layout: Arc<Datatype>,
    /// The user buffer address.
    pub buffer: *mut u8,
    /// Elements.
    pub count: usize,
    /// Packed bytes of the whole message.
    pub length_bytes: usize,
}

impl PackedBuffer {
    /// Pack the message into the first `length_bytes` of `packed`.
    pub fn pack_into(&self, packed: &mut [u8]) {
        // SAFETY: the application promises `count` elements at `buffer`.
        unsafe { self.layout.pack(self.buffer, self.count, 0, packed) };
    }

    /// Scatter the first `packed.len()` packed bytes into the buffer.
    pub fn unpack(&self, packed: &[u8]) {
        // SAFETY: the application promises `count` writable elements at `buffer`.
        unsafe { self.layout.unpack(self.buffer, self.count, 0, packed) };
    }
}

/// A point-to-point message buffer.
pub enum Message {
    /// One run of memory: sent and received in place.
    Contiguous {
        /// Start of the run.
        pointer: *mut u8,
        /// Its length.
        length_bytes: usize,
    },
    /// Needs packing.
    Packed(PackedBuffer),
}

impl Message {
    /// The memory the engine moves, and its packed length: a non-contiguous
    /// message is gathered and scattered by the engine itself, fragment by
    /// fragment, in the same pass as the frame copy and its checksum.
    pub fn into_user_bytes(self) -> (UserBytes, usize) {
        match self {
            Message::Contiguous {
                pointer,
                length_bytes,
            } => (UserBytes::Contiguous(pointer), length_bytes),
            Message::Packed(packed) => (
                UserBytes::Typed {
                    base: packed.buffer,
                    datatype: packed.layout,
                    count: packed.count,
                },
                packed.length_bytes,
            ),
        }
    }
}

/// A packed copy of `count` elements of `datatype` at `buffer` (after the
/// checks of [`message_buffer`]).
pub fn packed_copy(
    buffer: *const c_void,
    count: impl Into<MPI_Count>,
    datatype: MPI_Datatype,
) -> MpiResult<Vec<u8>> {
    let (bytes, length_bytes) = message_buffer(buffer, count, datatype)?.into_user_bytes();
    let mut copy = vec![0u8; length_bytes];
    // SAFETY: `count` elements at `buffer` are the caller's promise.
    unsafe { bytes.read(0, &mut copy) };
    Ok(copy)
}

/// Size of the most common predefined types (all contiguous, size =
/// extent), None for every other handle; [`builtin_info`] agrees.
#[inline]
fn common_type_bytes(handle: MPI_Datatype) -> Option<usize> {
    match handle {
        MPI_BYTE | MPI_CHAR | MPI_UNSIGNED_CHAR | MPI_PACKED => Some(1),
        MPI_INT | MPI_UNSIGNED | MPI_FLOAT => Some(4),
        MPI_DOUBLE | MPI_LONG | MPI_UNSIGNED_LONG | MPI_LONG_LONG_INT => Some(8),
        _ => None,
    }
}

/// Check `count` elements of `datatype` at `buffer` for point-to-point and
/// say how they move. Predefined types and contiguous derived ones take
/// the zero-copy path.
pub fn message_buffer(
    buffer: *const c_void,
    count: impl Into<MPI_Count>,
    datatype: MPI_Datatype,
) -> MpiResult<Message> {
    let count = count.into();
    // The types nearly every message uses skip the full table: this is on
    // the path from a ping-pong's receive to its next send.
    if let (Some(size_bytes), Ok(count)) = (common_type_bytes(datatype), usize::try_from(count)) {
        if let Some(length_bytes) = size_bytes.checked_mul(count) {
            if count == 0 || !buffer.is_null() {
                return Ok(Message::Contiguous {
                    pointer: buffer as *mut u8,
                    length_bytes,
                });
            }
        }
    }
    let count = check_count(count)?;
    let layout = match resolve(datatype)? {
        Resolved::Predefined(info) if info.size_bytes == info.extent_bytes => {
            let length_bytes = info.size_bytes.checked_mul(count).ok_or_else(|| {
                MpiError::new(
                    ErrorClass::Count,
                    "count times the size or extent of the datatype overflows",
                )
            })?;
            if length_bytes > 0 && buffer.is_null() {
                return Err(MpiError::new(
                    ErrorClass::Buffer,
                    format!("buffer is NULL but count is {count}"),
                ));
            }
            return Ok(Message::Contiguous {
                pointer: buffer as *mut u8,
                length_bytes,
            });
        }
        Resolved::Predefined(info) => {
            if count > 0 && buffer.is_null() {
                return Err(MpiError::new(
                    ErrorClass::Buffer,
                    format!("buffer is NULL but count is {count}"),
                ));
            }
            Arc::new(predefined_layout(datatype, info))
        }
        Resolved::Derived(object, true) => object.layout.clone(),
        Resolved::Derived(_, false) => return Err(uncommitted(datatype)),
    };
    let length_bytes = layout.packed_bytes(count).ok_or_else(|| {
        MpiError::new(
            ErrorClass::Count,
            "count times the size or extent of the datatype overflows",
        )
    })?;
    // A NULL buffer is MPI_BOTTOM for derived types (absolute addresses).
    Ok(match layout.contiguous_span(count) {
        Some((offset_bytes, length_bytes)) => Message::Contiguous {
            pointer: (buffer as *mut u8).wrapping_offset(offset_bytes),
            length_bytes,
        },
        None => Message::Packed(PackedBuffer {
            layout,
            buffer: buffer as *mut u8,
            count,
            length_bytes,
        }),
    })
}

/// MPI_Get_count (`elements` false) or MPI_Get_elements (true) for a
/// message of `bytes` packed bytes; MPI_UNDEFINED when not whole.
pub fn count_from_bytes(datatype: MPI_Datatype, bytes: usize, elements: bool) -> MpiResult<i64> {
    let layout = layout_of(datatype)?;
    if layout.size_bytes == 0 {
        return Ok(0);
    }
    if elements {
        return Ok(layout.elements_in(bytes) as i64);
    }
    Ok(if bytes.is_multiple_of(layout.size_bytes) {
        (bytes / layout.size_bytes) as i64
    } else {
        MPI_UNDEFINED as i64
    })
}

/// Packed bytes that hold the first `elements` basic elements of a message
/// of `datatype`: the inverse of `count_from_bytes(.., true)`
/// (MPI_Status_set_elements). None on overflow.
pub fn bytes_of_elements(datatype: MPI_Datatype, elements: usize) -> MpiResult<Option<usize>> {
    let layout = layout_of(datatype)?;
    let per_element = layout.basic_elements();
    if per_element == 0 {
        return Ok(Some(0));
    }
    let Some(mut bytes) = (elements / per_element).checked_mul(layout.size_bytes) else {
        return Ok(None);
    };
    let mut rest = elements % per_element;
    for run in &layout.elements {
        let taken = rest.min(run.count);
        bytes += taken * run.size_bytes;
        rest -= taken;
    }
    Ok(Some(bytes))
}

/// Mark `handle` committed.
pub fn commit(handle: MPI_Datatype) -> MpiResult<()> {
    if builtin_info(handle).is_some() {
        return Ok(());
    }
    let slot = derived_slot(handle).ok_or_else(|| invalid_type(handle))?;
    let mut table = table();
    match table.get_mut(slot).and_then(|entry| entry.as_mut()) {
        Some(entry) => {
            entry.committed = true;
            Ok(())
        }
        None => Err(invalid_type(handle)),
    }
}

/// Drop the handle of a derived type.
pub fn free(handle: MPI_Datatype) -> MpiResult<()> {
    if builtin_info(handle).is_some() {
        return Err(MpiError::new(
            ErrorClass::Type,
            "predefined datatypes cannot be freed",
        ));
    }
    let slot = derived_slot(handle).ok_or_else(|| invalid_type(handle))?;
    let mut table = table();
    match table.get_mut(slot) {
        Some(Some(entry))
            if crate::datatype_f90::is_parameterized(entry.object.contents.combiner) =>
        {
            Err(MpiError::new(
                ErrorClass::Type,
                "a type from MPI_Type_create_f90_* is predefined and cannot be freed",
            ))
        }
        Some(entry @ Some(_)) => {
            *entry = None;
            Ok(())
        }
        _ => Err(invalid_type(handle)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_predefined_table_agrees_with_the_definition_for_every_handle_of_both_kinds() {
        let mut found = 0;
        for kind in [PREDEFINED_KIND_BYTE, PAIR_KIND_BYTE, 0x0c, 0x44, 0x84] {
            for low in 0..=0xffffu32 {
                let handle = (kind << 24 | low) as MPI_Datatype;
                assert_eq!(builtin_info(handle), predefined_info(handle), "{handle:#x}");
                found += usize::from(predefined_info(handle).is_some());
            }
        }
        for handle in [
            MPI_INT,
            MPI_DOUBLE,
            MPI_2INT,
            MPI_DOUBLE_INT,
            MPI_LONG_DOUBLE_INT,
        ] {
            assert!(builtin_info(handle).is_some(), "{handle:#x}");
        }
        assert_eq!(builtin_info(MPI_DATATYPE_NULL), None);
        assert!(found > 60, "only {found} predefined handles");
    }

    #[test]
    fn the_common_type_shortcut_agrees_with_the_full_table() {
        let mut covered = 0;
        for handle in [
            MPI_BYTE,
            MPI_CHAR,
            MPI_UNSIGNED_CHAR,
            MPI_PACKED,
            MPI_INT,
            MPI_UNSIGNED,
            MPI_FLOAT,
            MPI_DOUBLE,
            MPI_LONG,
            MPI_UNSIGNED_LONG,
            MPI_LONG_LONG_INT,
            MPI_SHORT,
            MPI_2INT,
            MPI_LONG_DOUBLE,
            MPI_DOUBLE_INT,
            MPI_DATATYPE_NULL,
        ] {
            let Some(size_bytes) = common_type_bytes(handle) else {
                continue;
            };
            covered += 1;
            let info = builtin_info(handle).expect("a predefined type");
            assert_eq!(info.size_bytes, size_bytes, "size of {handle:#x}");
            assert_eq!(info.extent_bytes, size_bytes, "extent of {handle:#x}");
        }
        assert_eq!(covered, 11);
    }

    #[test]
    fn the_shortcut_keeps_the_errors_of_the_full_path() {
        let buffer = [0u8; 16];
        let pointer = buffer.as_ptr().cast::<c_void>();
        let length = |count| match message_buffer(pointer, count, MPI_INT) {
            Ok(Message::Contiguous { length_bytes, .. }) => length_bytes,
            _ => panic!("a contiguous message"),
        };
        assert_eq!(length(3), 12);
        assert_eq!(length(0), 0);
        let error = |buffer, count| {
            message_buffer(buffer, count, MPI_DOUBLE)
                .err()
                .map(|e| e.class)
        };
        assert_eq!(error(pointer, -1), Some(ErrorClass::Count));
        assert_eq!(error(std::ptr::null(), 2), Some(ErrorClass::Buffer));
        assert_eq!(error(std::ptr::null(), 0), None);
    }
}
