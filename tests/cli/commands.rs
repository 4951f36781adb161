//! The `filterstore` command-line tool, run as a separate process: every
//! command, stdin and file input, `--db` and `FILTERSTORE_DB`, JSON output,
//! and one-line errors with a non-zero status (never a panic).

use crate::cli_common;

use cli_common::*;
use std::process::Command;

#[test]
fn create_insert_query_remove_stats_list_drop() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = ok(&run(
        &db,
        &["create", "users", "--expected", "10000", "--fp", "0.01"],
        b"",
    ));
    assert!(out.contains("blocked"), "{out}");
    ok(&run(
        &db,
        &[
            "create",
            "orders",
            "--expected",
            "5000",
            "--fp",
            "0.001",
            "--layout",
            "standard",
        ],
        b"",
    ));
    // Insert from stdin; CRLF and empty lines are handled.
    let out = ok(&run(&db, &["insert", "users"], &lines(0..5000)));
    assert!(out.contains("inserted 5000 keys"), "{out}");
    let out = ok(&run(
        &db,
        &["insert", "users", "-"],
        b"crlf-key\r\n\n\nlast",
    ));
    assert!(out.contains("inserted 2 keys"), "{out}");
    // Insert from a file.
    let file = dir.path().join("keys.txt");
    std::fs::write(&file, lines(100..200)).unwrap();
    ok(&run(
        &db,
        &["insert", "orders", file.to_str().unwrap()],
        b"",
    ));

    // Query: every inserted key is "maybe"; the answer format is key<TAB>answer.
    let out = ok(&run(
        &db,
        &["query", "users"],
        b"key1\nkey4999\ncrlf-key\nlast\n",
    ));
    assert_eq!(
        out,
        "key1\tmaybe\nkey4999\tmaybe\ncrlf-key\tmaybe\nlast\tmaybe\n"
    );
    let out = ok(&run(&db, &["query", "users", "--count"], &lines(0..5000)));
    assert_eq!(out, "keys\t5000\nmaybe\t5000\nabsent\t0\n");
    // Absent keys: nearly all "absent" (the table's FP is at most 1%; the
    // bound below is 5σ above 1% of 10,000: 100 + 5·10).
    let out = ok(&run(
        &db,
        &["query", "users", "--count"],
        &lines(10_000..20_000),
    ));
    let maybe: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("maybe\t"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(maybe <= 150, "{out}");

    // Remove, then the removed keys answer "absent" unless false positives.
    let out = ok(&run(&db, &["remove", "users"], &lines(0..2500)));
    assert!(out.contains("removed 2500 keys"), "{out}");
    // A remove of a key that was never there fails and names its line; the
    // keys before it are removed.
    let err = fails(&run(
        &db,
        &["remove", "users"],
        b"key2500\nnever-inserted-xyz\nkey2501\n",
    ));
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains("1 keys before it were removed"), "{err}");

    // Stats: JSON object for one table, array for all.
    let out = ok(&run(&db, &["stats", "users", "--json"], b""));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for field in [
        "name",
        "layout",
        "m_bits",
        "k",
        "hash",
        "live_keys",
        "target_fp",
        "estimated_fp",
        "saturated_counters",
        "generation",
        "format_version",
    ] {
        assert!(v.get(field).is_some(), "missing {field}: {out}");
    }
    assert_eq!(v["name"], "users");
    assert_eq!(v["layout"], "blocked");
    assert_eq!(v["live_keys"], 5002 - 2501);
    assert_eq!(v["generation"], 1);
    let out = ok(&run(&db, &["stats", "--json"], b""));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 2);
    assert_eq!(arr[0]["name"], "orders");
    assert_eq!(arr[0]["layout"], "standard");
    assert_eq!(arr[0]["live_keys"], 100);
    let out = ok(&run(&db, &["stats"], b""));
    assert!(out.lines().next().unwrap().starts_with("name"), "{out}");
    assert_eq!(out.lines().count(), 3, "{out}");

    assert_eq!(ok(&run(&db, &["list"], b"")), "orders\nusers\n");
    ok(&run(&db, &["drop", "orders"], b""));
    assert_eq!(ok(&run(&db, &["list"], b"")), "users\n");
}

#[test]
fn db_from_the_environment_and_default() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("from-env");
    let mut cmd = bin();
    cmd.env("FILTERSTORE_DB", &db)
        .args(["create", "t", "--expected", "100", "--fp", "0.1"]);
    let out = run_command(cmd, b"");
    ok(&out);
    assert!(db.is_dir());
    // Without --db or the variable: ./filterstore.db in the working directory.
    let mut cmd = bin();
    cmd.current_dir(dir.path())
        .args(["create", "t", "--expected", "100", "--fp", "0.1"]);
    let out = run_command(cmd, b"");
    ok(&out);
    assert!(dir.path().join("filterstore.db").is_dir());
}

#[test]
fn errors_are_one_line_and_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // No database yet: commands other than create say so.
    let err = fails(&run(&db, &["list"], b""));
    assert!(err.contains("no database"), "{err}");
    assert!(!db.exists(), "a read command must not create a database");
    ok(&run(
        &db,
        &["create", "t", "--expected", "100", "--fp", "0.1"],
        b"",
    ));
    for (args, needle) in [
        (
            vec!["create", "t", "--expected", "100", "--fp", "0.1"],
            "already exists",
        ),
        (
            vec!["create", "bad/name", "--expected", "100", "--fp", "0.1"],
            "invalid table name",
        ),
        (
            vec!["create", "u", "--expected", "0", "--fp", "0.1"],
            "at least 1",
        ),
        (
            vec!["create", "u", "--expected", "10", "--fp", "2"],
            "outside (0, 1)",
        ),
        (
            vec!["create", "u", "--expected", "10", "--fp", "x"],
            "invalid value",
        ),
        (
            vec![
                "create",
                "u",
                "--expected",
                "10",
                "--fp",
                "0.1",
                "--layout",
                "cubic",
            ],
            "invalid value",
        ),
        (vec!["query", "missing"], "no table named"),
        (vec!["drop", "missing"], "no table named"),
        (vec!["stats", "missing"], "no table named"),
        (vec!["insert", "t", "/nonexistent/keys.txt"], "cannot read"),
        (vec!["frobnicate"], "unrecognized subcommand"),
    ] {
        let err = fails(&run(&db, &args, b""));
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // A directory that is a file.
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let err = fails(&run(
        &file,
        &["create", "t", "--expected", "1", "--fp", "0.1"],
        b"",
    ));
    assert!(err.contains("not a directory"), "{err}");
    // Usage errors exit with 2, others with 1.
    assert_eq!(run(&db, &["frobnicate"], b"").status.code(), Some(2));
    assert_eq!(run(&db, &["query", "missing"], b"").status.code(), Some(1));
}

#[test]
fn a_closed_output_pipe_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(&run(
        &db,
        &["create", "t", "--expected", "1000", "--fp", "0.01"],
        b"",
    ));
    // `query | head -1`: the reader goes away after one line.
    let script = format!(
        "seq 1 200000 | \"{}\" --db \"{}\" query t | head -1 >/dev/null; echo ${{PIPESTATUS[1]}}",
        env!("CARGO_BIN_EXE_filterstore"),
        db.display()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &script]);
    let out = run_command(cmd, b"");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

#[test]
fn help_and_version() {
    let mut cmd = bin();
    cmd.arg("--help");
    let out = run_command(cmd, b"");
    let text = ok(&out);
    for cmd in [
        "create", "insert", "remove", "query", "stats", "list", "drop",
    ] {
        assert!(text.contains(cmd), "{text}");
    }
    assert!(text.contains("FILTERSTORE_DB"), "{text}");
    let mut cmd = bin();
    cmd.arg("--version");
    ok(&run_command(cmd, b""));
}

#[test]
fn missing_arguments_are_named_and_fp_defaults_to_one_percent() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // `--expected` missing: its name is printed, on one line.
    let err = fails(&run(&db, &["create", "t"], b""));
    assert!(err.contains("--expected <N>"), "{err}");
    // `--fp` may be left out: 1%, as Cassandra's bloom_filter_fp_chance.
    ok(&run(&db, &["create", "t", "--expected", "100"], b""));
    let stats = ok(&run(&db, &["stats", "t", "--json"], b""));
    let v: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(v["target_fp"], 0.01, "{stats}");
}

#[test]
fn absurd_rates_are_printed_in_scientific_notation() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let err = fails(&run(
        &db,
        &["create", "t", "--expected", "100", "--fp", "1e-300"],
        b"",
    ));
    assert!(err.contains("1e-300"), "{err}");
    assert!(err.len() < 200, "{err}");
}

#[test]
fn keys_with_tabs_and_backslashes_are_escaped_in_query_output() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(&run(&db, &["create", "t", "--expected", "100"], b""));
    ok(&run(&db, &["insert", "t"], b"a\tb\nc\\d\n"));
    let out = ok(&run(&db, &["query", "t"], b"a\tb\nc\\d\nplain\n"));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "a\\tb\tmaybe", "{out}");
    assert_eq!(lines[1], "c\\\\d\tmaybe", "{out}");
    assert!(lines[2].starts_with("plain\t"), "{out}");
    // Every line splits into exactly two fields at its TAB.
    assert!(lines.iter().all(|l| l.split('\t').count() == 2), "{out}");
}

#[test]
fn an_absurd_table_is_refused_before_allocating_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(&run(&db, &["create", "keep", "--expected", "100"], b""));
    // 5·10^10 keys at 1%: a 62 GB bit filter, over a quarter of any machine
    // with less than 248 GB of memory.
    let err = fails(&run(
        &db,
        &["create", "e", "--expected", "50000000000"],
        b"",
    ));
    assert!(err.contains("--allow-large"), "{err}");
    // With the limit lifted but 4 GB of address space, the 4.9 GB filter
    // cannot be allocated: the create fails and leaves no table behind.
    let script = format!(
        "ulimit -v 4000000; \"{}\" --db \"{}\" create e --expected 4000000000 --allow-large",
        env!("CARGO_BIN_EXE_filterstore"),
        db.display()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &script]);
    let err = fails(&run_command(cmd, b""));
    assert!(err.contains("not enough memory"), "{err}");
    assert_eq!(ok(&run(&db, &["list"], b"")), "keep\n");
    ok(&run(&db, &["create", "e", "--expected", "1000"], b""));
    // A refused create that would have made the database leaves no
    // database (it once left an empty one, which `list` then opened).
    let fresh = dir.path().join("new").join("db");
    let err = fails(&run(
        &fresh,
        &["create", "e", "--expected", "50000000000"],
        b"",
    ));
    assert!(err.contains("--allow-large"), "{err}");
    assert!(!dir.path().join("new").exists(), "database left behind");
}

/// First contact (issue 29): `filterstore` alone says that a command is
/// missing and names the commands, on one line, with the usage status 2
/// (it printed the crate's description).
#[test]
fn no_command_says_a_command_is_missing() {
    let out = run_command(bin(), b"");
    assert_eq!(out.status.code(), Some(2));
    let err = fails(&out);
    assert!(err.contains("no command given"), "{err}");
    for cmd in ["create", "insert", "query", "inspect", "plot"] {
        assert!(err.contains(cmd), "{err}");
    }
    assert!(
        !err.contains("demo-child"),
        "a hidden command is named: {err}"
    );
    assert!(!err.contains("Bloom filters for databases"), "{err}");
}

/// A usage error points to --help once, not twice (clap's own "For more
/// information, try '--help'" is dropped); `set` without a change names
/// both options it accepts.
#[test]
fn usage_errors_name_the_problem_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let err = fails(&run(&db, &["--memory-budget", "abc", "list"], b""));
    assert!(err.contains("invalid value 'abc'"), "{err}");
    assert_eq!(err.matches("--help").count(), 1, "{err}");
    ok(&run(&db, &["create", "t", "--expected", "100"], b""));
    let out = run(&db, &["set", "t"], b"");
    assert_eq!(out.status.code(), Some(2));
    let err = fails(&out);
    assert!(err.contains("--fp") && err.contains("--expected"), "{err}");
}

/// `plot` writes where it is told, or to standard output: never into the
/// working directory (it used to overwrite docs/fp_vs_bits_per_key.svg
/// there, and fail where there is no docs/). Absurd sizes are refused
/// before anything is measured or allocated.
#[test]
fn plot_writes_only_where_it_is_told() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    let small = ["plot", "--keys", "1000", "--probes", "1000"];
    let mut cmd = bin();
    cmd.current_dir(dir.path()).args(small);
    let svg = ok(&run_command(cmd, b""));
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    let left: Vec<_> = std::fs::read_dir(dir.path().join("docs"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "plot wrote into docs/: {left:?}");
    let file = dir.path().join("fp.svg");
    let mut cmd = bin();
    cmd.args(small).arg("-o").arg(&file);
    let out = run_command(cmd, b"");
    assert_eq!(ok(&out), "", "the plot went to the file, not stdout");
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrote the plot"));
    assert!(std::fs::read_to_string(&file).unwrap().starts_with("<svg"));
    for absurd in [
        ["--keys", "0"],
        ["--keys", "100000000000"],
        ["--probes", "0"],
    ] {
        let mut cmd = bin();
        cmd.current_dir(dir.path()).arg("plot").args(absurd);
        let out = run_command(cmd, b"");
        assert_eq!(out.status.code(), Some(2), "{absurd:?}");
        fails(&out);
    }
}

/// `demo` creates tables of its own (and used to drop any of the user's
/// named like them): an existing --db is refused and left as it was, and
/// FILTERSTORE_DB, which names the user's database for the everyday
/// commands, is not used: the tour runs in a temporary database.
#[test]
fn demo_never_touches_an_existing_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(&run(
        &db,
        &["create", "customers", "--expected", "100"],
        b"",
    ));
    ok(&run(&db, &["insert", "customers"], b"alice\n"));
    let err = fails(&run(&db, &["demo"], b""));
    assert!(err.contains("does not exist yet"), "{err}");
    // With the variable set, the tour names its temporary database first
    // (under TMPDIR, here the test's directory); it is stopped there.
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut child = bin()
        .env("FILTERSTORE_DB", &db)
        .env("TMPDIR", &tmp)
        .arg("demo")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The first line, read on a thread of its own: a tour that printed
    // nothing would otherwise hold the test forever.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
        let _ = tx.send(line);
    });
    let first = rx.recv_timeout(COMMAND_TIMEOUT);
    child.kill().unwrap();
    child.wait().unwrap();
    let first = first.expect("demo printed no line within the command timeout");
    assert!(
        first.contains("database in") && first.contains(tmp.to_str().unwrap()),
        "{first}"
    );
    assert_eq!(ok(&run(&db, &["list"], b"")), "customers\n");
    let out = ok(&run(&db, &["query", "customers", "--count"], b"alice\n"));
    assert!(out.contains("maybe\t1"), "{out}");
}

/// `demo | head -1`: the tour stops quietly when its reader goes away (it
/// panicked at its next line, "failed printing to stdout").
#[test]
fn demo_stops_quietly_when_its_reader_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "TMPDIR=\"{}\" \"{}\" demo | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}",
        dir.path().display(),
        env!("CARGO_BIN_EXE_filterstore"),
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &script]);
    let out = run_command(cmd, b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0", "{err}");
    assert!(err.is_empty(), "{err}");
    // Its temporary database is gone with it.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A line longer than a key may be (1 MiB: a file that is not a key file)
/// is refused with its number, without being read whole; what the command
/// did before it is said: nothing inserted, or the removes before it
/// durable.
#[test]
fn an_overlong_line_is_refused_with_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(&run(&db, &["create", "t", "--expected", "100"], b""));
    let mut input = b"a\nb\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', (1 << 20) + 1));
    input.extend(b"\nc\n");
    let err = fails(&run(&db, &["insert", "t"], &input));
    assert!(
        err.contains("line 3") && err.contains("nothing was inserted"),
        "{err}"
    );
    assert_eq!(
        ok(&run(&db, &["query", "t", "--count"], b"a\nb\nc\n")),
        "keys\t3\nmaybe\t0\nabsent\t3\n"
    );
    ok(&run(&db, &["insert", "t"], b"a\nb\nc\n"));
    let err = fails(&run(&db, &["remove", "t"], &input));
    assert!(err.contains("line 3"), "{err}");
    assert!(
        err.contains("the 2 keys before it were removed (durable)"),
        "{err}"
    );
    let out = ok(&run(&db, &["query", "t"], b"c\n"));
    assert_eq!(out, "c\tmaybe\n");
    ok(&run(&db, &["remove", "t"], b"c\n"));
}
