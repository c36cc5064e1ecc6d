//! `--inject` specs on random and mutated text (issue 16, item 7;
//! `resmpi_fuzz_input`): a spec is accepted or refused with a message,
//! never a panic.
use resmpi_fuzz_input::Inputs;
use resmpi_path::inject_spec::FaultSpec;

#[test]
fn inject_specs_from_random_and_mutated_text_parse_or_fail_cleanly() {
    let corpus: [&[u8]; 5] = [
        b"drop:1e-3",
        b"corrupt:0.01@ranks=0-1,delay:5ms",
        b"rail-down:1@0.2s@ranks=0-3",
        b"kill:2@sends=100",
        b"kill:1.0@0.5s,seed=7",
    ];
    let mut accepted = 0;
    Inputs::new(6).check(&corpus, 50_000, 128, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        if text.parse::<FaultSpec>().is_ok() {
            accepted += 1;
        }
    });
    assert!(
        accepted >= corpus.len(),
        "the corpus itself parses ({accepted})"
    );
}
