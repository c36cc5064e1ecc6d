#!/bin/sh
# Coverage-guided fuzzing of every decoder of outside input (issue 16, item 7):
# each cargo-fuzz target under fuzz/ is built and run for FUZZ_SECONDS
# (default 10), starting from its seeds in fuzz/seeds/<target>/ (kept in the
# repository) and a scratch corpus; a crash, a panic or a leak of the input's
# bounds fails the script (libFuzzer exits non-zero and leaves the input in
# fuzz/artifacts/<target>/: add it to the seeds with the fix).
#
# libFuzzer's seed is fixed (FUZZ_SEED, default 1): a run explores the same
# inputs in the same order, only as far as its time allows, so CI does not
# fail one day on what it passed the day before. Explore anew with another
# FUZZ_SEED and a longer FUZZ_SECONDS.
#
# cargo-fuzz needs nightly rustc flags; RUSTC_BOOTSTRAP=1 lets the stable
# toolchain CI already has accept them, and `--sanitizer none` needs no
# nightly standard library. cargo-fuzz itself comes from crates.io.
set -eu
cd "$(dirname "$0")/.."
[ -d "$HOME/.cargo/bin" ] && PATH="$HOME/.cargo/bin:$PATH"
seconds="${FUZZ_SECONDS:-10}"
seed="${FUZZ_SEED:-1}"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install --locked cargo-fuzz
fi
export RUSTC_BOOTSTRAP=1
cargo fuzz build --sanitizer none -O
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for target in $(cargo fuzz list); do
    mkdir -p "$scratch/$target" "fuzz/seeds/$target"
    echo "fuzz: $target for ${seconds} s"
    cargo fuzz run --sanitizer none -O "$target" "$scratch/$target" "fuzz/seeds/$target" -- \
        -max_total_time="$seconds" -seed="$seed" -print_final_stats=0 2>"$scratch/$target.log" || {
        tail -n 40 "$scratch/$target.log" >&2
        echo "fuzz: $target failed (input kept in fuzz/artifacts/$target/)" >&2
        exit 1
    }
    tail -n 1 "$scratch/$target.log"
done
