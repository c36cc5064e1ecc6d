//! ULFM frames (agreement messages, revokes) and member sets on random and
//! mutated input (issue 16, item 7; `resmpi_fuzz_input`): never a panic;
//! an accepted frame re-encodes to one that decodes the same.
use resmpi_ft::member_set::MemberSet;
use resmpi_ft::ulfm::{decode_frame, encode_frame, UlfmFrame};
use resmpi_fuzz_input::Inputs;

#[test]
fn ulfm_frames_from_random_and_mutated_bytes_decode_or_fail_cleanly() {
    let revoke = encode_frame(&UlfmFrame::Revoke { context: 12 });
    let mut set = Vec::new();
    MemberSet::from_fn(9, |index| index % 2 == 0).encode(&mut set);
    Inputs::new(7).check(&[&revoke], 50_000, 256, |bytes| {
        if let Some(frame) = decode_frame(bytes) {
            assert_eq!(decode_frame(&encode_frame(&frame)), Some(frame));
        }
    });
    Inputs::new(8).check(&[&set], 20_000, 64, |bytes| {
        for size in [0, 1, 9, 64, 1000] {
            let _ = MemberSet::decode(size, bytes);
        }
    });
}
