//! The fuzzer (issue 19): grammar-aware random programs (the wild flavour
//! of the generator `tests/random_programs.rs` uses, `programs/wild.rs`:
//! the same grammar with wrong types, values out of their domain, odd
//! literals and wrong derivative rules on purpose; a fifth of them in
//! `f32`) and mutations of every `.eg` file in the repository (`fuzz/mutate.rs`:
//! tokens deleted, duplicated, swapped, odd literals, long names, deep
//! nesting, spliced ranges, bytes that are not UTF-8), each driven through
//! parse, check, optimize, compile and run (`fuzz/case.rs`: native code
//! against the interpreter, optimized against unoptimized, the gradient
//! pipeline too) for a bounded time.
//!
//! Cases run in child processes (this test binary again, as the test
//! `fuzz_worker` with `EGRAD_FUZZ_WORKER` set, under a 6 GB address-space
//! limit), each case on a thread with the 8 MB stack of a main thread, so
//! an abort (a stack overflow, an allocation failure) or a case that does
//! not finish within its deadline is seen, reported and survived: the
//! parent starts a new child. The child says which stage it is in before
//! each, so a hang or crash names its stage. A case that spent at least
//! half its deadline running programs (the `run ...` stages) when the
//! deadline passes is counted as slow, not as a bug (a loop of 10^8
//! steps takes long in the interpreter, and the stage after such a run
//! may be the one under way); otherwise it is a hang of its stage.
//!
//! A failure (a panic, an internal error, an abort, a hang, a mismatch
//! between native code and the interpreter or between optimized and
//! unoptimized programs) is minimized by delta debugging over tokens
//! (keeping the same failure: kind, stage and panic location or message)
//! and written to `tests/regressions/` with a header saying what failed,
//! the seed and the date; `tests/regressions.rs` runs every file there.
//! The test then fails, listing the failures with their seeds. A failure
//! whose signature is that of a known open bug (a `// signature:` line of
//! a file in `tests/regressions/open/`, which `tests/regressions.rs` does
//! not run) is counted apart, and does not fail the test. The deadline of
//! a case is of CPU time (the child's), within five times as much wall
//! time, so a loaded machine does not make slow cases hangs.
//!
//! Environment: `EGRAD_FUZZ_SECS` (how long to generate cases; 20 by
//! default, 3 in a debug build), `EGRAD_FUZZ_SEED` (the base seed; the
//! case of index `i` is drawn from `mix(seed + i)`, so a run is
//! reproducible up to how far it gets), `EGRAD_FUZZ_JOBS` (child
//! processes; 2 at most by default), `EGRAD_FUZZ_CASE_SECS` (the deadline
//! of one case; 20), `EGRAD_FUZZ_MIN_SECS` (the time to minimize one
//! failure; 60), `EGRAD_FUZZ_CASE_SEED` (run only the case of that seed,
//! as printed on a failure, and print its input), `EGRAD_FUZZ_NO_SAVE`
//! (report failures without writing to `tests/regressions/`).

#[path = "fuzz/case.rs"]
mod case;
mod common;
#[path = "fuzz/mutate.rs"]
mod mutate;
#[path = "programs/mod.rs"]
mod programs;

use common::env_u64;
use common::rng::Rng;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WORKER: &str = "EGRAD_FUZZ_WORKER";

fn mix(seed: u64) -> u64 {
    Rng(seed).next_u64()
}

// ------------------------------------------------------------ the child

static PANIC: Mutex<Option<String>> = Mutex::new(None);

/// The child's side: read cases from stdin, run each, and write
/// `@@stage NAME` before each stage and `@@done ...` at the end.
#[test]
fn fuzz_worker() {
    if std::env::var(WORKER).is_err() {
        return;
    }
    std::panic::set_hook(Box::new(|info| {
        let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
            s.to_string()
        } else if let Some(s) = info.payload().downcast_ref::<String>() {
            s.clone()
        } else {
            "(no message)".to_string()
        };
        let loc = info
            .location()
            .map_or("?".to_string(), |l| format!("{}:{}", l.file(), l.line()));
        *PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{loc}: {msg}"));
    }));
    // The native kernels generated programs call.
    programs::register_kernels();
    let mut stdin = std::io::stdin().lock();
    loop {
        let mut head = [0u8; 12];
        if stdin.read_exact(&mut head).is_err() {
            return;
        }
        let seed = u64::from_le_bytes(head[..8].try_into().unwrap());
        let len = u32::from_le_bytes(head[8..].try_into().unwrap()) as usize;
        let mut src = vec![0u8; len];
        if stdin.read_exact(&mut src).is_err() {
            return;
        }
        let stage = Arc::new(Mutex::new(String::from("start")));
        let st = stage.clone();
        let result = std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(move || {
                case::run_case(&src, seed, case::FUZZ_MAX_OPERATIONS, &mut |s: &str| {
                    *st.lock().unwrap() = s.to_string();
                    say(&format!("@@stage {s}"));
                })
            })
            .expect("a thread")
            .join();
        let at = stage.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let line = match result {
            Ok(Ok(c)) => format!(
                "@@done ok {} {} {} {} {}",
                c.checked, c.compiled, c.runs, c.gradients, c.fd_checks
            ),
            Ok(Err(b)) => format!("@@done bug {}\t{}", b.stage, b.what),
            Err(_) => {
                let m = PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
                format!("@@done panic {at}\t{}", m.unwrap_or_default())
            }
        };
        say(&line);
    }
}

fn say(line: &str) {
    let one: String = line
        .chars()
        .map(|c| if c == '\n' { '\u{1}' } else { c })
        .collect();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{one}");
    let _ = out.flush();
}

// ------------------------------------------------------------ the parent

/// How one case ended.
#[allow(dead_code)] // (`Fine`'s counts are read by a pattern)
#[derive(Clone, Debug)]
enum Outcome {
    /// Parsed and checked (0 or 1), functions compiled, calls compared,
    /// gradient programs.
    Fine([usize; 5]),
    /// Still running a program at its deadline (not a bug).
    Slow(String),
    /// A bug: its kind (`panic`, `internal`, `mismatch`, `crash`, `hang`),
    /// the stage and what happened.
    Bug {
        kind: &'static str,
        stage: String,
        what: String,
    },
}

impl Outcome {
    /// What identifies the failure when minimizing and deduplicating:
    /// the kind, the stage's first word, and the panic's location or the
    /// message without numbers and quoted names.
    fn signature(&self) -> Option<String> {
        let Outcome::Bug { kind, stage, what } = self else {
            return None;
        };
        let stage = stage.split(' ').next().unwrap_or("");
        let detail = match *kind {
            "panic" => what.split(": ").next().unwrap_or("").to_string(),
            "internal" => what
                .split('`')
                .step_by(2)
                .collect::<String>()
                .chars()
                .filter(|c| !c.is_ascii_digit())
                .take(70)
                .collect(),
            "mismatch" => what
                .split(" at ")
                .next()
                .unwrap_or("")
                .split(['[', '('])
                .next()
                .unwrap_or("")
                .chars()
                .filter(|c| !c.is_ascii_digit())
                .collect(),
            "hang" => String::new(),
            _ => what.split(':').next().unwrap_or("").to_string(),
        };
        Some(if detail.is_empty() {
            format!("{kind} in {stage}")
        } else {
            format!("{kind} in {stage}: {detail}")
        })
    }
}

/// A child process running `fuzz_worker`.
struct Child {
    proc: std::process::Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Child {
    fn spawn() -> Child {
        let exe = std::env::current_exe().expect("the test binary");
        let mut proc = Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 6000000 2>/dev/null; exec \"$0\" \"$@\"")
            .arg(exe)
            .args(["fuzz_worker", "--exact", "--nocapture", "--test-threads=1"])
            .env(WORKER, "1")
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a fuzz worker");
        let stdin = proc.stdin.take().unwrap();
        let stdout = proc.stdout.take().unwrap();
        let mut stderr = proc.stderr.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("@@") && tx.send(line).is_err() {
                    break;
                }
            }
        });
        let tail = Arc::new(Mutex::new(Vec::new()));
        let t = tail.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut t = t.lock().unwrap();
                t.extend_from_slice(&buf[..n]);
                let excess = t.len().saturating_sub(2000);
                t.drain(..excess);
            }
        });
        Child {
            proc,
            stdin,
            lines,
            stderr: tail,
        }
    }

    /// Run one case. A crash or a hang leaves the child dead (`alive` false).
    fn run(&mut self, seed: u64, src: &[u8], deadline: Duration) -> (Outcome, bool) {
        let mut msg = Vec::with_capacity(12 + src.len());
        msg.extend_from_slice(&seed.to_le_bytes());
        msg.extend_from_slice(&(src.len() as u32).to_le_bytes());
        msg.extend_from_slice(src);
        self.stderr.lock().unwrap().clear();
        let wrote = self.stdin.write_all(&msg).and_then(|_| self.stdin.flush());
        let started = Instant::now();
        let cpu_before = cpu_time(self.proc.id()).unwrap_or_default();
        let budget = deadline;
        let deadline = budget + cpu_before;
        let mut end = started + budget;
        let mut stage = String::from("start");
        // CPU time spent running programs (the `run ...` stages), and the
        // CPU time when the current stage began.
        let mut run_cpu = Duration::ZERO;
        let mut stage_cpu = cpu_before;
        if wrote.is_err() {
            return (self.crashed(&stage), false);
        }
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let line = line.replace('\u{1}', "\n");
                    if let Some(s) = line.strip_prefix("@@stage ") {
                        let now = cpu_time(self.proc.id()).unwrap_or(stage_cpu);
                        if stage.starts_with("run ") {
                            run_cpu += now.saturating_sub(stage_cpu);
                        }
                        stage_cpu = now;
                        stage = s.to_string();
                    } else if let Some(d) = line.strip_prefix("@@done ") {
                        return (parse_done(d), true);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    // The deadline is of CPU time (on a loaded machine a
                    // case gets a fraction of a core), within 5 times as
                    // much wall-clock time.
                    let cpu = cpu_time(self.proc.id());
                    if cpu.is_some_and(|c| c < deadline) && started.elapsed() < 5 * budget {
                        end = Instant::now() + deadline - cpu.unwrap_or_default();
                        continue;
                    }
                    let _ = self.proc.kill();
                    let _ = self.proc.wait();
                    if stage.starts_with("run ") {
                        run_cpu += cpu.unwrap_or(deadline).saturating_sub(stage_cpu);
                    }
                    // Slow, not a bug, when running the program took most
                    // of the budget, even if a later stage was under way.
                    let o = if run_cpu * 2 >= budget {
                        Outcome::Slow(stage)
                    } else {
                        Outcome::Bug {
                            kind: "hang",
                            what: format!(
                                "no result after {:?} of CPU time ({:?} in all)",
                                budget,
                                started.elapsed()
                            ),
                            stage,
                        }
                    };
                    return (o, false);
                }
                Err(RecvTimeoutError::Disconnected) => return (self.crashed(&stage), false),
            }
        }
    }

    fn crashed(&mut self, stage: &str) -> Outcome {
        let status = self.proc.wait();
        // Let the stderr reader catch up.
        std::thread::sleep(Duration::from_millis(50));
        let err = String::from_utf8_lossy(&self.stderr.lock().unwrap()).to_string();
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string();
        use std::os::unix::process::ExitStatusExt;
        let how = match status {
            Ok(s) => match s.signal() {
                Some(sig) => format!("signal {sig}"),
                None => format!("exit {}", s.code().unwrap_or(-1)),
            },
            Err(e) => format!("wait failed: {e}"),
        };
        Outcome::Bug {
            kind: "crash",
            stage: stage.to_string(),
            what: format!("{how}: {last}"),
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}

/// The CPU time a process has used so far (Linux: `/proc/PID/stat`, at
/// 100 ticks a second).
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn parse_done(d: &str) -> Outcome {
    if let Some(rest) = d.strip_prefix("ok ") {
        let mut c = [0usize; 5];
        for (k, x) in rest.split(' ').enumerate().take(5) {
            c[k] = x.parse().unwrap_or(0);
        }
        return Outcome::Fine(c);
    }
    let (kind, rest) = d.split_once(' ').unwrap_or((d, ""));
    let (stage, what) = rest.split_once('\t').unwrap_or((rest, ""));
    let kind = match kind {
        "panic" => "panic",
        _ if what.starts_with("internal error") => "internal",
        _ => "mismatch",
    };
    Outcome::Bug {
        kind,
        stage: stage.to_string(),
        what: what.to_string(),
    }
}

/// A child that starts again after a crash or a hang.
struct Runner {
    child: Option<Child>,
    deadline: Duration,
}

impl Runner {
    fn run(&mut self, seed: u64, src: &[u8]) -> Outcome {
        let child = self.child.get_or_insert_with(Child::spawn);
        let (o, alive) = child.run(seed, src, self.deadline);
        if !alive {
            self.child = None;
        }
        o
    }
}

// ------------------------------------------------------------ inputs

/// Every `.eg` file under `examples/`, `tests/` and `gradbench/`, sorted.
fn corpus() -> Vec<Vec<u8>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "eg") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    for d in ["examples", "tests", "gradbench"] {
        walk(Path::new(d), &mut files);
    }
    files.sort();
    files
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .filter(|b| b.len() < 200_000)
        .collect()
}

/// A wild generated program (`programs/wild.rs`), in `f32` if `f32`.
fn generated(rng: &mut Rng, f32: bool) -> Vec<u8> {
    let src = programs::generate_wild(rng.next_u64()).source;
    if f32 { programs::to_f32(&src) } else { src }.into_bytes()
}

/// The input of a case: where it comes from, and its bytes.
fn input(seed: u64, corpus: &[Vec<u8>]) -> (&'static str, Vec<u8>) {
    let mut rng = Rng(seed);
    let pick = |rng: &mut Rng| corpus[rng.below(corpus.len())].clone();
    match rng.below(20) {
        0..=6 if rng.chance(0.2) => ("generated, f32", generated(&mut rng, true)),
        0..=6 => ("generated", generated(&mut rng, false)),
        7..=9 => {
            let p = generated(&mut rng, false);
            let other = pick(&mut rng);
            ("generated, mutated", mutate::mutate(&p, &other, &mut rng))
        }
        10..=12 => {
            let p = pick(&mut rng);
            ("a file, odd literals", mutate::odd_literals(&p, &mut rng))
        }
        _ => {
            let (p, other) = (pick(&mut rng), pick(&mut rng));
            ("a file, mutated", mutate::mutate(&p, &other, &mut rng))
        }
    }
}

// ------------------------------------------------------------ minimizing

/// Delta debugging over tokens: remove chunks (halves, quarters, ... one
/// token) while the failure keeps its signature, within `budget`.
fn minimize(runner: &mut Runner, seed: u64, src: &[u8], sig: &str, budget: Duration) -> Vec<u8> {
    let start = Instant::now();
    let mut toks = mutate::tokens(src);
    let mut chunk = toks.len().div_ceil(2).max(1);
    while start.elapsed() < budget {
        let mut changed = false;
        let mut at = 0;
        while at < toks.len() && start.elapsed() < budget {
            let mut cand = toks.clone();
            cand.drain(at..(at + chunk).min(toks.len()));
            let o = runner.run(seed, &cand.concat());
            if o.signature().as_deref() == Some(sig) {
                toks = cand;
                changed = true;
            } else {
                at += chunk;
            }
        }
        if chunk == 1 && !changed {
            break;
        }
        if !changed {
            chunk = chunk.div_ceil(2);
        }
    }
    toks.concat()
}

/// Today's date, `YYYY-MM-DD` (UTC).
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    // Howard Hinnant's civil_from_days.
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn slug(sig: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in sig.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    let kind = sig.split(' ').next().unwrap_or("bug");
    format!("{kind}_{:08x}", h as u32)
}

// ------------------------------------------------------------ the test

#[derive(Default)]
struct Tally {
    cases: usize,
    /// Cases by where they come from: all, and those that checked.
    by_source: Vec<(&'static str, usize, usize)>,
    checked: usize,
    compiled: usize,
    runs: usize,
    gradients: usize,
    /// Gradient elements compared with central differences.
    fd_checks: usize,
    slow: usize,
    /// Failures by signature: the first case's seed, source and outcome,
    /// and how many cases failed so.
    failures: Vec<(String, u64, Vec<u8>, Outcome, usize)>,
    /// Failures of a known open bug (`tests/regressions/open/`), by
    /// signature.
    known: Vec<(String, usize)>,
}

impl Tally {
    /// Count case `i` (seed `seed`, from `from`, source `src`) and its
    /// outcome `o`; `known` are the open bugs' signatures.
    fn record(
        &mut self,
        i: u64,
        seed: u64,
        from: &'static str,
        src: Vec<u8>,
        o: Outcome,
        known: &[String],
    ) {
        self.cases += 1;
        let ok = usize::from(matches!(o, Outcome::Fine([1, ..])));
        match self.by_source.iter_mut().find(|x| x.0 == from) {
            Some(x) => {
                x.1 += 1;
                x.2 += ok;
            }
            None => self.by_source.push((from, 1, ok)),
        }
        match &o {
            Outcome::Fine(c) => {
                self.checked += c[0];
                self.compiled += c[1];
                self.runs += c[2];
                self.gradients += c[3];
                self.fd_checks += c[4];
            }
            Outcome::Slow(_) => self.slow += 1,
            Outcome::Bug { .. } if known.iter().any(|k| o.signature().unwrap().starts_with(k)) => {
                let sig = o.signature().unwrap();
                println!("FUZZ KNOWN case {i} (seed {seed:#x}): {o:?}");
                match self.known.iter_mut().find(|k| k.0 == sig) {
                    Some(k) => k.1 += 1,
                    None => self.known.push((sig, 1)),
                }
            }
            Outcome::Bug { .. } => {
                let sig = o.signature().unwrap();
                println!("FUZZ FAIL case {i} (seed {seed:#x}): {o:?}");
                match self.failures.iter_mut().find(|f| f.0 == sig) {
                    Some(f) => f.4 += 1,
                    None => self.failures.push((sig, seed, src, o, 1)),
                }
            }
        }
    }
}

/// The signatures of the open bugs (a failure is known when its signature
/// starts with one of them): the `// signature:` lines of the
/// files in `tests/regressions/open/` (reproducers of bugs not fixed yet,
/// which `tests/regressions.rs` does not run). The fuzzer counts such
/// failures apart and does not fail on them.
fn known_open() -> Vec<String> {
    let Ok(rd) = std::fs::read_dir("tests/regressions/open") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let text =
            String::from_utf8_lossy(&std::fs::read(e.path()).unwrap_or_default()).to_string();
        for l in text.lines() {
            if let Some(sig) = l.strip_prefix("// signature: ") {
                out.push(sig.trim_end().to_string());
            }
        }
    }
    out
}

/// Minimize each distinct failure, save it under `tests/regressions/`
/// (unless `EGRAD_FUZZ_NO_SAVE`), and say what was found and where.
fn save_failures(t: &Tally, deadline: Duration, min_budget: Duration) -> Vec<String> {
    let save = std::env::var("EGRAD_FUZZ_NO_SAVE").is_err();
    let mut runner = Runner {
        child: None,
        deadline,
    };
    let mut report = Vec::new();
    for (sig, seed, src, o, n) in &t.failures {
        let small = minimize(&mut runner, *seed, src, sig, min_budget);
        let mut line = format!(
            "{sig} ({n} cases; first seed {seed:#x}, rerun with EGRAD_FUZZ_CASE_SEED={seed:#x}; {} bytes minimized to {})",
            src.len(),
            small.len()
        );
        if save {
            let what = match o {
                Outcome::Bug { kind, stage, what } => format!(
                    "{kind} in {stage}: {}",
                    what.lines()
                        .next()
                        .unwrap_or("")
                        .chars()
                        .take(300)
                        .collect::<String>()
                ),
                _ => sig.clone(),
            };
            let path = format!("tests/regressions/{}.eg", slug(sig));
            let mut text = format!(
                "// fuzz: {what}\n// seed: {seed:#x} (EGRAD_FUZZ_CASE_SEED={seed:#x}); found {}\n// args-seed: {seed:#x}\n",
                today()
            )
            .into_bytes();
            text.extend_from_slice(&small);
            if !text.ends_with(b"\n") {
                text.push(b'\n');
            }
            if !Path::new(&path).exists() {
                let _ = std::fs::create_dir_all("tests/regressions");
                std::fs::write(&path, &text).expect("write a regression");
                line.push_str(&format!(", saved as {path}"));
            } else {
                line.push_str(&format!(", already saved as {path}"));
            }
        }
        println!("{line}");
        report.push(line);
    }
    report
}

#[test]
fn fuzz() {
    if std::env::var(WORKER).is_ok() {
        return;
    }
    let secs = env_u64("EGRAD_FUZZ_SECS").unwrap_or(if cfg!(debug_assertions) { 3 } else { 20 });
    let base = env_u64("EGRAD_FUZZ_SEED").unwrap_or(0xF022_0019);
    let jobs = env_u64("EGRAD_FUZZ_JOBS").map_or_else(
        || {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(2)
        },
        |j| j.max(1) as usize,
    );
    let deadline = Duration::from_secs(env_u64("EGRAD_FUZZ_CASE_SECS").unwrap_or(20));
    let min_budget = Duration::from_secs(env_u64("EGRAD_FUZZ_MIN_SECS").unwrap_or(60));
    let known = known_open();
    let corpus = corpus();
    assert!(corpus.len() > 10, "the corpus of .eg files is missing");

    if let Some(seed) = env_u64("EGRAD_FUZZ_CASE_SEED") {
        let (from, src) = input(seed, &corpus);
        println!(
            "case {seed:#x} ({from}):\n{}",
            String::from_utf8_lossy(&src)
        );
        // In this process, so that a panic shows its backtrace and
        // EGRAD_FUZZ_VERBOSE its errors.
        let r = case::run_case(&src, seed, case::FUZZ_MAX_OPERATIONS, &mut |s| {
            println!("stage: {s}")
        });
        println!("{r:?}");
        assert!(r.is_ok(), "{r:?}");
        return;
    }

    let start = Instant::now();
    let stop = start + Duration::from_secs(secs);
    let next = AtomicU64::new(0);
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                let mut runner = Runner {
                    child: None,
                    deadline,
                };
                while Instant::now() < stop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let seed = mix(base.wrapping_add(i));
                    let (from, src) = input(seed, &corpus);
                    let o = runner.run(seed, &src);
                    tally.lock().unwrap().record(i, seed, from, src, o, &known);
                }
            });
        }
    });
    let t = tally.into_inner().unwrap();
    let elapsed = start.elapsed();
    let sources: Vec<String> = t
        .by_source
        .iter()
        .map(|(w, n, ok)| format!("{n} {w} ({ok} checked)"))
        .collect();
    println!(
        "fuzz: {} cases in {:.0?} with {jobs} jobs (seed {base:#x}; {}): {} parsed and checked, {} functions optimized and compiled, {} calls native = interpreter, {} gradient programs ({} elements against finite differences); {} slow (still running a program at the {deadline:?} deadline); {} failures ({} distinct)",
        t.cases,
        elapsed,
        sources.join(", "),
        t.checked,
        t.compiled,
        t.runs,
        t.gradients,
        t.fd_checks,
        t.slow,
        t.failures.iter().map(|f| f.4).sum::<usize>(),
        t.failures.len(),
    );
    for (sig, n) in &t.known {
        println!("known open bug (tests/regressions/open/): {sig}: {n} cases");
    }
    if t.failures.is_empty() {
        return;
    }
    let report = save_failures(&t, deadline, min_budget);
    panic!(
        "the fuzzer found {} failures:\n{}",
        report.len(),
        report.join("\n")
    );
}
