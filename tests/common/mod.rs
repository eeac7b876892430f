//! Helpers shared by integration tests.

use std::path::PathBuf;

/// Every `examples/*.eg`, sorted.
pub fn example_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir("examples")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "eg"))
        .collect();
    files.sort();
    files
}

/// Every `examples/*.eg` and `examples/suite/*.eg`, sorted.
#[allow(dead_code)]
pub fn all_example_files() -> Vec<PathBuf> {
    let mut files = example_files();
    let mut suite: Vec<PathBuf> = std::fs::read_dir("examples/suite")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "eg"))
        .collect();
    suite.sort();
    files.extend(suite);
    files
}

/// Deterministic arguments for `f`, every size parameter `n`; parameter `k`
/// gets a different smooth sequence in (-0.9, 0.9); a run-time `i64` (a
/// loop count) is `n`.
#[allow(dead_code)]
pub fn sample_args(
    f: &egrad::internals::lang::ir::Function,
    n: usize,
) -> Vec<egrad::internals::lang::value::Value> {
    use egrad::internals::lang::types::Dim;
    f.params
        .iter()
        .enumerate()
        .map(|(k, prm)| {
            let t = f.ty(prm.var);
            if t.dtype == egrad::internals::lang::types::DType::I64 {
                return egrad::internals::lang::value::Value::scalar(t.dtype, n as f64);
            }
            let shape: Vec<usize> = t
                .shape
                .iter()
                .map(|d| match d {
                    Dim::Lit(m) => *m as usize,
                    Dim::Param(_) => n,
                    Dim::Sub(..) | Dim::Rows(..) => panic!("parameters have plain sizes"),
                })
                .collect();
            let len: usize = shape.iter().product();
            let data = (0..len)
                .map(|i| ((i * 7 + k * 13) as f64 * 0.37).sin() * 0.9)
                .collect();
            egrad::internals::lang::value::Value::array(t.dtype, shape, data)
        })
        .collect()
}

/// Compare `text` with the golden file at `path`, or (when `bless`, i.e.
/// `UPDATE_GOLDEN=1`) write it there. A difference or a missing file is
/// pushed to `failures`.
#[allow(dead_code)]
pub fn check_golden(path: &std::path::Path, text: &str, bless: bool, failures: &mut Vec<String>) {
    if bless {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, text).unwrap();
        return;
    }
    match std::fs::read_to_string(path) {
        Ok(want) if want == text => {}
        Ok(want) => failures.push(format!(
            "{} differs from the golden file.\n--- want\n{want}\n--- got\n{text}",
            path.display()
        )),
        Err(_) => failures.push(format!(
            "{} is missing (run with UPDATE_GOLDEN=1)",
            path.display()
        )),
    }
}

/// Parse and check `src` (named `<input>`); panics with the diagnostics.
#[allow(dead_code)]
pub fn prog(src: &str) -> egrad::Program {
    egrad::Program::parse(src).unwrap_or_else(|e| panic!("{e}"))
}

/// The rendered error of a program that must be rejected.
#[allow(dead_code)]
pub fn err(src: &str) -> String {
    match egrad::Program::parse(src) {
        Ok(_) => panic!("should be rejected:\n{src}"),
        Err(e) => e.to_string(),
    }
}

/// Central differences of a scalar function (run by the interpreter), per
/// element of each parameter in `wrt`.
#[allow(dead_code)]
pub fn finite_differences(
    f: &egrad::Function,
    args: &[egrad::Value],
    wrt: &[usize],
) -> Vec<egrad::Value> {
    let eval = |a: &[egrad::Value]| {
        let refs: Vec<&egrad::Value> = a.iter().collect();
        egrad::internals::lang::interp::run(f, &refs).unwrap()[0].as_scalar()
    };
    let mut out = Vec::new();
    for &i in wrt {
        let mut g = args[i].clone();
        for k in 0..args[i].len() {
            let x = args[i].data[k];
            let h = 1e-6 * x.abs().max(1.0);
            let mut plus = args.to_vec();
            plus[i].data[k] = x + h;
            let mut minus = args.to_vec();
            minus[i].data[k] = x - h;
            g.data[k] = (eval(&plus) - eval(&minus)) / (2.0 * h);
        }
        out.push(g);
    }
    out
}
