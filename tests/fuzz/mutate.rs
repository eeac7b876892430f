//! A mutator of programs (the examples, the other `.eg` files of the
//! repository, the regressions and generated programs): tokens deleted,
//! duplicated, swapped, replaced by other tokens or by odd literals;
//! names made long; expressions nested deeply; ranges spliced in from
//! another program; bytes that are not UTF-8.
//!
//! Tokens are a rough cut of the text (a run of name characters, a number,
//! a run of blanks, a comment, one other character), good enough to
//! mutate and to minimize by (`tokens`).

use crate::common::rng::Rng;

/// Cut `src` into tokens whose concatenation is `src`.
pub fn tokens(src: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'.';
    while i < src.len() {
        let c = src[i];
        let start = i;
        if c == b'/' && src.get(i + 1) == Some(&b'/') {
            while i < src.len() && src[i] != b'\n' {
                i += 1;
            }
        } else if c == b' ' || c == b'\t' {
            while i < src.len() && (src[i] == b' ' || src[i] == b'\t') {
                i += 1;
            }
        } else if word(c) && c != b'.' {
            while i < src.len() && word(src[i]) {
                i += 1;
            }
        } else {
            i += 1;
        }
        out.push(src[start..i].to_vec());
    }
    out
}

const ODD_LITERALS: &[&str] = &[
    "0",
    "-0.0",
    "1e308",
    "1e309",
    "1e-320",
    "4.9e-324",
    "9007199254740993",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
    "1e99999",
    "0.000000000000000000000000000001",
    "1_000",
    "0x10",
    "1e",
    "1.",
    ".5",
    "1.5e+",
    "00007",
    "2000",
    "2001",
    "100000000",
    "4294967296",
    "3.0000000000000004",
];

const TOKENS: &[&str] = &[
    "fn",
    "let",
    "if",
    "else",
    "static",
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
    "=>",
    "+",
    "-",
    "*",
    "/",
    "%",
    ".*",
    "./",
    "+/",
    "max/",
    "min/",
    "<",
    "<=",
    "==",
    "!=",
    "&&",
    "||",
    "!",
    "@grad",
    "@jvp",
    "@value_and_grad",
    "@",
    "f64",
    "f32",
    "i64",
    "bool",
    "N",
    "M",
    "N-1",
    "tabulate",
    "iterate",
    "iterate_until",
    "scan",
    "scan_all",
    "reverse",
    "concat",
    "reshape",
    "flatten",
    "scatter_add",
    "argmax",
    "matmul",
    "transpose",
    "true",
    "false",
    "\n",
    " ",
    "//",
    "\t",
    "\r\n",
    "x",
    "i",
    "_",
    "\"",
    "'",
    "#",
    "$",
    "\\",
    "`",
];

/// Bytes that are not UTF-8, or unusual code points.
const ODD_BYTES: &[&[u8]] = &[
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\x00",
    b"\xc0\xaf",
    "\u{feff}".as_bytes(),
    "\u{202e}".as_bytes(),
    "é".as_bytes(),
    "名".as_bytes(),
    "\u{1F600}".as_bytes(),
    b"\x0b\x0c",
];

/// Only numbers replaced by odd literals (one to three of them): the
/// program mostly still checks, and the back stages see the literals.
pub fn odd_literals(src: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut t = tokens(src);
    let nums: Vec<usize> = (0..t.len())
        .filter(|&k| t[k].first().is_some_and(|c| c.is_ascii_digit()))
        .collect();
    for _ in 0..rng.range(1, 4) {
        if let Some(&k) = nums.get(rng.below(nums.len().max(1))) {
            t[k] = rng.pick(ODD_LITERALS).as_bytes().to_vec();
        }
    }
    t.concat()
}

/// 1 to 4 mutations of `src` (one half of the time); `other` is another program to splice from.
pub fn mutate(src: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut t = tokens(src);
    let n = if rng.chance(0.5) { 1 } else { rng.range(2, 5) };
    for _ in 0..n {
        mutate_once(&mut t, other, rng);
    }
    t.concat()
}

fn mutate_once(t: &mut Vec<Vec<u8>>, other: &[u8], rng: &mut Rng) {
    if t.is_empty() {
        t.push(rng.pick(TOKENS).as_bytes().to_vec());
        return;
    }
    let at = rng.below(t.len());
    let len = rng.range(1, 4).min(t.len() - at);
    match rng.below(12) {
        // Delete a range of tokens.
        0 | 1 => {
            t.drain(at..at + len);
        }
        // Duplicate a range.
        2 => {
            let dup: Vec<Vec<u8>> = t[at..at + len].to_vec();
            let to = rng.below(t.len() + 1);
            for (k, x) in dup.into_iter().enumerate() {
                t.insert(to + k, x);
            }
        }
        // Swap two tokens.
        3 => {
            let b = rng.below(t.len());
            t.swap(at, b);
        }
        // A number becomes an odd literal (or any token does).
        4 | 5 => {
            let nums: Vec<usize> = (0..t.len())
                .filter(|&k| t[k].first().is_some_and(|c| c.is_ascii_digit()))
                .collect();
            let k = if nums.is_empty() {
                at
            } else {
                nums[rng.below(nums.len())]
            };
            t[k] = rng.pick(ODD_LITERALS).as_bytes().to_vec();
        }
        // Insert or replace with a token of the language.
        6 => {
            let tok = rng.pick(TOKENS).as_bytes().to_vec();
            if rng.chance(0.5) {
                t.insert(at, tok);
            } else {
                t[at] = tok;
            }
        }
        // A name becomes long (every use of it, or one).
        7 => {
            let names: Vec<usize> = (0..t.len())
                .filter(|&k| t[k].first().is_some_and(|c| c.is_ascii_alphabetic()))
                .collect();
            if let Some(&k) = names.get(rng.below(names.len().max(1))) {
                let old = t[k].clone();
                let n = rng.pick(&[64usize, 1000, 100_000]);
                let long: Vec<u8> = old.iter().cycle().take(n).cloned().collect();
                if rng.chance(0.7) {
                    for x in t.iter_mut().filter(|x| **x == old) {
                        *x = long.clone();
                    }
                }
                t[k] = long;
            }
        }
        // Deep nesting: parentheses around a range, a chain of unary
        // operators, nested blocks or nested `tabulate`s.
        8 => {
            let depth = rng.pick(&[20usize, 200, 2_000, 50_000]);
            let end = at + len;
            let (open, close) = match rng.below(5) {
                0 | 1 => ("(".repeat(depth), ")".repeat(depth)),
                2 => ("-".repeat(depth), String::new()),
                3 => ("{ ".repeat(depth), " }".repeat(depth)),
                _ => (
                    "+/tabulate[2](i => ".repeat(depth.min(2_000)),
                    ")".repeat(depth.min(2_000)),
                ),
            };
            t.insert(end, close.into_bytes());
            t.insert(at, open.into_bytes());
        }
        // Bytes that are not UTF-8 (or odd code points).
        9 => {
            let b = rng.pick(ODD_BYTES).to_vec();
            t.insert(at, b);
        }
        // Splice a range of another program in.
        10 => {
            let o = tokens(other);
            if !o.is_empty() {
                let from = rng.below(o.len());
                let n = rng.range(1, 30).min(o.len() - from);
                let _ = t.splice(at..at + len, o[from..from + n].iter().cloned());
            }
        }
        // Repeat a whole line (a `let`, a parameter list, a function).
        _ => {
            let lines: Vec<usize> = (0..t.len()).filter(|&k| t[k] == b"\n").collect();
            if lines.len() >= 2 {
                let a = rng.below(lines.len() - 1);
                let line: Vec<Vec<u8>> = t[lines[a]..lines[a + 1]].to_vec();
                for _ in 0..rng.range(1, 50) {
                    for (k, x) in line.iter().enumerate() {
                        t.insert(lines[a + 1] + k, x.clone());
                    }
                }
            }
        }
    }
}
