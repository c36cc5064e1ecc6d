//! Randomness for job ids and job secrets. It comes from the kernel
//! (`/dev/urandom`) because a secret that peers prove on connect is worthless
//! if it can be guessed from a clock or a pid.

use std::fs::File;
use std::io::Read;

/// `count` bytes from `/dev/urandom`.
///
/// # Panics
/// When `/dev/urandom` cannot be read: a job must not start with a
/// predictable secret.
pub fn random_bytes(count: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; count];
    File::open("/dev/urandom")
        .and_then(|mut file| file.read_exact(&mut bytes))
        .unwrap_or_else(|error| panic!("cannot read /dev/urandom for a job secret: {error}"));
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_bytes_has_the_length_asked_and_differs_between_calls() {
        let first = random_bytes(32);
        let second = random_bytes(32);
        assert_eq!(first.len(), 32);
        assert_ne!(first, second);
        assert!(random_bytes(0).is_empty());
    }
}
