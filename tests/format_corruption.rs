//! Corruption of real files: every single-bit flip, every byte inverted and
//! every truncation of every committed v1 fixture is refused with a typed
//! [`CodecError`] — never a panic, never `Ok`.
//!
//! Why this can hold for *every* single-byte change: the frame's CRC32 covers
//! header and body, and CRC-32 detects every burst error of at most 32 bits,
//! so any change confined to one byte (and any change of the stored CRC
//! itself) yields a mismatch — unless an earlier, structural check refuses the
//! bytes first (magic, version, kind, reserved, length). The test asserts which
//! error family each position produces, so it also shows that the structural
//! checks run before the checksum. Truncations are refused by the frame's
//! declared length before any checksum is computed.
//!
//! Each file is a few hundred bytes to 1.1 KB: 9 variants per byte plus every
//! prefix is about 25,000 decodes in all, well under a second.

use filterstore::CodecError;
use filterstore::{decode_filter, inspect};
use filterstore::{decode_frame, encode_frame};
use std::path::PathBuf;

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures/v1");
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "fsf"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    assert_eq!(out.len(), 4, "expected the four v1 fixtures in {dir:?}");
    out
}

/// The decoder's verdict on `bytes`, which must be an error; `inspect` must
/// agree with `decode_filter` on every input.
fn refused(bytes: &[u8], what: &str) -> CodecError {
    let err = match decode_filter(bytes) {
        Ok(d) => panic!("{what}: accepted as {:?}", d.descriptor),
        Err(e) => e,
    };
    assert_eq!(inspect(bytes).err().as_ref(), Some(&err), "{what}");
    // Every error explains itself.
    assert!(!err.to_string().is_empty());
    err
}

/// Which error a change at byte `at` of a valid file must produce.
fn check_family(err: &CodecError, at: usize, len: usize, what: &str) {
    let ok = match at {
        0..=3 => matches!(err, CodecError::BadMagic { .. }),
        4..=7 => matches!(
            err,
            CodecError::UnsupportedVersion { .. }
                | CodecError::VersionTooOld { .. }
                | CodecError::ChecksumMismatch { .. }
        ),
        8 => matches!(
            err,
            CodecError::UnknownKind(_)
                | CodecError::WrongKind { .. }
                | CodecError::ChecksumMismatch { .. }
        ),
        10 | 11 | 20..=23 => matches!(err, CodecError::ReservedNotZero),
        12..=19 => matches!(
            err,
            CodecError::Truncated { .. } | CodecError::TrailingBytes { .. }
        ),
        // Flags, body and the stored CRC itself: the checksum.
        _ => {
            debug_assert!(at == 9 || (24..len).contains(&at));
            matches!(err, CodecError::ChecksumMismatch { .. })
        }
    };
    assert!(ok, "{what}: unexpected error {err:?}");
}

#[test]
fn every_bit_flip_and_byte_inversion_is_refused() {
    for (name, file) in fixtures() {
        assert!(decode_filter(&file).is_ok(), "{name} itself must decode");
        let mut bad = file.clone();
        for at in 0..file.len() {
            for mask in (0..8).map(|b| 1u8 << b).chain([0xff]) {
                bad[at] ^= mask;
                let what = format!("{name}: byte {at} ^ {mask:#04x}");
                let err = refused(&bad, &what);
                check_family(&err, at, file.len(), &what);
                bad[at] ^= mask;
            }
        }
        assert_eq!(bad, file);
    }
}

#[test]
fn every_truncation_is_refused() {
    for (name, file) in fixtures() {
        for len in 0..file.len() {
            let what = format!("{name}: truncated to {len} bytes");
            match refused(&file[..len], &what) {
                CodecError::Truncated { needed, found } => {
                    assert_eq!(found, len as u64, "{what}");
                    assert!(needed > found, "{what}");
                }
                // Fewer than four bytes is too short even for the magic; four
                // to 27 bytes are too short for any frame: both are `Truncated`.
                other => panic!("{what}: {other:?}"),
            }
        }
    }
}

#[test]
fn appended_bytes_are_refused() {
    for (name, file) in fixtures() {
        for extra in [&[0u8][..], &[0, 0, 0, 0], &file[..]] {
            let mut long = file.clone();
            long.extend_from_slice(extra);
            assert_eq!(
                refused(&long, &name),
                CodecError::TrailingBytes {
                    extra: extra.len() as u64
                },
                "{name} + {} bytes",
                extra.len()
            );
        }
    }
}

/// A change that keeps the CRC valid (a forger's, or a buggy writer's) gets
/// past the checksum, so it is the field checks that must catch it. Each
/// descriptor byte is changed in every possible way and the CRC recomputed:
///
/// * hash algorithm, counter width, codec, payload length and the reserved
///   bytes admit exactly one value each for this file, so every change must
///   be refused;
/// * layout, k, seed, m and n have other valid values (k = 6 is as valid as
///   k = 7): there only the CRC stands between a corrupted file and wrong
///   answers, which is why it covers every byte. The decoder must still never
///   panic, and any filter it returns must answer queries without panicking.
#[test]
fn descriptor_changes_with_a_valid_crc() {
    let probe: Vec<Vec<u8>> = (0..64)
        .map(|i| format!("key-{i:04}").into_bytes())
        .collect();
    for (name, file) in fixtures() {
        let frame = decode_frame(&file).unwrap();
        let (body, kind) = (frame.body, frame.kind);
        let mut b = body.to_vec();
        for at in 0..48 {
            let must_refuse = matches!(at, 1..=3 | 32..=47);
            for mask in 1..=255u8 {
                b[at] ^= mask;
                match decode_filter(&encode_frame(kind, 0, &b)) {
                    Err(e) => assert!(!e.to_string().is_empty()),
                    Ok(d) => {
                        assert!(
                            !must_refuse,
                            "{name}: descriptor byte {at} ^ {mask:#04x} accepted: {:?}",
                            d.descriptor
                        );
                        for k in &probe {
                            let _ = d.contains(k);
                        }
                    }
                }
                b[at] ^= mask;
            }
        }
    }
}
