//! Running the `filterstore` binary in tests: shared by the modules of the
//! `cli` test binary.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_filterstore"));
    c.env_remove("FILTERSTORE_DB");
    c
}

/// How long one command may run before the test fails (a hang is a failure,
/// never a stuck CI run).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

pub fn run(db: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = bin();
    cmd.arg("--db").arg(db).args(args);
    run_command(cmd, stdin)
}

/// Runs `cmd` with `stdin` as its input, killing it and failing the test if
/// it runs longer than [`COMMAND_TIMEOUT`].
pub fn run_command(mut cmd: Command, stdin: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    // A command that fails before reading its input closes the pipe: that
    // is the command's outcome to check, not a test error.
    let writer = std::thread::spawn(move || {
        if let Err(e) = input.write_all(&stdin) {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
        }
    });
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        out.read_to_end(&mut v).map(|_| v)
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        err.read_to_end(&mut v).map(|_| v)
    });
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("command did not finish within {COMMAND_TIMEOUT:?}: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    writer.join().unwrap();
    Output {
        status,
        stdout: out_reader.join().unwrap().unwrap(),
        stderr: err_reader.join().unwrap().unwrap(),
    }
}

pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A failure: non-zero status, one line on stderr, no panic.
pub fn fails(out: &Output) -> String {
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.starts_with("filterstore: "), "{err}");
    err
}

pub fn lines(range: std::ops::Range<u32>) -> Vec<u8> {
    range
        .map(|i| format!("key{i}\n"))
        .collect::<String>()
        .into_bytes()
}
