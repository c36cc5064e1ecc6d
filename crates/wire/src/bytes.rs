//! A bounds-checked cursor over little-endian bytes from outside the
//! process (frames, checkpoint files, log files).
//!
//! Why it is here: every decoder of such bytes (the message-logging frames
//! and the event logger's file, a checkpoint's saved position, VeloC's file
//! format, RMA requests) needs the same three things: take `n` bytes or
//! report truncation, read fixed-size little-endian integers, never panic.
//! Each had its own copy; this is the one, with the decoder's own error.

/// A cursor over `bytes`; every read past the end returns the error given
/// at construction (cloned), never panics.
#[derive(Clone, Debug)]
pub struct ByteReader<'a, E> {
    bytes: &'a [u8],
    at: usize,
    truncated: E,
}

impl<'a, E: Clone> ByteReader<'a, E> {
    /// A cursor at the start of `bytes` that reports `truncated` when a read
    /// runs past their end.
    pub fn new(bytes: &'a [u8], truncated: E) -> ByteReader<'a, E> {
        ByteReader {
            bytes,
            at: 0,
            truncated,
        }
    }

    /// The next `length` bytes.
    pub fn take(&mut self, length: usize) -> Result<&'a [u8], E> {
        let end = self
            .at
            .checked_add(length)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| self.truncated.clone())?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], E> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    /// The next byte.
    pub fn u8(&mut self) -> Result<u8, E> {
        Ok(self.take(1)?[0])
    }

    /// The next little-endian u32.
    pub fn u32(&mut self) -> Result<u32, E> {
        self.array().map(u32::from_le_bytes)
    }

    /// The next little-endian u64.
    pub fn u64(&mut self) -> Result<u64, E> {
        self.array().map(u64::from_le_bytes)
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.at
    }
}

#[cfg(test)]
mod tests {
    use super::ByteReader;

    #[test]
    fn reads_little_endian_and_reports_truncation_without_moving() {
        let bytes = [1u8, 2, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 9];
        let mut reader = ByteReader::new(&bytes, "short");
        assert_eq!(reader.u8(), Ok(1));
        assert_eq!(reader.u32(), Ok(2));
        assert_eq!(reader.u64(), Ok(7));
        assert_eq!(reader.remaining(), 1);
        assert_eq!(reader.u32(), Err("short"));
        assert_eq!(reader.position(), 13);
        assert_eq!(reader.take(usize::MAX), Err("short"));
        assert_eq!(reader.take(1), Ok(&[9u8][..]));
        assert_eq!(reader.u8(), Err("short"));
    }
}
