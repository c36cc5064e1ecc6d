//! The bytes of one checkpoint file (little-endian):
//!
//! ```text
//! magic        8   "RSMPICKP"
//! format       u32 1
//! rank         u32
//! version      u32
//! name length  u32, then the name's bytes
//! region count u32, then per region: id i32, byte length u64
//! the regions' bytes, in the order of the table
//! crc32c       u32 of every byte above
//! ```
//!
//! The name, rank and version are inside the checksummed bytes so that a
//! file copied or renamed to another rank's or version's name is refused,
//! not loaded into the wrong process.

use resmpi_checksum::Crc32c;
use std::io::{self, Write};

/// The first bytes of every checkpoint file.
pub const MAGIC: &[u8; 8] = b"RSMPICKP";
/// The layout version this code writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Most regions one checkpoint may hold (a limit on the table a reader
/// allocates from a file it has not checked yet).
pub const REGION_COUNT_MAX: u32 = 1 << 16;
/// Longest name (VeloC's `VELOC_MAX_NAME`).
pub const NAME_BYTES_MAX: usize = 1024;

/// The region id under which the library (not the application) keeps its
/// message-logging position in a checkpoint file: the smallest id, so it
/// is written first. `VELOC_Mem_protect` refuses it for an application's
/// region, and a restart never copies it into one.
pub const POSITION_REGION_ID: i32 = i32::MIN;

/// One protected region as it is written: its id and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Region<'a> {
    /// The application's id (`VELOC_Mem_protect`'s first argument).
    pub id: i32,
    /// The region's bytes.
    pub bytes: &'a [u8],
}

/// A checkpoint read back and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The checkpoint's name.
    pub name: String,
    /// The rank that wrote it.
    pub rank: u32,
    /// Its version.
    pub version: u32,
    /// Its regions, in the order written (ascending id).
    pub regions: Vec<(i32, Vec<u8>)>,
}

impl Checkpoint {
    /// The bytes saved under `id`, if any.
    pub fn region(&self, id: i32) -> Option<&[u8]> {
        self.regions
            .iter()
            .find(|(region_id, _)| *region_id == id)
            .map(|(_, bytes)| bytes.as_slice())
    }
}

/// Why a file is not a checkpoint resmpi will load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// Shorter than its header or its table says.
    Truncated,
    /// Not a resmpi checkpoint, or another layout version.
    NotACheckpoint,
    /// The CRC32C over the file does not match: its bytes changed.
    ChecksumMismatch {
        /// What the trailer says.
        stored: u32,
        /// What the bytes give.
        computed: u32,
    },
    /// Checksummed correctly, but for another name, rank or version.
    WrongIdentity {
        /// What the file says it is, as `name-rank-version`.
        found: String,
    },
    /// A table or name past this crate's limits, or bytes after the trailer.
    Malformed(&'static str),
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::Truncated => write!(formatter, "truncated"),
            FormatError::NotACheckpoint => write!(formatter, "not a resmpi checkpoint file"),
            FormatError::ChecksumMismatch { stored, computed } => write!(
                formatter,
                "checksum mismatch (stored crc32c {stored:08x}, computed {computed:08x})"
            ),
            FormatError::WrongIdentity { found } => {
                write!(formatter, "holds checkpoint {found}, not the one named")
            }
            FormatError::Malformed(what) => write!(formatter, "malformed: {what}"),
        }
    }
}

/// A writer that checksums what goes through it.
struct Checksummed<'a> {
    inner: &'a mut dyn Write,
    crc: Crc32c,
}

impl Checksummed<'_> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc = self.crc.update(bytes);
        self.inner.write_all(bytes)
    }
}

/// Write one checkpoint to `writer`: header, table, regions, trailer.
pub fn emit(
    writer: &mut dyn Write,
    name: &str,
    rank: u32,
    version: u32,
    regions: &[Region<'_>],
) -> io::Result<()> {
    let region_count = u32::try_from(regions.len())
        .ok()
        .filter(|&count| count <= REGION_COUNT_MAX)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "too many regions"))?;
    let mut out = Checksummed {
        inner: writer,
        crc: Crc32c::new(),
    };
    out.put(MAGIC)?;
    out.put(&FORMAT_VERSION.to_le_bytes())?;
    out.put(&rank.to_le_bytes())?;
    out.put(&version.to_le_bytes())?;
    out.put(&(name.len() as u32).to_le_bytes())?;
    out.put(name.as_bytes())?;
    out.put(&region_count.to_le_bytes())?;
    for region in regions {
        out.put(&region.id.to_le_bytes())?;
        out.put(&(region.bytes.len() as u64).to_le_bytes())?;
    }
    for region in regions {
        out.put(region.bytes)?;
    }
    let crc = out.crc.finish();
    out.inner.write_all(&crc.to_le_bytes())
}

/// A cursor over the checksummed part of a file.
type Reader<'a> = resmpi_wire::bytes::ByteReader<'a, FormatError>;

/// Check and decode a whole file. The checksum is verified before any
/// field is trusted; then the identity is compared with what the caller
/// asked for (`expected`: name, rank, version).
pub fn parse(bytes: &[u8], expected: (&str, u32, u32)) -> Result<Checkpoint, FormatError> {
    if bytes.len() < MAGIC.len() + 4 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(if bytes.len() < MAGIC.len() {
            FormatError::Truncated
        } else {
            FormatError::NotACheckpoint
        });
    }
    let (body, trailer) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes(trailer.try_into().expect("4 bytes"));
    let computed = resmpi_checksum::crc32c(body);
    if stored != computed {
        return Err(FormatError::ChecksumMismatch { stored, computed });
    }
    let mut reader = Reader::new(body, FormatError::Truncated);
    reader.take(MAGIC.len())?;
    if reader.u32()? != FORMAT_VERSION {
        return Err(FormatError::NotACheckpoint);
    }
    let rank = reader.u32()?;
    let version = reader.u32()?;
    let name_length = reader.u32()? as usize;
    if name_length > NAME_BYTES_MAX {
        return Err(FormatError::Malformed("name longer than VELOC_MAX_NAME"));
    }
    let name = std::str::from_utf8(reader.take(name_length)?)
        .map_err(|_| FormatError::Malformed("name is not UTF-8"))?
        .to_string();
    let region_count = reader.u32()?;
    if region_count > REGION_COUNT_MAX {
        return Err(FormatError::Malformed("too many regions"));
    }
    let mut table = Vec::with_capacity(region_count as usize);
    for _ in 0..region_count {
        let id = reader.u32()? as i32;
        let length = usize::try_from(reader.u64()?).map_err(|_| FormatError::Truncated)?;
        table.push((id, length));
    }
    let mut regions = Vec::with_capacity(table.len());
    for (id, length) in table {
        regions.push((id, reader.take(length)?.to_vec()));
    }
    if reader.remaining() != 0 {
        return Err(FormatError::Malformed("bytes after the last region"));
    }
    if (name.as_str(), rank, version) != expected {
        return Err(FormatError::WrongIdentity {
            found: format!("{name}-{rank}-{version}"),
        });
    }
    Ok(Checkpoint {
        name,
        rank,
        version,
        regions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut bytes = Vec::new();
        emit(
            &mut bytes,
            "heat",
            3,
            7,
            &[
                Region {
                    id: 0,
                    bytes: &[1, 2, 3, 4],
                },
                Region {
                    id: 5,
                    bytes: &[9; 100],
                },
            ],
        )
        .unwrap();
        bytes
    }

    #[test]
    fn what_is_written_reads_back() {
        let checkpoint = parse(&sample(), ("heat", 3, 7)).unwrap();
        assert_eq!(checkpoint.region(0), Some(&[1, 2, 3, 4][..]));
        assert_eq!(checkpoint.region(5), Some(&[9; 100][..]));
        assert_eq!(checkpoint.region(1), None);
    }

    #[test]
    fn any_flipped_bit_is_refused() {
        let bytes = sample();
        for index in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[index] ^= 0x10;
            assert!(
                parse(&flipped, ("heat", 3, 7)).is_err(),
                "a flip at byte {index} was accepted"
            );
        }
    }

    #[test]
    fn every_truncation_is_refused() {
        let bytes = sample();
        for length in 0..bytes.len() {
            assert!(parse(&bytes[..length], ("heat", 3, 7)).is_err());
        }
    }

    #[test]
    fn decoders_fuzz_checkpoint_files_random_and_mutated() {
        use resmpi_fuzz_input::Inputs;
        let mut empty = Vec::new();
        emit(&mut empty, "heat", 3, 7, &[]).unwrap();
        let sample = sample();
        let corpus: [&[u8]; 2] = [&sample, &empty];
        let mut decoded = 0;
        Inputs::new(41).check(&corpus, 20_000, 512, |bytes| {
            if let Ok(checkpoint) = parse(bytes, ("heat", 3, 7)) {
                let regions: Vec<Region<'_>> = checkpoint
                    .regions
                    .iter()
                    .map(|(id, bytes)| Region { id: *id, bytes })
                    .collect();
                let mut again = Vec::new();
                emit(&mut again, "heat", 3, 7, &regions).unwrap();
                assert_eq!(again, bytes, "a decoded file encodes back to itself");
                decoded += 1;
            }
        });
        assert!(decoded >= 2, "the corpus itself decodes");
    }

    #[test]
    fn another_ranks_file_under_this_name_is_refused() {
        assert_eq!(
            parse(&sample(), ("heat", 2, 7)),
            Err(FormatError::WrongIdentity {
                found: "heat-3-7".to_string()
            })
        );
    }
}
