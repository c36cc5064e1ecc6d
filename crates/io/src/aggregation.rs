//! Two-phase collective I/O: which process writes (or reads) which part of
//! the file, and which pieces of each process's data go to it.
//!
//! In a collective access with an interleaved view every process holds
//! many small runs of the file; written independently they are many small
//! `pwrite`s, and on a replicated file many read-modify-writes of shared
//! blocks. Two-phase I/O (ROMIO's) first exchanges the data so that each of
//! a few aggregators holds one contiguous file domain, then each writes its
//! domain in large runs. Domains start on block boundaries, so no two
//! aggregators ever touch the same replicated block; each is handled in
//! rounds of at most the buffer size, which bounds the memory an
//! aggregator needs.

use crate::view::Extent;

/// Who handles which part of the accessed byte range, in how many rounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    start_bytes: u64,
    end_bytes: u64,
    domain_bytes: u64,
    round_bytes: u64,
    /// The rank of each aggregator, in file order of their domains.
    pub aggregators: Vec<usize>,
    /// Exchange rounds every process takes part in.
    pub rounds: u64,
}

impl Plan {
    /// A plan for the bytes `[start, end)` accessed by `ranks` processes,
    /// with at most `aggregator_count` aggregators, domains aligned to
    /// `alignment_bytes` and at most `buffer_bytes` per aggregator and round.
    pub fn new(
        start_bytes: u64,
        end_bytes: u64,
        ranks: usize,
        aggregator_count: usize,
        alignment_bytes: u64,
        buffer_bytes: u64,
    ) -> Plan {
        let alignment = alignment_bytes.max(1);
        let aligned_start = start_bytes / alignment * alignment;
        let span = end_bytes.saturating_sub(aligned_start);
        let wanted = aggregator_count.clamp(1, ranks.max(1)) as u64;
        let domain = span.div_ceil(wanted).div_ceil(alignment).max(1) * alignment;
        // Fewer aggregators when alignment makes domains larger.
        let count = span.div_ceil(domain).max(1);
        let round = buffer_bytes.max(alignment).div_ceil(alignment) * alignment;
        let aggregators = (0..count)
            .map(|index| (index as usize * ranks.max(1)) / count as usize)
            .collect();
        Plan {
            start_bytes: aligned_start,
            end_bytes,
            domain_bytes: domain,
            round_bytes: round,
            aggregators,
            rounds: domain.div_ceil(round),
        }
    }

    /// The bytes aggregator `index` handles in round `round`: `[lo, hi)`,
    /// empty when `lo >= hi`.
    pub fn window(&self, index: usize, round: u64) -> (u64, u64) {
        let domain_start = self.start_bytes + index as u64 * self.domain_bytes;
        let domain_end = (domain_start + self.domain_bytes).min(self.end_bytes);
        let low = domain_start + round * self.round_bytes;
        let high = (low + self.round_bytes).min(domain_end);
        (low, high.max(low))
    }
}

/// A run of one process's data that falls in one window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Where it goes in the file.
    pub offset_bytes: u64,
    /// Its length.
    pub length_bytes: u64,
    /// Where it is in the process's packed data.
    pub packed_offset_bytes: u64,
}

/// A process's extents in file order, with their packed positions, ready
/// to be cut into windows.
#[derive(Clone, Debug)]
pub struct Access {
    extents: Vec<Extent>,
    packed_starts: Vec<u64>,
}

impl Access {
    /// `extents` in view order; None unless they are in increasing file
    /// order without overlap (MPI's rule for filetypes makes them so; a
    /// caller falls back to independent I/O otherwise).
    pub fn new(extents: Vec<Extent>) -> Option<Access> {
        let ordered = extents
            .windows(2)
            .all(|pair| pair[0].offset_bytes + pair[0].length_bytes <= pair[1].offset_bytes);
        if !ordered {
            return None;
        }
        let mut packed_starts = Vec::with_capacity(extents.len());
        let mut position = 0;
        for extent in &extents {
            packed_starts.push(position);
            position += extent.length_bytes;
        }
        Some(Access {
            extents,
            packed_starts,
        })
    }

    /// First and one-past-last file byte, if any.
    pub fn bounds(&self) -> Option<(u64, u64)> {
        let first = self.extents.first()?;
        let last = self.extents.last()?;
        Some((first.offset_bytes, last.offset_bytes + last.length_bytes))
    }

    /// The pieces inside `[low, high)`.
    pub fn pieces_in(&self, low: u64, high: u64) -> Vec<Piece> {
        let mut pieces = Vec::new();
        if low >= high {
            return pieces;
        }
        let first = self
            .extents
            .partition_point(|extent| extent.offset_bytes + extent.length_bytes <= low);
        for (extent, packed) in self.extents[first..]
            .iter()
            .zip(&self.packed_starts[first..])
        {
            if extent.offset_bytes >= high {
                break;
            }
            let start = extent.offset_bytes.max(low);
            let end = (extent.offset_bytes + extent.length_bytes).min(high);
            pieces.push(Piece {
                offset_bytes: start,
                length_bytes: end - start,
                packed_offset_bytes: packed + (start - extent.offset_bytes),
            });
        }
        pieces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extent(offset_bytes: u64, length_bytes: u64) -> Extent {
        Extent {
            offset_bytes,
            length_bytes,
        }
    }

    #[test]
    fn windows_tile_the_range_on_aligned_boundaries() {
        let plan = Plan::new(100, 10_000, 8, 3, 1024, 2048);
        let mut covered = Vec::new();
        for index in 0..plan.aggregators.len() {
            for round in 0..plan.rounds {
                let (low, high) = plan.window(index, round);
                if low < high {
                    assert!(high - low <= 2048);
                    covered.push((low, high));
                }
            }
        }
        covered.sort();
        assert_eq!(covered.first().unwrap().0, 0);
        assert_eq!(covered.last().unwrap().1, 10_000);
        for pair in covered.windows(2) {
            assert_eq!(pair[0].1, pair[1].0);
        }
        // Domain boundaries are block-aligned.
        for index in 1..plan.aggregators.len() {
            assert_eq!(plan.window(index, 0).0 % 1024, 0);
        }
        assert_eq!(plan.aggregators, vec![0, 2, 5]);
    }

    #[test]
    fn small_ranges_get_fewer_aggregators() {
        let plan = Plan::new(0, 100, 16, 8, 4096, 1 << 20);
        assert_eq!(plan.aggregators, vec![0]);
        assert_eq!(plan.rounds, 1);
        assert_eq!(plan.window(0, 0), (0, 100));
    }

    #[test]
    fn pieces_cut_extents_at_window_edges() {
        let access = Access::new(vec![extent(0, 10), extent(20, 10), extent(40, 10)]).unwrap();
        assert_eq!(access.bounds(), Some((0, 50)));
        assert_eq!(
            access.pieces_in(5, 25),
            vec![
                Piece {
                    offset_bytes: 5,
                    length_bytes: 5,
                    packed_offset_bytes: 5
                },
                Piece {
                    offset_bytes: 20,
                    length_bytes: 5,
                    packed_offset_bytes: 10
                },
            ]
        );
        assert!(access.pieces_in(10, 20).is_empty());
        assert_eq!(access.pieces_in(0, 100).len(), 3);
        assert!(Access::new(vec![extent(10, 5), extent(0, 5)]).is_none());
    }
}
