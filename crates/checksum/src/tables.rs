//! Lookup tables, all built at compile time from the polynomial so there is
//! no start-up cost and no hand-copied table that could hold a typo.
//!
//! Bit order is the reflected one used by iSCSI, ext4 and the SSE4.2
//! `crc32` instruction: bit 31 of a `u32` is the coefficient of x^0 and
//! shifting right multiplies by x.

/// CRC32C polynomial 0x1EDC6F41, bit-reflected.
pub(crate) const POLYNOMIAL: u32 = 0x82F6_3B78;

/// `SLICING[0]` is the classic byte-at-a-time table; `SLICING[k][byte]` is
/// the register contribution of `byte` followed by `k` zero bytes, which lets
/// the portable path consume eight bytes with eight independent lookups.
pub(crate) static SLICING: [[u32; 256]; 8] = slicing_tables();

const fn slicing_tables() -> [[u32; 256]; 8] {
    let mut tables = [[0u32; 256]; 8];
    let mut byte = 0;
    while byte < 256 {
        let mut register = byte as u32;
        let mut bit = 0;
        while bit < 8 {
            register = if register & 1 != 0 {
                (register >> 1) ^ POLYNOMIAL
            } else {
                register >> 1
            };
            bit += 1;
        }
        tables[0][byte] = register;
        byte += 1;
    }
    let mut slice = 1;
    while slice < 8 {
        let mut byte = 0;
        while byte < 256 {
            let previous = tables[slice - 1][byte];
            tables[slice][byte] = (previous >> 8) ^ tables[0][(previous & 0xFF) as usize];
            byte += 1;
        }
        slice += 1;
    }
    tables
}

/// `a * b mod P` over GF(2), reflected representation.
const fn multiply_modulo(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut mask = 1u32 << 31;
    while mask != 0 {
        if a & mask != 0 {
            product ^= b;
        }
        b = if b & 1 != 0 {
            (b >> 1) ^ POLYNOMIAL
        } else {
            b >> 1
        };
        mask >>= 1;
    }
    product
}

/// `x^(8 * length_bytes) mod P`: the effect of feeding `length_bytes` zero
/// bytes through the register.
const fn zero_bytes_operator(length_bytes: usize) -> u32 {
    let mut exponent = 8 * length_bytes;
    let mut result = 1u32 << 31; // x^0
    let mut base = 1u32 << 30; // x^1
    while exponent != 0 {
        if exponent & 1 != 0 {
            result = multiply_modulo(result, base);
        }
        base = multiply_modulo(base, base);
        exponent >>= 1;
    }
    result
}

/// Folding constant for a distance of `bits` (a multiple of 8): `x^bits
/// mod P` in the reflected representation, shifted left by one, the form
/// the carry-less multiplications of `folding.rs` take (Intel's paper
/// writes it `[x^bits mod P]' << 1`).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) const fn fold_constant(bits: usize) -> u64 {
    assert!(bits.is_multiple_of(8));
    (zero_bytes_operator(bits / 8) as u64) << 1
}

/// Advances a raw CRC register over `length_bytes` zero bytes in four
/// lookups instead of `length_bytes / 8` dependent `crc32` instructions.
/// This is what lets independent streams over adjacent stripes be merged:
/// `state(a ++ b) = shift(state(a), len(b)) ^ state_from_zero(b)`.
pub(crate) struct ShiftTable([[u32; 256]; 4]);

impl ShiftTable {
    pub(crate) const fn new(length_bytes: usize) -> ShiftTable {
        let operator = zero_bytes_operator(length_bytes);
        let mut table = [[0u32; 256]; 4];
        let mut lane = 0;
        while lane < 4 {
            let mut byte = 0;
            while byte < 256 {
                table[lane][byte] = multiply_modulo(operator, (byte as u32) << (8 * lane));
                byte += 1;
            }
            lane += 1;
        }
        ShiftTable(table)
    }

    #[inline(always)]
    pub(crate) fn apply(&self, register: u32) -> u32 {
        self.0[0][(register & 0xFF) as usize]
            ^ self.0[1][((register >> 8) & 0xFF) as usize]
            ^ self.0[2][((register >> 16) & 0xFF) as usize]
            ^ self.0[3][(register >> 24) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::fold_constant;

    #[test]
    fn fold_constants_match_an_independent_computation() {
        // x^n mod 0x1EDC6F41, bit-reflected, shifted left by one, computed
        // bit by bit in Python; the same formula gives the published
        // CRC-32/IEEE constants (0x154442bd4 for x^544, 0x1c6e41596 for
        // x^480, 0x1751997d0 for x^160, 0x0ccaa009e for x^96).
        for (bits, expected) in [
            (544, 0x0_740e_ef02),
            (480, 0x0_9e4a_ddf8),
            (160, 0x0_f20c_0dfe),
            (96, 0x1_4cd0_0bd6),
            (2080, 0x0_dcb1_7aa4),
            (2016, 0x0_b9e0_2b86),
        ] {
            assert_eq!(fold_constant(bits), expected, "x^{bits}");
        }
    }
}
