//! User mistakes and documented limits, one row each: the library's error
//! has the right kind and points at the user's code (`file:line:col`), and
//! the binary exits with that kind's code (1 for all of these) and prints
//! the same place. The programs are `tests/errors/*.eg`.

use egrad::internals::backend;
use egrad::internals::call::call_checked;
use egrad::{optimize_gradient, Arg, BackendOptions, Error, ErrorKind, Options, Program};
use std::process::Command;

/// What is done with the program.
enum Action {
    /// Parse and check it (`egrad check`).
    Check,
    /// Differentiate plain function `fn` with respect to `wrt` (`egrad grad`).
    Grad(&'static str, &'static str),
    /// Run `fn` on `x=[1, 2]` (`egrad run`).
    RunWithTwo(&'static str),
}

struct Case {
    file: &'static str,
    action: Action,
    kind: ErrorKind,
    /// `line:col` the first diagnostic points at.
    at: &'static str,
    /// A piece of the message.
    says: &'static str,
}

const CASES: &[Case] = &[
    Case {
        file: "missing-paren",
        action: Action::Check,
        kind: ErrorKind::Syntax,
        at: "1:12",
        says: "expected `)` to close the bracket",
    },
    // Where the `)` is missing (after `2.0`), not where parsing noticed
    // (the `let` a line later).
    Case {
        file: "missing-paren-multiline",
        action: Action::Check,
        kind: ErrorKind::Syntax,
        at: "2:25",
        says: "expected `)` to close the bracket, found `let`",
    },
    // Rust's float parser gives infinity; egrad says so.
    Case {
        file: "literal-too-large",
        action: Action::Check,
        kind: ErrorKind::Syntax,
        at: "1:27",
        says: "number `1e400` is too large for a float",
    },
    Case {
        file: "matmul-inner-axes",
        action: Action::Check,
        kind: ErrorKind::Type,
        at: "1:49",
        says: "the first operand's axis 1 (its columns) has length 4, the second's axis 0 (its rows) has length 5",
    },
    Case {
        file: "bad-char",
        action: Action::Check,
        kind: ErrorKind::Syntax,
        at: "1:25",
        says: "unexpected character `$`",
    },
    Case {
        file: "long-name",
        action: Action::Check,
        kind: ErrorKind::Limit,
        at: "5:6",
        says: "this name is 2000 characters long; a name has at most 1024",
    },
    Case {
        file: "deep-nesting",
        action: Action::Check,
        kind: ErrorKind::Limit,
        at: "1:151",
        says: "nested too deeply",
    },
    Case {
        file: "unknown-name",
        action: Action::Check,
        kind: ErrorKind::Type,
        at: "3:7",
        says: "unknown name `z`",
    },
    // Found by the fuzzer: steps on constants were folded one by one,
    // 10^8 of them, for minutes; now a limit at 2^20 steps.
    Case {
        file: "constant-iterate",
        action: Action::Check,
        kind: ErrorKind::Limit,
        at: "3:35",
        says: "would be evaluated at compile time for 100000000 steps",
    },
    Case {
        file: "dtype-mix",
        action: Action::Check,
        kind: ErrorKind::Type,
        at: "1:33",
        says: "mixes element types",
    },
    Case {
        file: "arg-count",
        action: Action::Check,
        kind: ErrorKind::Type,
        at: "2:23",
        says: "takes 2 arguments",
    },
    Case {
        file: "size-mismatch",
        action: Action::Check,
        kind: ErrorKind::Type,
        at: "1:48",
        says: "shape mismatch",
    },
    Case {
        file: "grad-not-scalar",
        action: Action::Check,
        kind: ErrorKind::Type,
        at: "3:33",
        says: "must be a scalar",
    },
    Case {
        file: "grad-integer",
        action: Action::Check,
        kind: ErrorKind::Type,
        at: "1:7",
        says: "an integer has no derivative",
    },
    Case {
        file: "deep-recursion",
        action: Action::Check,
        kind: ErrorKind::Limit,
        at: "1:41",
        says: "specialized 64 calls deep",
    },
    Case {
        file: "tabulate-matmul",
        action: Action::Check,
        kind: ErrorKind::Unsupported,
        at: "1:41",
        says: "`matmul` of two values that both depend on the index of `tabulate` is not supported yet",
    },
    Case {
        file: "tabulate-loop-gradient",
        action: Action::Check,
        kind: ErrorKind::Unsupported,
        at: "4:57",
        says: "`df` is a derivative that runs a loop, which cannot be called on values that depend on the index of `tabulate` yet",
    },
    Case {
        file: "grad-of-loop-gradient",
        action: Action::Grad("g", "xs"),
        kind: ErrorKind::Unsupported,
        at: "4:12",
        says: "differentiating this gradient of a `scan` is not supported yet",
    },
    Case {
        file: "jvp-scan-sequence",
        action: Action::Check,
        kind: ErrorKind::Unsupported,
        at: "5:4",
        says: "forward mode through a scan's gradient with respect to its sequence is not supported yet",
    },
    // Before the error kinds this one printed "internal compiler error":
    // the pipeline took every AD error for a bug.
    Case {
        file: "run-length",
        action: Action::RunWithTwo("f"),
        kind: ErrorKind::Type,
        at: "1:6",
        says: "argument `x`",
    },
    Case {
        file: "size-unreadable",
        action: Action::Check,
        kind: ErrorKind::Type,
        at: "1:6",
        says: "size parameter `N` of `f` cannot be read from the parameter types",
    },
    Case {
        file: "reshape-count",
        action: Action::Check,
        kind: ErrorKind::Type,
        at: "1:37",
        says: "`reshape` to f64[N, 2*M] needs 2*M*N elements",
    },
    Case {
        file: "run-size",
        action: Action::RunWithTwo("f"),
        kind: ErrorKind::Type,
        at: "1:9",
        says: "argument `x` has length 2, too short for its type f64[N+3]: `N` would be -1",
    },
];

fn path(case: &Case) -> String {
    format!("tests/errors/{}.eg", case.file)
}

/// The library's answer.
fn library(case: &Case) -> Error {
    let path = path(case);
    let src = std::fs::read_to_string(&path).unwrap();
    let program = match Program::parse_named(&path, &src) {
        Err(e) => return e,
        Ok(p) => p,
    };
    let result = match case.action {
        Action::Check => panic!("{path}: accepted"),
        Action::Grad(f, wrt) => {
            optimize_gradient(&program, &Options::default().function(f).wrt([wrt])).map(|_| ())
        }
        Action::RunWithTwo(f) => {
            let native =
                backend::compile(program.ir(f).unwrap(), &BackendOptions::verified()).unwrap();
            call_checked(&native, program.file(), &[Arg::f64(&[1.0, 2.0])]).map(|_| ())
        }
    };
    result.expect_err(&format!("{path}: no error"))
}

/// The binary's exit code and standard error.
fn binary(case: &Case) -> (Option<i32>, String) {
    let path = path(case);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_egrad"));
    match case.action {
        Action::Check => cmd.args(["check", &path]),
        Action::Grad(f, wrt) => cmd.args(["grad", &path, "--fn", f, "--wrt", wrt]),
        Action::RunWithTwo(f) => cmd.args(["run", &path, "--fn", f, "--arg", "x=[1,2]"]),
    };
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn mistakes_and_limits_have_a_kind_a_place_and_an_exit_code() {
    assert!(CASES.len() >= 10);
    let mut failures = Vec::new();
    for case in CASES {
        let name = path(case);
        let place = format!("{name}:{}", case.at);
        let e = library(case);
        let shown = e.to_string();
        if e.kind() != case.kind {
            failures.push(format!(
                "{name}: kind {}, want {}\n{shown}",
                e.kind(),
                case.kind
            ));
        }
        if e.location().as_deref() != Some(place.as_str()) {
            failures.push(format!(
                "{name}: at {:?}, want {place}\n{shown}",
                e.location()
            ));
        }
        if !shown.contains(case.says) || shown.contains("internal compiler error") {
            failures.push(format!("{name}: message\n{shown}"));
        }
        let (code, stderr) = binary(case);
        if code != Some(case.kind.exit_code()) || code != Some(1) {
            failures.push(format!("{name}: exit {code:?}\n{stderr}"));
        }
        if !stderr.contains(&format!("--> {place}\n")) || !stderr.contains(case.says) {
            failures.push(format!(
                "{name}: stderr does not point at {place}\n{stderr}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn usage_and_io_errors_have_their_own_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_egrad"))
        .args(["run", "tests/errors/run-length.eg", "--fn", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let out = Command::new(env!("CARGO_BIN_EXE_egrad"))
        .args(["check", "tests/errors/no-such-file.eg"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "an io error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot read tests/errors/no-such-file.eg"),
        "{err}"
    );
    assert_eq!(
        Program::from_file("tests/errors/no-such-file.eg")
            .unwrap_err()
            .kind(),
        ErrorKind::Io
    );
}

#[test]
fn an_internal_error_asks_for_a_report_and_names_the_version() {
    let e = Error::internal("an invariant broke");
    assert_eq!(e.kind(), ErrorKind::Internal);
    assert_eq!(e.exit_code(), egrad::EXIT_INTERNAL);
    let shown = e.to_string();
    assert!(shown.contains("internal compiler error: an invariant broke"));
    assert!(shown.contains(&format!("egrad {}", env!("CARGO_PKG_VERSION"))));
    assert!(shown.contains("please report"));
}
