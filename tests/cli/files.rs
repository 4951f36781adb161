//! The file commands of `filterstore`, run as a separate process: `export`
//! (bit, counting, compressed), `inspect` (filter files and exchange
//! messages, text and JSON), `probe` and `estimate`; every defect is one line
//! on stderr with a non-zero status, never a panic.

use crate::cli_common;

use cli_common::*;
use std::path::{Path, PathBuf};
use std::process::Output;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations/fixtures/v1")
        .join(name)
}

/// A store with table `t` (blocked, 2,000 keys inserted, `key0`..`key99`
/// removed) and table `s` (standard layout, `key1000`..`key2999`).
fn store(dir: &Path) -> PathBuf {
    let db = dir.join("db");
    ok(&create(&db, "t", &[]));
    ok(&run(&db, &["insert", "t"], &lines(0..2000)));
    ok(&run(&db, &["remove", "t"], &lines(0..100)));
    ok(&create(&db, "s", &["--layout", "standard"]));
    ok(&run(&db, &["insert", "s"], &lines(1000..3000)));
    db
}

/// `create NAME --expected 2000 --fp 0.01 --seed 7`, plus `extra`.
fn create(db: &Path, name: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "create",
        name,
        "--expected",
        "2000",
        "--fp",
        "0.01",
        "--seed",
        "7",
    ];
    args.extend_from_slice(extra);
    run(db, &args, b"")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn export_inspect_probe_bit_and_counting() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let bit = dir.path().join("t.fsf");
    let counting = dir.path().join("t.counting.fsf");
    ok(&run(&db, &["export", "t", "-o", s(&bit)], b""));
    ok(&run(
        &db,
        &["export", "t", "--counting", "-o", s(&counting)],
        b"",
    ));
    // Standard output gets the same bytes when no file is named.
    let stdout = run(&db, &["export", "t"], b"");
    assert!(stdout.status.success());
    assert_eq!(stdout.stdout, std::fs::read(&bit).unwrap());

    let text = ok(&run(&db, &["inspect", s(&bit)], b""));
    assert!(text.contains("kind               bit-filter (1)"), "{text}");
    assert!(text.contains("(verified)"), "{text}");
    assert!(text.contains("n                  1900"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&run(&db, &["inspect", "--json", s(&counting)], b""))).unwrap();
    assert_eq!(json["kind"], "counting-filter");
    assert_eq!(json["n"], 1900);
    assert_eq!(json["seed"], 7);
    assert_eq!(json["layout"], "blocked");

    // Probe: every live key is printed (no false negatives), from a file or
    // stdin; of 1,000 absent keys at most 1% + 5σ (10 + 5·3.2 ≈ 26) pass.
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, lines(100..2000)).unwrap();
    for f in [&bit, &counting] {
        let out = ok(&run(&db, &["probe", s(f), s(&keys)], b""));
        assert_eq!(out.as_bytes(), lines(100..2000).as_slice());
        let out = ok(&run(&db, &["probe", s(f)], &lines(10_000..11_000)));
        assert!(out.lines().count() <= 26, "{}", out.lines().count());
    }
    // The two exports of one table answer alike (bit i set iff counter i > 0).
    let a = ok(&run(&db, &["probe", s(&bit)], &lines(0..20_000)));
    let b = ok(&run(&db, &["probe", s(&counting)], &lines(0..20_000)));
    assert_eq!(a, b);
}

#[test]
fn compressed_export_is_a_message_with_or_without_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let own = dir.path().join("own.msg");
    let built = dir.path().join("built.msg");
    ok(&run(
        &db,
        &["export", "s", "--compressed", "-o", s(&own)],
        b"",
    ));
    let json: serde_json::Value =
        serde_json::from_str(&ok(&run(&db, &["inspect", "--json", s(&own)], b""))).unwrap();
    assert_eq!(json["kind"], "exchange-full");
    assert_eq!(json["version"], 1);
    let own_len = std::fs::metadata(&own).unwrap().len();
    // Over budget: refused with the way out named.
    let err = fails(&run(
        &db,
        &[
            "export",
            "s",
            "--compressed",
            "--budget",
            "100",
            "-o",
            s(&built),
        ],
        b"",
    ));
    assert!(err.contains("--keys"), "{err}");
    assert!(!built.exists());
    // From the keys within a budget of 2,000 bytes (8 bits per key).
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, lines(1000..3000)).unwrap();
    ok(&run(
        &db,
        &[
            "export",
            "s",
            "--compressed",
            "--budget",
            "2000",
            "--keys",
            s(&keys),
            "-o",
            s(&built),
        ],
        b"",
    ));
    let built_len = std::fs::metadata(&built).unwrap().len();
    assert!(
        built_len <= 2000 && built_len < own_len,
        "{built_len} vs {own_len}"
    );
    let text = ok(&run(&db, &["inspect", s(&built)], b""));
    assert!(text.contains("exchange-full"), "{text}");
    for msg in [&own, &built] {
        let out = ok(&run(&db, &["probe", s(msg), s(&keys)], b""));
        assert_eq!(out.as_bytes(), lines(1000..3000).as_slice());
    }
    let err = fails(&run(
        &db,
        &["export", "s", "--compressed", "--counting"],
        b"",
    ));
    assert!(err.contains("exclude"), "{err}");
    let err = fails(&run(&db, &["export", "s", "--budget", "10"], b""));
    assert!(err.contains("--compressed"), "{err}");
    fails(&run(&db, &["export", "nope"], b""));
}

#[test]
fn estimate_sizes_and_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let (a, b) = (dir.path().join("a.fsf"), dir.path().join("b.fsf"));
    // Two tables of the same shape: t2 gets key1000..key2999 like s, but in
    // the blocked layout of t.
    ok(&create(&db, "t2", &[]));
    ok(&run(&db, &["insert", "t2"], &lines(1000..3000)));
    ok(&run(&db, &["export", "t", "-o", s(&a)], b""));
    ok(&run(&db, &["export", "t2", "--counting", "-o", s(&b)], b""));
    let v: serde_json::Value =
        serde_json::from_str(&ok(&run(&db, &["estimate", "--json", s(&a), s(&b)], b""))).unwrap();
    // True sizes: |A| = 1,900, |B| = 2,000, |A ∩ B| = 1,000, |A ∪ B| = 2,900.
    // The estimators' relative error at this fill is a few percent; 10%
    // leaves a wide margin while still catching a wrong formula.
    let near = |x: &serde_json::Value, want: f64| {
        let x = x.as_f64().unwrap();
        assert!((x - want).abs() <= 0.1 * want, "{x} vs {want}");
    };
    near(&v["a"]["estimated_keys"], 1900.0);
    near(&v["b"]["estimated_keys"], 2000.0);
    near(&v["union"], 2900.0);
    near(&v["intersection"], 1000.0);
    let text = ok(&run(&db, &["estimate", s(&a), s(&b)], b""));
    assert!(text.contains("intersection\t"), "{text}");
    // Different shapes cannot be compared.
    let c = dir.path().join("c.fsf");
    ok(&run(&db, &["export", "s", "-o", s(&c)], b""));
    let err = fails(&run(&db, &["estimate", s(&a), s(&c)], b""));
    assert!(err.contains("cannot be compared"), "{err}");
}

#[test]
fn committed_fixtures_are_inspected_and_probed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("unused");
    let keys: String = (0..200).map(|i| format!("key-{i:04}\n")).collect();
    for name in [
        "bit_standard.fsf",
        "bit_blocked.fsf",
        "counting_standard.fsf",
        "counting_blocked.fsf",
    ] {
        let f = fixture(name);
        let text = ok(&run(&db, &["inspect", s(&f)], b""));
        assert!(
            text.contains("seed               0xf11e5eed00000001"),
            "{text}"
        );
        let out = ok(&run(&db, &["probe", s(&f)], keys.as_bytes()));
        assert_eq!(out, keys, "{name}");
    }
}

#[test]
fn every_defect_is_one_line_and_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("unused");
    let good = std::fs::read(fixture("bit_blocked.fsf")).unwrap();
    let bad = dir.path().join("bad.fsf");
    // Truncations, a flipped payload byte, a flipped header byte, an empty
    // file and a missing one: each refused by every reading command.
    let cases: Vec<Vec<u8>> = vec![
        good[..good.len() - 1].to_vec(),
        good[..10].to_vec(),
        Vec::new(),
        {
            let mut b = good.clone();
            b[100] ^= 0x10;
            b
        },
        {
            let mut b = good.clone();
            b[4] ^= 0x01;
            b
        },
    ];
    for bytes in cases {
        std::fs::write(&bad, &bytes).unwrap();
        fails(&run(&db, &["inspect", s(&bad)], b""));
        fails(&run(&db, &["inspect", "--json", s(&bad)], b""));
        fails(&run(&db, &["probe", s(&bad)], b"key-0001\n"));
        fails(&run(
            &db,
            &["estimate", s(&bad), s(&fixture("bit_blocked.fsf"))],
            b"",
        ));
    }
    let err = fails(&run(&db, &["inspect", s(&dir.path().join("missing"))], b""));
    assert!(err.contains("cannot read"), "{err}");
    assert!(!db.exists(), "reading files must not create a database");
}

#[test]
fn import_of_a_counting_export_is_the_same_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let counting = dir.path().join("t.counting.fsf");
    let bit = dir.path().join("t.fsf");
    ok(&run(
        &db,
        &["export", "t", "--counting", "-o", s(&counting)],
        b"",
    ));
    ok(&run(&db, &["export", "t", "-o", s(&bit)], b""));
    // Into a new database and into the same one under another name.
    let db2 = dir.path().join("db2");
    for (db, name) in [(&db2, "t"), (&db, "copy")] {
        let out = ok(&run(db, &["import", name, s(&counting)], b""));
        assert!(out.contains("1900 live keys"), "{out}");
        // Same counters: re-exporting gives the same file.
        let again = dir.path().join(format!("{name}.again.fsf"));
        ok(&run(
            db,
            &["export", name, "--counting", "-o", s(&again)],
            b"",
        ));
        assert_eq!(
            std::fs::read(&again).unwrap(),
            std::fs::read(&counting).unwrap()
        );
        // Every live key is present; removes of live keys work, and a key
        // whose counters include a zero is refused.
        let out = ok(&run(db, &["query", name, "--count"], &lines(100..2000)));
        assert!(out.contains("maybe\t1900"), "{out}");
        ok(&run(db, &["remove", name], &lines(100..1100)));
        let out = ok(&run(db, &["query", name, "--count"], &lines(1100..2000)));
        assert!(out.contains("maybe\t900"), "{out}");
        let out = ok(&run(db, &["stats", name, "--json"], b""));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["live_keys"], 900);
    }
    let err = fails(&run(&db, &["import", "other", s(&bit)], b""));
    assert!(err.contains("--counting"), "{err}");
    let err = fails(&run(&db, &["import", "copy", s(&counting)], b""));
    assert!(err.contains("copy"), "{err}");
    std::fs::write(&bit, b"FSTR").unwrap();
    fails(&run(&db, &["import", "x", s(&bit)], b""));
    let names = ok(&run(&db, &["list"], b""));
    assert_eq!(names, "copy\ns\nt\n");
}

#[test]
fn import_of_the_v1_counting_fixtures() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let keys: String = (0..200).map(|i| format!("key-{i:04}\n")).collect();
    for (name, file) in [
        ("std", "counting_standard.fsf"),
        ("blk", "counting_blocked.fsf"),
    ] {
        let out = ok(&run(&db, &["import", name, s(&fixture(file))], b""));
        assert!(out.contains("216 live keys"), "{out}");
        let out = ok(&run(&db, &["query", name, "--count"], keys.as_bytes()));
        assert!(out.contains("maybe\t200"), "{out}");
        // hot-key was inserted 16 times: its counters are saturated, so it
        // stays present after as many removes as one likes.
        ok(&run(
            &db,
            &["remove", name],
            "hot-key\n".repeat(20).as_bytes(),
        ));
        let out = ok(&run(&db, &["query", name], b"hot-key\n"));
        assert_eq!(out, "hot-key\tmaybe\n");
    }
}

/// A rans message of 2,000 keys at 1%, and its frame's body.
fn rans_message() -> Vec<u8> {
    let keys: Vec<Vec<u8>> = (0..2000).map(|i| format!("key{i}").into_bytes()).collect();
    let target = filterstore::MessageTarget::Fp(0.01);
    let (msg, _) =
        filterstore::build_message(&keys, target, filterstore::HashSpec::xxh3(5), 1).unwrap();
    let m = filterstore::decode_message(&msg).unwrap();
    assert_eq!(m.descriptor.codec.name(), "rans");
    msg
}

/// `msg` with its body edited and framed again with a valid CRC.
fn reframed(msg: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let f = filterstore::decode_frame(msg).unwrap();
    let mut body = f.body.to_vec();
    edit(&mut body);
    filterstore::encode_frame(f.kind, f.flags, &body)
}

/// Offset of the payload in a message body: the descriptor (48 bytes) and
/// the message fields (32), FORMAT.md § exchange messages.
const PAYLOAD_AT: usize = 80;

#[test]
fn inspect_decodes_and_verifies_a_coded_payload() {
    let dir = tempfile::tempdir().unwrap();
    let msg = rans_message();
    let path = dir.path().join("m.fsm");
    std::fs::write(&path, &msg).unwrap();
    ok(&run(&dir.path().join("db"), &["inspect", s(&path)], b""));
    let payload_len = msg.len() - 28 - PAYLOAD_AT;
    // Every CRC-valid message whose payload was corrupted in one byte is a
    // defect for inspect, as it is for probe.
    let mut refused = 0;
    for at in (0..payload_len).step_by(payload_len / 16 + 1) {
        let bad = reframed(&msg, |b| b[PAYLOAD_AT + at] ^= 0x5a);
        std::fs::write(&path, &bad).unwrap();
        let probe_fails = !run(&dir.path().join("db"), &["probe", s(&path)], b"")
            .status
            .success();
        let err = fails(&run(&dir.path().join("db"), &["inspect", s(&path)], b""));
        assert!(probe_fails, "probe accepted what inspect refused: {err}");
        refused += 1;
    }
    assert!(refused >= 16);
    // A truncated payload (length field kept consistent) and a wrong `ones`.
    let truncated = reframed(&msg, |b| {
        b.truncate(b.len() - 9);
        let len = (b.len() - PAYLOAD_AT) as u64;
        b[32..40].copy_from_slice(&len.to_le_bytes());
    });
    let wrong_ones = reframed(&msg, |b| b[64] ^= 1);
    for bad in [truncated, wrong_ones] {
        std::fs::write(&path, &bad).unwrap();
        fails(&run(&dir.path().join("db"), &["inspect", s(&path)], b""));
    }
}

#[test]
fn a_huge_message_is_refused_before_decoding() {
    // The header says m = 2^33 bits (1 GiB) with an empty payload: probe,
    // inspect and estimate refuse it under their default 256 MiB budget,
    // quickly and without allocating the array.
    let dir = tempfile::tempdir().unwrap();
    let huge = reframed(&rans_message(), |b| {
        b[0] = 1; // standard layout: any m is valid
        b[16..24].copy_from_slice(&(1u64 << 33).to_le_bytes());
        b[32..40].copy_from_slice(&0u64.to_le_bytes());
        b.truncate(PAYLOAD_AT);
    });
    let path = dir.path().join("huge.fsm");
    std::fs::write(&path, &huge).unwrap();
    let db = dir.path().join("db");
    for args in [
        vec!["probe", s(&path)],
        vec!["inspect", s(&path)],
        vec!["estimate", s(&path), s(&path)],
    ] {
        let err = fails(&run(&db, &args, b""));
        assert!(err.contains("8589934592"), "{err}");
    }
}

/// `inspect` shows a version-2 message's build statistics and its versions
/// and flag, and a version-1 message has none (the committed fixtures).
#[test]
fn inspect_shows_build_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures");
    let v2 = fixtures.join("v2/message_full_stats_rans.fsm");
    let v: serde_json::Value =
        serde_json::from_str(&ok(&run(&db, &["inspect", "--json", s(&v2)], b""))).unwrap();
    assert_eq!(
        (
            &v["format_version"],
            &v["min_reader_version"],
            &v["flags"],
            &v["build_rows"],
            &v["build_distinct_keys"],
            &v["n"]
        ),
        (
            &2.into(),
            &2.into(),
            &1.into(),
            &1000.into(),
            &200.into(),
            &200.into()
        )
    );
    let text = ok(&run(&db, &["inspect", s(&v2)], b""));
    assert!(text.contains("build rows         1000"), "{text}");
    let v1 = fixtures.join("v1/message_full_rans.fsm");
    let v: serde_json::Value =
        serde_json::from_str(&ok(&run(&db, &["inspect", "--json", s(&v1)], b""))).unwrap();
    assert_eq!((&v["format_version"], &v["flags"]), (&1.into(), &0.into()));
    assert!(v.get("build_rows").is_none(), "{v}");
}

/// First contact (issue 29): a file that is not a filterstore file is named
/// as such by every reading command, whatever its length, and an empty one
/// as empty; never "truncated".
#[test]
fn a_text_file_is_not_a_filterstore_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("unused");
    let text = dir.path().join("keys.txt");
    let empty = dir.path().join("empty.fsf");
    std::fs::write(&text, b"hello world\n").unwrap();
    std::fs::write(&empty, b"").unwrap();
    let good = s(&fixture("bit_blocked.fsf")).to_string();
    for args in [
        vec!["inspect", s(&text)],
        vec!["inspect", "--json", s(&text)],
        vec!["probe", s(&text)],
        vec!["estimate", s(&text), &good],
        vec!["import", "t", s(&text)],
    ] {
        let err = fails(&run(&db, &args, b"key\n"));
        assert!(
            err.contains("not a filterstore file") && err.contains("\"hell\""),
            "{args:?}: {err}"
        );
        assert!(!err.contains("truncated"), "{args:?}: {err}");
    }
    for args in [
        vec!["inspect", s(&empty)],
        vec!["probe", s(&empty)],
        vec!["estimate", &good, s(&empty)],
        vec!["import", "t", s(&empty)],
    ] {
        let err = fails(&run(&db, &args, b"key\n"));
        assert!(err.contains("empty.fsf is empty"), "{args:?}: {err}");
    }
    assert!(!db.exists(), "a refused import must not create a database");
}

/// A truncated counting filter file is refused by `import` with the bytes
/// it needs and the bytes it holds (it said "found 0"), whether the cut
/// falls within the head read before the database is opened (64 KiB) or
/// after it; a refused file leaves no database and no table behind, in a
/// fresh directory no empty database either.
#[test]
fn a_truncated_import_says_what_it_found() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // 50,000 keys at 1%: about 240 KB of counters.
    ok(&run(&db, &["create", "big", "--expected", "50000"], b""));
    ok(&run(&db, &["insert", "big"], &lines(0..1000)));
    let counting = dir.path().join("big.counting.fsf");
    ok(&run(
        &db,
        &["export", "big", "--counting", "-o", s(&counting)],
        b"",
    ));
    let whole = std::fs::read(&counting).unwrap();
    assert!(whole.len() > 200_000, "{}", whole.len());
    let cut = dir.path().join("cut.fsf");
    let fresh = dir.path().join("fresh-db");
    for len in [30, 100, 30_000, 65_536, 70_000, whole.len() - 1] {
        std::fs::write(&cut, &whole[..len]).unwrap();
        for target in [&db, &fresh] {
            let err = fails(&run(target, &["import", "copy", s(&cut)], b""));
            let want = format!("truncated: need {} bytes, found {len}", whole.len());
            assert!(err.contains(&want), "cut at {len}: {err}");
        }
        // Cut after the 64 KiB head too: the store opened for the import
        // is taken back (it once stayed, an empty store that opened).
        assert!(!fresh.exists(), "cut at {len}: database left behind");
    }
    assert_eq!(ok(&run(&db, &["list"], b"")), "big\n");
    ok(&run(&db, &["import", "copy", s(&counting)], b""));
    assert_eq!(ok(&run(&db, &["list"], b"")), "big\ncopy\n");
}

/// Two empty filters hold 0 keys, printed as 0, not -0.
#[test]
fn estimate_of_empty_filters_prints_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(&create(&db, "e", &[]));
    let file = dir.path().join("e.fsf");
    ok(&run(&db, &["export", "e", "-o", s(&file)], b""));
    let out = ok(&run(&db, &["estimate", s(&file), s(&file)], b""));
    assert!(!out.contains("-0"), "{out}");
    assert!(
        out.starts_with("a\t0\t") && out.contains("union\t0\n"),
        "{out}"
    );
    let out = ok(&run(&db, &["estimate", "--json", s(&file), s(&file)], b""));
    assert!(!out.contains("-0"), "{out}");
}
