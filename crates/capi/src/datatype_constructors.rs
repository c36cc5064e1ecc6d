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

fn block_length(value: c_int) -> MpiResult<usize> {
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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_contiguous(
    count: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct("MPI_Type_contiguous", newtype, || {
        let copies = check_count(count)?;
        let (child, layout, child_raw) = type_ref(oldtype)?;
        let new = Datatype::contiguous(copies, &layout)?;
        let raw_span = (child_raw && layout.lb_bytes == 0) || is_dense(&new);
        Ok(TypeObject {
            layout: Arc::new(new),
            contents: Contents {
                combiner: MPI_COMBINER_CONTIGUOUS,
                integers: vec![count],
                addresses: vec![],
                datatypes: vec![child],
            },
            raw_span,
        })
    })
}
const _: fn_types::MPI_Type_contiguous = PMPI_Type_contiguous;

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

fn hvector_object(
    combiner: c_int,
    count: c_int,
    blocklength: c_int,
    stride_bytes: isize,
    oldtype: MPI_Datatype,
    integers: Vec<c_int>,
    addresses: Vec<MPI_Aint>,
    stride_in_elements: bool,
) -> MpiResult<TypeObject> {
    let copies = check_count(count)?;
    let block = block_length(blocklength)?;
    let (child, layout, _) = type_ref(oldtype)?;
    let stride_bytes = if stride_in_elements {
        times_extent(stride_bytes, &layout)?
    } else {
        stride_bytes
    };
    let new = Datatype::hvector(copies, block, stride_bytes, &layout)?;
    Ok(object(
        new,
        Contents {
            combiner,
            integers,
            addresses,
            datatypes: vec![child],
        },
    ))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_vector(
    count: c_int,
    blocklength: c_int,
    stride: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct("MPI_Type_vector", newtype, || {
        hvector_object(
            MPI_COMBINER_VECTOR,
            count,
            blocklength,
            stride as isize,
            oldtype,
            vec![count, blocklength, stride],
            vec![],
            true,
        )
    })
}
const _: fn_types::MPI_Type_vector = PMPI_Type_vector;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_hvector(
    count: c_int,
    blocklength: c_int,
    stride: MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct("MPI_Type_create_hvector", newtype, || {
        hvector_object(
            MPI_COMBINER_HVECTOR,
            count,
            blocklength,
            stride as isize,
            oldtype,
            vec![count, blocklength],
            vec![stride],
            false,
        )
    })
}
const _: fn_types::MPI_Type_create_hvector = PMPI_Type_create_hvector;

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
/// displacements in elements or bytes.
unsafe fn indexed_object(
    combiner: c_int,
    count: c_int,
    block_lengths: Option<*const c_int>,
    shared_block_length: c_int,
    element_displacements: Option<*const c_int>,
    byte_displacements: Option<*const MPI_Aint>,
    oldtype: MPI_Datatype,
) -> MpiResult<TypeObject> {
    let blocks = check_count(count)?;
    let (child, layout, _) = type_ref(oldtype)?;
    let lengths: Vec<c_int> = match block_lengths {
        // SAFETY: the caller's array of `count` block lengths.
        Some(pointer) => unsafe { array(pointer, blocks, "array_of_blocklengths")? }.to_vec(),
        None => vec![shared_block_length; blocks],
    };
    let lengths_usize = lengths
        .iter()
        .map(|&length| block_length(length))
        .collect::<MpiResult<Vec<_>>>()?;
    let mut integers = vec![count];
    let mut addresses = vec![];
    match block_lengths {
        Some(_) => integers.extend(&lengths),
        None => integers.push(shared_block_length),
    }
    let displacements_bytes: Vec<isize> = match (element_displacements, byte_displacements) {
        (Some(pointer), _) => {
            // SAFETY: the caller's array of `count` displacements.
            let displacements = unsafe { array(pointer, blocks, "array_of_displacements")? };
            integers.extend(displacements);
            displacements
                .iter()
                .map(|&displacement| times_extent(displacement as isize, &layout))
                .collect::<MpiResult<_>>()?
        }
        (None, Some(pointer)) => {
            // SAFETY: the caller's array of `count` displacements.
            let displacements = unsafe { array(pointer, blocks, "array_of_displacements")? };
            addresses.extend(displacements);
            displacements
                .iter()
                .map(|&displacement| displacement as isize)
                .collect()
        }
        (None, None) => unreachable!("every indexed form has displacements"),
    };
    let new = Datatype::hindexed(&lengths_usize, &displacements_bytes, &layout)?;
    Ok(object(
        new,
        Contents {
            combiner,
            integers,
            addresses,
            datatypes: vec![child],
        },
    ))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_indexed(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct("MPI_Type_indexed", newtype, || {
        // SAFETY: the caller's arrays.
        unsafe {
            indexed_object(
                MPI_COMBINER_INDEXED,
                count,
                Some(array_of_blocklengths),
                0,
                Some(array_of_displacements),
                None,
                oldtype,
            )
        }
    })
}
const _: fn_types::MPI_Type_indexed = PMPI_Type_indexed;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_hindexed(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct("MPI_Type_create_hindexed", newtype, || {
        // SAFETY: the caller's arrays.
        unsafe {
            indexed_object(
                MPI_COMBINER_HINDEXED,
                count,
                Some(array_of_blocklengths),
                0,
                None,
                Some(array_of_displacements),
                oldtype,
            )
        }
    })
}
const _: fn_types::MPI_Type_create_hindexed = PMPI_Type_create_hindexed;

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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_indexed_block(
    count: c_int,
    blocklength: c_int,
    array_of_displacements: *const c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct("MPI_Type_create_indexed_block", newtype, || {
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
const _: fn_types::MPI_Type_create_indexed_block = PMPI_Type_create_indexed_block;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_hindexed_block(
    count: c_int,
    blocklength: c_int,
    array_of_displacements: *const MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct("MPI_Type_create_hindexed_block", newtype, || {
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
const _: fn_types::MPI_Type_create_hindexed_block = PMPI_Type_create_hindexed_block;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_struct(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const MPI_Aint,
    array_of_types: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct("MPI_Type_create_struct", newtype, || {
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
        let mut integers = vec![count];
        integers.extend(lengths);
        Ok(object(
            new,
            Contents {
                combiner: MPI_COMBINER_STRUCT,
                integers,
                addresses: displacements.to_vec(),
                datatypes: children,
            },
        ))
    })
}
const _: fn_types::MPI_Type_create_struct = PMPI_Type_create_struct;

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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_resized(
    oldtype: MPI_Datatype,
    lb: MPI_Aint,
    extent: MPI_Aint,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct("MPI_Type_create_resized", newtype, || {
        let (child, layout, _) = type_ref(oldtype)?;
        let new = Datatype::resized(&layout, lb as isize, extent as isize)?;
        Ok(object(
            new,
            Contents {
                combiner: MPI_COMBINER_RESIZED,
                integers: vec![],
                addresses: vec![lb, extent],
                datatypes: vec![child],
            },
        ))
    })
}
const _: fn_types::MPI_Type_create_resized = PMPI_Type_create_resized;

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

fn non_negative(values: &[c_int], what: &str) -> MpiResult<Vec<usize>> {
    values
        .iter()
        .map(|&value| {
            usize::try_from(value)
                .map_err(|_| MpiError::new(ErrorClass::Arg, format!("{what} {value} is negative")))
        })
        .collect()
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_subarray(
    ndims: c_int,
    array_of_sizes: *const c_int,
    array_of_subsizes: *const c_int,
    array_of_starts: *const c_int,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct("MPI_Type_create_subarray", newtype, || {
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
        let mut integers = vec![ndims];
        integers.extend(sizes);
        integers.extend(subsizes);
        integers.extend(starts);
        integers.push(order);
        Ok(object(
            new,
            Contents {
                combiner: MPI_COMBINER_SUBARRAY,
                integers,
                addresses: vec![],
                datatypes: vec![child],
            },
        ))
    })
}
const _: fn_types::MPI_Type_create_subarray = PMPI_Type_create_subarray;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_darray(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    array_of_gsizes: *const c_int,
    array_of_distribs: *const c_int,
    array_of_dargs: *const c_int,
    array_of_psizes: *const c_int,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    construct("MPI_Type_create_darray", newtype, || {
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
        let mut integers = vec![size, rank, ndims];
        integers.extend(gsizes);
        integers.extend(distribs);
        integers.extend(dargs);
        integers.extend(psizes);
        integers.push(order);
        Ok(object(
            new,
            Contents {
                combiner: MPI_COMBINER_DARRAY,
                integers,
                addresses: vec![],
                datatypes: vec![child],
            },
        ))
    })
}
const _: fn_types::MPI_Type_create_darray = PMPI_Type_create_darray;

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
