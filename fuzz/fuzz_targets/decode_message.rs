//! Fuzz target `decode_message`: see `filterstore_fuzz::decode_message` (fuzz/src/lib.rs) for
//! what it checks; `tests/formats/fuzz_corpus_replay.rs` runs the same check over
//! the committed corpus on stable Rust.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| filterstore_fuzz::decode_message(data));
