//! Reduction operators: the predefined MPI ops on every basic kind the
//! standard allows, and user functions.
//!
//! Kernels work on byte slices holding `count` elements of one kind and
//! combine `input` into `inout` (`inout = input op inout`, MPI's order).
//! Values are read and written unaligned so any user buffer works.

use crate::datatype::{BasicKind, PairValue, TypeInfo};
use crate::error::{fail, ErrorClass, MpiResult};

/// A C user reduction function: `(invec, inoutvec, len, datatype)`, with
/// an `int` length (MPI_Op_create) or an `MPI_Count` one (MPI_Op_create_c).
#[derive(Clone, Copy, Debug)]
pub enum UserFunction {
    /// `MPI_User_function`.
    Int(unsafe extern "C" fn(*mut std::ffi::c_void, *mut std::ffi::c_void, *mut i32, *mut i32)),
    /// `MPI_User_function_c`.
    Large(
        unsafe extern "C" fn(
            *mut std::ffi::c_void,
            *mut std::ffi::c_void,
            *mut std::ffi::c_long,
            *mut i32,
        ),
    ),
}

/// A reduction operator.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub enum Op {
    Max,
    Min,
    Sum,
    Prod,
    LogicalAnd,
    BitwiseAnd,
    LogicalOr,
    BitwiseOr,
    LogicalXor,
    BitwiseXor,
    MinLoc,
    MaxLoc,
    Replace,
    NoOp,
    /// A user op: the function, whether it commutes, and the datatype handle
    /// to pass back to it.
    User {
        function: UserFunction,
        commutative: bool,
    },
}

impl Op {
    /// Whether operands may be combined in any order.
    pub fn is_commutative(&self) -> bool {
        match self {
            Op::User { commutative, .. } => *commutative,
            _ => true,
        }
    }
}

extern "C" {
    fn resmpi_long_double_reduce(op: i32, input: *const u8, inout: *mut u8, count: usize) -> i32;
    fn resmpi_long_double_complex_reduce(
        op: i32,
        input: *const u8,
        inout: *mut u8,
        count: usize,
    ) -> i32;
    fn resmpi_long_double_int_loc(
        is_max: i32,
        input: *const u8,
        inout: *mut u8,
        count: usize,
    ) -> i32;
}

trait Element: Copy {
    const SIZE: usize;
    fn load(bytes: &[u8]) -> Self;
    fn store(self, bytes: &mut [u8]);
}

macro_rules! element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline]
            fn load(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes[..Self::SIZE].try_into().unwrap())
            }
            #[inline]
            fn store(self, bytes: &mut [u8]) {
                bytes[..Self::SIZE].copy_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}
element!(i8, u8, i16, u16, i32, u32, i64, u64, f32, f64);

#[inline]
fn combine<T: Element>(input: &[u8], inout: &mut [u8], count: usize, f: impl Fn(T, T) -> T) {
    for index in 0..count {
        let at = index * T::SIZE;
        let value = f(T::load(&input[at..]), T::load(&inout[at..]));
        value.store(&mut inout[at..]);
    }
}

/// A predefined op's loop over one basic kind, chosen once per call:
/// `inout = input op inout` over equal-length slices of whole elements.
pub type Kernel = fn(&[u8], &mut [u8]);

/// `combine` over slices of whole elements, without per-element bounds
/// checks (the loop the compiler can vectorise).
#[inline(always)]
fn combine_exact<T: Element>(input: &[u8], inout: &mut [u8], f: impl Fn(T, T) -> T) {
    for (a, b) in input
        .chunks_exact(T::SIZE)
        .zip(inout.chunks_exact_mut(T::SIZE))
    {
        f(T::load(a), T::load(b)).store(b);
    }
}

macro_rules! kernels {
    ($($name:ident: $t:ty, $f:expr;)*) => {$(
        fn $name(input: &[u8], inout: &mut [u8]) {
            combine_exact::<$t>(input, inout, $f)
        }
    )*};
}

kernels! {
    sum_i32: i32, |a, b| a.wrapping_add(b);
    sum_u32: u32, |a, b| a.wrapping_add(b);
    sum_i64: i64, |a, b| a.wrapping_add(b);
    sum_u64: u64, |a, b| a.wrapping_add(b);
    sum_f32: f32, |a, b| a + b;
    sum_f64: f64, |a, b| a + b;
    max_i32: i32, |a, b| a.max(b);
    max_i64: i64, |a, b| a.max(b);
    max_f32: f32, |a, b| if a > b { a } else { b };
    max_f64: f64, |a, b| if a > b { a } else { b };
    min_i32: i32, |a, b| a.min(b);
    min_i64: i64, |a, b| a.min(b);
    min_f32: f32, |a, b| if a < b { a } else { b };
    min_f64: f64, |a, b| if a < b { a } else { b };
    prod_f64: f64, |a, b| a * b;
    prod_i32: i32, |a, b| a.wrapping_mul(b);
    bor_i32: i32, |a, b| a | b;
    band_i32: i32, |a, b| a & b;
    land_i32: i32, |a, b| ((a != 0) && (b != 0)) as i32;
    lor_i32: i32, |a, b| ((a != 0) || (b != 0)) as i32;
}

/// The kernel of the (op, kind) pairs applications use most (sums,
/// extrema and products of 32/64-bit integers and floats, bit and logical
/// ops on `int`): a reduction of a few elements then costs its loop and
/// not the dispatch. None for every other pair, which
/// [`reduce_predefined`] handles; each pair here is one the standard
/// allows, with the same semantics as there (the unit tests compare).
#[inline]
pub fn kernel(op: Op, kind: BasicKind) -> Option<Kernel> {
    use BasicKind as K;
    Some(match (op, kind) {
        (Op::Sum, K::I32) => sum_i32,
        (Op::Sum, K::U32) => sum_u32,
        (Op::Sum, K::I64) => sum_i64,
        (Op::Sum, K::U64) => sum_u64,
        (Op::Sum, K::F32) => sum_f32,
        (Op::Sum, K::F64) => sum_f64,
        (Op::Max, K::I32) => max_i32,
        (Op::Max, K::I64) => max_i64,
        (Op::Max, K::F32) => max_f32,
        (Op::Max, K::F64) => max_f64,
        (Op::Min, K::I32) => min_i32,
        (Op::Min, K::I64) => min_i64,
        (Op::Min, K::F32) => min_f32,
        (Op::Min, K::F64) => min_f64,
        (Op::Prod, K::F64) => prod_f64,
        (Op::Prod, K::I32) => prod_i32,
        (Op::BitwiseOr, K::I32) => bor_i32,
        (Op::BitwiseAnd, K::I32) => band_i32,
        (Op::LogicalAnd, K::I32) => land_i32,
        (Op::LogicalOr, K::I32) => lor_i32,
        _ => return None,
    })
}

macro_rules! integer_op {
    ($t:ty, $op:expr, $input:expr, $inout:expr, $count:expr) => {{
        let (input, inout, count) = ($input, $inout, $count);
        match $op {
            Op::Max => combine::<$t>(input, inout, count, |a, b| a.max(b)),
            Op::Min => combine::<$t>(input, inout, count, |a, b| a.min(b)),
            Op::Sum => combine::<$t>(input, inout, count, |a, b| a.wrapping_add(b)),
            Op::Prod => combine::<$t>(input, inout, count, |a, b| a.wrapping_mul(b)),
            Op::LogicalAnd => {
                combine::<$t>(input, inout, count, |a, b| ((a != 0) && (b != 0)) as $t)
            }
            Op::LogicalOr => {
                combine::<$t>(input, inout, count, |a, b| ((a != 0) || (b != 0)) as $t)
            }
            Op::LogicalXor => {
                combine::<$t>(input, inout, count, |a, b| ((a != 0) != (b != 0)) as $t)
            }
            Op::BitwiseAnd => combine::<$t>(input, inout, count, |a, b| a & b),
            Op::BitwiseOr => combine::<$t>(input, inout, count, |a, b| a | b),
            Op::BitwiseXor => combine::<$t>(input, inout, count, |a, b| a ^ b),
            _ => return unsupported($op),
        }
        Ok(())
    }};
}

macro_rules! float_op {
    ($t:ty, $op:expr, $input:expr, $inout:expr, $count:expr) => {{
        let (input, inout, count) = ($input, $inout, $count);
        match $op {
            Op::Max => combine::<$t>(input, inout, count, |a, b| if a > b { a } else { b }),
            Op::Min => combine::<$t>(input, inout, count, |a, b| if a < b { a } else { b }),
            Op::Sum => combine::<$t>(input, inout, count, |a, b| a + b),
            Op::Prod => combine::<$t>(input, inout, count, |a, b| a * b),
            _ => return unsupported($op),
        }
        Ok(())
    }};
}

fn unsupported<T>(op: Op) -> MpiResult<T> {
    fail(
        ErrorClass::Op,
        format!("{op:?} is not defined on this datatype"),
    )
}

fn complex_op<
    T: Element + std::ops::Add<Output = T> + std::ops::Sub<Output = T> + std::ops::Mul<Output = T>,
>(
    op: Op,
    input: &[u8],
    inout: &mut [u8],
    count: usize,
) -> MpiResult<()> {
    let size = T::SIZE;
    for index in 0..count {
        let at = index * 2 * size;
        let (ar, ai) = (T::load(&input[at..]), T::load(&input[at + size..]));
        let (br, bi) = (T::load(&inout[at..]), T::load(&inout[at + size..]));
        let (real, imaginary) = match op {
            Op::Sum => (ar + br, ai + bi),
            Op::Prod => (ar * br - ai * bi, ar * bi + ai * br),
            _ => return unsupported(op),
        };
        real.store(&mut inout[at..]);
        imaginary.store(&mut inout[at + size..]);
    }
    Ok(())
}

fn pair_loc<T: Element + PartialOrd>(
    is_max: bool,
    extent: usize,
    input: &[u8],
    inout: &mut [u8],
    count: usize,
) {
    // The int index follows the value, aligned to 4 bytes.
    let index_at = T::SIZE.max(4);
    for element in 0..count {
        let at = element * extent;
        let (a, b) = (T::load(&input[at..]), T::load(&inout[at..]));
        let a_index = i32::load(&input[at + index_at..]);
        let b_index = i32::load(&inout[at + index_at..]);
        let better = if is_max { a > b } else { a < b };
        if better || (a == b && a_index < b_index) {
            let (source, target) = (&input[at..at + extent], &mut inout[at..at + extent]);
            target.copy_from_slice(source);
        }
    }
}

/// Which predefined ops the standard defines on each kind of type (MPI-4.0
/// section 6.9.2): MAX/MIN on integers and floating point, SUM/PROD also on
/// complex, the logical ops on integers and logicals, the bitwise ops on
/// integers and bytes, MINLOC/MAXLOC on the pair types. REPLACE and NO_OP
/// apply to anything. `char` counts as an integer, as in MPICH.
pub fn check_op_type(op: Op, info: &TypeInfo) -> MpiResult<()> {
    use BasicKind as K;
    let integer = matches!(
        info.kind,
        K::I8 | K::U8 | K::I16 | K::U16 | K::I32 | K::U32 | K::I64 | K::U64 | K::Char
    );
    let floating = matches!(info.kind, K::F32 | K::F64 | K::LongDouble);
    let complex = matches!(
        info.kind,
        K::ComplexF32 | K::ComplexF64 | K::ComplexLongDouble
    );
    let allowed = match op {
        Op::Max | Op::Min => integer || floating,
        Op::Sum | Op::Prod => integer || floating || complex,
        Op::LogicalAnd | Op::LogicalOr | Op::LogicalXor => integer || info.kind == K::Bool,
        Op::BitwiseAnd | Op::BitwiseOr | Op::BitwiseXor => integer || info.kind == K::Byte,
        Op::MinLoc | Op::MaxLoc => matches!(info.kind, K::Pair(_)),
        Op::Replace | Op::NoOp | Op::User { .. } => true,
    };
    if allowed {
        Ok(())
    } else {
        unsupported(op)
    }
}

/// Combine `count` elements of `info` from `input` into `inout` with a predefined op.
pub fn reduce_predefined(
    op: Op,
    info: &TypeInfo,
    input: &[u8],
    inout: &mut [u8],
    count: usize,
) -> MpiResult<()> {
    let needed = info.extent_bytes * count;
    if input.len() < needed || inout.len() < needed {
        return fail(ErrorClass::Intern, "reduction buffers shorter than count");
    }
    if info.size_bytes == info.extent_bytes {
        if let Some(kernel) = kernel(op, info.kind) {
            kernel(&input[..needed], &mut inout[..needed]);
            return Ok(());
        }
    }
    reduce_by_kind(op, info, input, inout, count)
}

/// [`reduce_predefined`] for every pair, by the op and the kind (buffer
/// lengths already checked).
fn reduce_by_kind(
    op: Op,
    info: &TypeInfo,
    input: &[u8],
    inout: &mut [u8],
    count: usize,
) -> MpiResult<()> {
    check_op_type(op, info)?;
    let needed = info.extent_bytes * count;
    match op {
        Op::NoOp => return Ok(()),
        Op::Replace => {
            inout[..needed].copy_from_slice(&input[..needed]);
            return Ok(());
        }
        Op::User { .. } => {
            return fail(ErrorClass::Intern, "user op passed to a predefined kernel")
        }
        _ => {}
    }
    if matches!(op, Op::MinLoc | Op::MaxLoc) {
        let is_max = matches!(op, Op::MaxLoc);
        let BasicKind::Pair(value) = info.kind else {
            return fail(
                ErrorClass::Op,
                "MPI_MINLOC/MPI_MAXLOC need a pair type such as MPI_DOUBLE_INT",
            );
        };
        let extent = info.extent_bytes;
        match value {
            PairValue::F32 => pair_loc::<f32>(is_max, extent, input, inout, count),
            PairValue::F64 => pair_loc::<f64>(is_max, extent, input, inout, count),
            PairValue::I64 => pair_loc::<i64>(is_max, extent, input, inout, count),
            PairValue::I32 => pair_loc::<i32>(is_max, extent, input, inout, count),
            PairValue::I16 => pair_loc::<i16>(is_max, extent, input, inout, count),
            PairValue::LongDouble => {
                // SAFETY: both buffers hold `count` 32-byte {long double, int} pairs (checked above).
                unsafe {
                    resmpi_long_double_int_loc(
                        is_max as i32,
                        input.as_ptr(),
                        inout.as_mut_ptr(),
                        count,
                    )
                };
            }
        }
        return Ok(());
    }
    match info.kind {
        BasicKind::I8 => integer_op!(i8, op, input, inout, count),
        BasicKind::U8 | BasicKind::Bool => integer_op!(u8, op, input, inout, count),
        BasicKind::I16 => integer_op!(i16, op, input, inout, count),
        BasicKind::U16 => integer_op!(u16, op, input, inout, count),
        BasicKind::I32 => integer_op!(i32, op, input, inout, count),
        BasicKind::U32 => integer_op!(u32, op, input, inout, count),
        BasicKind::I64 => integer_op!(i64, op, input, inout, count),
        BasicKind::U64 => integer_op!(u64, op, input, inout, count),
        BasicKind::Char => integer_op!(i8, op, input, inout, count),
        BasicKind::F32 => float_op!(f32, op, input, inout, count),
        BasicKind::F64 => float_op!(f64, op, input, inout, count),
        BasicKind::Byte => match op {
            Op::BitwiseAnd | Op::BitwiseOr | Op::BitwiseXor => {
                integer_op!(u8, op, input, inout, needed)
            }
            _ => unsupported(op),
        },
        BasicKind::ComplexF32 => complex_op::<f32>(op, input, inout, count),
        BasicKind::ComplexF64 => complex_op::<f64>(op, input, inout, count),
        BasicKind::LongDouble | BasicKind::ComplexLongDouble => {
            let code = match op {
                Op::Max => 1,
                Op::Min => 2,
                Op::Sum => 3,
                Op::Prod => 4,
                _ => return unsupported(op),
            };
            // SAFETY: both buffers hold `count` elements of the type (checked above).
            let result = unsafe {
                if info.kind == BasicKind::LongDouble {
                    resmpi_long_double_reduce(code, input.as_ptr(), inout.as_mut_ptr(), count)
                } else {
                    resmpi_long_double_complex_reduce(
                        code,
                        input.as_ptr(),
                        inout.as_mut_ptr(),
                        count,
                    )
                }
            };
            if result != 0 {
                return unsupported(op);
            }
            Ok(())
        }
        BasicKind::Pair(_) => unsupported(op),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_gives_what_the_general_path_gives() {
        let ops = [
            Op::Sum,
            Op::Prod,
            Op::Max,
            Op::Min,
            Op::BitwiseOr,
            Op::BitwiseAnd,
            Op::LogicalAnd,
            Op::LogicalOr,
        ];
        let kinds = [
            (BasicKind::I32, 4),
            (BasicKind::U32, 4),
            (BasicKind::I64, 8),
            (BasicKind::U64, 8),
            (BasicKind::F32, 4),
            (BasicKind::F64, 8),
        ];
        let mut kernels = 0;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for op in ops {
            for (kind, size) in kinds {
                let Some(kernel) = kernel(op, kind) else {
                    continue;
                };
                kernels += 1;
                let info = TypeInfo::basic(size, kind);
                let count = 37;
                // Small values (some zero, some negative) so that floats
                // stay exact and the logical ops see both truth values.
                let mut value = |_| {
                    let v = (next() % 7) as i64 - 3;
                    match kind {
                        BasicKind::F32 => (v as f32).to_ne_bytes().to_vec(),
                        BasicKind::F64 => (v as f64).to_ne_bytes().to_vec(),
                        _ => v.to_ne_bytes()[..size].to_vec(),
                    }
                };
                let input: Vec<u8> = (0..count).flat_map(&mut value).collect();
                let inout: Vec<u8> = (0..count).flat_map(&mut value).collect();
                let mut by_kernel = inout.clone();
                kernel(&input, &mut by_kernel);
                let mut by_kind = inout.clone();
                reduce_by_kind(op, &info, &input, &mut by_kind, count).unwrap();
                assert_eq!(by_kernel, by_kind, "{op:?} on {kind:?}");
                assert_ne!(by_kernel, inout, "{op:?} on {kind:?} changed nothing");
            }
        }
        assert_eq!(kernels, 20);
    }

    fn bytes_of_i32(values: &[i32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    #[test]
    fn integer_sum_max_and_bitwise_combine_elementwise() {
        let info = TypeInfo::basic(4, BasicKind::I32);
        let input = bytes_of_i32(&[1, -5, 6]);
        let mut inout = bytes_of_i32(&[2, 3, 3]);
        reduce_predefined(Op::Sum, &info, &input, &mut inout, 3).unwrap();
        assert_eq!(inout, bytes_of_i32(&[3, -2, 9]));
        reduce_predefined(Op::Max, &info, &bytes_of_i32(&[9, 0, 0]), &mut inout, 3).unwrap();
        assert_eq!(inout, bytes_of_i32(&[9, 0, 9]));
        reduce_predefined(
            Op::BitwiseXor,
            &info,
            &bytes_of_i32(&[1, 1, 1]),
            &mut inout,
            3,
        )
        .unwrap();
        assert_eq!(inout, bytes_of_i32(&[8, 1, 8]));
    }

    #[test]
    fn ops_outside_the_standard_table_are_op_errors_even_for_zero_elements() {
        let complex = TypeInfo::basic(16, BasicKind::ComplexF64);
        let boolean = TypeInfo::basic(1, BasicKind::Bool);
        let byte = TypeInfo::basic(1, BasicKind::Byte);
        let double = TypeInfo::basic(8, BasicKind::F64);
        for (op, info) in [
            (Op::Max, complex),
            (Op::Sum, boolean),
            (Op::BitwiseOr, boolean),
            (Op::Sum, byte),
            (Op::LogicalXor, double),
            (Op::MaxLoc, double),
        ] {
            let error = reduce_predefined(op, &info, &[], &mut [], 0).unwrap_err();
            assert_eq!(error.class, ErrorClass::Op, "{op:?} on {:?}", info.kind);
        }
        for (op, info) in [
            (Op::Prod, complex),
            (Op::LogicalAnd, boolean),
            (Op::BitwiseXor, byte),
        ] {
            reduce_predefined(op, &info, &[], &mut [], 0).unwrap();
        }
    }

    #[test]
    fn float_bitwise_op_is_an_op_error() {
        let info = TypeInfo::basic(8, BasicKind::F64);
        let mut inout = vec![0u8; 8];
        let error = reduce_predefined(Op::BitwiseAnd, &info, &[0u8; 8], &mut inout, 1).unwrap_err();
        assert_eq!(error.class, ErrorClass::Op);
    }

    #[test]
    fn maxloc_on_double_int_prefers_lower_index_on_ties() {
        let info = TypeInfo {
            size_bytes: 12,
            extent_bytes: 16,
            basic_elements: 2,
            kind: BasicKind::Pair(PairValue::F64),
        };
        let pair = |value: f64, index: i32| {
            let mut bytes = vec![0u8; 16];
            bytes[..8].copy_from_slice(&value.to_ne_bytes());
            bytes[8..12].copy_from_slice(&index.to_ne_bytes());
            bytes
        };
        let mut inout = pair(2.0, 5);
        reduce_predefined(Op::MaxLoc, &info, &pair(2.0, 1), &mut inout, 1).unwrap();
        assert_eq!(inout, pair(2.0, 1));
        reduce_predefined(Op::MaxLoc, &info, &pair(1.0, 0), &mut inout, 1).unwrap();
        assert_eq!(inout, pair(2.0, 1));
    }

    #[test]
    fn long_double_sum_goes_through_the_c_kernel() {
        let info = TypeInfo::basic(16, BasicKind::LongDouble);
        // 1.5 as x87 extended: mantissa 0xC000000000000000, exponent 0x3FFF.
        let mut one_and_half = [0u8; 16];
        one_and_half[..8].copy_from_slice(&0xC000_0000_0000_0000u64.to_le_bytes());
        one_and_half[8..10].copy_from_slice(&0x3FFFu16.to_le_bytes());
        let mut inout = one_and_half;
        reduce_predefined(Op::Sum, &info, &one_and_half, &mut inout, 1).unwrap();
        // 3.0: mantissa 0xC000000000000000, exponent 0x4000.
        assert_eq!(&inout[8..10], &0x4000u16.to_le_bytes());
        assert_eq!(&inout[..8], &0xC000_0000_0000_0000u64.to_le_bytes());
    }
}
