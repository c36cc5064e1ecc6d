//! Random and mutated byte strings for the decoder tests that every build
//! runs (issue 16, item 7).
//!
//! Why not only `cargo fuzz`: its coverage-guided targets (in `fuzz/`) need
//! the nightly toolchain and run for as long as one lets them, so CI could
//! not run them on every commit. These inputs are derived deterministically
//! from a seed and a small corpus of valid encodings (so that mutations get
//! past the first length and magic checks), run on the stable toolchain in
//! bounded time, and are the same on every machine: a decoder that panics,
//! loops or accepts what it cannot re-encode fails `cargo test` with the
//! input that did it. The corpus entries are the ones `fuzz/corpus/` keeps
//! for the deep runs.

/// A deterministic source of test inputs (xorshift64*: fast, no
/// dependency, and the same sequence everywhere).
#[derive(Clone, Debug)]
pub struct Inputs {
    state: u64,
}

/// Byte values that sit at the edges of what decoders check.
const INTERESTING_BYTES: [u8; 8] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff, b' ', b'='];

impl Inputs {
    /// The inputs of `seed` (any value; 0 is replaced by a fixed one).
    pub fn new(seed: u64) -> Inputs {
        Inputs {
            state: if seed == 0 {
                0x9e37_79b9_7f4a_7c15
            } else {
                seed
            },
        }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `bound` (> 0).
    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    /// One input: a corpus entry changed in 1 to 8 places (a bit flipped, a
    /// byte set to an edge value, bytes cut off or added, a piece of
    /// another entry spliced in), or, one time in eight (or when the corpus
    /// is empty), random bytes of a random length up to `max_len_bytes`.
    pub fn next_case(&mut self, corpus: &[&[u8]], max_len_bytes: usize) -> Vec<u8> {
        if corpus.is_empty() || self.below(8) == 0 {
            let length = self.below(max_len_bytes + 1);
            return (0..length).map(|_| self.next() as u8).collect();
        }
        let mut case = corpus[self.below(corpus.len())].to_vec();
        for _ in 0..1 + self.below(8) {
            match self.below(5) {
                0 if !case.is_empty() => {
                    let at = self.below(case.len());
                    case[at] ^= 1 << self.below(8);
                }
                1 if !case.is_empty() => {
                    let at = self.below(case.len());
                    case[at] = INTERESTING_BYTES[self.below(INTERESTING_BYTES.len())];
                }
                2 if !case.is_empty() => {
                    let keep = self.below(case.len());
                    case.truncate(keep);
                }
                3 if case.len() < max_len_bytes => {
                    let extra = self.below(16) + 1;
                    for _ in 0..extra {
                        case.push(self.next() as u8);
                    }
                }
                _ => {
                    let other = corpus[self.below(corpus.len())];
                    if !other.is_empty() && !case.is_empty() {
                        let from = self.below(other.len());
                        let to = self.below(case.len());
                        let length = self.below(other.len() - from) + 1;
                        case.splice(to..to, other[from..from + length].iter().copied());
                    }
                }
            }
        }
        case.truncate(max_len_bytes);
        case
    }

    /// Call `check` with the corpus entries themselves, then `count` cases
    /// of [`next_case`](Self::next_case).
    pub fn check(
        &mut self,
        corpus: &[&[u8]],
        count: usize,
        max_len_bytes: usize,
        mut check: impl FnMut(&[u8]),
    ) {
        for entry in corpus {
            check(entry);
        }
        for _ in 0..count {
            let case = self.next_case(corpus, max_len_bytes);
            check(&case);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Inputs;

    #[test]
    fn the_same_seed_gives_the_same_inputs_and_mutations_stay_bounded() {
        let corpus: [&[u8]; 2] = [b"cmd=get key=a", b"\x00\x01\x02\x03"];
        let first: Vec<Vec<u8>> = {
            let mut inputs = Inputs::new(7);
            (0..500).map(|_| inputs.next_case(&corpus, 64)).collect()
        };
        let mut again = Inputs::new(7);
        for case in &first {
            assert_eq!(&again.next_case(&corpus, 64), case);
            assert!(case.len() <= 64);
        }
        let distinct: std::collections::HashSet<_> = first.iter().collect();
        assert!(
            distinct.len() > 300,
            "only {} distinct inputs",
            distinct.len()
        );
        assert!(
            first.iter().any(|case| case.starts_with(b"cmd=")),
            "mutations keep corpus prefixes"
        );
    }
}
