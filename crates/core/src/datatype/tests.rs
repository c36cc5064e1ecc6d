use super::*;

fn int() -> Datatype {
    Datatype::basic(TypeInfo::basic(4, BasicKind::I32), 4)
}

fn double() -> Datatype {
    Datatype::basic(TypeInfo::basic(8, BasicKind::F64), 8)
}

fn char_type() -> Datatype {
    Datatype::basic(TypeInfo::basic(1, BasicKind::Char), 1)
}

fn segments(datatype: &Datatype) -> Vec<(isize, usize)> {
    datatype
        .segments
        .iter()
        .map(|segment| (segment.offset_bytes, segment.length_bytes))
        .collect()
}

fn pack_all(datatype: &Datatype, buffer: &[u8], count: usize) -> Vec<u8> {
    let mut packed = vec![0u8; datatype.size_bytes * count];
    // SAFETY: the test buffers cover every element of these layouts.
    unsafe { datatype.pack(buffer.as_ptr(), count, 0, &mut packed) };
    packed
}

#[test]
fn contiguous_of_contiguous_is_one_segment() {
    let five = Datatype::contiguous(5, &int()).unwrap();
    let twice = Datatype::contiguous(2, &five).unwrap();
    assert_eq!(segments(&twice), vec![(0, 40)]);
    assert_eq!(twice.size_bytes, 40);
    assert_eq!(twice.extent_bytes(), 40);
    assert_eq!(twice.basic_elements(), 10);
    assert_eq!(twice.contiguous_span(3), Some((0, 120)));
    assert_eq!(twice.unit, Some(TypeInfo::basic(4, BasicKind::I32)));
}

#[test]
fn vector_has_one_segment_per_block_and_extent_ends_at_last_block() {
    // 3 blocks of 2 ints, stride 5 ints.
    let vector = Datatype::hvector(3, 2, 20, &int()).unwrap();
    assert_eq!(segments(&vector), vec![(0, 8), (20, 8), (40, 8)]);
    assert_eq!(vector.size_bytes, 24);
    assert_eq!((vector.lb_bytes, vector.ub_bytes), (0, 48));
    assert_eq!(vector.contiguous_span(1), None);
    // A vector whose stride equals the block is contiguous.
    let dense = Datatype::hvector(4, 2, 8, &int()).unwrap();
    assert_eq!(segments(&dense), vec![(0, 32)]);
}

#[test]
fn negative_stride_puts_lower_bound_below_zero() {
    let vector = Datatype::hvector(3, 1, -8, &int()).unwrap();
    assert_eq!(segments(&vector), vec![(0, 4), (-8, 4), (-16, 4)]);
    assert_eq!((vector.lb_bytes, vector.ub_bytes), (-16, 4));
    assert_eq!((vector.true_lb_bytes, vector.true_ub_bytes), (-16, 4));
}

#[test]
fn struct_pads_extent_to_alignment_unless_resized() {
    let blocks = [
        Block {
            datatype: &double(),
            count: 1,
            displacement_bytes: 0,
        },
        Block {
            datatype: &char_type(),
            count: 1,
            displacement_bytes: 8,
        },
    ];
    let record = Datatype::from_blocks(&blocks, true).unwrap();
    assert_eq!(record.size_bytes, 9);
    assert_eq!(record.extent_bytes(), 16);
    assert_eq!(record.true_extent_bytes(), 9);
    assert_eq!(record.unit, None);
    assert_eq!(record.elements_in(8), 1);
    assert_eq!(record.elements_in(9), 2);
    assert_eq!(record.elements_in(9 + 8), 3);
}

#[test]
fn resized_keeps_data_and_moves_bounds() {
    let resized = Datatype::resized(&int(), -4, 16).unwrap();
    assert_eq!((resized.lb_bytes, resized.ub_bytes), (-4, 12));
    assert_eq!((resized.true_lb_bytes, resized.true_ub_bytes), (0, 4));
    let three = Datatype::contiguous(3, &resized).unwrap();
    assert_eq!(segments(&three), vec![(0, 4), (16, 4), (32, 4)]);
    assert_eq!((three.lb_bytes, three.ub_bytes), (-4, 44));
}

#[test]
fn pack_and_unpack_round_trip_and_leave_gaps_alone() {
    let vector = Datatype::hvector(3, 2, 20, &int()).unwrap();
    let source: Vec<u8> = (0..96u8).collect();
    let packed = pack_all(&vector, &source, 2);
    let expected: Vec<u8> = [0..8, 20..28, 40..48, 48..56, 68..76, 88..96]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(packed, expected);
    let mut target = vec![0xeeu8; 96];
    // SAFETY: `target` covers two elements.
    unsafe { vector.unpack(target.as_mut_ptr(), 2, 0, &packed) };
    for (i, byte) in target.iter().enumerate() {
        let in_data = expected.contains(&(i as u8));
        assert_eq!(*byte, if in_data { i as u8 } else { 0xee }, "byte {i}");
    }
}

#[test]
fn pack_from_any_position_matches_the_whole() {
    let vector = Datatype::hvector(3, 3, 7, &char_type()).unwrap();
    let source: Vec<u8> = (0..64u8).collect();
    let whole = pack_all(&vector, &source, 3);
    for start in 0..whole.len() {
        for length in 0..=whole.len() - start {
            let mut piece = vec![0u8; length];
            // SAFETY: `source` covers three elements.
            unsafe { vector.pack(source.as_ptr(), 3, start, &mut piece) };
            assert_eq!(
                piece,
                whole[start..start + length],
                "start {start} length {length}"
            );
        }
    }
}

#[test]
fn partial_unpack_fills_only_the_received_prefix() {
    let vector = Datatype::hvector(2, 1, 8, &int()).unwrap();
    let packed: Vec<u8> = (1..=6u8).collect(); // 1.5 elements of 8 packed bytes
    let mut target = vec![0u8; 32];
    // SAFETY: `target` covers two elements (extent 12).
    unsafe { vector.unpack(target.as_mut_ptr(), 2, 0, &packed) };
    assert_eq!(&target[0..4], &[1, 2, 3, 4]);
    assert_eq!(&target[8..12], &[5, 6, 0, 0]);
    assert!(target[4..8]
        .iter()
        .chain(&target[12..])
        .all(|byte| *byte == 0));
}

#[test]
fn subarray_c_and_fortran_orders() {
    // 4x5 array of chars, 2x3 box at (1, 2).
    let c = Datatype::subarray(&[4, 5], &[2, 3], &[1, 2], DimensionOrder::C, &char_type()).unwrap();
    assert_eq!(segments(&c), vec![(7, 3), (12, 3)]);
    assert_eq!((c.lb_bytes, c.extent_bytes()), (0, 20));
    assert_eq!((c.true_lb_bytes, c.true_ub_bytes), (7, 15));
    // Fortran: first index fastest; element (i, j) at i + 4 j.
    let fortran = Datatype::subarray(
        &[4, 5],
        &[2, 3],
        &[1, 2],
        DimensionOrder::Fortran,
        &char_type(),
    )
    .unwrap();
    assert_eq!(segments(&fortran), vec![(9, 2), (13, 2), (17, 2)]);
    assert!(Datatype::subarray(&[4], &[3], &[2], DimensionOrder::C, &char_type()).is_err());
}

#[test]
fn darray_block_and_cyclic_cover_the_array_once() {
    // 2x3 process grid over a 6x7 array: dimension 0 block, dimension 1 cyclic(2).
    let global = [6, 7];
    let distributions = [
        DarrayDistribution::Block(None),
        DarrayDistribution::Cyclic(Some(2)),
    ];
    let mut owner = [usize::MAX; 42];
    for rank in 0..6 {
        let piece = Datatype::darray(
            rank,
            &global,
            &distributions,
            &[2, 3],
            DimensionOrder::C,
            &char_type(),
        )
        .unwrap();
        assert_eq!(piece.extent_bytes(), 42);
        for segment in &piece.segments {
            for byte in segment.offset_bytes..segment.end_bytes() {
                assert_eq!(owner[byte as usize], usize::MAX, "byte {byte} owned twice");
                owner[byte as usize] = rank;
            }
        }
    }
    // Rank 1 is grid (0, 1): rows 0..3, columns 2, 3 (cyclic blocks of 2 over 3 processes).
    for row in 0..6 {
        for column in 0..7 {
            let expected = (row / 3) * 3 + (column / 2) % 3;
            assert_eq!(owner[row * 7 + column], expected, "({row}, {column})");
        }
    }
    assert!(Datatype::darray(
        0,
        &[10],
        &[DarrayDistribution::Block(Some(2))],
        &[2],
        DimensionOrder::C,
        &char_type()
    )
    .is_err());
}

#[test]
fn pair_types_have_holes_and_two_elements() {
    let double_int = Datatype::pair(
        TypeInfo {
            size_bytes: 12,
            extent_bytes: 16,
            basic_elements: 2,
            kind: BasicKind::Pair(PairValue::F64),
        },
        8,
    );
    assert_eq!(segments(&double_int), vec![(0, 12)]);
    assert_eq!(double_int.contiguous_span(2), None);
    assert_eq!(double_int.elements_in(24), 4);
    let short_int = Datatype::pair(
        TypeInfo {
            size_bytes: 6,
            extent_bytes: 8,
            basic_elements: 2,
            kind: BasicKind::Pair(PairValue::I16),
        },
        2,
    );
    assert_eq!(segments(&short_int), vec![(0, 2), (4, 4)]);
}

#[test]
fn empty_types_have_no_data() {
    let nothing = Datatype::contiguous(0, &int()).unwrap();
    assert_eq!(nothing.size_bytes, 0);
    assert_eq!(nothing.extent_bytes(), 0);
    assert_eq!(nothing.contiguous_span(10), Some((0, 0)));
    assert_eq!(nothing.elements_in(0), 0);
}

#[test]
fn vector_of_touching_blocks_is_one_run_at_any_count() {
    // 3e9 blocks of one double, stride one double: a large-count vector
    // with no memory behind its type map.
    let count = 3_000_000_000usize;
    let vector = Datatype::hvector(count, 1, 8, &double()).unwrap();
    assert_eq!(segments(&vector), vec![(0, 8 * count)]);
    assert_eq!(vector.size_bytes, 8 * count);
    assert_eq!(vector.extent_bytes(), 8 * count as isize);
    assert_eq!(vector.basic_elements(), count);
    // the same as the general path for a small count
    let small = Datatype::hvector(3, 2, 8, &int()).unwrap();
    assert_eq!(segments(&small), vec![(0, 24)]);
    assert_eq!((small.lb_bytes, small.ub_bytes), (0, 24));
}

#[test]
fn vector_of_too_many_separate_blocks_is_mpi_err_count() {
    let error = Datatype::hvector(MAX_FLAT_SEGMENTS + 1, 1, 16, &int()).unwrap_err();
    assert_eq!(error.class, crate::ErrorClass::Count);
    let strided = Datatype::hvector(4, 1, 16, &int()).unwrap();
    let error = Datatype::contiguous(MAX_FLAT_SEGMENTS, &strided).unwrap_err();
    assert_eq!(error.class, crate::ErrorClass::Count);
    assert!(
        error.to_string().contains("flat datatype representation"),
        "{error}"
    );
}

#[test]
fn external32_sizes_follow_the_predefined_type_through_derived_types() {
    let narrow_long = External32::Narrow {
        bytes: 4,
        signed: true,
    };
    let long =
        Datatype::basic(TypeInfo::basic(8, BasicKind::I64), 8).with_external32_first(narrow_long);
    let long_long = Datatype::basic(TypeInfo::basic(8, BasicKind::I64), 8);
    assert!(long.narrows_in_external32());
    assert!(!long_long.narrows_in_external32());
    assert_eq!(
        (
            long.external32_size_bytes(),
            long_long.external32_size_bytes()
        ),
        (4, 8)
    );
    // Three longs merge into one run that keeps the narrowing.
    let three = Datatype::contiguous(3, &long).unwrap();
    assert_eq!(three.elements.len(), 1);
    assert_eq!((three.size_bytes, three.external32_size_bytes()), (24, 12));
    // A long beside a long long of the same native size stays two runs.
    let both = Datatype::from_blocks(
        &[
            Block {
                datatype: &long,
                count: 2,
                displacement_bytes: 0,
            },
            Block {
                datatype: &long_long,
                count: 1,
                displacement_bytes: 16,
            },
        ],
        true,
    )
    .unwrap();
    assert_eq!(both.elements.len(), 2);
    assert_eq!((both.size_bytes, both.external32_size_bytes()), (24, 16));
    // Narrowing the first of several elements splits the run.
    let pair = Datatype::contiguous(2, &long_long)
        .unwrap()
        .with_external32_first(narrow_long);
    assert_eq!(pair.elements.len(), 2);
    assert_eq!(pair.external32_size_bytes(), 12);
}
