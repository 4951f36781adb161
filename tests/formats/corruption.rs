//! Corruption of real files: every single-bit flip, every byte inverted and
//! every truncation of every committed fixture — the filter files of v1, v2
//! (the split-block layout), v4 (XXH3-64) and v6 (XXH3-64 sectorized), and
//! the exchange messages of v1 and v2 — is
//! refused with a typed [`CodecError`] — never a panic, never `Ok`.
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

use crate::format_common;

use filterstore::{decode_filter, inspect};
use filterstore::{decode_frame, encode_frame};
use filterstore::{decode_message, BitFilter, BloomRead, CodecError, ExchangeError};
use std::path::PathBuf;

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    // Four of format 1; the split-block layout's two of format 2; the
    // XXH3-64 hash's two of format 4; the XXH3-64 sectorized hash's two of
    // format 6.
    for (version, count) in [(1, 4), (2, 2), (4, 2), (6, 2)] {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(format!("migrations/fixtures/v{version}"));
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "fsf"))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (format!("v{version}/{name}"), std::fs::read(&p).unwrap())
            })
            .collect();
        files.sort();
        assert_eq!(files.len(), count, "filter fixtures in {dir:?}");
        out.extend(files);
    }
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
        each_single_byte_change(&name, &file, refused);
    }
}

/// Every single-bit flip and every byte inversion of `file`, each refused
/// (`refuse` returns the error) with the error family its position implies.
fn each_single_byte_change(name: &str, file: &[u8], refuse: impl Fn(&[u8], &str) -> CodecError) {
    let mut bad = file.to_vec();
    for at in 0..file.len() {
        for mask in (0..8).map(|b| 1u8 << b).chain([0xff]) {
            bad[at] ^= mask;
            let what = format!("{name}: byte {at} ^ {mask:#04x}");
            let err = refuse(&bad, &what);
            check_family(&err, at, file.len(), &what);
            bad[at] ^= mask;
        }
    }
    assert_eq!(bad, file);
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
            // The hash byte of a version-4 or version-6 blocked file
            // (XXH3-64, id 3; XXH3-64 sectorized, id 4) re-framed as version
            // 1 has one valid value, 1 (XXH3-128): a different filter of the
            // same bytes, like another valid k.
            let newer_hash = name.starts_with("v4/") || name.starts_with("v6/");
            let must_refuse = matches!(at, 2..=3 | 32..=47) || (at == 1 && !newer_hash);
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

// ---- Exchange messages (v1 and v2 fixtures, `*.fsm`) ----

fn message_fixtures() -> Vec<(String, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures");
    let mut out = Vec::new();
    for version in ["v1", "v2"] {
        for e in std::fs::read_dir(root.join(version)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "fsm") {
                let name = format!("{version}/{}", p.file_name().unwrap().to_string_lossy());
                out.push((name, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    assert_eq!(
        out.len(),
        5,
        "expected two v1 and three v2 message fixtures"
    );
    out
}

/// Decodes `bytes` as a message all the way (a full message's filter, a
/// delta applied to a zero base of its shape); the error it must produce.
fn message_refused(bytes: &[u8], what: &str) -> CodecError {
    let err = match decode_message(bytes) {
        Ok(m) => {
            let whole = if m.is_delta() {
                let zero = BitFilter::new(*m.params()).unwrap();
                m.apply_to(&zero, m.base_version).map(|_| ())
            } else {
                m.filter().map(|_| ())
            };
            match whole {
                Ok(()) => panic!("{what}: accepted"),
                Err(e) => e,
            }
        }
        Err(e) => e,
    };
    assert!(!err.to_string().is_empty());
    match err {
        ExchangeError::Codec(e) => e,
        other => panic!("{what}: not a codec error: {other:?}"),
    }
}

#[test]
fn every_message_flip_inversion_and_truncation_is_refused() {
    for (name, file) in message_fixtures() {
        assert!(decode_message(&file).is_ok(), "{name} itself must decode");
        each_single_byte_change(&name, &file, message_refused);
        for len in 0..file.len() {
            let what = format!("{name}: truncated to {len} bytes");
            match message_refused(&file[..len], &what) {
                CodecError::Truncated { needed, found } => {
                    assert_eq!(found, len as u64, "{what}");
                    assert!(needed > found, "{what}");
                }
                other => panic!("{what}: {other:?}"),
            }
        }
        let mut long = file.clone();
        long.push(0);
        assert_eq!(
            message_refused(&long, &name),
            CodecError::TrailingBytes { extra: 1 }
        );
    }
}

/// Changes that keep the CRC valid, in the message fields and the build
/// statistics (body bytes 48..96): the reserved bytes and, in a version-2
/// message, statistics with more distinct keys than rows must be refused;
/// every other change must decode (or be refused) without a panic, and
/// whatever decodes answers queries.
#[test]
fn message_field_changes_with_a_valid_crc() {
    for (name, file) in message_fixtures() {
        let frame = filterstore::decode_frame(&file).unwrap();
        let has_stats = frame.flags & 1 != 0;
        let end = if has_stats { 96 } else { 80 };
        let mut b = frame.body.to_vec();
        let sign = |body: &[u8]| {
            let mut bytes = filterstore::encode_frame(frame.kind, frame.flags, body);
            bytes[4..8].copy_from_slice(&file[4..8]); // the fixture's versions
            let crc_at = bytes.len() - 4;
            let crc = format_common::crc32(&bytes[..crc_at]);
            bytes[crc_at..].copy_from_slice(&crc.to_le_bytes());
            bytes
        };
        // The re-signing is sound: the unchanged body gives the file back.
        assert_eq!(sign(&b), file, "{name}");
        for at in 48..end {
            for mask in 1..=255u8 {
                b[at] ^= mask;
                let bytes = sign(&b);
                let stats_inverted = has_stats && {
                    let rows = u64::from_le_bytes(b[80..88].try_into().unwrap());
                    let distinct = u64::from_le_bytes(b[88..96].try_into().unwrap());
                    distinct > rows || (rows > 0 && distinct == 0)
                };
                match decode_message(&bytes) {
                    Ok(m) => {
                        assert!(
                            !(72..80).contains(&at) && !stats_inverted,
                            "{name}: body byte {at} ^ {mask:#04x} accepted"
                        );
                        if let Ok(f) = m.filter() {
                            let _ = f.contains(b"key-0000");
                        }
                    }
                    Err(e) => assert!(!e.to_string().is_empty()),
                }
                b[at] ^= mask;
            }
        }
    }
}
