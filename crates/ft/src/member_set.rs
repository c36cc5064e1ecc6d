//! A set of participants of one communicator (ranks `0..size`), as a
//! bitmap: agreement decisions carry two of them (the failed processes and
//! the acknowledged ones), so they must be small on the wire and cheap to
//! intersect and unite.

/// Participants `0..size` of a communicator, one bit each.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MemberSet {
    size: usize,
    words: Vec<u64>,
}

impl MemberSet {
    /// The empty set over `size` participants.
    pub fn empty(size: usize) -> MemberSet {
        MemberSet {
            size,
            words: vec![0; size.div_ceil(64)],
        }
    }

    /// The set over `size` participants holding every member `member(i)` is true for.
    pub fn from_fn(size: usize, member: impl Fn(usize) -> bool) -> MemberSet {
        let mut set = MemberSet::empty(size);
        for index in (0..size).filter(|&index| member(index)) {
            set.insert(index);
        }
        set
    }

    /// Participants the set ranges over.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Add `index` (ignored when out of range).
    pub fn insert(&mut self, index: usize) {
        if index < self.size {
            self.words[index / 64] |= 1 << (index % 64);
        }
    }

    /// Whether `index` is a member.
    pub fn contains(&self, index: usize) -> bool {
        index < self.size && self.words[index / 64] & (1 << (index % 64)) != 0
    }

    /// Members, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.size).filter(|&index| self.contains(index))
    }

    /// Number of members.
    pub fn count(&self) -> usize {
        self.words
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    /// Add every member of `other` (same size).
    pub fn unite(&mut self, other: &MemberSet) {
        for (word, other) in self.words.iter_mut().zip(&other.words) {
            *word |= other;
        }
    }

    /// Keep only the members also in `other` (same size).
    pub fn intersect(&mut self, other: &MemberSet) {
        for (word, other) in self.words.iter_mut().zip(&other.words) {
            *word &= other;
        }
    }

    /// Whether every member is also in `other`.
    pub fn is_subset(&self, other: &MemberSet) -> bool {
        self.words
            .iter()
            .zip(&other.words)
            .all(|(word, other)| word & !other == 0)
    }

    /// Bytes of the wire form for `size` participants.
    pub fn encoded_len(size: usize) -> usize {
        size.div_ceil(8)
    }

    /// Append the bitmap (little-endian bit order, `encoded_len` bytes).
    pub fn encode(&self, out: &mut Vec<u8>) {
        for byte in 0..MemberSet::encoded_len(self.size) {
            out.push((self.words[byte / 8] >> ((byte % 8) * 8)) as u8);
        }
    }

    /// Read a bitmap of `size` participants; None when `bytes` is too short
    /// or names a participant past `size`.
    pub fn decode(size: usize, bytes: &[u8]) -> Option<MemberSet> {
        let length = MemberSet::encoded_len(size);
        let bytes = bytes.get(..length)?;
        let mut set = MemberSet::empty(size);
        for (byte_index, &byte) in bytes.iter().enumerate() {
            set.words[byte_index / 8] |= u64::from(byte) << ((byte_index % 8) * 8);
        }
        if !size.is_multiple_of(8) && length > 0 && bytes[length - 1] >> (size % 8) != 0 {
            return None;
        }
        Some(set)
    }
}

#[cfg(test)]
mod tests {
    use super::MemberSet;

    #[test]
    fn sets_round_trip_through_their_wire_form() {
        for size in [0, 1, 7, 8, 9, 63, 64, 65, 130] {
            let set = MemberSet::from_fn(size, |index| index % 3 == 1);
            let mut bytes = Vec::new();
            set.encode(&mut bytes);
            assert_eq!(bytes.len(), MemberSet::encoded_len(size));
            assert_eq!(MemberSet::decode(size, &bytes), Some(set));
        }
    }

    #[test]
    fn a_bitmap_naming_a_member_past_the_size_is_refused() {
        assert_eq!(MemberSet::decode(3, &[0b1000]), None);
        assert_eq!(MemberSet::decode(9, &[0]), None);
    }

    #[test]
    fn union_intersection_and_subset() {
        let mut left = MemberSet::from_fn(70, |index| index < 10);
        let right = MemberSet::from_fn(70, |index| (5..66).contains(&index));
        assert!(!left.is_subset(&right));
        left.intersect(&right);
        assert_eq!(left.iter().collect::<Vec<_>>(), vec![5, 6, 7, 8, 9]);
        assert!(left.is_subset(&right));
        left.unite(&right);
        assert_eq!(left.count(), 61);
    }
}
