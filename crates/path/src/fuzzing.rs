//! Entry points of the decoder fuzzers (issue 16, item 7) for decoders
//! that are private to this crate: the shm ring's records and both sides of
//! the TCP handshake. Public so that the bounded `decoders_fuzz` tests
//! (stable, every `cargo test`) and the cargo-fuzz targets in `fuzz/`
//! (nightly, open-ended) drive the same code with the same input shapes;
//! not part of the API a rank uses.

use crate::PathError;

/// Run a consumer and a producer over a ring laid out from `bytes` (see
/// `ring::fuzz_records` for the layout). Ok(frames delivered) or the
/// consumer's protocol error; it panics only if a decoder is broken.
pub fn ring_records(bytes: &[u8]) -> Result<usize, String> {
    crate::ring::fuzz_records(bytes)
}

/// The acceptor's side of a TCP handshake with a stranger who sends `bytes`:
/// true if the stranger was taken for a rank (a bug: it does not know the
/// secret). Errors are of the loopback sockets the fuzzer uses.
pub fn tcp_acceptor_handshake(bytes: &[u8]) -> std::io::Result<bool> {
    crate::tcp::fuzz_acceptor_handshake(bytes)
}

/// The connector's side of a TCP handshake answered by a stranger with
/// `bytes`: Ok only if the stranger proved the secret (a bug).
pub fn tcp_connector_handshake(bytes: &[u8]) -> Result<(), PathError> {
    crate::tcp::fuzz_connector_handshake(bytes)
}

/// A well-formed handshake hello of `rank`, for seeds.
pub fn tcp_hello(rank: u32) -> Vec<u8> {
    crate::tcp::fuzz_hello(rank)
}
