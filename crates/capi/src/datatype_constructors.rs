//! MPI type constructors: each checks its arguments, asks the core for the
//! layout, and records its arguments for MPI_Type_get_contents.

use std::sync::Arc;

use resmpi_core::datatype::{Block, DarrayDistribution, Datatype, DimensionOrder};
use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::datatype::{
    check_count, commit, register, resolve, type_ref, Contents, Resolved, TypeObject, TypeRef,
};
use crate::global::entry;
use crate::large_count::{int_and_large_count, Count};

/// Whether `count` elements of `layout` fill exactly `count * extent` bytes from the buffer address.
fn is_dense(layout: &Datatype) -> bool {
    layout.lb_bytes == 0
        && match layout.segments.as_slice() {
            [] => layout.extent_bytes() == 0,
            [only] => only.offset_bytes == 0 && only.length_bytes as isize == layout.extent_bytes(),
            _ => false,
        }
}

/// Register the type `build` makes and store its handle in `newtype`.
fn construct(
    name: &str,
    newtype: *mut MPI_Datatype,
    build: impl FnOnce() -> MpiResult<TypeObject>,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, _| {
        if newtype.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "newtype pointer is NULL"));
        }
        let object = build()?;
        // SAFETY: checked non-null; the caller's output variable.
        unsafe { *newtype = register(Arc::new(object)) };
        Ok(())
    })
}

fn object(layout: Datatype, contents: Contents) -> TypeObject {
    let raw_span = is_dense(&layout);
    TypeObject {
        layout: Arc::new(layout),
        contents,
        raw_span,
    }
}

/// `count` entries of a C array, MPI_ERR_ARG when NULL with a positive count.
unsafe fn array<'a, T>(pointer: *const T, count: usize, what: &str) -> MpiResult<&'a [T]> {
    if count == 0 {
        return Ok(&[]);
    }
    if pointer.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, format!("{what} is NULL")));
    }
    // SAFETY: the caller passes an array of `count` entries (MPI's contract).
    Ok(unsafe { std::slice::from_raw_parts(pointer, count) })
}

fn block_length(value: impl Into<MPI_Count>) -> MpiResult<usize> {
    let value = value.into();
    usize::try_from(value).map_err(|_| {
        MpiError::new(
            ErrorClass::Count,
            format!("block length {value} is negative"),
        )
    })
}

fn times_extent(value: isize, layout: &Datatype) -> MpiResult<isize> {
    value
        .checked_mul(layout.extent_bytes())
        .ok_or_else(|| MpiError::new(ErrorClass::Count, "displacement times extent overflows"))
}

/// A count argument as an `isize` displacement or stride.
fn displacement(value: impl Into<MPI_Count>) -> isize {
    value.into() as isize
}

/// The arguments of a constructor as MPI_Type_get_contents gives them
/// back: the counts of a large-count (`_c`) constructor are its large
/// counts, those of a classic one are integers (where they came from an
/// `int`, so they fit one).
struct Recorded<C> {
    integers: Vec<c_int>,
    large_counts: Vec<MPI_Count>,
    addresses: Vec<MPI_Aint>,
    count_type: std::marker::PhantomData<C>,
}

impl<C: Count> Recorded<C> {
    fn new() -> Self {
        Recorded {
            integers: Vec::new(),
            large_counts: Vec::new(),
            addresses: Vec::new(),
            count_type: std::marker::PhantomData,
        }
    }

    /// An `int` argument in both forms (ndims, order, distributions ...).
    fn integer(&mut self, value: c_int) {
        self.integers.push(value);
    }

    /// Count arguments (`int` or `MPI_Count` by form).
    fn counts(&mut self, values: &[C]) {
        for &value in values {
            let value: MPI_Count = value.into();
            if C::LARGE {
                self.large_counts.push(value);
            } else {
                self.integers.push(value as c_int);
            }
        }
    }

    /// Byte displacements and strides: addresses in the classic form,
    /// large counts in the `_c` one (MPI-4.0 sec. 5.1.13).
    fn byte_displacements(&mut self, values: &[MPI_Aint]) {
        if C::LARGE {
            self.large_counts.extend(values);
        } else {
            self.addresses.extend(values);
        }
    }

    fn contents(self, combiner: c_int, datatypes: Vec<TypeRef>) -> Contents {
        Contents {
            combiner,
            integers: self.integers,
            large_counts: self.large_counts,
            addresses: self.addresses,
            datatypes,
        }
    }
}

unsafe fn type_contiguous<C: Count>(
    name: &str,
    count: C,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(name, newtype, || {
        let copies = check_count(count)?;
        let (child, layout, child_raw) = type_ref(oldtype)?;
        let new = Datatype::contiguous(copies, &layout)?;
        let raw_span = (child_raw && layout.lb_bytes == 0) || is_dense(&new);
        let mut recorded = Recorded::<C>::new();
        recorded.counts(&[count]);
        Ok(TypeObject {
            layout: Arc::new(new),
            contents: recorded.contents(MPI_COMBINER_CONTIGUOUS, vec![child]),
            raw_span,
        })
    })
}
int_and_large_count!(PMPI_Type_contiguous = MPI_Type_contiguous,
    PMPI_Type_contiguous_c = MPI_Type_contiguous_c, type_contiguous, (
    count: Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype));

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_dup(oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
    let code = duplicate(oldtype, newtype);
    if code != MPI_SUCCESS {
        return code;
    }
    // Copy callbacks are application code: they run without the state.
    // SAFETY: `duplicate` succeeded, so `newtype` is non-null and set.
    let new = unsafe { *newtype };
    match crate::type_attr::copy_attributes(oldtype, new) {
        Ok(()) => MPI_SUCCESS,
        Err(error) => crate::global::raise_error("MPI_Type_dup", MPI_COMM_WORLD, error),
    }
}
const _: fn_types::MPI_Type_dup = PMPI_Type_dup;

/// MPI_Type_dup without its attributes.
fn duplicate(oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
    entry("MPI_Type_dup", MPI_COMM_WORLD, |_, _| {
        if newtype.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "newtype pointer is NULL"));
        }
        // A duplicate has the committed state of its original (MPI-4.0 sec. 5.1.10).
        let committed = match resolve(oldtype)? {
            Resolved::Predefined(_) => true,
            Resolved::Derived(_, committed) => committed,
        };
        let (child, layout, raw_span) = type_ref(oldtype)?;
        let handle = register(Arc::new(TypeObject {
            layout,
            contents: Contents {
                combiner: MPI_COMBINER_DUP,
                integers: vec![],
                large_counts: vec![],
                addresses: vec![],
                datatypes: vec![child],
            },
            raw_span,
        }));
        if committed {
            commit(handle)?;
        }
        // SAFETY: checked non-null.
        unsafe { *newtype = handle };
        Ok(())
    })
}

/// MPI_Type_vector (`stride` in elements) and MPI_Type_create_hvector (in
/// bytes), classic or `_c`.
fn hvector_object<C: Count>(
    combiner: c_int,
    count: C,
    blocklength: C,
    stride: isize,
    oldtype: MPI_Datatype,
    mut recorded: Recorded<C>,
    stride_in_elements: bool,
) -> MpiResult<TypeObject> {
    let copies = check_count(count)?;
    let block = block_length(blocklength)?;
    let (child, layout, _) = type_ref(oldtype)?;
    let stride_bytes = if stride_in_elements {
        times_extent(stride, &layout)?
    } else {
        stride
    };
    let new = Datatype::hvector(copies, block, stride_bytes, &layout)?;
    if !stride_in_elements {
        recorded.byte_displacements(&[stride as MPI_Aint]);
    }
    Ok(object(new, recorded.contents(combiner, vec![child])))
}

unsafe fn type_vector<C: Count>(
    name: &str,
    count: C,
    blocklength: C,
    stride: C,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(name, newtype, || {
        let mut recorded = Recorded::new();
        recorded.counts(&[count, blocklength, stride]);
        let stride = displacement(stride);
        hvector_object(
            MPI_COMBINER_VECTOR,
            count,
            blocklength,
            stride,
            oldtype,
            recorded,
            true,
        )
    })
}
int_and_large_count!(PMPI_Type_vector = MPI_Type_vector, PMPI_Type_vector_c = MPI_Type_vector_c,
    type_vector, (count: Count, blocklength: Count, stride: Count, oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype));

unsafe fn type_create_hvector<C: Count>(
    name: &str,
    count: C,
    blocklength: C,
    stride: MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(name, newtype, || {
        let mut recorded = Recorded::new();
        recorded.counts(&[count, blocklength]);
        let stride = stride as isize;
        hvector_object(
            MPI_COMBINER_HVECTOR,
            count,
            blocklength,
            stride,
            oldtype,
            recorded,
            false,
        )
    })
}
int_and_large_count!(PMPI_Type_create_hvector = MPI_Type_create_hvector,
    PMPI_Type_create_hvector_c = MPI_Type_create_hvector_c, type_create_hvector, (
    count: Count, blocklength: Count, stride: MPI_Aint, oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype));

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_hvector(
    count: c_int,
    blocklength: c_int,
    stride: MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: forwarded caller pointer.
    unsafe { PMPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype) }
}
const _: fn_types::MPI_Type_hvector = PMPI_Type_hvector;

/// The general indexed form: per-block lengths (or one shared length) and
/// displacements in elements or bytes, classic or `_c`.
unsafe fn indexed_object<C: Count>(
    combiner: c_int,
    count: C,
    block_lengths: Option<*const C>,
    shared_block_length: C,
    element_displacements: Option<*const C>,
    byte_displacements: Option<*const MPI_Aint>,
    oldtype: MPI_Datatype,
) -> MpiResult<TypeObject> {
    let blocks = check_count(count)?;
    let (child, layout, _) = type_ref(oldtype)?;
    let lengths: Vec<C> = match block_lengths {
        // SAFETY: the caller's array of `count` block lengths.
        Some(pointer) => unsafe { array(pointer, blocks, "array_of_blocklengths")? }.to_vec(),
        None => vec![shared_block_length; blocks],
    };
    let lengths_usize = lengths
        .iter()
        .map(|&length| block_length(length))
        .collect::<MpiResult<Vec<_>>>()?;
    let mut recorded = Recorded::<C>::new();
    recorded.counts(&[count]);
    match block_lengths {
        Some(_) => recorded.counts(&lengths),
        None => recorded.counts(&[shared_block_length]),
    }
    let displacements_bytes: Vec<isize> = match (element_displacements, byte_displacements) {
        (Some(pointer), _) => {
            // SAFETY: the caller's array of `count` displacements.
            let displacements = unsafe { array(pointer, blocks, "array_of_displacements")? };
            recorded.counts(displacements);
            displacements
                .iter()
                .map(|&value| times_extent(displacement(value), &layout))
                .collect::<MpiResult<_>>()?
        }
        (None, Some(pointer)) => {
            // SAFETY: the caller's array of `count` displacements.
            let displacements = unsafe { array(pointer, blocks, "array_of_displacements")? };
            recorded.byte_displacements(displacements);
            displacements
                .iter()
                .map(|&displacement| displacement as isize)
                .collect()
        }
        (None, None) => unreachable!("every indexed form has displacements"),
    };
    let new = Datatype::hindexed(&lengths_usize, &displacements_bytes, &layout)?;
    Ok(object(new, recorded.contents(combiner, vec![child])))
}

unsafe fn type_indexed<C: Count>(
    name: &str,
    count: C,
    array_of_blocklengths: *const C,
    array_of_displacements: *const C,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(name, newtype, || {
        // SAFETY: the caller's arrays.
        unsafe {
            indexed_object(
                MPI_COMBINER_INDEXED,
                count,
                Some(array_of_blocklengths),
                count,
                Some(array_of_displacements),
                None,
                oldtype,
            )
        }
    })
}
int_and_large_count!(PMPI_Type_indexed = MPI_Type_indexed, PMPI_Type_indexed_c = MPI_Type_indexed_c,
    type_indexed, (count: Count, array_of_blocklengths: *const Count,
    array_of_displacements: *const Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype));

unsafe fn type_create_hindexed<C: Count>(
    name: &str,
    count: C,
    array_of_blocklengths: *const C,
    array_of_displacements: *const MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(name, newtype, || {
        // SAFETY: the caller's arrays.
        unsafe {
            indexed_object(
                MPI_COMBINER_HINDEXED,
                count,
                Some(array_of_blocklengths),
                count,
                None,
                Some(array_of_displacements),
                oldtype,
            )
        }
    })
}
int_and_large_count!(PMPI_Type_create_hindexed = MPI_Type_create_hindexed,
    PMPI_Type_create_hindexed_c = MPI_Type_create_hindexed_c, type_create_hindexed, (
    count: Count, array_of_blocklengths: *const Count, array_of_displacements: *const MPI_Aint,
    oldtype: MPI_Datatype, newtype: *mut MPI_Datatype));

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_hindexed(
    count: c_int,
    array_of_blocklengths: *mut c_int,
    array_of_displacements: *mut MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: forwarded caller pointers.
    unsafe {
        PMPI_Type_create_hindexed(
            count,
            array_of_blocklengths,
            array_of_displacements,
            oldtype,
            newtype,
        )
    }
}
const _: fn_types::MPI_Type_hindexed = PMPI_Type_hindexed;

unsafe fn type_create_indexed_block<C: Count>(
    name: &str,
    count: C,
    blocklength: C,
    array_of_displacements: *const C,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(name, newtype, || {
        // SAFETY: the caller's array.
        unsafe {
            indexed_object(
                MPI_COMBINER_INDEXED_BLOCK,
                count,
                None,
                blocklength,
                Some(array_of_displacements),
                None,
                oldtype,
            )
        }
    })
}
int_and_large_count!(PMPI_Type_create_indexed_block = MPI_Type_create_indexed_block,
    PMPI_Type_create_indexed_block_c = MPI_Type_create_indexed_block_c,
    type_create_indexed_block, (count: Count, blocklength: Count,
    array_of_displacements: *const Count, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype));

unsafe fn type_create_hindexed_block<C: Count>(
    name: &str,
    count: C,
    blocklength: C,
    array_of_displacements: *const MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(name, newtype, || {
        // SAFETY: the caller's array.
        unsafe {
            indexed_object(
                MPI_COMBINER_HINDEXED_BLOCK,
                count,
                None,
                blocklength,
                None,
                Some(array_of_displacements),
                oldtype,
            )
        }
    })
}
int_and_large_count!(PMPI_Type_create_hindexed_block = MPI_Type_create_hindexed_block,
    PMPI_Type_create_hindexed_block_c = MPI_Type_create_hindexed_block_c,
    type_create_hindexed_block, (count: Count, blocklength: Count,
    array_of_displacements: *const MPI_Aint, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype));

unsafe fn type_create_struct<C: Count>(
    name: &str,
    count: C,
    array_of_blocklengths: *const C,
    array_of_displacements: *const MPI_Aint,
    array_of_types: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(name, newtype, || {
        let blocks = check_count(count)?;
        // SAFETY: the caller's arrays of `count` entries.
        let (lengths, displacements, types) = unsafe {
            (
                array(array_of_blocklengths, blocks, "array_of_blocklengths")?,
                array(array_of_displacements, blocks, "array_of_displacements")?,
                array(array_of_types, blocks, "array_of_types")?,
            )
        };
        let mut children = Vec::with_capacity(blocks);
        let mut layouts = Vec::with_capacity(blocks);
        for &handle in types {
            let (child, layout, _) = type_ref(handle)?;
            children.push(child);
            layouts.push(layout);
        }
        let lengths_usize = lengths
            .iter()
            .map(|&length| block_length(length))
            .collect::<MpiResult<Vec<_>>>()?;
        let block_list: Vec<Block> = layouts
            .iter()
            .zip(&lengths_usize)
            .zip(displacements)
            .map(|((layout, &count), &displacement)| Block {
                datatype: layout,
                count,
                displacement_bytes: displacement as isize,
            })
            .collect();
        let new = Datatype::from_blocks(&block_list, true)?;
        let mut recorded = Recorded::<C>::new();
        recorded.counts(&[count]);
        recorded.counts(lengths);
        recorded.byte_displacements(displacements);
        Ok(object(
            new,
            recorded.contents(MPI_COMBINER_STRUCT, children),
        ))
    })
}
int_and_large_count!(PMPI_Type_create_struct = MPI_Type_create_struct,
    PMPI_Type_create_struct_c = MPI_Type_create_struct_c, type_create_struct, (
    count: Count, array_of_blocklengths: *const Count, array_of_displacements: *const MPI_Aint,
    array_of_types: *const MPI_Datatype, newtype: *mut MPI_Datatype));

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_struct(
    count: c_int,
    array_of_blocklengths: *mut c_int,
    array_of_displacements: *mut MPI_Aint,
    array_of_types: *mut MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: forwarded caller pointers.
    unsafe {
        PMPI_Type_create_struct(
            count,
            array_of_blocklengths,
            array_of_displacements,
            array_of_types,
            newtype,
        )
    }
}
const _: fn_types::MPI_Type_struct = PMPI_Type_struct;

/// MPI_Type_create_resized: `lb` and `extent` are addresses in the classic
/// form and large counts in the `_c` one (both 64-bit here).
unsafe fn type_create_resized<C: Count>(
    name: &str,
    oldtype: MPI_Datatype,
    lb: MPI_Aint,
    extent: MPI_Aint,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(name, newtype, || {
        let (child, layout, _) = type_ref(oldtype)?;
        let new = Datatype::resized(&layout, lb as isize, extent as isize)?;
        let mut recorded = Recorded::<C>::new();
        recorded.byte_displacements(&[lb, extent]);
        Ok(object(
            new,
            recorded.contents(MPI_COMBINER_RESIZED, vec![child]),
        ))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_resized(
    oldtype: MPI_Datatype,
    lb: MPI_Aint,
    extent: MPI_Aint,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { type_create_resized::<c_int>("MPI_Type_create_resized", oldtype, lb, extent, newtype) }
}
const _: fn_types::MPI_Type_create_resized = PMPI_Type_create_resized;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_resized_c(
    oldtype: MPI_Datatype,
    lb: MPI_Count,
    extent: MPI_Count,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        type_create_resized::<MPI_Count>("MPI_Type_create_resized_c", oldtype, lb, extent, newtype)
    }
}
const _: fn_types::MPI_Type_create_resized_c = PMPI_Type_create_resized_c;

fn dimension_order(order: c_int) -> MpiResult<DimensionOrder> {
    match order {
        MPI_ORDER_C => Ok(DimensionOrder::C),
        MPI_ORDER_FORTRAN => Ok(DimensionOrder::Fortran),
        _ => Err(MpiError::new(
            ErrorClass::Arg,
            format!("order {order} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"),
        )),
    }
}

fn dimension_count(ndims: c_int) -> MpiResult<usize> {
    usize::try_from(ndims)
        .ok()
        .filter(|dimensions| *dimensions > 0)
        .ok_or_else(|| MpiError::new(ErrorClass::Arg, format!("ndims {ndims} must be positive")))
}

fn non_negative<T: Copy + Into<MPI_Count>>(values: &[T], what: &str) -> MpiResult<Vec<usize>> {
    values
        .iter()
        .map(|&value| {
            let value: MPI_Count = value.into();
            usize::try_from(value)
                .map_err(|_| MpiError::new(ErrorClass::Arg, format!("{what} {value} is negative")))
        })
        .collect()
}

unsafe fn type_create_subarray<C: Count>(
    name: &str,
    ndims: c_int,
    array_of_sizes: *const C,
    array_of_subsizes: *const C,
    array_of_starts: *const C,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(name, newtype, || {
        let dimensions = dimension_count(ndims)?;
        // SAFETY: the caller's arrays of `ndims` entries.
        let (sizes, subsizes, starts) = unsafe {
            (
                array(array_of_sizes, dimensions, "array_of_sizes")?,
                array(array_of_subsizes, dimensions, "array_of_subsizes")?,
                array(array_of_starts, dimensions, "array_of_starts")?,
            )
        };
        let order_value = dimension_order(order)?;
        let (child, layout, _) = type_ref(oldtype)?;
        let new = Datatype::subarray(
            &non_negative(sizes, "size")?,
            &non_negative(subsizes, "subsize")?,
            &non_negative(starts, "start")?,
            order_value,
            &layout,
        )?;
        let mut recorded = Recorded::<C>::new();
        recorded.integer(ndims);
        recorded.counts(sizes);
        recorded.counts(subsizes);
        recorded.counts(starts);
        recorded.integer(order);
        Ok(object(
            new,
            recorded.contents(MPI_COMBINER_SUBARRAY, vec![child]),
        ))
    })
}
int_and_large_count!(PMPI_Type_create_subarray = MPI_Type_create_subarray,
    PMPI_Type_create_subarray_c = MPI_Type_create_subarray_c, type_create_subarray, (
    ndims: c_int, array_of_sizes: *const Count, array_of_subsizes: *const Count,
    array_of_starts: *const Count, order: c_int, oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype));

unsafe fn type_create_darray<C: Count>(
    name: &str,
    size: c_int,
    rank: c_int,
    ndims: c_int,
    array_of_gsizes: *const C,
    array_of_distribs: *const c_int,
    array_of_dargs: *const c_int,
    array_of_psizes: *const c_int,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct(name, newtype, || {
        let dimensions = dimension_count(ndims)?;
        if size <= 0 || rank < 0 || rank >= size {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("darray: rank {rank} of size {size} is invalid"),
            ));
        }
        // SAFETY: the caller's arrays of `ndims` entries.
        let (gsizes, distribs, dargs, psizes) = unsafe {
            (
                array(array_of_gsizes, dimensions, "array_of_gsizes")?,
                array(array_of_distribs, dimensions, "array_of_distribs")?,
                array(array_of_dargs, dimensions, "array_of_dargs")?,
                array(array_of_psizes, dimensions, "array_of_psizes")?,
            )
        };
        let global_sizes = non_negative(gsizes, "gsize")?;
        let process_sizes = non_negative(psizes, "psize")?;
        let grid: usize = process_sizes.iter().product();
        if grid != size as usize || process_sizes.contains(&0) {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!(
                    "darray: the process grid {process_sizes:?} does not hold {size} processes"
                ),
            ));
        }
        let mut distributions = Vec::with_capacity(dimensions);
        for (dimension, (&distrib, &darg)) in distribs.iter().zip(dargs).enumerate() {
            let block = match darg {
                MPI_DISTRIBUTE_DFLT_DARG => None,
                positive if positive > 0 => Some(positive as usize),
                other => {
                    return Err(MpiError::new(
                        ErrorClass::Arg,
                        format!("darray dimension {dimension}: darg {other} is invalid"),
                    ))
                }
            };
            distributions.push(match distrib {
                MPI_DISTRIBUTE_BLOCK => DarrayDistribution::Block(block),
                MPI_DISTRIBUTE_CYCLIC => DarrayDistribution::Cyclic(block),
                MPI_DISTRIBUTE_NONE => DarrayDistribution::None,
                other => {
                    return Err(MpiError::new(
                        ErrorClass::Arg,
                        format!("darray dimension {dimension}: distribution {other} is invalid"),
                    ))
                }
            });
        }
        let order_value = dimension_order(order)?;
        let (child, layout, _) = type_ref(oldtype)?;
        let new = Datatype::darray(
            rank as usize,
            &global_sizes,
            &distributions,
            &process_sizes,
            order_value,
            &layout,
        )?;
        let mut recorded = Recorded::<C>::new();
        for value in [size, rank, ndims] {
            recorded.integer(value);
        }
        recorded.counts(gsizes);
        recorded.integers.extend(distribs);
        recorded.integers.extend(dargs);
        recorded.integers.extend(psizes);
        recorded.integer(order);
        Ok(object(
            new,
            recorded.contents(MPI_COMBINER_DARRAY, vec![child]),
        ))
    })
}
int_and_large_count!(PMPI_Type_create_darray = MPI_Type_create_darray,
    PMPI_Type_create_darray_c = MPI_Type_create_darray_c, type_create_darray, (
    size: c_int, rank: c_int, ndims: c_int, array_of_gsizes: *const Count,
    array_of_distribs: *const c_int, array_of_dargs: *const c_int,
    array_of_psizes: *const c_int, order: c_int, oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype));

/// Handles for the constituents of a derived type (new handles for derived ones).
pub fn constituent_handles(datatypes: &[TypeRef]) -> Vec<MPI_Datatype> {
    datatypes
        .iter()
        .map(|constituent| match constituent {
            TypeRef::Predefined(handle) => *handle,
            TypeRef::Derived(object) => register(object.clone()),
        })
        .collect()
}
