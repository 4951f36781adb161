//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the
//! very checks the fuzz targets run — `fuzz/src/lib.rs` is compiled into this
//! test — on stable Rust, on every CI run. A corpus file that makes a check
//! panic fails this test with the file's name. Crashing inputs found by the
//! fuzzer are added to the corpus as regressions, so they are replayed here
//! forever.

#[allow(dead_code)]
#[path = "../../fuzz/src/lib.rs"]
mod checks;
use crate::common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

/// Runs `check` over every file of `fuzz/corpus/<target>/`; returns how many.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let mut failures = Vec::new();
    for path in &files {
        let data = std::fs::read(path).unwrap();
        if catch_unwind(AssertUnwindSafe(|| check(&data))).is_err() {
            failures.push(path.display().to_string());
        }
    }
    assert!(
        failures.is_empty(),
        "{target}: failing inputs {failures:#?}"
    );
    files.len()
}

#[test]
fn store_ops_corpus() {
    // The only replay that reaches sled: a hang is a failure, not a stuck run.
    let n = common::with_timeout(common::TEST_LIMIT, || {
        replay("store_ops", checks::store_ops)
    });
    assert!(n >= 10);
}

#[test]
fn decode_frame_corpus() {
    assert!(replay("decode_frame", checks::decode_frame) >= 10);
}

#[test]
fn decode_meta_corpus() {
    assert!(replay("decode_meta", checks::decode_meta) >= 10);
}

#[test]
fn decode_filter_corpus() {
    assert!(replay("decode_filter", checks::decode_filter) >= 10);
}

#[test]
fn roundtrip_filter_corpus() {
    assert!(replay("roundtrip_filter", checks::roundtrip_filter) >= 10);
}

#[test]
fn split_block_ops_corpus() {
    assert!(replay("split_block_ops", checks::split_block_ops) >= 10);
}

/// The fix-up that lets the fuzzer past the checksum does what it claims: a
/// valid file is left alone, and a file whose CRC was corrupted gets a
/// repaired twin that decodes again.
#[test]
fn checks_are_not_vacuous() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures/v1");
    let file = std::fs::read(dir.join("bit_standard.fsf")).unwrap();
    assert!(filterstore::decode_filter(&file).is_ok());
    // The fixed-up copy of a valid file is the file itself: one variant only.
    assert_eq!(checks::with_valid_frame(&file), vec![file.clone()]);
    // A corrupted CRC gets a fixed-up twin that decodes again.
    let mut bad = file.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let variants = checks::with_valid_frame(&bad);
    assert_eq!(variants.len(), 2);
    assert!(filterstore::decode_filter(&variants[1]).is_ok());
}

#[test]
fn decode_message_corpus() {
    assert!(replay("decode_message", checks::decode_message) >= 10);
}

#[test]
fn roundtrip_message_corpus() {
    assert!(replay("roundtrip_message", checks::roundtrip_message) >= 10);
}
