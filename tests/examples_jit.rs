//! Every function of every example, optimized and compiled, gives the same
//! bits as the reference interpreter on the same optimized program, and the
//! optimized program agrees with the unoptimized one.

mod common;

use egrad::internals::backend::{self, BackendOptions};
use egrad::internals::ir::interp::run;
use egrad::internals::pipeline::{optimize_ir, Options};
use egrad::internals::types::value::Value;
use egrad::Program;

#[test]
fn jit_equals_interpreter_on_every_example() {
    let files = common::example_files();
    let mut checked = 0;
    for path in files {
        let p = Program::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        for name in p.function_names() {
            let f = p.ir(name).unwrap();
            let opt = optimize_ir(f, &Options::default()).unwrap().after;
            let native = backend::compile(&opt, &BackendOptions::verified()).unwrap();
            for n in [1usize, 5, 64] {
                let args: Vec<Value> = common::sample_args(f, n);
                let refs: Vec<&Value> = args.iter().collect();
                let jit = native.call(&refs).unwrap();
                let interp = run(&opt, &refs).unwrap();
                for (a, b) in jit.iter().zip(&interp) {
                    assert!(
                        a.bits_eq(b),
                        "{}: {name} n={n}: {a:?} vs {b:?}",
                        path.display()
                    );
                }
                let unopt = run(f, &refs).unwrap();
                for (a, b) in interp.iter().zip(&unopt) {
                    for (x, y) in a.data.iter().zip(&b.data) {
                        // NaN where the program's own arithmetic gives
                        // it (`sqrt` of a negative sample), in both.
                        assert!(
                            (x - y).abs() <= 1e-5 * (1.0 + y.abs()) || (x.is_nan() && y.is_nan()),
                            "{}: {name}: optimized {x} vs unoptimized {y}",
                            path.display()
                        );
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 30, "{checked}");
}
