//! Fuzzing the inputs that are not programs (issue 38): GradBench protocol
//! messages to `egrad gradbench`, `--rules` folders of bundled rules
//! mutated, and `.npy`/`.npz` argument files mutated, each through the
//! binary. A bug is a panic, an internal error,
//! a crash (a signal), a hang (no answer in `HANG`), or a protocol answer
//! missing for a line. Every other outcome is fine: a malformed message
//! gets an error answer, a bad rules file a usage error at its line.
//!
//! Environment: `EGRAD_FUZZ_INPUT_SECS` (how long, 4 by default),
//! `EGRAD_FUZZ_INPUT_SEED` (the first seed; a failure names its seed, so
//! `EGRAD_FUZZ_INPUT_SEED=S EGRAD_FUZZ_INPUT_SECS=0` reruns it alone).
//! The counts of each kind of input are printed at the end.

mod common;

use common::env_u64;
use common::rng::Rng;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest one input may take.
const HANG: Duration = Duration::from_secs(60);

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

/// Run `egrad` with `args` and `stdin` under the `HANG` limit: exit code
/// (None: killed by a signal or the limit), stdout, stderr.
fn run(args: &[&str], stdin: &[u8]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_egrad"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run egrad");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let start = Instant::now();
    while child.try_wait().ok().flatten().is_none() && start.elapsed() < HANG {
        std::thread::sleep(Duration::from_millis(5));
    }
    if child.try_wait().ok().flatten().is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("egrad's output");
    let _ = feeder.join();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Why an outcome is a bug, if it is.
fn bug(code: Option<i32>, out: &str, err: &str) -> Option<String> {
    let text = format!("{out}{err}");
    if code.is_none() {
        return Some("killed: a crash or a hang".into());
    }
    if code == Some(70) || text.contains("internal compiler error") || text.contains("panicked") {
        return Some(format!("exit {code:?}: {}", &err[..err.len().min(800)]));
    }
    None
}

/// One GradBench session of a few lines: every non-empty line answered
/// with a JSON object, no bug.
fn protocol_case(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed);
    let lines: Vec<String> = (0..1 + rng.below(4))
        .map(|i| message(&mut rng, i))
        .collect();
    let stdin = lines.join("\n") + "\n";
    let (code, out, err) = run(&["gradbench"], stdin.as_bytes());
    if let Some(b) = bug(code, &out, &err) {
        return Err(format!("{b}\ninput:\n{stdin}"));
    }
    let answers = out.lines().count();
    if code != Some(0) || answers != lines.len() {
        return Err(format!(
            "exit {code:?}, {answers} answers to {} lines: {}\ninput:\n{stdin}",
            lines.len(),
            &err[..err.len().min(800)]
        ));
    }
    Ok(())
}

/// A bundled rules file with a few of its tokens deleted, duplicated,
/// swapped or replaced by another of its tokens, in a folder of its own,
/// used to optimize a gradient: a usage error at a line, or a program.
fn rules_case(seed: u64, work: &std::path::Path) -> Result<(), String> {
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
    let (code, out, err) = run(&args, b"");
    std::fs::remove_dir_all(&dir).unwrap();
    match bug(code, &out, &err) {
        Some(b) => Err(format!("{b}\nrules ({name} mutated):\n{}", toks.concat())),
        None => Ok(()),
    }
}

/// Valid argument files for `examples/loss.eg`'s `dloss_dw` (`w`, `x`:
/// `f32[4]`, `y`: `f32`) with a few byte-level mutations (bytes flipped,
/// replaced, cut, dropped or repeated), read by `egrad run` as an `.npz`
/// (`--args`) or one `.npy` (`--arg w=@`). An error (a bad file) is fine.
fn container_case(seed: u64, work: &std::path::Path) -> Result<(), String> {
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
    let (code, out, err) = run(&args, b"");
    std::fs::remove_dir_all(&dir).unwrap();
    match bug(code, &out, &err) {
        Some(b) => Err(format!("{b}\n{} bytes: {bytes:?}", bytes.len())),
        None => Ok(()),
    }
}

#[test]
fn fuzz_inputs() {
    let secs = env_u64("EGRAD_FUZZ_INPUT_SECS").unwrap_or(4);
    let first = env_u64("EGRAD_FUZZ_INPUT_SEED").unwrap_or(0x5eed_1a7e);
    let work = std::env::temp_dir().join(format!("egrad-fuzz-inputs-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let start = Instant::now();
    let (mut protocol, mut rules, mut containers, mut failures) = (0, 0, 0, Vec::new());
    let mut seed = first;
    loop {
        let r = match seed % 3 {
            0 => {
                protocol += 1;
                protocol_case(seed)
            }
            1 => {
                rules += 1;
                rules_case(seed, &work)
            }
            _ => {
                containers += 1;
                container_case(seed, &work)
            }
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
    println!(
        "fuzz_inputs: {protocol} GradBench sessions, {rules} rules folders, {containers} npy/npz files, {} failures",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
