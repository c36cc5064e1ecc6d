//! What the core knows about datatypes: for reductions, the size, extent and
//! kind of number of an element ([`TypeInfo`]); for moving data, the layout
//! of any type, predefined or derived ([`Datatype`], in `layout`), and the
//! constructors that build one from another (`build`).
//!
//! Handles are the C layer's business: it maps each handle to a
//! [`TypeInfo`] or a [`Datatype`]. Layouts are LA-MPI's flattened
//! (offset, length) segment lists, so packing, unpacking and a future
//! checksum fused with the copy walk one list instead of a type tree.

mod build;
mod layout;
#[cfg(test)]
mod tests;

pub use build::{Block, DarrayDistribution, DimensionOrder, MAX_FLAT_SEGMENTS};
pub use layout::{Datatype, ElementRun, External32, Segment};

/// Element kinds the reduction kernels understand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum BasicKind {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    /// x87 80-bit extended precision stored in 16 bytes (C `long double`).
    LongDouble,
    /// C `_Bool` / C++ `bool`, one byte.
    Bool,
    /// Complex of two f32.
    ComplexF32,
    /// Complex of two f64.
    ComplexF64,
    /// Complex of two long double.
    ComplexLongDouble,
    /// MPI_BYTE / MPI_PACKED: only bitwise ops allowed.
    Byte,
    /// C `char` (not a reduction type in the standard).
    Char,
    /// (value, int) pair for MINLOC/MAXLOC; the value kind is given.
    Pair(PairValue),
}

/// The value half of a MINLOC/MAXLOC pair type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum PairValue {
    F32,
    F64,
    I64,
    I32,
    I16,
    LongDouble,
}

/// Size, extent and kind of a datatype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeInfo {
    /// Bytes of data in one element (MPI_Type_size).
    pub size_bytes: usize,
    /// Distance between consecutive elements in a buffer (MPI_Type_get_extent).
    pub extent_bytes: usize,
    /// Basic elements per element (2 for pair types), for MPI_Get_elements.
    pub basic_elements: usize,
    /// Kind for reductions.
    pub kind: BasicKind,
}

impl TypeInfo {
    /// A plain type whose size equals its extent.
    pub const fn basic(size_bytes: usize, kind: BasicKind) -> TypeInfo {
        TypeInfo {
            size_bytes,
            extent_bytes: size_bytes,
            basic_elements: 1,
            kind,
        }
    }

    /// Bytes that `count` elements occupy in a contiguous buffer, or `None` on overflow.
    pub fn span_bytes(&self, count: usize) -> Option<usize> {
        self.extent_bytes.checked_mul(count)
    }
}
