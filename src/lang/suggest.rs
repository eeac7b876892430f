//! "Did you mean": the name in scope closest to a misspelt one, and the
//! egrad forms of Python's and NumPy's names (`True`, `len`, `float`).
//!
//! Everything here runs only when an error is reported, so a program
//! that checks never pays for it. The distance is the optimal string
//! alignment distance (an insertion, deletion, substitution or swap of
//! two neighbours costs 1), computed in O(len²) for names of at most
//! [`crate::lang::parser::MAX_NAME_LEN`] bytes and only for candidates
//! whose length is near enough to matter.

use super::check::{
    ARRAY_BUILTINS, BUILTINS2, COMPOSITES, CONVERSIONS, MATRIX_BUILTINS, SPECIAL_FORMS,
};
use super::prelude;
use crate::ops::{kernels, Math};

/// The largest distance at which a name is suggested for `name`: one edit
/// per three characters, at least one (`f46` → `f64`, `alpah` → `alpha`,
/// `tanhh` → `tanh`; `zq` suggests nothing for `x`).
fn threshold(name: &str) -> usize {
    (name.chars().count() / 3).max(1)
}

/// The optimal string alignment distance between `a` and `b`, or `None`
/// when it is above `bound`.
pub fn distance(a: &str, b: &str, bound: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > bound {
        return None;
    }
    // Three rows of the table: i-2, i-1, i.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            cur[j] = d;
        }
        std::mem::swap(&mut before, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    let d = prev[b.len()];
    (d <= bound).then_some(d)
}

/// The candidate closest to `name` within [`threshold`], if any: the
/// nearest, and among equally near ones the least in byte order (so the
/// answer never depends on the order of a hash map). `name` itself is
/// not suggested, nor is a name that differs from it only in case when
/// that is the only kind of name found (it is reported as it is).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let bound = threshold(name);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if c == name || c.is_empty() || c.starts_with(prelude::PRIVATE) && c.len() > 1 {
            continue;
        }
        // The same name in other case costs one edit, whatever its length;
        // a one-letter name is one edit from every other, so it suggests
        // nothing else.
        let d = if c.eq_ignore_ascii_case(name) {
            Some(1)
        } else if name.chars().count() < 2 {
            None
        } else {
            distance(name, c, bound)
        };
        if let Some(d) = d {
            if best.is_none_or(|(bd, bc)| (d, c) < (bd, bc)) {
                best = Some((d, c));
            }
        }
    }
    best.map(|(_, c)| c)
}

/// The names of egrad's builtin functions, special forms, composite
/// builtins, prelude functions and registered kernels: what a call may
/// name besides the program's own functions.
pub fn builtin_functions() -> Vec<String> {
    let mut out: Vec<String> = Math::ALL.iter().map(|m| m.name().to_string()).collect();
    let names = BUILTINS2
        .iter()
        .map(|(n, _)| *n)
        .chain(MATRIX_BUILTINS.iter().map(|(n, _)| *n))
        .chain(CONVERSIONS.iter().map(|(n, _)| *n))
        .chain(ARRAY_BUILTINS.iter().copied())
        .chain(SPECIAL_FORMS.iter().copied())
        .chain(COMPOSITES.iter().map(|(n, _)| *n))
        .chain(prelude::NAMES.iter().copied());
    out.extend(names.map(str::to_string));
    let mut id = 0;
    while let Some(k) = kernels::kernel(id) {
        // Only what a program can call by name (not a rule's entries).
        if kernels::kernel_id(&k.name) == Some(id) && !k.name.contains('.') {
            out.push(k.name);
        }
        id += 1;
    }
    out
}

/// Whether a call may name `name` without the program defining it.
pub fn is_builtin_function(name: &str) -> bool {
    builtin_functions().iter().any(|n| n == name)
}

/// The element types, and Python's and NumPy's names for them, each with
/// the egrad type it means.
const TYPE_NAMES: &[(&str, &str)] = &[
    ("f32", "f32"),
    ("f64", "f64"),
    ("i64", "i64"),
    ("bool", "bool"),
    ("float", "f64"),
    ("double", "f64"),
    ("float64", "f64"),
    ("float32", "f32"),
    ("int", "i64"),
    ("int64", "i64"),
    ("long", "i64"),
    ("boolean", "bool"),
];

/// The egrad type meant by an unknown type name: Python's name for it
/// (`float`), or the nearest element type or other name of one (`f46`,
/// `flaot`), or one of `extra` (the function's element-type parameters).
pub fn type_for<'a>(name: &str, extra: impl IntoIterator<Item = &'a str>) -> Option<String> {
    if let Some((_, t)) = TYPE_NAMES
        .iter()
        .find(|(n, _)| *n == name.to_ascii_lowercase())
    {
        return Some(t.to_string());
    }
    let extra: Vec<&str> = extra.into_iter().collect();
    let near = closest(
        name,
        TYPE_NAMES
            .iter()
            .map(|(n, _)| *n)
            .chain(extra.iter().copied()),
    )?;
    Some(
        TYPE_NAMES
            .iter()
            .find(|(n, _)| *n == near)
            .map_or(near, |(_, t)| *t)
            .to_string(),
    )
}

/// What a name of Python's or NumPy's means in egrad, used as a value
/// (`None` when it is no such name): the message's note and the help.
pub fn python_value(name: &str) -> Option<(&'static str, &'static str)> {
    Some(match name {
        "True" => ("egrad's booleans are lowercase", "write `true`"),
        "False" => ("egrad's booleans are lowercase", "write `false`"),
        "None" => (
            "egrad has no `None`: every value is a number, an array, a bool or a tuple of them",
            "give a value of the result's type (`0.0`), or choose one with `if c { a } else { b }`",
        ),
        "pi" => ("egrad has no constant `pi`", "write `3.141592653589793`"),
        "inf" => ("egrad has no constant `inf`", "write `(1.0 / 0.0)`"),
        "nan" => ("egrad has no constant `nan`", "write `(0.0 / 0.0)`"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("alpah", "alpha", 3), Some(1));
        assert_eq!(distance("f46", "f64", 3), Some(1));
        assert_eq!(distance("tanhh", "tanh", 3), Some(1));
        assert_eq!(distance("kitten", "sitting", 3), Some(3));
        assert_eq!(distance("kitten", "sitting", 2), None);
        assert_eq!(distance("", "abc", 3), Some(3));
        assert_eq!(distance("abc", "abc", 0), Some(0));
    }

    #[test]
    fn the_closest_name_is_deterministic() {
        assert_eq!(closest("alpah", ["beta", "alpha", "gamma"]), Some("alpha"));
        // Ties: the least in byte order, whatever the order given.
        assert_eq!(closest("ab", ["xb", "ax"]), Some("ax"));
        assert_eq!(closest("ab", ["ax", "xb"]), Some("ax"));
        // Nothing near: nothing suggested.
        assert_eq!(closest("zzzzzz", ["alpha", "beta"]), None);
        assert_eq!(closest("q", ["x"]), None);
        assert_eq!(closest("w", ["weights"]), None);
        assert_eq!(closest("true", ["True"]), Some("True"));
    }

    #[test]
    fn types() {
        assert_eq!(type_for("f46", []).as_deref(), Some("f64"));
        assert_eq!(type_for("flaot", []).as_deref(), Some("f64"));
        assert_eq!(type_for("float", []).as_deref(), Some("f64"));
        assert_eq!(type_for("Int", []).as_deref(), Some("i64"));
        assert_eq!(type_for("Tt", ["T"]).as_deref(), Some("T"));
        assert_eq!(type_for("matrix", []), None);
    }

    #[test]
    fn builtins_are_listed() {
        let names = builtin_functions();
        for n in [
            "exp", "tanh", "max", "matmul", "iterate", "mean", "dot", "cholesky", "f64",
        ] {
            assert!(names.iter().any(|m| m == n), "{n}");
        }
        assert!(!names.iter().any(|m| m.contains('.')));
    }
}
