//! A file view (MPI_File_set_view) flattened to byte extents.
//!
//! MPI tiles the file, from the displacement on, with copies of the
//! filetype; the data a process sees is the filetype's bytes, tile after
//! tile, in type-map order. A position in that data stream (a "view byte";
//! MPI positions are in etypes, the caller multiplies by the etype size)
//! therefore lies at `disp + tile * extent + segment offset + rest`. Every
//! read and write turns its run of view bytes into the file extents it
//! touches with [`FileView::extents`]; the default view (bytes, no holes) is
//! one extent however long the run, so contiguous I/O costs nothing here.

/// A run of file bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Where the run starts in the file.
    pub offset_bytes: u64,
    /// How long it is.
    pub length_bytes: u64,
}

/// A run of the filetype's data, relative to the start of its tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FiletypeSegment {
    /// Offset from the tile start (the filetype's type-map displacement).
    pub offset_bytes: i64,
    /// Length of the run.
    pub length_bytes: u64,
}

/// Why a view cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewError(pub String);

/// A validated view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileView {
    displacement_bytes: u64,
    etype_size_bytes: u64,
    segments: Vec<FiletypeSegment>,
    /// Where each segment starts in one tile's data.
    data_starts_bytes: Vec<u64>,
    tile_size_bytes: u64,
    tile_extent_bytes: u64,
}

/// MPI's rule for etypes and filetypes: no data before the displacement,
/// and displacements that never decrease; runs may overlap only when
/// `overlap_allowed` (a file opened read-only, as in ROMIO).
pub fn check_monotonic(
    segments: &[FiletypeSegment],
    what: &str,
    overlap_allowed: bool,
) -> Result<(), ViewError> {
    if let Some(segment) = segments.iter().find(|segment| segment.offset_bytes < 0) {
        return Err(ViewError(format!(
            "the {what} has data at negative displacement {}",
            segment.offset_bytes
        )));
    }
    for pair in segments.windows(2) {
        let previous_end = pair[0].offset_bytes + pair[0].length_bytes as i64;
        let limit = if overlap_allowed {
            pair[0].offset_bytes
        } else {
            previous_end
        };
        if pair[1].offset_bytes < limit {
            return Err(ViewError(format!(
                "the {what}'s displacements decrease or overlap (bytes at {} after bytes at {}..{}); \
                 MPI requires them to be monotonically nondecreasing",
                pair[1].offset_bytes,
                pair[0].offset_bytes,
                previous_end
            )));
        }
    }
    Ok(())
}

impl FileView {
    /// The default view: displacement 0, etype and filetype MPI_BYTE.
    pub fn bytes() -> FileView {
        FileView::new(
            0,
            1,
            vec![FiletypeSegment {
                offset_bytes: 0,
                length_bytes: 1,
            }],
            1,
        )
        .expect("the byte view is valid")
    }

    /// A view of `segments` (one filetype, in type-map order) tiled every
    /// `tile_extent_bytes` from `displacement_bytes`, in units of
    /// `etype_size_bytes`. The filetype must hold data, no byte of it may
    /// lie before its tile's displacement in the file, and its size must be
    /// a multiple of the etype's, as MPI requires.
    pub fn new(
        displacement_bytes: u64,
        etype_size_bytes: u64,
        segments: Vec<FiletypeSegment>,
        tile_extent_bytes: i64,
    ) -> Result<FileView, ViewError> {
        if etype_size_bytes == 0 {
            return Err(ViewError("the etype holds no data".into()));
        }
        let segments: Vec<FiletypeSegment> = segments
            .into_iter()
            .filter(|segment| segment.length_bytes > 0)
            .collect();
        let tile_size_bytes: u64 = segments.iter().map(|segment| segment.length_bytes).sum();
        if tile_size_bytes == 0 {
            return Err(ViewError("the filetype holds no data".into()));
        }
        if !tile_size_bytes.is_multiple_of(etype_size_bytes) {
            return Err(ViewError(format!(
                "the filetype's size ({tile_size_bytes} bytes) is not a multiple of the \
                 etype's ({etype_size_bytes} bytes)"
            )));
        }
        if let Some(segment) = segments.iter().find(|segment| segment.offset_bytes < 0) {
            return Err(ViewError(format!(
                "the filetype has data at negative displacement {}",
                segment.offset_bytes
            )));
        }
        // Overlaps are the caller's to refuse (see check_monotonic).
        check_monotonic(&segments, "filetype", true)?;
        if tile_extent_bytes <= 0 {
            return Err(ViewError(format!(
                "the filetype's extent ({tile_extent_bytes} bytes) is not positive"
            )));
        }
        let mut data_starts_bytes = Vec::with_capacity(segments.len());
        let mut start = 0;
        for segment in &segments {
            data_starts_bytes.push(start);
            start += segment.length_bytes;
        }
        Ok(FileView {
            displacement_bytes,
            etype_size_bytes,
            segments,
            data_starts_bytes,
            tile_size_bytes,
            tile_extent_bytes: tile_extent_bytes as u64,
        })
    }

    /// The displacement.
    pub fn displacement_bytes(&self) -> u64 {
        self.displacement_bytes
    }

    /// The etype's size.
    pub fn etype_size_bytes(&self) -> u64 {
        self.etype_size_bytes
    }

    /// A single run that tiles without gaps: view byte p is file byte
    /// `disp + offset + p`.
    fn dense_offset_bytes(&self) -> Option<u64> {
        match self.segments.as_slice() {
            [only] if only.length_bytes == self.tile_extent_bytes => Some(only.offset_bytes as u64),
            _ => None,
        }
    }

    /// The file byte that holds view byte `position_bytes`.
    pub fn file_offset_of(&self, position_bytes: u64) -> u64 {
        if let Some(offset) = self.dense_offset_bytes() {
            return self.displacement_bytes + offset + position_bytes;
        }
        let tile = position_bytes / self.tile_size_bytes;
        let within = position_bytes % self.tile_size_bytes;
        let index = self
            .data_starts_bytes
            .partition_point(|start| *start <= within)
            - 1;
        let segment = self.segments[index];
        self.displacement_bytes
            + tile * self.tile_extent_bytes
            + segment.offset_bytes as u64
            + (within - self.data_starts_bytes[index])
    }

    /// The file extents that view bytes `[start, start + length)` occupy, in
    /// view order, adjacent runs merged.
    pub fn extents(&self, start_bytes: u64, length_bytes: u64) -> Vec<Extent> {
        let mut extents: Vec<Extent> = Vec::new();
        if length_bytes == 0 {
            return extents;
        }
        if self.dense_offset_bytes().is_some() {
            extents.push(Extent {
                offset_bytes: self.file_offset_of(start_bytes),
                length_bytes,
            });
            return extents;
        }
        let mut position = start_bytes;
        let end = start_bytes + length_bytes;
        let mut tile = position / self.tile_size_bytes;
        let within = position % self.tile_size_bytes;
        let mut index = self
            .data_starts_bytes
            .partition_point(|start| *start <= within)
            - 1;
        let mut skip = within - self.data_starts_bytes[index];
        while position < end {
            let segment = self.segments[index];
            let take = (segment.length_bytes - skip).min(end - position);
            let offset = self.displacement_bytes
                + tile * self.tile_extent_bytes
                + segment.offset_bytes as u64
                + skip;
            match extents.last_mut() {
                Some(last) if last.offset_bytes + last.length_bytes == offset => {
                    last.length_bytes += take
                }
                _ => extents.push(Extent {
                    offset_bytes: offset,
                    length_bytes: take,
                }),
            }
            position += take;
            skip = 0;
            index += 1;
            if index == self.segments.len() {
                index = 0;
                tile += 1;
            }
        }
        extents
    }

    /// How many view bytes lie in the file before `file_size_bytes` (what
    /// MPI_SEEK_END and MPI_MODE_APPEND start from), rounded down to whole
    /// etypes.
    pub fn view_bytes_before(&self, file_size_bytes: u64) -> u64 {
        if file_size_bytes <= self.displacement_bytes {
            return 0;
        }
        let inside = file_size_bytes - self.displacement_bytes;
        let bytes = if let Some(offset) = self.dense_offset_bytes() {
            inside.saturating_sub(offset)
        } else {
            let tiles = inside / self.tile_extent_bytes;
            let rest = (inside % self.tile_extent_bytes) as i64;
            let partial: u64 = self
                .segments
                .iter()
                .map(|segment| {
                    let end = segment.offset_bytes + segment.length_bytes as i64;
                    (end.min(rest) - segment.offset_bytes).max(0) as u64
                })
                .sum();
            tiles * self.tile_size_bytes + partial
        };
        bytes / self.etype_size_bytes * self.etype_size_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(offset_bytes: i64, length_bytes: u64) -> FiletypeSegment {
        FiletypeSegment {
            offset_bytes,
            length_bytes,
        }
    }

    fn extent(offset_bytes: u64, length_bytes: u64) -> Extent {
        Extent {
            offset_bytes,
            length_bytes,
        }
    }

    #[test]
    fn byte_view_is_one_extent_however_long() {
        let view = FileView::bytes();
        assert_eq!(view.extents(10, 1 << 30), vec![extent(10, 1 << 30)]);
        assert_eq!(view.view_bytes_before(77), 77);
    }

    #[test]
    fn vector_filetype_strides_and_displacement() {
        // MPI_Type_vector(2 blocks of 4 bytes, stride 16), resized to 32:
        // rank r of 2 would see bytes [0,4) and [16,20) of each 32-byte tile.
        let view = FileView::new(100, 4, vec![segment(0, 4), segment(16, 4)], 32).unwrap();
        assert_eq!(
            view.extents(0, 12),
            vec![extent(100, 4), extent(116, 4), extent(132, 4)]
        );
        // Start in the middle of a segment.
        assert_eq!(view.extents(6, 4), vec![extent(118, 2), extent(132, 2)]);
        assert_eq!(view.file_offset_of(9), 133);
        assert_eq!(view.view_bytes_before(100), 0);
        assert_eq!(view.view_bytes_before(118), 4);
        assert_eq!(view.view_bytes_before(132), 8);
        assert_eq!(view.view_bytes_before(1000), 228);
    }

    #[test]
    fn adjacent_tiles_merge() {
        // A filetype whose data ends where the next tile's begins.
        let view = FileView::new(0, 1, vec![segment(0, 2), segment(2, 2)], 4).unwrap();
        assert_eq!(view.extents(1, 10), vec![extent(1, 10)]);
    }

    #[test]
    fn bad_views_are_refused() {
        assert!(FileView::new(0, 4, vec![segment(0, 6)], 8).is_err());
        assert!(FileView::new(0, 1, vec![segment(-1, 2)], 8).is_err());
        assert!(FileView::new(0, 1, vec![], 8).is_err());
        assert!(FileView::new(0, 1, vec![segment(0, 1)], 0).is_err());
        // decreasing, overlapping
        assert!(FileView::new(0, 4, vec![segment(12, 4), segment(0, 4)], 16).is_err());
        assert!(check_monotonic(&[segment(0, 12), segment(4, 4)], "filetype", false).is_err());
        assert!(check_monotonic(&[segment(0, 12), segment(4, 4)], "filetype", true).is_ok());
        assert!(FileView::new(0, 0, vec![segment(0, 1)], 1).is_err());
    }

    #[test]
    fn extents_cover_exactly_the_requested_bytes() {
        let view = FileView::new(
            7,
            1,
            vec![segment(3, 5), segment(12, 1), segment(20, 3)],
            29,
        )
        .unwrap();
        for start in 0..40 {
            for length in 0..40 {
                let extents = view.extents(start, length);
                let total: u64 = extents.iter().map(|extent| extent.length_bytes).sum();
                assert_eq!(total, length);
                // Byte by byte, the same positions as file_offset_of.
                let mut bytes = Vec::new();
                for extent in &extents {
                    bytes.extend(extent.offset_bytes..extent.offset_bytes + extent.length_bytes);
                }
                let expected: Vec<u64> = (start..start + length)
                    .map(|p| view.file_offset_of(p))
                    .collect();
                assert_eq!(bytes, expected);
            }
        }
    }
}
