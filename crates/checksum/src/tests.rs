//! Every implementation against a bit-at-a-time reference, which is short
//! enough to check by eye against the definition.

use crate::tables::POLYNOMIAL;
use crate::{crc32c, hardware_accelerated, portable, Crc32c};

/// The definition, one bit at a time, returning the final CRC.
fn reference(bytes: &[u8]) -> u32 {
    let mut register = !0u32;
    for &byte in bytes {
        register ^= u32::from(byte);
        for _ in 0..8 {
            register = if register & 1 != 0 {
                (register >> 1) ^ POLYNOMIAL
            } else {
                register >> 1
            };
        }
    }
    !register
}

/// Deterministic xorshift64*, so a failure names a reproducible input.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    fn bytes(&mut self, length: usize) -> Vec<u8> {
        (0..length).map(|_| self.next() as u8).collect()
    }
}

fn hardware(bytes: &[u8]) -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    if hardware_accelerated() {
        // SAFETY: SSE4.2 detected; live slice; no destination with COPY = false.
        let register = unsafe {
            crate::x86_64::update::<false>(!0, bytes.as_ptr(), core::ptr::null_mut(), bytes.len())
        };
        return Some(!register);
    }
    let _ = bytes;
    None
}

fn hardware_copy(destination: &mut [u8], source: &[u8]) -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    if hardware_accelerated() {
        assert!(destination.len() >= source.len());
        // SAFETY: SSE4.2 detected; ranges valid and disjoint (asserted, and
        // `&mut` vs `&`).
        let register = unsafe {
            crate::x86_64::update::<true>(
                !0,
                source.as_ptr(),
                destination.as_mut_ptr(),
                source.len(),
            )
        };
        return Some(!register);
    }
    let _ = (destination, source);
    None
}

fn table(bytes: &[u8]) -> u32 {
    portable::update(Crc32c::new(), bytes).finish()
}

/// A way to copy and checksum; `None` where that path is absent here.
type CopyVariant = dyn Fn(&mut [u8], &[u8]) -> Option<u32>;

/// Checks every implementation on `bytes`, and both copying variants into a
/// destination at `destination_offset` inside a sentinel-filled buffer.
fn check_all(bytes: &[u8], destination_offset: usize) {
    let expected = reference(bytes);
    let length = bytes.len();
    assert_eq!(table(bytes), expected, "table, length {length}");
    if let Some(value) = hardware(bytes) {
        assert_eq!(value, expected, "hardware, length {length}");
    }
    assert_eq!(crc32c(bytes), expected, "dispatch, length {length}");

    let copy_variants: [&CopyVariant; 3] = [
        &|to, from| Some(portable::copy_and_update(Crc32c::new(), to, from).finish()),
        &hardware_copy,
        &|to, from| Some(Crc32c::new().copy_and_update(to, from).finish()),
    ];
    for (variant, copy) in copy_variants.iter().enumerate() {
        let mut buffer = vec![0xA5u8; destination_offset + length + 16];
        let region = &mut buffer[destination_offset..];
        if let Some(value) = copy(region, bytes) {
            assert_eq!(value, expected, "copy variant {variant}, length {length}");
            assert_eq!(
                &buffer[destination_offset..destination_offset + length],
                bytes,
                "copy variant {variant} copied wrong bytes, length {length}"
            );
            assert!(
                buffer[..destination_offset]
                    .iter()
                    .all(|&byte| byte == 0xA5),
                "copy variant {variant} wrote before the destination"
            );
            assert!(
                buffer[destination_offset + length..]
                    .iter()
                    .all(|&byte| byte == 0xA5),
                "copy variant {variant} wrote past source.len()"
            );
        }
    }
}

#[test]
fn hardware_path_is_used_where_the_cpu_has_it() {
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        hardware_accelerated(),
        std::arch::is_x86_feature_detected!("sse4.2")
    );
    #[cfg(not(target_arch = "x86_64"))]
    assert!(!hardware_accelerated());
}

#[test]
fn known_vectors_match_published_values() {
    let ascending: Vec<u8> = (0u8..32).collect();
    let descending: Vec<u8> = (0u8..32).rev().collect();
    // RFC 3720 B.4: an iSCSI SCSI Read (10) command PDU.
    let iscsi_read_pdu: [u8; 48] = [
        0x01, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00,
        0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00,
    ];
    let vectors: [(&[u8], u32); 7] = [
        (b"", 0x0000_0000),
        (b"123456789", 0xE306_9283),
        (&[0x00; 32], 0x8A91_36AA),
        (&[0xFF; 32], 0x62A8_AB43),
        (&ascending, 0x46DD_794E),
        (&descending, 0x113F_DB5C),
        (&iscsi_read_pdu, 0xD996_3A56),
    ];
    for (bytes, expected) in vectors {
        assert_eq!(reference(bytes), expected, "reference on {bytes:02X?}");
        assert_eq!(crc32c(bytes), expected, "crc32c on {bytes:02X?}");
        check_all(bytes, 3);
    }
}

#[test]
fn every_length_to_1024_at_every_alignment_agrees_with_reference() {
    let mut random = Random(0x1234_5678_9ABC_DEF1);
    let backing = random.bytes(1024 + 64);
    for length in 0..=1024 {
        let source_offset = length % 8;
        let destination_offset = random.below(16);
        check_all(
            &backing[source_offset..source_offset + length],
            destination_offset,
        );
    }
    for _ in 0..200 {
        let length = random.below(1025);
        let source_offset = random.below(64);
        check_all(
            &backing[source_offset..source_offset + length],
            random.below(64),
        );
    }
}

#[test]
fn long_inputs_cross_every_stripe_boundary_correctly() {
    // The three-stream path starts at 3 * 256 and 3 * 8192 bytes; test
    // around both thresholds, a few multiples, and odd sizes past them.
    let mut random = Random(0xDEAD_BEEF_CAFE_F00D);
    let backing = random.bytes(200_000);
    let mut lengths = Vec::new();
    for base in [768usize, 1536, 24_576, 49_152, 73_728] {
        for delta in [-9isize, -8, -1, 0, 1, 7, 8, 9, 255, 256, 257] {
            lengths.push((base as isize + delta) as usize);
        }
    }
    for _ in 0..20 {
        lengths.push(random.below(190_000));
    }
    for length in lengths {
        for source_offset in [0, 1, 5] {
            check_all(&backing[source_offset..source_offset + length], 3);
        }
    }
}

#[test]
fn feeding_in_pieces_equals_one_shot_for_every_split() {
    let mut random = Random(42);
    let bytes = random.bytes(2000);
    let expected = crc32c(&bytes);
    for split in 0..=bytes.len() {
        let (head, tail) = bytes.split_at(split);
        assert_eq!(
            Crc32c::new().update(head).update(tail).finish(),
            expected,
            "split at {split}"
        );
        let mut destination = vec![0u8; bytes.len()];
        let (destination_head, destination_tail) = destination.split_at_mut(split);
        let copied = Crc32c::new()
            .copy_and_update(destination_head, head)
            .update(&[])
            .copy_and_update(destination_tail, tail)
            .finish();
        assert_eq!(copied, expected, "copy split at {split}");
        assert_eq!(destination, bytes);
        assert_eq!(
            portable::update(portable::update(Crc32c::new(), head), tail).finish(),
            expected
        );
    }
    // Many pieces of random sizes, over the long path too.
    let long = random.bytes(120_000);
    let expected = reference(&long);
    for _ in 0..20 {
        let mut state = Crc32c::new();
        let mut start = 0;
        while start < long.len() {
            let end = (start + random.below(40_000)).min(long.len());
            state = state.update(&long[start..end]);
            start = end;
        }
        assert_eq!(state.finish(), expected);
    }
}

#[test]
fn finish_does_not_end_the_stream() {
    let state = Crc32c::new().update(b"12345");
    let _ = state.finish();
    assert_eq!(state.update(b"6789").finish(), 0xE306_9283);
    assert_eq!(Crc32c::default(), Crc32c::new());
    assert_eq!(Crc32c::new().finish(), 0);
}

#[test]
fn any_single_bit_flip_changes_the_crc() {
    let mut random = Random(7);
    let mut bytes = random.bytes(1024);
    let original = crc32c(&bytes);
    for bit in 0..bytes.len() * 8 {
        bytes[bit / 8] ^= 1 << (bit % 8);
        assert_ne!(crc32c(&bytes), original, "flip of bit {bit} went unseen");
        assert_ne!(
            table(&bytes),
            original,
            "table: flip of bit {bit} went unseen"
        );
        bytes[bit / 8] ^= 1 << (bit % 8);
    }
    let mut long = random.bytes(100_000);
    let original = crc32c(&long);
    for _ in 0..2000 {
        let bit = random.below(long.len() * 8);
        long[bit / 8] ^= 1 << (bit % 8);
        assert_ne!(crc32c(&long), original, "flip of bit {bit} went unseen");
        long[bit / 8] ^= 1 << (bit % 8);
    }
}

#[test]
#[should_panic(expected = "destination holds 3 bytes, source has 4")]
fn copy_into_a_short_destination_panics() {
    let _ = Crc32c::new().copy_and_update(&mut [0u8; 3], b"abcd");
}

#[test]
#[should_panic(expected = "destination holds 3 bytes, source has 4")]
fn portable_copy_into_a_short_destination_panics() {
    let _ = portable::copy_and_update(Crc32c::new(), &mut [0u8; 3], b"abcd");
}
