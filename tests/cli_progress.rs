//! Progress on stderr (`src/cli/progress.rs`): never when stderr is not a
//! terminal, never with `--quiet` (which every command that optimizes
//! takes), and never on stdout.

use std::process::{Command, Stdio};

mod common;
use common::egrad;

/// A bench that takes about two seconds: timing alone is 2 × 800 ms.
const SLOW_BENCH: &[&str] = &[
    "bench",
    "examples/classify.eg",
    "--fn",
    "dlogistic",
    "--dim",
    "N=200",
    "--dim",
    "K=20",
    "--time-ms",
    "800",
];

#[test]
fn a_long_command_prints_nothing_on_stderr_when_it_is_not_a_terminal() {
    let start = std::time::Instant::now();
    let (code, out, err) = egrad(SLOW_BENCH);
    assert!(start.elapsed().as_secs_f64() > 1.5, "not long enough");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("speedup"), "{out}");
    assert_eq!(err, "", "stderr is a pipe here: no progress");
}

#[test]
fn quiet_is_accepted_by_every_command_that_optimizes() {
    let o = std::env::temp_dir().join(format!("egrad-quiet-{}.o", std::process::id()));
    let o = o.to_str().unwrap();
    let commands: &[&[&str]] = &[
        &[
            "run",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--arg",
            "w=[1,2,3]",
            "--arg",
            "x=[4,5,6]",
            "--arg",
            "y=0.5",
        ],
        &["grad", "examples/loss.eg", "--fn", "dloss_dw", "--report"],
        &[
            "explore",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--dim",
            "N=100",
            "--no-run",
        ],
        &[
            "bench",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--dim",
            "N=100",
            "--time-ms",
            "5",
        ],
        &["build", "examples/loss.eg", "--fn", "dloss_dw", "-o", o],
        &["explain", "examples/loss.eg", "--fn", "dloss_dw"],
    ];
    for args in commands {
        let (code, plain, err) = egrad(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
        for quiet in ["--quiet", "-q"] {
            let mut with = args.to_vec();
            with.push(quiet);
            let (code, out, err) = egrad(&with);
            assert_eq!(code, 0, "{with:?}: {err}");
            assert_eq!(err, "", "{with:?}");
            // The same output, except what is measured.
            if !matches!(args[0], "bench" | "grad") {
                assert_eq!(out, plain, "{with:?}");
            }
        }
    }
    let _ = std::fs::remove_file(o);
    let _ = std::fs::remove_file(std::path::Path::new(o).with_extension("h"));
}

/// On a terminal (a pseudo-terminal made by util-linux's `script`, where
/// there is one) a long command shows its progress and clears it before
/// the output; `--quiet` shows nothing.
#[test]
fn on_a_terminal_progress_shows_and_is_cleared() {
    let on_tty = |extra: &str| {
        let cmd = format!(
            "{} {} {extra}",
            env!("CARGO_BIN_EXE_egrad"),
            SLOW_BENCH.join(" ")
        );
        Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .stdin(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let Some(shown) = on_tty("") else {
        eprintln!("skipped: no `script` to make a terminal");
        return;
    };
    assert!(shown.contains("timing 2 programs"), "{shown:?}");
    // The line is erased (`ESC [2K`) before the result is printed.
    let result = shown.find("dlogistic: optimized").expect("the result");
    let cleared = shown.rfind("\x1b[2K").expect("the line is cleared");
    assert!(cleared < result, "{shown:?}");
    let quiet = on_tty("--quiet").expect("ran before");
    assert!(quiet.starts_with("dlogistic: optimized"), "{quiet:?}");
    assert!(!quiet.contains("timing"), "{quiet:?}");
}
