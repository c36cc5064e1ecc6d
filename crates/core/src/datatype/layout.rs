//! The layout of one datatype: where its bytes lie relative to the buffer
//! address (a flattened, merged segment list in type-map order), its bounds,
//! and the sequence of basic elements it is made of.
//!
//! A message on the wire is the packed form: the segments of element 0,
//! then those of element 1 (shifted by the extent), and so on, back to
//! back. Packing and unpacking take a byte position in that packed stream
//! so a sender or receiver can move a message chunk by chunk.

use super::TypeInfo;

/// A run of bytes of one element, relative to the buffer address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Where the run starts (may be negative: lower bounds can be).
    pub offset_bytes: isize,
    /// How long it is (never 0 in a layout).
    pub length_bytes: usize,
}

impl Segment {
    /// One past the last byte.
    pub fn end_bytes(&self) -> isize {
        self.offset_bytes + self.length_bytes as isize
    }
}

/// `count` consecutive basic elements of `size_bytes` each, in type-map order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElementRun {
    /// Size of each basic element.
    pub size_bytes: usize,
    /// How many in a row.
    pub count: usize,
    /// How each element is stored in the "external32" representation.
    pub external32: External32,
}

impl ElementRun {
    /// `count` elements of `size_bytes` whose external32 size is their own.
    pub fn native(size_bytes: usize, count: usize) -> ElementRun {
        ElementRun {
            size_bytes,
            count,
            external32: External32::Native,
        }
    }

    /// Bytes of one element in the external32 representation.
    pub fn external32_bytes(&self) -> usize {
        match self.external32 {
            External32::Native => self.size_bytes,
            External32::Narrow { bytes, .. } => bytes as usize,
        }
    }
}

/// The size of a basic element in the portable "external32" representation
/// when it is not its native size. Why it is needed: on LP64 Linux C's
/// `long` and `unsigned long` take 8 bytes and `wchar_t` 4, but external32
/// fixes them at 4, 4 and 2 (MPI-4.0 section 19.5; MPICH packs them so),
/// while `long long` and `int64_t`, of the same native size and kind, stay
/// 8. So the size in external32 is a property of the predefined type the
/// element came from, carried with its run through every derived type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum External32 {
    /// Stored in external32 with its native size.
    #[default]
    Native,
    /// Stored in `bytes` (fewer than its native size): a value is narrowed
    /// on the way out (it must fit) and widened on the way in, sign-extended
    /// when `signed`, else zero-extended.
    Narrow {
        /// Bytes in external32.
        bytes: u8,
        /// Whether the value is a signed integer.
        signed: bool,
    },
}

/// A datatype's layout and bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datatype {
    /// Bytes of data in one element (MPI_Type_size).
    pub size_bytes: usize,
    /// Lower bound (MPI_Type_get_extent).
    pub lb_bytes: isize,
    /// Upper bound; extent = ub - lb.
    pub ub_bytes: isize,
    /// Lowest byte holding data (MPI_Type_get_true_extent).
    pub true_lb_bytes: isize,
    /// One past the highest byte holding data.
    pub true_ub_bytes: isize,
    /// The data of one element, in type-map order, adjacent runs merged.
    pub segments: Vec<Segment>,
    /// The basic elements of one element, in type-map order (MPI_Get_elements).
    pub elements: Vec<ElementRun>,
    /// The predefined type all data is made of, when there is exactly one
    /// (reductions need it); None for mixed types.
    pub unit: Option<TypeInfo>,
    /// Largest alignment of the basic types inside (struct extent padding).
    pub alignment_bytes: usize,
    /// The bounds were set by MPI_Type_create_resized (or subarray/darray),
    /// so MPI_Type_create_struct must not pad them for alignment.
    pub explicit_bounds: bool,
    /// Where each segment starts in one element's packed bytes (computed on
    /// first use), so a fragment at any packed offset finds its first
    /// segment by binary search instead of a walk from the element's start.
    pub packed_starts: PackedStarts,
}

/// A cache of [`Datatype::segments`]' packed start offsets; never part of
/// a type's identity (two types with equal layouts are equal whether or not
/// either has computed it).
#[derive(Clone, Debug, Default)]
pub struct PackedStarts(std::sync::OnceLock<Vec<usize>>);

impl PartialEq for PackedStarts {
    fn eq(&self, _: &PackedStarts) -> bool {
        true
    }
}

impl Eq for PackedStarts {}

impl Datatype {
    /// A predefined type with no holes: `info.size_bytes` bytes of data, `info.extent_bytes` apart.
    pub fn basic(info: TypeInfo, alignment_bytes: usize) -> Datatype {
        let segments = if info.size_bytes == 0 {
            Vec::new()
        } else {
            vec![Segment {
                offset_bytes: 0,
                length_bytes: info.size_bytes,
            }]
        };
        let element_size = info.size_bytes / info.basic_elements.max(1);
        Datatype {
            size_bytes: info.size_bytes,
            lb_bytes: 0,
            ub_bytes: info.extent_bytes as isize,
            true_lb_bytes: 0,
            true_ub_bytes: info.size_bytes as isize,
            segments,
            elements: vec![ElementRun::native(element_size, info.basic_elements)],
            unit: Some(info),
            alignment_bytes,
            explicit_bounds: false,
            packed_starts: PackedStarts::default(),
        }
    }

    /// A predefined (value, index) pair type such as MPI_DOUBLE_INT: the
    /// value at 0, the second member at the next offset aligned to its own
    /// size (so MPI_SHORT_INT has a 2-byte hole), extent from `info`.
    pub fn pair(info: TypeInfo, value_size_bytes: usize) -> Datatype {
        let second_size_bytes = info.size_bytes - value_size_bytes;
        let second_offset_bytes = value_size_bytes.next_multiple_of(second_size_bytes);
        let mut segments = vec![Segment {
            offset_bytes: 0,
            length_bytes: value_size_bytes,
        }];
        push_merged(
            &mut segments,
            Segment {
                offset_bytes: second_offset_bytes as isize,
                length_bytes: second_size_bytes,
            },
        );
        let mut elements = vec![ElementRun::native(value_size_bytes, 1)];
        push_run(&mut elements, ElementRun::native(second_size_bytes, 1));
        Datatype {
            size_bytes: info.size_bytes,
            lb_bytes: 0,
            ub_bytes: info.extent_bytes as isize,
            true_lb_bytes: 0,
            true_ub_bytes: (second_offset_bytes + second_size_bytes) as isize,
            segments,
            elements,
            unit: Some(info),
            alignment_bytes: value_size_bytes.max(second_size_bytes).min(16),
            explicit_bounds: false,
            packed_starts: PackedStarts::default(),
        }
    }

    /// ub - lb (MPI_Type_get_extent's extent; may be negative after resizing).
    pub fn extent_bytes(&self) -> isize {
        self.ub_bytes - self.lb_bytes
    }

    /// true_ub - true_lb.
    pub fn true_extent_bytes(&self) -> isize {
        self.true_ub_bytes - self.true_lb_bytes
    }

    /// This layout with the first basic element of each element stored in
    /// external32 as `external32` says (the predefined types whose
    /// external32 size differs from their native one: all their basic
    /// elements for MPI_LONG, only the value of MPI_LONG_INT).
    pub fn with_external32_first(mut self, external32: External32) -> Datatype {
        if let Some(first) = self.elements.first_mut() {
            if first.count > 1 {
                let rest = ElementRun {
                    count: first.count - 1,
                    ..*first
                };
                first.count = 1;
                first.external32 = external32;
                self.elements.insert(1, rest);
            } else {
                first.external32 = external32;
            }
        }
        self
    }

    /// Whether some basic element has another size in external32.
    pub fn narrows_in_external32(&self) -> bool {
        self.elements
            .iter()
            .any(|run| run.external32 != External32::Native)
    }

    /// Bytes of one element in the external32 representation.
    pub fn external32_size_bytes(&self) -> usize {
        self.elements
            .iter()
            .map(|run| run.external32_bytes() * run.count)
            .sum()
    }

    /// Basic elements in one element.
    pub fn basic_elements(&self) -> usize {
        self.elements.iter().map(|run| run.count).sum()
    }

    /// Packed bytes of `count` elements, or None on overflow: of
    /// `count × size`, or of the memory the elements span (`count − 1`
    /// extents past the first element's true bounds), which no buffer can
    /// hold and whose addresses would wrap (MPI_ERR_COUNT for the callers).
    pub fn packed_bytes(&self, count: usize) -> Option<usize> {
        if count > 1 && self.size_bytes > 0 {
            let strides = isize::try_from(count - 1)
                .ok()?
                .checked_mul(self.extent_bytes())?;
            strides.checked_add(self.true_ub_bytes)?;
            strides.checked_add(self.true_lb_bytes)?;
        }
        self.size_bytes.checked_mul(count)
    }

    /// When `count` elements occupy one run of memory: its offset from the
    /// buffer address and its length. Such messages need no packing.
    pub fn contiguous_span(&self, count: usize) -> Option<(isize, usize)> {
        match self.segments.as_slice() {
            [] => Some((0, 0)),
            [only] if count <= 1 || only.length_bytes as isize == self.extent_bytes() => {
                Some((only.offset_bytes, only.length_bytes * count))
            }
            _ => None,
        }
    }

    /// Number of basic elements in the first `bytes` packed bytes of a
    /// message of this type (MPI_Get_elements); a trailing partial basic
    /// element is not counted.
    pub fn elements_in(&self, bytes: usize) -> usize {
        if self.size_bytes == 0 {
            return 0;
        }
        let whole = bytes / self.size_bytes;
        let mut rest_bytes = bytes % self.size_bytes;
        let mut elements = whole * self.basic_elements();
        for run in &self.elements {
            if run.size_bytes == 0 {
                continue;
            }
            let run_bytes = run.size_bytes * run.count;
            if rest_bytes >= run_bytes {
                elements += run.count;
                rest_bytes -= run_bytes;
            } else {
                elements += rest_bytes / run.size_bytes;
                break;
            }
        }
        elements
    }

    /// The packed offset at which each segment of one element starts.
    fn segment_starts(&self) -> &[usize] {
        self.packed_starts.0.get_or_init(|| {
            let mut start_bytes = 0;
            self.segments
                .iter()
                .map(|segment| {
                    let this = start_bytes;
                    start_bytes += segment.length_bytes;
                    this
                })
                .collect()
        })
    }

    /// Visit the memory pieces behind packed bytes `[start, start + length)`
    /// of `count` elements, in packed order:
    /// `visit(buffer_offset_bytes, packed_offset_bytes, length_bytes)`.
    fn for_each_piece(
        &self,
        count: usize,
        start_bytes: usize,
        length_bytes: usize,
        mut visit: impl FnMut(isize, usize, usize),
    ) {
        if self.size_bytes == 0 || length_bytes == 0 {
            return;
        }
        let end_bytes = (start_bytes + length_bytes).min(self.size_bytes * count);
        let extent_bytes = self.extent_bytes();
        let starts = self.segment_starts();
        let mut element = start_bytes / self.size_bytes;
        let mut position_bytes = start_bytes;
        // The segment holding the first byte: the last one starting at or
        // before it (segment 0 starts at 0, so there always is one).
        let within_bytes = start_bytes - element * self.size_bytes;
        let mut segment = starts.partition_point(|start| *start <= within_bytes) - 1;
        while position_bytes < end_bytes {
            let element_offset_bytes = element as isize * extent_bytes;
            let element_packed_bytes = element * self.size_bytes;
            for (run, start) in self.segments[segment..].iter().zip(&starts[segment..]) {
                let run_packed_bytes = element_packed_bytes + start;
                let piece_end_bytes = (run_packed_bytes + run.length_bytes).min(end_bytes);
                let skip_bytes = position_bytes - run_packed_bytes;
                visit(
                    element_offset_bytes + run.offset_bytes + skip_bytes as isize,
                    position_bytes,
                    piece_end_bytes - position_bytes,
                );
                position_bytes = piece_end_bytes;
                if position_bytes >= end_bytes {
                    return;
                }
            }
            segment = 0;
            element += 1;
        }
    }

    /// Copy packed bytes `[start_bytes, start_bytes + packed.len())` of
    /// `count` elements at `buffer` into `packed` (stops at the message end).
    ///
    /// # Safety
    /// `buffer` must be valid for reads at every byte the first `count`
    /// elements of this layout cover (the application's promise to MPI).
    pub unsafe fn pack(
        &self,
        buffer: *const u8,
        count: usize,
        start_bytes: usize,
        packed: &mut [u8],
    ) {
        self.for_each_piece(count, start_bytes, packed.len(), |offset, at, length| {
            let target = &mut packed[at - start_bytes..at - start_bytes + length];
            // SAFETY: the caller guarantees the element bytes are readable;
            // `target` is a distinct Rust slice, so they do not overlap.
            unsafe { copy_piece(buffer.wrapping_offset(offset), target.as_mut_ptr(), length) };
        });
    }

    /// Copy `packed`, which holds packed bytes from `start_bytes` on, into
    /// the first `count` elements at `buffer`; bytes beyond the message end
    /// are ignored, and memory between segments is never written.
    ///
    /// # Safety
    /// `buffer` must be valid for writes at every byte the first `count`
    /// elements of this layout cover.
    pub unsafe fn unpack(&self, buffer: *mut u8, count: usize, start_bytes: usize, packed: &[u8]) {
        self.for_each_piece(count, start_bytes, packed.len(), |offset, at, length| {
            let source = &packed[at - start_bytes..at - start_bytes + length];
            // SAFETY: as for `pack`, with writable element bytes.
            unsafe { copy_piece(source.as_ptr(), buffer.wrapping_offset(offset), length) };
        });
    }

    /// Size, extent and kind for reductions and raw-span collectives.
    pub fn info(&self) -> TypeInfo {
        let extent_bytes = self.extent_bytes().max(0) as usize;
        TypeInfo {
            size_bytes: self.size_bytes,
            extent_bytes,
            basic_elements: self.basic_elements(),
            kind: self.unit.map_or(super::BasicKind::Byte, |unit| unit.kind),
        }
    }
}

/// Copy one piece of a layout. Pieces of one basic element (4, 8 or 16
/// bytes, as in a strided vector of doubles) are copied with one load and
/// one store: a call to `memcpy` per element costs more than the copy.
///
/// # Safety
/// As `std::ptr::copy_nonoverlapping(source, target, length)`.
#[inline(always)]
unsafe fn copy_piece(source: *const u8, target: *mut u8, length: usize) {
    // SAFETY (every arm): the caller's promise; unaligned accesses are allowed.
    unsafe {
        match length {
            4 => target
                .cast::<u32>()
                .write_unaligned(source.cast::<u32>().read_unaligned()),
            8 => target
                .cast::<u64>()
                .write_unaligned(source.cast::<u64>().read_unaligned()),
            16 => target
                .cast::<u128>()
                .write_unaligned(source.cast::<u128>().read_unaligned()),
            _ => std::ptr::copy_nonoverlapping(source, target, length),
        }
    }
}

/// Append `segment`, merging it into the last one when they touch.
pub(super) fn push_merged(segments: &mut Vec<Segment>, segment: Segment) {
    if segment.length_bytes == 0 {
        return;
    }
    if let Some(last) = segments.last_mut() {
        if last.end_bytes() == segment.offset_bytes {
            last.length_bytes += segment.length_bytes;
            return;
        }
    }
    segments.push(segment);
}

/// Append `run`, merging it into the last one when the sizes agree.
pub(super) fn push_run(elements: &mut Vec<ElementRun>, run: ElementRun) {
    if run.count == 0 {
        return;
    }
    if let Some(last) = elements.last_mut() {
        if last.size_bytes == run.size_bytes && last.external32 == run.external32 {
            last.count += run.count;
            return;
        }
    }
    elements.push(run);
}
