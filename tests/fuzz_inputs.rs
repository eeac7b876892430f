//! Fuzzing the inputs that are not programs (issue 38), each through the
//! binary: GradBench protocol messages to `egrad gradbench`, `--rules`
//! folders of bundled rules mutated, `.npy`/`.npz` argument files
//! mutated, command lines of every subcommand with its flags at their
//! extremes (`fuzz_inputs/cli.rs`: the flags read from `-h`), and
//! programs of one construct chained or nested from once to 20,000 times
//! (`fuzz_inputs/shapes.rs`).
//!
//! Each case runs as its seed draws: a quarter of them under an
//! address-space limit (RLIMIT_AS of 256 MiB to 4 GiB, set in the child;
//! a command line with a size past any array always), and a sixth each
//! once more with stdout closed (the pipe's reader gone) or on
//! `/dev/full`.
//!
//! A bug is a panic, an internal error (exit 70), an exit code egrad does
//! not have, a crash (a signal: SIGABRT of a failed allocation, SIGSEGV,
//! SIGPIPE, SIGKILL of the kernel's OOM killer), a hang (no exit in
//! `HANG`), a protocol answer missing for a line; with stdout closed, an
//! exit code other than the command's or a broken-pipe message; with
//! stdout full, an exit code other than the command's, except that output
//! lost must be an io error with exit code 1, never a success. Every other
//! outcome is fine: a malformed message gets an error answer, a bad rules
//! file a usage error at its line, a bad flag value a usage error.
//!
//! Environment: `EGRAD_FUZZ_INPUT_SECS` (how long, 4 by default),
//! `EGRAD_FUZZ_INPUT_SEED` (the first seed; a failure names its seed, so
//! `EGRAD_FUZZ_INPUT_SEED=S EGRAD_FUZZ_INPUT_SECS=0` reruns it alone),
//! `EGRAD_FUZZ_INPUT_SHOW` (set: each command line that passed, with its
//! exit code and first line of stderr, on stderr). The counts of each
//! kind of input and condition are printed at the end.

#[path = "fuzz_inputs/cli.rs"]
mod cli;
mod common;
#[path = "fuzz_inputs/shapes.rs"]
mod shapes;

use common::child::{os_args, run_egrad, How, Outcome, Stdout};
use common::env_u64;
use common::rng::Rng;
use std::ffi::OsString;
use std::time::{Duration, Instant};

/// The longest one input may take.
const HANG: Duration = Duration::from_secs(60);

/// The address-space limits (RLIMIT_AS) cases run under: a tight one and
/// a few roomy ones, all with room for the binary to start and compile.
const ADDRESS_SPACES: &[u64] = &[256 << 20, 1 << 30, 2 << 30, 4 << 30];

/// The modules and their functions, as `gradbench/` ships them.
const MODULES: &[(&str, &[&str])] = &[
    ("lse", &["primal", "gradient"]),
    ("llsq", &["primal", "gradient"]),
    ("kmeans", &["cost", "dir"]),
    ("det", &["primal", "gradient"]),
    ("ode", &["primal", "gradient"]),
    ("gmm", &["objective", "jacobian"]),
    ("lstm", &["objective", "jacobian"]),
    ("ht", &["objective", "jacobian"]),
    ("ba", &["objective", "jacobian"]),
];

/// Every field name a module reads.
const FIELDS: &[&str] = &[
    "x",
    "n",
    "s",
    "d",
    "k",
    "m",
    "p",
    "ell",
    "A",
    "alpha",
    "cam",
    "feat",
    "w",
    "gamma",
    "mu",
    "q",
    "l",
    "points",
    "centroids",
    "main_params",
    "extra_params",
    "state",
    "sequence",
    "theta",
    "data",
    "us",
    "start",
    "min_runs",
    "min_seconds",
];

/// A number: small ones, counts, and the extremes of each JSON reading.
fn number(rng: &mut Rng) -> String {
    let extremes = [
        "0",
        "1",
        "2",
        "-1",
        "0.5",
        "1e308",
        "-1e308",
        "1e-320",
        "9007199254740993",
        "18446744073709551615",
        "18446744073709551616",
        "9223372036854775807",
        "-9223372036854775808",
        "1000000000000",
        "3.5",
    ];
    if rng.chance(0.5) {
        rng.pick(&extremes).to_string()
    } else {
        format!("{}", rng.below(8))
    }
}

/// A JSON value of a few levels: numbers, arrays, matrices, odd types.
fn value(rng: &mut Rng, depth: usize) -> String {
    match rng.below(if depth > 2 { 2 } else { 7 }) {
        0 | 1 => number(rng),
        2 | 3 => {
            let n = rng.below(6);
            let xs: Vec<String> = (0..n).map(|_| number(rng)).collect();
            format!("[{}]", xs.join(","))
        }
        4 => {
            let (r, c) = (rng.below(4), rng.below(4));
            let rows: Vec<String> = (0..r)
                .map(|_| {
                    let xs: Vec<String> = (0..c).map(|_| format!("{}", rng.below(5))).collect();
                    format!("[{}]", xs.join(","))
                })
                .collect();
            format!("[{}]", rows.join(","))
        }
        5 => rng
            .pick(&["null", "true", "\"x\"", "{}", "[[]]"])
            .to_string(),
        _ => {
            let n = rng.below(3);
            let fields: Vec<String> = (0..n)
                .map(|_| format!("\"{}\": {}", rng.pick(FIELDS), value(rng, depth + 1)))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
    }
}

/// One protocol line: mostly evaluates of a real module and function with
/// random inputs, some other kinds, some not JSON at all.
fn message(rng: &mut Rng, id: usize) -> String {
    let (module, functions) = rng.pick(MODULES);
    match rng.below(10) {
        0 => format!(r#"{{"id": {id}, "kind": "start"}}"#),
        1 => format!(r#"{{"id": {id}, "kind": "define", "module": "{module}"}}"#),
        2 => rng
            .pick(&["{", "[1]", "nul", "{\"id\": []}", "\u{7f}"])
            .to_string(),
        _ => {
            let n = rng.below(6);
            let mut fields: Vec<String> = (0..n)
                .map(|_| format!("\"{}\": {}", rng.pick(FIELDS), value(rng, 1)))
                .collect();
            // Runs stay small: many runs is a long run, not a bug.
            fields.retain(|f| !f.starts_with("\"min_"));
            if rng.chance(0.2) {
                fields.push(format!(
                    "\"min_runs\": {}",
                    rng.pick(&["0", "3", "1e3", "18446744073709551615", "-1"])
                ));
            }
            format!(
                r#"{{"id": {id}, "kind": "evaluate", "module": "{module}", "function": "{}", "input": {{{}}}}}"#,
                rng.pick(functions),
                fields.join(",")
            )
        }
    }
}

/// Why an outcome is a bug, if it is: a signal, a hang, an internal
/// error, a panic, or an exit code egrad does not have.
fn bug(o: &Outcome) -> Option<String> {
    let text = format!("{}{}", o.out, o.err);
    let err = &o.err[..o.err.floor_char_boundary(800)];
    if o.hung {
        return Some(format!("a hang: still running after {HANG:?}"));
    }
    if let Some(sig) = o.signal {
        return Some(format!("killed by signal {sig}: {err}"));
    }
    if o.code == Some(70) || text.contains("internal compiler error") || text.contains("panicked") {
        return Some(format!("exit {:?}: {err}", o.code));
    }
    if !matches!(o.code, Some(0..=2)) {
        return Some(format!(
            "exit {:?}, not one of egrad's codes: {err}",
            o.code
        ));
    }
    None
}

/// What a case runs under besides its input: an address-space limit for
/// a quarter of them, stdout closed or full for a sixth each.
#[derive(Clone, Copy, Debug)]
struct Conditions {
    address_space: Option<u64>,
    stdout: Stdout,
}

impl Conditions {
    /// Drawn from a stream of their own, so a case's input is the same
    /// whatever its conditions.
    fn of(seed: u64) -> Conditions {
        let mut rng = Rng(seed ^ 0xc0de_d1ce);
        Conditions {
            address_space: rng.chance(0.25).then(|| rng.pick(ADDRESS_SPACES)),
            stdout: match rng.below(6) {
                0 => Stdout::Closed,
                1 => Stdout::Full,
                _ => Stdout::Piped,
            },
        }
    }
}

/// How many runs went under each condition.
#[derive(Default)]
struct Counts {
    limited: usize,
    closed: usize,
    full: usize,
    /// The exit codes of the command lines: 0, 1 and 2.
    cli_codes: [usize; 3],
}

/// Run a command as `cond` says, then, for a closed or full stdout, once
/// more that way: no bug either time; a closed stdout keeps the command's
/// exit code and adds no message; a full one keeps it too, except that
/// output lost is an io error (exit 1, ENOSPC), never a success.
fn check_run(
    args: &[OsString],
    stdin: &[u8],
    cond: Conditions,
    counts: &mut Counts,
) -> Result<Outcome, String> {
    let mut how = How {
        address_space: cond.address_space,
        deadline: HANG,
        ..How::default()
    };
    counts.limited += usize::from(cond.address_space.is_some());
    let first = run_egrad(args, stdin, &how);
    let limit = format!("under RLIMIT_AS {:?}", cond.address_space);
    if let Some(b) = bug(&first) {
        return Err(format!("{b} ({limit})"));
    }
    if cond.stdout == Stdout::Piped {
        return Ok(first);
    }
    how.stdout = cond.stdout;
    let again = run_egrad(args, stdin, &how);
    let what = format!("stdout {:?} {limit}", cond.stdout);
    if let Some(b) = bug(&again) {
        return Err(format!("{b} ({what})"));
    }
    let wrong = match cond.stdout {
        Stdout::Closed => {
            counts.closed += 1;
            let epipe = |e: &str| e.contains("Broken pipe") || e.contains("os error 32");
            again.code != first.code || (epipe(&again.err) && !epipe(&first.err))
        }
        _ => {
            counts.full += 1;
            let enospc = again.code == Some(1) && again.err.contains("No space left on device");
            if first.out.is_empty() {
                again.code != first.code
            } else if first.code == Some(0) {
                !enospc
            } else {
                again.code != first.code && !enospc
            }
        }
    };
    if wrong {
        return Err(format!(
            "{what}: exit {:?}, stderr {:?}; with stdout piped: exit {:?}, {} bytes out, stderr {:?}",
            again.code,
            &again.err[..again.err.floor_char_boundary(800)],
            first.code,
            first.out.len(),
            &first.err[..first.err.floor_char_boundary(800)]
        ));
    }
    Ok(first)
}

/// One GradBench session of a few lines: every non-empty line answered
/// with a JSON object, no bug.
fn protocol_case(seed: u64, counts: &mut Counts) -> Result<(), String> {
    let mut rng = Rng(seed);
    let lines: Vec<String> = (0..1 + rng.below(4))
        .map(|i| message(&mut rng, i))
        .collect();
    let stdin = lines.join("\n") + "\n";
    let o = check_run(
        &os_args(&["gradbench"]),
        stdin.as_bytes(),
        Conditions::of(seed),
        counts,
    )
    .map_err(|b| format!("{b}\ninput:\n{stdin}"))?;
    let answers = o.out.lines().count();
    if o.code != Some(0) || answers != lines.len() {
        return Err(format!(
            "exit {:?}, {answers} answers to {} lines: {}\ninput:\n{stdin}",
            o.code,
            lines.len(),
            &o.err[..o.err.floor_char_boundary(800)]
        ));
    }
    Ok(())
}

/// A bundled rules file with a few of its tokens deleted, duplicated,
/// swapped or replaced by another of its tokens, in a folder of its own,
/// used to optimize a gradient: a usage error at a line, or a program.
fn rules_case(seed: u64, work: &std::path::Path, counts: &mut Counts) -> Result<(), String> {
    let mut rng = Rng(seed);
    let files = [
        "algebra.rules",
        "zero.rules",
        "broadcast.rules",
        "strength.rules",
        "fastmath.rules",
    ];
    let name = rng.pick(&files);
    let text = std::fs::read_to_string(format!("rulesets/{name}")).expect("a bundled rules file");
    let mut toks: Vec<String> = text
        .split_inclusive([' ', '(', ')', '\n'])
        .map(String::from)
        .collect();
    for _ in 0..1 + rng.below(4) {
        let (i, j) = (rng.below(toks.len()), rng.below(toks.len()));
        match rng.below(4) {
            0 => {
                toks.remove(i);
            }
            1 => toks.insert(i, toks[j].clone()),
            2 => toks.swap(i, j),
            _ => toks[i] = toks[j].clone(),
        }
    }
    let dir = work.join(format!("rules-{seed:x}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("mutated.rules"), toks.concat()).unwrap();
    // Now and then a rules file with no end besides.
    if Rng(seed ^ 0xde5_2e50).chance(0.05) {
        std::os::unix::fs::symlink("/dev/zero", dir.join("endless.rules")).unwrap();
    }
    let d = dir.display().to_string();
    let example = rng.pick(&[
        ("examples/loss.eg", "dloss_dw"),
        ("examples/neuron.eg", "dneuron"),
        ("examples/smooth.eg", "dpenalty"),
    ]);
    let mut args = vec![
        "run", example.0, "--fn", example.1, "--random", "--dim", "N=5", "--rules", &d,
    ];
    if rng.chance(0.5) {
        args.push("--fast-math");
    }
    let r = check_run(&os_args(&args), b"", Conditions::of(seed), counts);
    std::fs::remove_dir_all(&dir).unwrap();
    match r {
        Err(b) => Err(format!("{b}\nrules ({name} mutated):\n{}", toks.concat())),
        Ok(_) => Ok(()),
    }
}

/// Valid argument files for `examples/loss.eg`'s `dloss_dw` (`w`, `x`:
/// `f32[4]`, `y`: `f32`) with a few byte-level mutations (bytes flipped,
/// replaced, cut, dropped or repeated), read by `egrad run` as an `.npz`
/// (`--args`) or one `.npy` (`--arg w=@`). An error (a bad file) is fine.
fn container_case(seed: u64, work: &std::path::Path, counts: &mut Counts) -> Result<(), String> {
    use egrad::{npy, Value};
    let mut rng = Rng(seed);
    let dir = work.join(format!("npz-{seed:x}"));
    std::fs::create_dir_all(&dir).unwrap();
    let v = Value::f32(&[1.0, -2.0, 0.5, 3.0]);
    let npz = rng.chance(0.5);
    let path = dir.join(if npz { "args.npz" } else { "w.npy" });
    if npz {
        let arrays = [
            ("w".to_string(), v.clone()),
            ("x".to_string(), v.clone()),
            ("y".to_string(), Value::f32(&[0.25])),
        ];
        npy::write_npz(&path, &arrays).unwrap();
    } else {
        npy::write_npy(&path, &v).unwrap();
    }
    let mut bytes = std::fs::read(&path).unwrap();
    for _ in 0..1 + rng.below(3) {
        if bytes.is_empty() {
            break;
        }
        let i = rng.below(bytes.len());
        match rng.below(5) {
            0 => bytes[i] ^= 1 << rng.below(8),
            1 => bytes[i] = rng.pick(&[0u8, 0xff, 0x7f, b'{', b'(', b'9']),
            2 => bytes.truncate(i),
            3 => {
                let k = rng.below(bytes.len() - i + 1);
                bytes.drain(i..i + k);
            }
            _ => {
                let b = bytes[rng.below(bytes.len())];
                bytes.insert(i, b);
            }
        }
    }
    std::fs::write(&path, &bytes).unwrap();
    let file = format!("@{}", path.display());
    let w = format!("w={file}");
    let mut args = vec!["run", "examples/loss.eg", "--fn", "dloss_dw", "--quiet"];
    if npz {
        args.extend(["--args", file.as_str()]);
    } else {
        args.extend(["--arg", w.as_str(), "--random"]);
    }
    let r = check_run(&os_args(&args), b"", Conditions::of(seed), counts);
    std::fs::remove_dir_all(&dir).unwrap();
    match r {
        Err(b) => Err(format!("{b}\n{} bytes: {bytes:?}", bytes.len())),
        Ok(_) => Ok(()),
    }
}

/// The command line at its extremes ([`cli::case`]): one subcommand with a
/// random subset of its flags, under its conditions, and under an
/// address-space limit whenever a size is past any array.
fn cli_case(
    seed: u64,
    work: &std::path::Path,
    cli: &cli::Cli,
    seen: &mut [Vec<bool>],
    counts: &mut Counts,
) -> Result<(), String> {
    let mut rng = Rng(seed);
    let plan = cli::case(&mut rng, cli, work, seen);
    let mut cond = Conditions::of(seed);
    if plan.huge && cond.address_space.is_none() {
        cond.address_space = Some(rng.pick(ADDRESS_SPACES));
    }
    match check_run(&plan.args, b"", cond, counts) {
        Ok(o) => {
            counts.cli_codes[o.code.unwrap_or(0).clamp(0, 2) as usize] += 1;
            if std::env::var_os("EGRAD_FUZZ_INPUT_SHOW").is_some() {
                eprintln!(
                    "{:?} {} :: {}",
                    o.code,
                    show_args(&plan.args),
                    o.err.lines().next().unwrap_or("")
                );
            }
            Ok(())
        }
        Err(b) => Err(format!("{b}\nargs: {}", show_args(&plan.args))),
    }
}

/// A program of one construct chained or nested ([`shapes::shape`]),
/// checked; and where it is no longer than 1,000 links, run or
/// differentiated too. Past the nesting limit it is an error (exit 1).
fn shape_case(seed: u64, work: &std::path::Path, counts: &mut Counts) -> Result<(), String> {
    let mut rng = Rng(seed);
    let shape = shapes::shape(&mut rng);
    let path = work.join(format!("shape-{seed:x}.eg"));
    std::fs::write(&path, &shape.source).unwrap();
    let file = path.to_str().unwrap();
    let args: Vec<&str> = match (shape.depth <= 1000, rng.below(3)) {
        (true, 0) => vec!["run", file, "--fn", "f", "--random"],
        (true, 1) => vec!["grad", file, "--fn", "f"],
        _ => vec!["check", file],
    };
    let r = check_run(&os_args(&args), b"", Conditions::of(seed), counts);
    std::fs::remove_file(&path).unwrap();
    r.map(|_| ()).map_err(|b| {
        format!(
            "{b}
{} of {}: {}",
            shape.what,
            shape.depth,
            args.join(" ")
        )
    })
}

/// `args` as a shell would take them (long ones cut).
fn show_args(args: &[OsString]) -> String {
    let words: Vec<String> = args
        .iter()
        .map(|a| {
            let a = a.to_string_lossy();
            let a = if a.len() > 60 {
                format!("{}…({} bytes)", &a[..a.floor_char_boundary(40)], a.len())
            } else {
                a.into_owned()
            };
            format!("'{}'", a.replace('\'', "'\\''"))
        })
        .collect();
    format!("egrad {}", words.join(" "))
}

/// The names in the repository's root (the tests' working directory).
fn root_entries() -> Vec<OsString> {
    let mut names: Vec<OsString> = (std::fs::read_dir(".").unwrap())
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    names
}

#[test]
fn fuzz_inputs() {
    let secs = env_u64("EGRAD_FUZZ_INPUT_SECS").unwrap_or(4);
    let first = env_u64("EGRAD_FUZZ_INPUT_SEED").unwrap_or(0x5eed_1a7e);
    let work = std::env::temp_dir().join(format!("egrad-fuzz-inputs-{}", std::process::id()));
    std::fs::create_dir_all(work.join("dir")).unwrap();
    std::fs::write(work.join("empty.eg"), "").unwrap();
    let cli = cli::Cli::read();
    // Cases write only under `work`: what the repository holds before.
    let before = root_entries();
    let mut seen: Vec<Vec<bool>> = cli
        .commands
        .iter()
        .map(|(_, f)| vec![false; f.len()])
        .collect();
    let start = Instant::now();
    let mut counts = Counts::default();
    let mut kinds = [0usize; 5];
    let mut failures = Vec::new();
    let mut seed = first;
    loop {
        let kind = (seed % 5) as usize;
        kinds[kind] += 1;
        let r = match kind {
            0 => protocol_case(seed, &mut counts),
            1 => rules_case(seed, &work, &mut counts),
            2 => container_case(seed, &work, &mut counts),
            3 => cli_case(seed, &work, &cli, &mut seen, &mut counts),
            _ => shape_case(seed, &work, &mut counts),
        };
        if let Err(e) = r {
            failures.push(format!("seed {seed:#x}: {e}"));
        }
        seed = seed.wrapping_add(1);
        if start.elapsed() >= Duration::from_secs(secs) {
            break;
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    let strays: Vec<OsString> = (root_entries().into_iter())
        .filter(|n| !before.contains(n))
        .collect();
    if !strays.is_empty() {
        failures.push(format!("files written outside the work folder: {strays:?}"));
    }
    let fuzzed: usize = seen.iter().flatten().filter(|&&s| s).count();
    let unseen: Vec<String> = (cli.commands.iter().zip(&seen))
        .flat_map(|((c, flags), s)| {
            (flags.iter().zip(s))
                .filter(|(_, &s)| !s)
                .map(move |(f, _)| format!("{c} {}", f.long))
        })
        .collect();
    if !unseen.is_empty() && unseen.len() < 20 {
        println!(
            "fuzz_inputs: flags not fuzzed in this run: {}",
            unseen.join(", ")
        );
    }
    println!(
        "fuzz_inputs: {} GradBench sessions, {} rules folders, {} npy/npz files, {} command lines ({fuzzed} of the {} flags of {} subcommands; exit 0, 1, 2: {:?}), {} programs chained or nested; {} runs under RLIMIT_AS, {} with stdout closed, {} with stdout full; {} failures",
        kinds[0],
        kinds[1],
        kinds[2],
        kinds[3],
        cli.flag_count(),
        cli.commands.len(),
        counts.cli_codes,
        kinds[4],
        counts.limited,
        counts.closed,
        counts.full,
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
