//! Reliability II (issue 38), through the binary: output failures are
//! errors, never panics (a closed pipe exits quietly, a full disk is an io
//! error).

mod common;

use common::child::{os_args, run_egrad, How, Stdout};

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
    with_stdout(args, stdin, Stdout::Closed)
}

/// Run egrad with `args` and stdout on `/dev/full`: the exit code and
/// stderr.
fn with_stdout_full(args: &[&str]) -> (i32, String) {
    with_stdout(args, b"", Stdout::Full)
}

fn with_stdout(args: &[&str], stdin: &[u8], stdout: Stdout) -> (i32, String) {
    let how = How {
        stdout,
        ..How::default()
    };
    let o = run_egrad(&os_args(args), stdin, &how);
    (o.code.unwrap_or(-1), o.err)
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
    // The GradBench tool says it as the other commands do.
    let (code, err) = with_stdout(
        &["gradbench"],
        b"{\"id\": 0, \"kind\": \"start\"}\n",
        Stdout::Full,
    );
    assert_eq!((code, err.as_str()), (1, enospc));
}

/// egrad's exit code, stdout and stderr for `args`.
fn run(args: &[&str]) -> (i32, String, String) {
    common::egrad(args)
}

#[test]
fn fdcheck_perturbs_only_float_parameters() {
    // An i64 array filled by --random (was: "give the run-time count
    // `kind` with --arg kind=N", whose advice then failed too).
    let (code, out, err) = run(&["fdcheck", "examples/match.eg", "--fn", "loss"]);
    assert_eq!(code, 0, "{out}{err}");
    // Integers and bools named by --wrt are told, not moved (were a
    // mismatch, "must be a whole number, got 5.000005", ...).
    for (file, f, int, float, extra) in [
        ("examples/match.eg", "loss", "kind", "x", None),
        ("examples/match.eg", "penalty", "robust", "r", None),
        ("examples/decay.eg", "decay", "n", "a", Some("n=5")),
        ("examples/random.eg", "loss", "seed", "mu", Some("seed=3")),
    ] {
        let mut args = vec!["fdcheck", file, "--fn", f, "--wrt", int, "--wrt", float];
        if let Some(d) = extra {
            args.extend(["--dim", d]);
        }
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        assert!(
            out.contains(&format!("{int}: ")) && out.contains("not checked"),
            "{out}"
        );
        assert!(
            out.contains(&format!("{float}: ")) && out.contains("ok: "),
            "{out}"
        );
    }
}

#[test]
fn random_fills_i64_arrays_with_small_counts() {
    // `piece` matches each element of `kind: i64[N]` against 0, 1 and the
    // rest; --random used to refuse it with advice that failed next.
    for interp in [false, true] {
        let mut args = vec!["run", "examples/match.eg", "--fn", "piece", "--random"];
        args.extend(["--dim", "N=64", "--json"]);
        if interp {
            args.push("--interp");
        }
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("\"result\""), "{out}");
    }
    // The scalar count's advice works as given.
    let (code, _, err) = run(&["run", "examples/decay.eg", "--fn", "ddecay", "--random"]);
    assert_eq!(code, 2);
    assert!(err.contains("--dim n=N"), "{err}");
    let args = ["run", "examples/decay.eg", "--fn", "ddecay", "--random"];
    let (code, _, err) = run(&[&args[..], &["--dim", "n=50", "--dim", "N=4"]].concat());
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_rules_folder_without_rule_files_is_an_error() {
    let dir = std::env::temp_dir().join(format!("egrad-empty-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("README.md"), "rules go here\n").unwrap();
    let d = dir.display().to_string();
    let args = ["run", "examples/loss.eg", "--fn", "loss", "--random"];
    // Was exit 0, optimized with no rules at all.
    let (code, _, err) = run(&[&args[..], &["--dim", "N=3", "--rules", &d]].concat());
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("{d}: no rules here")) && err.contains("*.rules"),
        "{err}"
    );
}

/// Write `text` to a fresh file under the temp folder; its path.
fn temp_program(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("egrad-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn diagnostics_are_bounded_in_number_and_width() {
    // 100 unknown names, one a function: all were printed.
    let text: String = (0..100)
        .map(|i| format!("fn f{i}(x: f64) -> f64 = x + y{i}\n"))
        .collect();
    let p = temp_program("errors100.eg", &text);
    let (code, _, err) = run(&["check", p.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("\nerror: ").count() + 1, 20, "{err}");
    assert!(err.contains("\n80 more error(s) in "), "{err}");
    assert!(
        err.trim_end().ends_with("not shown (the first 20 are)"),
        "{err}"
    );
    // One line of 100,000 characters: was echoed whole.
    let pad = " ".repeat(50_000);
    let line = format!("fn f(x: f64) -> f64 = x +{pad}q{pad}\n");
    let p2 = temp_program("longline.eg", &line);
    let (code, _, err) = run(&["check", p2.to_str().unwrap()]);
    std::fs::remove_file(&p).unwrap();
    std::fs::remove_file(&p2).unwrap();
    assert_eq!(code, 1, "{err}");
    assert!(err.len() < 1000, "{} bytes: {err}", err.len());
    assert!(
        err.contains("1 | …") && err.contains(" q ") && err.contains(" …\n"),
        "{err}"
    );
    assert!(
        err.contains(":1:50026"),
        "the column is the real one: {err}"
    );
}

/// λ beyond `MAX_LAMBDA` (where λ times a residual's bytes overflowed to
/// infinity and the extractor panicked: `explore --lambdas 1e308`) is a
/// usage error, from the CLI and from the library; `MAX_LAMBDA` itself
/// works.
#[test]
fn lambda_beyond_its_maximum_is_a_usage_error() {
    for flag in ["--lambdas", "--lambda"] {
        let cmd = if flag == "--lambdas" {
            "explore"
        } else {
            "grad"
        };
        let (code, _, err) = run(&[cmd, "examples/decay.eg", "--fn", "ddecay", flag, "1e308"]);
        assert_eq!(code, 2, "{cmd} {flag} 1e308: {err}");
        assert!(err.contains("from 0 to 1e50"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let (code, _, err) = run(&[
        "explore",
        "examples/decay.eg",
        "--fn",
        "ddecay",
        "--lambdas",
        "1e50",
        "--no-run",
        "--quiet",
    ]);
    assert_eq!(code, 0, "{err}");
    let p = egrad::Program::from_file("examples/decay.eg").unwrap();
    for l in [1e308, 1e51, -1.0, f64::NAN] {
        let o = egrad::Options::default().function("ddecay").lambda(l);
        match egrad::optimize_gradient(&p, &o) {
            Err(egrad::Error::Usage(m)) => assert!(m.contains("λ"), "{m}"),
            Err(e) => panic!("λ = {l}: {e}"),
            Ok(_) => panic!("λ = {l} was taken"),
        }
    }
    assert!(egrad::optimize_gradient(
        &p,
        &egrad::Options::default()
            .function("ddecay")
            .lambda(egrad::MAX_LAMBDA)
    )
    .is_ok());
}

/// Every construct nested or chained 20,000 deep is a limit error at
/// file:line or a program, never a crash of the thread's stack: a chain of
/// `[0]` indexes (`x[0][0]...`) overflowed the checker's stack (exit 134).
#[test]
fn deep_nesting_of_every_construct_is_a_limit_never_a_crash() {
    let n = 20_000;
    let deep = |open: &str, core: &str, close: &str| {
        format!("{}{core}{}", open.repeat(n), close.repeat(n))
    };
    let cases: Vec<(&str, String)> = vec![
        ("an index chain", format!("x{}", "[0]".repeat(n))),
        ("nested indexes", deep("x[", "0", "]")),
        ("parentheses", deep("(", "x[0]", ")")),
        ("negations", format!("{}x[0]", "-".repeat(n))),
        ("sums", format!("{}x", "+/".repeat(n))),
        ("calls", deep("sin(", "x[0]", ")")),
        ("an operator chain", format!("x[0]{}", " + x[0]".repeat(n))),
        ("tuples", deep("(x[0], ", "x[0]", ")")),
        ("blocks", deep("{ let a = ", "x[0]", "; a }")),
        ("ifs", deep("if x[0] > 0 { ", "x[0]", " } else { x[0] }")),
        (
            "else-if chains",
            format!("{}x[0]{}", "if x[0] > 0 { x[0] } else ".repeat(n), ""),
        ),
        ("tabulates", deep("+/(tabulate[2](i => ", "x[0]", "))")),
    ];
    for (what, body) in cases {
        let p = temp_program(
            "deep.eg",
            &format!("fn f(x: f64[3]) -> f64 {{\n  {body}\n}}\n"),
        );
        let (code, _, err) = run(&["check", p.to_str().unwrap()]);
        std::fs::remove_file(&p).unwrap();
        assert!(
            code == 1 && err.contains("nested too deeply") && err.contains("deep.eg:2:"),
            "{what}: exit {code}: {}",
            &err[..err.len().min(600)]
        );
    }
}

/// A rules file whose rule changes a value's type is an error at
/// file:line when loaded (it was accepted, and merged classes of two
/// types for the extractor to fail on).
#[test]
fn an_ill_typed_rules_file_is_an_error_at_its_line() {
    let dir = std::env::temp_dir().join(format!("egrad-bad-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.rules");
    std::fs::write(
        &file,
        "comm: (mul ?a ?b) => (mul ?b ?a)\n# a type error:\nsum-of-add: (add ?a ?b) => (sum ?a)\n",
    )
    .unwrap();
    let d = dir.display().to_string();
    let args = [
        "grad",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--rules",
        &d,
    ];
    let (code, _, err) = run(&args);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 2, "{err}");
    let at = format!(
        "{}:3: rule `sum-of-add` changes a value's type",
        file.display()
    );
    assert!(err.contains(&at), "{err}");
    assert!(err.contains("`sum` does not take"), "{err}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_program_file_without_end_is_read_only_to_the_memory_limit() {
    // `/dev/zero` as the program was read to the end: under an address
    // space limit until the allocator failed ("cannot read /dev/zero: out
    // of memory"), without one until the kernel killed the process (the
    // input fuzzer's command lines). The limit here keeps the old code
    // from taking the machine's memory.
    let how = How {
        address_space: Some(1 << 30),
        ..How::default()
    };
    let args = ["run", "/dev/zero", "--fn", "f", "--memory-limit", "64M"];
    let o = run_egrad(&os_args(&args), b"", &how);
    assert_eq!(o.code, Some(1), "{}", o.err);
    assert!(
        o.err.starts_with("error: reading /dev/zero needs ")
            && o.err
                .contains("more than the memory limit of 67108864 bytes"),
        "{}",
        o.err
    );
    // `check` has no --memory-limit: the default, from RLIMIT_AS.
    let o = run_egrad(&os_args(&["check", "/dev/zero"]), b"", &how);
    assert_eq!(o.code, Some(1), "{}", o.err);
    assert!(
        o.err.starts_with("error: reading /dev/zero needs "),
        "{}",
        o.err
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_rules_file_that_is_no_regular_file_is_an_error() {
    // A `*.rules` link to `/dev/zero` was read to the end: under an
    // address-space limit until the allocator failed ("out of memory",
    // naming the folder), without one until the kernel killed egrad. The
    // limit here keeps the old code from taking the machine's memory.
    let dir = std::env::temp_dir().join(format!("egrad-rules-zero-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("endless.rules");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let how = How {
        address_space: Some(1 << 30),
        ..How::default()
    };
    let d = dir.display().to_string();
    let args = [
        "run",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--random",
        "--dim",
        "N=3",
        "--rules",
        &d,
    ];
    let o = run_egrad(&os_args(&args), b"", &how);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(o.code, Some(2), "{}", o.err);
    assert_eq!(
        o.err,
        format!("error: {}: not a regular file\n", link.display()),
    );
}

/// A long program under a tight address-space limit is a limit error at
/// the function that does not fit, never an abort: checking 20,000 `let`s
/// or 20,000 chained functions under 256 MiB failed an allocation (exit
/// 134; the input fuzzer's programs of one shape).
#[cfg(target_os = "linux")]
#[test]
fn a_long_program_under_an_address_space_limit_is_a_limit_error() {
    let n = 20_000;
    let mut lets = String::from("fn f(x: f64[3]) -> f64 {\nlet a = x[0]\n");
    lets += &"let a = sin(a) * x[1]\n".repeat(n);
    lets += "a\n}\n@grad(x) fn df(x: f64[3]) -> f64[3] = f(x)\n";
    let mut calls = String::from("fn g0(x: f64[3]) -> f64 = x[0]\n");
    for k in 1..n {
        calls += &format!("fn g{k}(x: f64[3]) -> f64 = sin(g{}(x)) * x[1]\n", k - 1);
    }
    let how = How {
        address_space: Some(256 << 20),
        ..How::default()
    };
    for (name, src) in [("lets", lets), ("calls", calls)] {
        let p = temp_program(&format!("long_{name}.eg"), &src);
        let o = run_egrad(&os_args(&["check", p.to_str().unwrap()]), b"", &how);
        std::fs::remove_file(&p).unwrap();
        assert_eq!(o.code, Some(1), "{name}: {:?} {}", o.signal, o.err);
        assert!(
            o.err.starts_with("error: compiling `")
                && o.err.contains("operations in the program so far"),
            "{name}: {}",
            o.err
        );
    }
    // A function whose call (kept as a call) takes it past the limit, with
    // nothing after the call: the error is at that function, not an
    // internal error for the functions left unchecked after it.
    let mut src = String::from("fn g(x: f64) -> f64 {\n");
    src += &"  let x = sin(x) * 1.5\n".repeat(3000);
    src += "  x\n}\nfn f(x: f64) -> f64 = g(x)\nfn h(x: f64) -> f64 = f(x)\n";
    let p = temp_program("long_call.eg", &src);
    let args = ["run", p.to_str().unwrap(), "--fn", "h", "--arg", "x=0.5"];
    let o = run_egrad(
        &os_args(&[&args[..], &["--memory-limit", "200000000"]].concat()),
        b"",
        &How::default(),
    );
    std::fs::remove_file(&p).unwrap();
    assert_eq!(o.code, Some(1), "{}", o.err);
    assert!(o.err.starts_with("error: compiling `f` ("), "{}", o.err);
    // A short program checks under the same limit.
    let p = temp_program("long_ok.eg", "fn f(x: f64) -> f64 = sin(x)\n");
    let o = run_egrad(&os_args(&["check", p.to_str().unwrap()]), b"", &how);
    std::fs::remove_file(&p).unwrap();
    assert_eq!(o.code, Some(0), "{}", o.err);
}

#[test]
fn a_run_of_extreme_length_is_refused_by_the_work_limit() {
    // A reduction over a `tabulate` of 2^62 elements is one fused loop that
    // allocates nothing: it ran for a century. So did a loop of 9e15 steps.
    let p = temp_program(
        "extreme.eg",
        "fn g(x: f64[4]) -> f64 = +/tabulate[4611686018427387904](i => f64(i) * x[1])\n\
         fn h(n: i64, x: f64) -> f64 = iterate(n, x, s => 0.5 * s + 1.0)\n\
         fn r(n: i64, a: f64) -> f64 =\n  \
           iterate_until(n, a, s => abs(s * s - a) < 1e-12, s => 0.5 * (s + a / s))\n",
    );
    let file = p.to_str().unwrap();
    let how = How {
        deadline: std::time::Duration::from_secs(30),
        ..How::default()
    };
    let egrad = |args: &[&str]| {
        let o = run_egrad(&os_args(&[&["run", file][..], args].concat()), b"", &how);
        assert!(!o.hung, "{args:?} hung");
        (o.code, o.out, o.err)
    };
    for interp in [&[][..], &["--interp"]] {
        // At least one operation per element, and per step.
        for (args, least) in [
            (&["--fn", "g", "--arg", "x=[1,2,3,4]"][..], 4.6e18),
            (
                &["--fn", "h", "--arg", "n=9000000000000000", "--arg", "x=1"],
                9.0e15,
            ),
        ] {
            let (code, _, err) = egrad(&[args, interp].concat());
            assert_eq!(code, Some(1), "{args:?} {interp:?}: {err}");
            let ops: Option<f64> = err
                .split("would take about ")
                .nth(1)
                .and_then(|t| t.split(' ').next()?.parse().ok());
            assert!(
                err.starts_with("error: ")
                    && ops.is_some_and(|n| n >= least)
                    && err.contains(
                        "element operations, more than the work limit of 1.0e13 (--work-limit"
                    ),
                "{args:?} {interp:?}: {err}"
            );
        }
        // An `iterate_until` may stop at its first step: its count is a
        // bound, not counted.
        let until = ["--fn", "r", "--arg", "n=1000000000000000", "--arg", "a=2"];
        let (code, out, err) = egrad(&[&until[..], interp].concat());
        assert_eq!((code, out.trim()), (Some(0), "1.414213562373095"), "{err}");
    }
    // The limit is the user's: lowered, it refuses a short loop; raised,
    // it lets a long one run.
    let short = ["--fn", "h", "--arg", "n=1000", "--arg", "x=1"];
    let (code, _, err) = egrad(&[&short[..], &["--work-limit", "10^2"]].concat());
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("more than the work limit of 100 "), "{err}");
    let (code, out, err) = egrad(&[&short[..], &["--work-limit", "1e4"]].concat());
    assert_eq!((code, out.trim()), (Some(0), "2"), "{err}");
    for bad in ["0", "2.5e0", "1e20", "ten", "10^-2"] {
        let (code, _, err) = egrad(&[&short[..], &["--work-limit", bad]].concat());
        assert_eq!(code, Some(2), "{bad}: {err}");
    }
    std::fs::remove_file(&p).unwrap();
}
