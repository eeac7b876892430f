//! Every file in `tests/regressions/` (reproducers the fuzzer saved,
//! minimized, and others written by hand) goes through the fuzzer's
//! pipeline (`fuzz/case.rs`: parse, check, optimize, compile, run native
//! code against the interpreter, optimized against unoptimized, the
//! gradient pipeline) without a panic, an internal error or a mismatch.
//! A file's `// args-seed: 0x...` line gives the seed of the arguments it
//! is run on (0 when there is none).

#[path = "fuzz/case.rs"]
mod case;
mod common;

use std::path::PathBuf;

/// The reproducers: those of `EGRAD_REGRESSIONS` (paths separated by
/// commas, e.g. one of `tests/regressions/open/` while fixing it), else
/// every `.eg` file of `tests/regressions/`.
fn files() -> Vec<PathBuf> {
    if let Ok(list) = std::env::var("EGRAD_REGRESSIONS") {
        return list.split(',').map(PathBuf::from).collect();
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir("tests/regressions")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "eg"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn args_seed(src: &[u8]) -> u64 {
    String::from_utf8_lossy(src)
        .lines()
        .find_map(|l| l.strip_prefix("// args-seed: 0x"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap_or(0)
}

#[test]
fn every_regression_passes_the_pipeline() {
    let mut failures = Vec::new();
    let files = files();
    for path in &files {
        let src = std::fs::read(path).unwrap();
        let seed = args_seed(&src);
        // Each on a thread with a main thread's stack (8 MB), as the
        // fuzzer runs them.
        let r = std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(move || {
                let t = std::time::Instant::now();
                case::run_case(&src, seed, egrad::MAX_OPERATIONS, &mut |s| {
                    if std::env::var_os("EGRAD_REGRESSIONS_VERBOSE").is_some() {
                        eprintln!("{:>8.1?} {s}", t.elapsed());
                    }
                })
            })
            .unwrap()
            .join();
        match r {
            Ok(Ok(_)) => {}
            Ok(Err(b)) => failures.push(format!("{}: {}: {}", path.display(), b.stage, b.what)),
            Err(e) => {
                let m = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{}: panicked: {m}", path.display()));
            }
        }
    }
    println!("{} regressions run", files.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
