//! Datatype constructors: every MPI type constructor reduces to a list of
//! blocks (a child type repeated `count` times at a byte displacement),
//! followed for subarray, darray and resized by explicit bounds.
//!
//! Bounds follow MPI-4.0 sec. 5.1: a block of `n` copies of a type at
//! displacement `d` spans `[d + lb + min(0, (n-1) * extent), d + ub +
//! max(0, (n-1) * extent)]`; a struct's extent is padded to the largest
//! alignment of its basic types unless a member has explicit bounds.

use super::layout::{push_merged, push_run, Datatype, Segment};
use crate::{fail, ErrorClass, MpiResult};

/// `count` copies of `datatype`, one extent apart, starting `displacement_bytes` from the buffer.
#[derive(Clone, Copy, Debug)]
pub struct Block<'a> {
    /// The child type.
    pub datatype: &'a Datatype,
    /// Copies of it.
    pub count: usize,
    /// Where the first copy's origin lies.
    pub displacement_bytes: isize,
}

/// Storage order of a multidimensional array (MPI_ORDER_C / MPI_ORDER_FORTRAN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimensionOrder {
    /// Last index varies fastest.
    C,
    /// First index varies fastest.
    Fortran,
}

/// How one dimension of a distributed array is split over processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DarrayDistribution {
    /// Contiguous blocks of `block` indices (None: ceil(size / processes)).
    Block(Option<usize>),
    /// Blocks of `block` indices dealt round robin (None: 1).
    Cyclic(Option<usize>),
    /// Not distributed: every process has the whole dimension.
    None,
}

fn overflow<T>() -> MpiResult<T> {
    fail(ErrorClass::Count, "datatype size or displacement overflows")
}

/// The most segments (runs of bytes) or element runs one datatype's flat
/// representation may hold: a constructor that would need more (a vector
/// of billions of separate blocks, made with a large-count `_c`
/// constructor) fails with MPI_ERR_COUNT instead of exhausting memory.
/// Dense types of any count need one segment.
pub const MAX_FLAT_SEGMENTS: usize = 1 << 26;

fn too_many_segments<T>(segments: usize) -> MpiResult<T> {
    fail(
        ErrorClass::Count,
        format!(
            "the datatype would need {segments} separate runs of data; resmpi's flat \
             datatype representation holds at most {MAX_FLAT_SEGMENTS}"
        ),
    )
}

/// Whether `copies` copies of `child` one extent apart form one run.
fn is_dense_run(child: &Datatype) -> bool {
    matches!(child.segments.as_slice(), [only] if only.length_bytes as isize == child.extent_bytes())
}

fn checked_isize(value: usize) -> MpiResult<isize> {
    isize::try_from(value).or_else(|_| overflow())
}

impl Datatype {
    /// The type whose type map is the concatenation of `blocks` (MPI_Type_create_struct
    /// when `is_struct`, and through it every other constructor).
    pub fn from_blocks(blocks: &[Block<'_>], is_struct: bool) -> MpiResult<Datatype> {
        let mut segments: Vec<Segment> = Vec::new();
        let mut elements = Vec::new();
        let mut size_bytes = 0usize;
        let mut bounds: Option<(isize, isize)> = None;
        let mut true_bounds: Option<(isize, isize)> = None;
        let mut unit = None;
        let mut mixed = false;
        let mut alignment_bytes = 1;
        let mut explicit_bounds = false;
        for block in blocks.iter().filter(|block| block.count > 0) {
            let child = block.datatype;
            let copies = block.count;
            let extent_bytes = child.extent_bytes();
            let span_bytes = (checked_isize(copies)? - 1)
                .checked_mul(extent_bytes)
                .map_or_else(overflow, Ok)?;
            let segments_needed = if is_dense_run(child) {
                1
            } else {
                copies.saturating_mul(child.segments.len())
            };
            let element_runs_needed = if child.elements.len() == 1 {
                1
            } else {
                copies.saturating_mul(child.elements.len())
            };
            let needed = segments_needed.max(element_runs_needed);
            if segments.len().saturating_add(needed) > MAX_FLAT_SEGMENTS {
                return too_many_segments(segments.len().saturating_add(needed));
            }
            let lb = block.displacement_bytes + child.lb_bytes + span_bytes.min(0);
            let ub = block.displacement_bytes + child.ub_bytes + span_bytes.max(0);
            bounds = Some(bounds.map_or((lb, ub), |(low, high)| (low.min(lb), high.max(ub))));
            if child.size_bytes > 0 {
                let true_lb = block.displacement_bytes + child.true_lb_bytes + span_bytes.min(0);
                let true_ub = block.displacement_bytes + child.true_ub_bytes + span_bytes.max(0);
                true_bounds = Some(true_bounds.map_or((true_lb, true_ub), |(low, high)| {
                    (low.min(true_lb), high.max(true_ub))
                }));
            }
            size_bytes = child
                .size_bytes
                .checked_mul(copies)
                .and_then(|bytes| bytes.checked_add(size_bytes))
                .map_or_else(overflow, Ok)?;
            append_copies(&mut segments, child, block.displacement_bytes, copies);
            append_element_runs(&mut elements, child, copies);
            if child.size_bytes > 0 {
                match (unit, child.unit) {
                    (_, None) => mixed = true,
                    (None, Some(child_unit)) => unit = Some(child_unit),
                    (Some(own), Some(child_unit)) if own != child_unit => mixed = true,
                    _ => {}
                }
            }
            alignment_bytes = alignment_bytes.max(child.alignment_bytes);
            explicit_bounds |= child.explicit_bounds;
        }
        let (lb_bytes, mut ub_bytes) = bounds.unwrap_or((0, 0));
        if is_struct && !explicit_bounds && alignment_bytes > 1 {
            let extent_bytes = ub_bytes - lb_bytes;
            let align = alignment_bytes as isize;
            ub_bytes += (align - extent_bytes.rem_euclid(align)) % align;
        }
        let (true_lb_bytes, true_ub_bytes) = true_bounds.unwrap_or((0, 0));
        Ok(Datatype {
            size_bytes,
            lb_bytes,
            ub_bytes,
            true_lb_bytes,
            true_ub_bytes,
            segments,
            elements,
            unit: if mixed { None } else { unit },
            alignment_bytes,
            explicit_bounds,
            packed_starts: Default::default(),
        })
    }

    /// MPI_Type_contiguous.
    pub fn contiguous(count: usize, child: &Datatype) -> MpiResult<Datatype> {
        Datatype::from_blocks(
            &[Block {
                datatype: child,
                count,
                displacement_bytes: 0,
            }],
            false,
        )
    }

    /// MPI_Type_create_hvector (and MPI_Type_vector with the stride times the extent).
    pub fn hvector(
        count: usize,
        block_length: usize,
        stride_bytes: isize,
        child: &Datatype,
    ) -> MpiResult<Datatype> {
        if is_dense_run(child) && block_length > 0 {
            let block_bytes = (block_length as isize).checked_mul(child.extent_bytes());
            if block_bytes == Some(stride_bytes) {
                // Blocks that touch: one contiguous run of every element
                // (whatever the count), with the same type map.
                let block = Datatype::contiguous(block_length, child)?;
                return Datatype::contiguous(count, &block);
            }
        }
        if count > MAX_FLAT_SEGMENTS {
            return too_many_segments(count);
        }
        let displacements = (0..count)
            .map(|i| {
                (i as isize)
                    .checked_mul(stride_bytes)
                    .map_or_else(overflow, Ok)
            })
            .collect::<MpiResult<Vec<_>>>()?;
        let blocks: Vec<Block> = displacements
            .into_iter()
            .map(|displacement_bytes| Block {
                datatype: child,
                count: block_length,
                displacement_bytes,
            })
            .collect();
        Datatype::from_blocks(&blocks, false)
    }

    /// MPI_Type_create_hindexed (indexed forms multiply displacements by the extent first).
    pub fn hindexed(
        block_lengths: &[usize],
        displacements_bytes: &[isize],
        child: &Datatype,
    ) -> MpiResult<Datatype> {
        let blocks: Vec<Block> = block_lengths
            .iter()
            .zip(displacements_bytes)
            .map(|(&count, &displacement_bytes)| Block {
                datatype: child,
                count,
                displacement_bytes,
            })
            .collect();
        Datatype::from_blocks(&blocks, false)
    }

    /// MPI_Type_create_resized: same data, bounds `[lb, lb + extent)`.
    pub fn resized(child: &Datatype, lb_bytes: isize, extent_bytes: isize) -> MpiResult<Datatype> {
        let ub_bytes = lb_bytes
            .checked_add(extent_bytes)
            .map_or_else(overflow, Ok)?;
        Ok(Datatype {
            lb_bytes,
            ub_bytes,
            explicit_bounds: true,
            packed_starts: Default::default(),
            ..child.clone()
        })
    }

    /// MPI_Type_create_subarray: the `subsizes` box at `starts` of an
    /// array of `sizes`, extent the whole array.
    pub fn subarray(
        sizes: &[usize],
        subsizes: &[usize],
        starts: &[usize],
        order: DimensionOrder,
        child: &Datatype,
    ) -> MpiResult<Datatype> {
        if sizes.is_empty() || sizes.len() != subsizes.len() || sizes.len() != starts.len() {
            return fail(
                ErrorClass::Arg,
                "subarray needs ndims >= 1 sizes, subsizes and starts",
            );
        }
        for (dimension, ((&size, &subsize), &start)) in
            sizes.iter().zip(subsizes).zip(starts).enumerate()
        {
            if size == 0 || subsize == 0 || start.checked_add(subsize).is_none_or(|end| end > size)
            {
                return fail(
                    ErrorClass::Arg,
                    format!("subarray dimension {dimension}: size {size}, subsize {subsize}, start {start} do not fit (need size >= 1, subsize >= 1, start + subsize <= size)"),
                );
            }
        }
        let runs: Vec<Vec<(usize, usize)>> = subsizes
            .iter()
            .zip(starts)
            .map(|(&subsize, &start)| vec![(start, subsize)])
            .collect();
        Datatype::grid(sizes, &runs, order, child)
    }

    /// MPI_Type_create_darray for process `rank` of a `process_sizes` grid
    /// (row-major ranks, as the standard says, whatever the array order).
    pub fn darray(
        rank: usize,
        global_sizes: &[usize],
        distributions: &[DarrayDistribution],
        process_sizes: &[usize],
        order: DimensionOrder,
        child: &Datatype,
    ) -> MpiResult<Datatype> {
        let dimensions = global_sizes.len();
        if dimensions == 0 || distributions.len() != dimensions || process_sizes.len() != dimensions
        {
            return fail(
                ErrorClass::Arg,
                "darray needs ndims >= 1 gsizes, distribs, dargs and psizes",
            );
        }
        let grid_size: usize = process_sizes.iter().product();
        if rank >= grid_size {
            return fail(
                ErrorClass::Arg,
                format!("darray: rank {rank} is outside the process grid of {grid_size}"),
            );
        }
        let mut coordinates = vec![0; dimensions];
        let mut rest = rank;
        for dimension in (0..dimensions).rev() {
            coordinates[dimension] = rest % process_sizes[dimension];
            rest /= process_sizes[dimension];
        }
        let mut runs = Vec::with_capacity(dimensions);
        for dimension in 0..dimensions {
            let size = global_sizes[dimension];
            let processes = process_sizes[dimension];
            let coordinate = coordinates[dimension];
            let mut dimension_runs = Vec::new();
            match distributions[dimension] {
                DarrayDistribution::None => {
                    if processes != 1 {
                        return fail(ErrorClass::Arg, format!("darray dimension {dimension}: MPI_DISTRIBUTE_NONE needs psize 1, not {processes}"));
                    }
                    dimension_runs.push((0, size));
                }
                DarrayDistribution::Block(block) => {
                    let block = block.unwrap_or(size.div_ceil(processes));
                    if block == 0
                        || block
                            .checked_mul(processes)
                            .is_none_or(|covered| covered < size)
                    {
                        return fail(ErrorClass::Arg, format!("darray dimension {dimension}: block {block} x {processes} processes does not cover {size}"));
                    }
                    let start = (coordinate * block).min(size);
                    let end = (start + block).min(size);
                    if end > start {
                        dimension_runs.push((start, end - start));
                    }
                }
                DarrayDistribution::Cyclic(block) => {
                    let block = block.unwrap_or(1);
                    if block == 0 {
                        return fail(
                            ErrorClass::Arg,
                            format!("darray dimension {dimension}: cyclic block 0"),
                        );
                    }
                    let mut start = coordinate * block;
                    while start < size {
                        dimension_runs.push((start, block.min(size - start)));
                        start += block * processes;
                    }
                }
            }
            runs.push(dimension_runs);
        }
        Datatype::grid(global_sizes, &runs, order, child)
    }

    /// The elements of an array of `sizes` whose index in each dimension
    /// lies in one of that dimension's `(start, length)` runs, in array
    /// order; bounds are the whole array.
    fn grid(
        sizes: &[usize],
        runs: &[Vec<(usize, usize)>],
        order: DimensionOrder,
        child: &Datatype,
    ) -> MpiResult<Datatype> {
        // Dimensions from slowest to fastest varying.
        let mut dimensions: Vec<usize> = (0..sizes.len()).collect();
        if order == DimensionOrder::Fortran {
            dimensions.reverse();
        }
        let extent_bytes = child.extent_bytes();
        let mut strides_bytes = vec![0isize; sizes.len()];
        let mut stride_bytes = extent_bytes;
        for &dimension in dimensions.iter().rev() {
            strides_bytes[dimension] = stride_bytes;
            stride_bytes = stride_bytes
                .checked_mul(checked_isize(sizes[dimension])?)
                .map_or_else(overflow, Ok)?;
        }
        let array_extent_bytes = stride_bytes;
        let (&fastest, outer) = dimensions.split_last().expect("at least one dimension");
        // Every index combination of the outer dimensions, in order.
        let outer_indices: Vec<Vec<usize>> = outer
            .iter()
            .map(|&dimension| {
                runs[dimension]
                    .iter()
                    .flat_map(|&(start, length)| start..start + length)
                    .collect()
            })
            .collect();
        let mut blocks_spec: Vec<(isize, usize)> = Vec::new();
        let empty = outer_indices.iter().any(Vec::is_empty) || runs[fastest].is_empty();
        if !empty {
            let mut odometer = vec![0usize; outer.len()];
            'combinations: loop {
                let mut base_bytes = 0isize;
                for (position, &dimension) in outer.iter().enumerate() {
                    let index = outer_indices[position][odometer[position]] as isize;
                    base_bytes += index * strides_bytes[dimension];
                }
                for &(start, length) in &runs[fastest] {
                    blocks_spec
                        .push((base_bytes + start as isize * strides_bytes[fastest], length));
                }
                // Advance the odometer, last outer dimension fastest.
                let mut position = outer.len();
                loop {
                    if position == 0 {
                        break 'combinations;
                    }
                    position -= 1;
                    odometer[position] += 1;
                    if odometer[position] < outer_indices[position].len() {
                        continue 'combinations;
                    }
                    odometer[position] = 0;
                }
            }
        }
        let blocks: Vec<Block> = blocks_spec
            .iter()
            .map(|&(displacement_bytes, count)| Block {
                datatype: child,
                count,
                displacement_bytes,
            })
            .collect();
        let inner = Datatype::from_blocks(&blocks, false)?;
        Datatype::resized(&inner, 0, array_extent_bytes)
    }
}

/// Append `copies` copies of `child`'s segments, one extent apart, at `displacement_bytes`.
fn append_copies(
    segments: &mut Vec<Segment>,
    child: &Datatype,
    displacement_bytes: isize,
    copies: usize,
) {
    let extent_bytes = child.extent_bytes();
    if let [only] = child.segments.as_slice() {
        if only.length_bytes as isize == extent_bytes {
            // Dense child: the copies form one run.
            push_merged(
                segments,
                Segment {
                    offset_bytes: displacement_bytes + only.offset_bytes,
                    length_bytes: only.length_bytes * copies,
                },
            );
            return;
        }
    }
    for copy in 0..copies {
        let shift_bytes = displacement_bytes + copy as isize * extent_bytes;
        for segment in &child.segments {
            push_merged(
                segments,
                Segment {
                    offset_bytes: segment.offset_bytes + shift_bytes,
                    length_bytes: segment.length_bytes,
                },
            );
        }
    }
}

/// Append the basic elements of `copies` copies of `child`.
fn append_element_runs(elements: &mut Vec<super::ElementRun>, child: &Datatype, copies: usize) {
    if let [only] = child.elements.as_slice() {
        push_run(
            elements,
            super::ElementRun {
                count: only.count * copies,
                ..*only
            },
        );
        return;
    }
    for _ in 0..copies {
        for run in &child.elements {
            push_run(elements, *run);
        }
    }
}
