//! Reliability II (issue 38), through the binary: output failures are
//! errors, never panics (a closed pipe exits quietly, a full disk is an io
//! error).

mod common;

use std::io::Read;
use std::process::{Command, Stdio};

/// The gradient of the seed program on 100,000 random elements: with
/// `--json`, megabytes of output, more than a pipe holds.
const BIG_RUN: [&str; 9] = [
    "run",
    "examples/loss.eg",
    "--fn",
    "dloss_dw",
    "--random",
    "--dim",
    "N=100000",
    "--json",
    "--quiet",
];

/// Run egrad with `args`, its stdout a pipe whose reader closes at once:
/// the exit code and stderr.
fn with_stdout_closed(args: &[&str], stdin: &[u8]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_egrad"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run egrad");
    drop(child.stdout.take());
    {
        use std::io::Write;
        let mut input = child.stdin.take().unwrap();
        // The child may be gone already: that is no failure of the test.
        let _ = input.write_all(stdin);
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    (status.code().unwrap_or(-1), err)
}

/// Run egrad with `args` and stdout on `/dev/full`: the exit code and
/// stderr.
fn with_stdout_full(args: &[&str]) -> (i32, String) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full exists on Linux");
    let out = Command::new(env!("CARGO_BIN_EXE_egrad"))
        .args(args)
        .stdout(Stdio::from(full))
        .output()
        .expect("run egrad");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_closed_stdout_exits_quietly_with_the_commands_code() {
    // Was exit 101 with "failed printing to stdout: Broken pipe".
    let (code, err) = with_stdout_closed(&BIG_RUN, b"");
    assert_eq!(code, 0, "{err}");
    assert_eq!(err, "");
    // Plain text too, and help.
    let (code, err) = with_stdout_closed(&BIG_RUN[..8], b"");
    assert_eq!((code, err.as_str()), (0, ""));
    let (code, err) = with_stdout_closed(&["--help"], b"");
    assert_eq!((code, err.as_str()), (0, ""));
    // A failed command keeps its code; its diagnostic still reaches stderr.
    let (code, err) = with_stdout_closed(&["run", "no/such.eg", "--fn", "f", "--json"], b"");
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with("error: cannot read no/such.eg"), "{err}");
    // The GradBench tool, whose harness went away.
    let (code, err) = with_stdout_closed(&["gradbench"], b"{\"id\": 0, \"kind\": \"start\"}\n");
    assert_eq!((code, err.as_str()), (0, ""));
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_stdout_is_an_io_error_on_one_line() {
    let enospc = "error: cannot write standard output: No space left on device (os error 28)\n";
    for args in [&BIG_RUN[..], &BIG_RUN[..8], &["--help"]] {
        // Was exit 101 with "failed printing to stdout: No space left".
        let (code, err) = with_stdout_full(args);
        assert_eq!((code, err.as_str()), (1, enospc), "{args:?}");
    }
    // The command's own error comes first and keeps its exit code.
    let (code, err) = with_stdout_full(&["run", "examples/loss.eg", "--fn", "nope", "--json"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.ends_with(enospc) && !err.contains("panicked"), "{err}");
    let (code, err) = with_stdout_full(&["gradbench"]);
    assert_eq!(code, 0, "no request, nothing written: {err}");
}
