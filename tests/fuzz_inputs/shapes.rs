//! Programs of one construct chained or nested to a random depth (issue
//! 38): every construct of the language, from once to far past the
//! parser's nesting limit (256) and as long as 20,000 links, for
//! [`crate::shape_case`]. Past the limit a program is a limit error at
//! its place; a chain of any length is checked, compiled and run.

use crate::common::rng::Rng;

/// The depths drawn: small ones, around the nesting limit, and far past.
const DEPTHS: &[usize] = &[1, 2, 3, 10, 100, 255, 256, 257, 1000, 5000, 20_000];

/// One program and what it is made of (for the failure's message).
pub struct Shape {
    pub what: &'static str,
    pub depth: usize,
    pub source: String,
}

/// A program of `f(x: f64[3]) -> f64` (and its `@grad` `df`) whose body
/// is one construct `depth` times: nested (each inside the next) or
/// chained (each after the one before). A few are ill-typed past one
/// level (an index of a scalar, a tuple where a number is declared):
/// their errors, and the limit's, are what is checked there.
pub fn shape(rng: &mut Rng) -> Shape {
    let depth = rng.pick(DEPTHS);
    let nest = |open: &str, core: &str, close: &str| {
        format!("{}{core}{}", open.repeat(depth), close.repeat(depth))
    };
    let lets = |line: &str| format!("let a = x[0]\n{}a", line.repeat(depth));
    let (what, body) = match rng.below(19) {
        0 => ("an index chain", format!("x{}", "[0]".repeat(depth))),
        1 => ("nested indexes", nest("x[", "0", "]")),
        2 => ("parentheses", nest("(", "x[0]", ")")),
        3 => ("negations", format!("{}x[0]", "-".repeat(depth))),
        4 => ("sums", nest("+/(x * ", "x[0]", ")")),
        5 => ("calls", nest("sin(", "x[0]", ")")),
        6 => (
            "an operator chain",
            format!("x[0]{}", " * x[1]".repeat(depth)),
        ),
        7 => ("tuples", nest("(x[0], ", "x[0]", ")")),
        8 => ("blocks", nest("{ let a = ", "x[0]", "; a * x[1] }")),
        9 => ("ifs", nest("if x[0] > 0 { ", "x[1]", " } else { x[2] }")),
        10 => (
            "an else-if chain",
            format!(
                "{}{{ x[0] }}",
                "if x[0] > x[1] { x[2] } else ".repeat(depth)
            ),
        ),
        11 => ("tabulates", nest("+/(tabulate[2](i => ", "x[i]", "))")),
        12 => ("a let chain", lets("let a = sin(a) * x[1]\n")),
        13 => ("an integer let chain", {
            let ints = "let k = (k * 7 + 3) % 3\n".repeat(depth);
            format!("let k = 1\n{ints}x[k]")
        }),
        14 => ("iterates", nest("iterate(2, ", "x[0]", ", s => s * x[1])")),
        15 => ("scans", nest("scan(x, ", "x[0]", ", (c, e) => c * e)")),
        16 => ("a chain of static ifs", {
            let ifs = "let a = if 1 > 0 { a * x[1] } else { a }\n".repeat(depth);
            format!("let a = x[0]\n{ifs}a")
        }),
        17 => ("matches", nest("match 1 { 0 => x[0], _ => ", "x[1]", " }")),
        _ => {
            // A chain of functions, each calling the one before.
            let mut s = String::from("fn g0(x: f64[3]) -> f64 = x[0]\n");
            for k in 1..depth {
                s += &format!("fn g{k}(x: f64[3]) -> f64 = sin(g{}(x)) * x[1]\n", k - 1);
            }
            return Shape {
                what: "a call chain",
                depth,
                source: format!("{s}fn f(x: f64[3]) -> f64 = g{}(x)\n{GRAD}", depth - 1),
            };
        }
    };
    Shape {
        what,
        depth,
        source: format!("fn f(x: f64[3]) -> f64 {{\n{body}\n}}\n{GRAD}"),
    }
}

/// The gradient every program has.
const GRAD: &str = "@grad(x) fn df(x: f64[3]) -> f64[3] = f(x)\n";
