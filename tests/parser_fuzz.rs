//! Random bytes and random token streams never make the parser or the type
//! checker panic; every error renders.

use egrad::Program;
use proptest::prelude::*;

const TOKENS: &[&str] = &[
    "fn",
    "let",
    "f",
    "g",
    "w",
    "x",
    "N",
    "M",
    "f32",
    "f64",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    ";",
    "=",
    "->",
    "+",
    "-",
    "*",
    "/",
    ".*",
    "./",
    "+/",
    "@",
    "grad",
    "sin",
    "exp",
    "sqrt",
    "1",
    "2.5",
    "1e-3",
    "0",
    "\n",
    " ",
    "//c\n",
    "loss",
    "(f32[N], f32)",
];

fn check(src: &str) {
    match Program::parse_named("fuzz.eg", src) {
        Ok(p) => {
            let _ = p.dump_ast();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        check(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn random_token_streams(idx in prop::collection::vec(0..TOKENS.len(), 0..80)) {
        let src: Vec<&str> = idx.iter().map(|&i| TOKENS[i]).collect();
        check(&src.join(" "));
    }

    #[test]
    fn mutated_seed_program(cut in 0usize..400, insert in 0..TOKENS.len()) {
        let seed = "fn loss[N](w: f32[N], x: f32[N], y: f32) -> f32 {\n  let pred = +/(w .* x)\n  let err = pred - y\n  err * err\n}\n\n@grad(w)\nfn dloss_dw[N](w: f32[N], x: f32[N], y: f32) -> f32[N] = loss(w, x, y)\n";
        let mut at = cut.min(seed.len());
        while !seed.is_char_boundary(at) { at -= 1; }
        let src = format!("{}{}{}", &seed[..at], TOKENS[insert], &seed[at..]);
        check(&src);
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let src = format!(
        "fn f(x: f64) -> f64 = {}x{}",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    assert!(Program::parse(&src).is_err());
    let src = format!("fn f(x: f64) -> f64 = {}x", "-".repeat(100_000));
    assert!(Program::parse(&src).is_err());
}

#[test]
fn long_operator_chains_do_not_overflow_the_stack() {
    let src = format!("fn f(x: f64) -> f64 = x{}", " + x".repeat(50_000));
    let _ = Program::parse(&src);
}
