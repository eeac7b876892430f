//! Unit tests of `parser.rs`.

use super::*;

const SEED: &str = "fn loss[N](w: f32[N], x: f32[N], y: f32) -> f32 {
  let pred = +/(w .* x)
  let err = pred - y
  err * err
}

@grad(w)
fn dloss_dw[N](w: f32[N], x: f32[N], y: f32) -> f32[N] = loss(w, x, y)
";

fn ok(src: &str) -> Module {
    let (m, e) = parse(src);
    assert!(e.is_empty(), "{e:?}");
    m
}

fn body_dump(src: &str) -> String {
    let m = ok(&format!(
        "fn f(a: f32, b: f32, c: f32) -> f32 {{\n{src}\n}}"
    ));
    m.dump()
        .lines()
        .skip_while(|l| !l.starts_with("  body"))
        .skip(2)
        .map(|l| format!("{}\n", l.split(" @").next().unwrap_or("")))
        .map(|l| l.strip_prefix("  ").unwrap_or(&l).to_string())
        .collect()
}

#[test]
fn seed_parses() {
    let m = ok(SEED);
    assert_eq!(m.items.len(), 2);
    assert_eq!(m.items[1].attrs[0].name.name, "grad");
    assert_eq!(m.items[0].params.len(), 3);
}

#[test]
fn precedence() {
    assert_eq!(
        body_dump("a + b * -c"),
        "    add `+`\n      name a\n      mul `*`\n        name b\n        neg\n          name c\n"
    );
    assert_eq!(
        body_dump("+/a .* b - c"),
        "    sub `-`\n      mul `.*`\n        sum\n          name a\n        name b\n      name c\n"
    );
    assert_eq!(
        body_dump("a - b - c"),
        "    sub `-`\n      sub `-`\n        name a\n        name b\n      name c\n"
    );
}

#[test]
fn newline_ends_expressions() {
    // `let a = b` then `-c` on the next line: two statements.
    let d = body_dump("let a = b\n-c");
    assert!(d.contains("let a"), "{d}");
    assert!(d.contains("\n    neg\n"), "{d}");
    // Inside parentheses a line break does not end anything.
    assert_eq!(
        body_dump("(a\n - c)"),
        "    sub `-`\n      name a\n      name c\n"
    );
    // A trailing operator continues onto the next line.
    assert_eq!(
        body_dump("a -\n c"),
        "    sub `-`\n      name a\n      name c\n"
    );
}

#[test]
fn destructuring_and_semicolons() {
    let d = body_dump("let (p, q) = g(a, b); p + q");
    assert!(d.contains("let (p, q)"), "{d}");
}

#[test]
fn unused_expression_is_an_error() {
    let (_, e) = parse("fn f(a: f32) -> f32 {\n a\n a\n}");
    assert_eq!(e.len(), 1);
    assert!(e[0].message.contains("unused"), "{}", e[0].message);
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!(
        "fn f(a: f32) -> f32 = {}a{}",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    let (_, e) = parse(&deep);
    assert!(e[0].message.contains("nested too deeply"));
    let long = format!("fn f(a: f32) -> f32 = a{}", " + a".repeat(5000));
    let (_, e) = parse(&long);
    assert!(e[0].message.contains("nested too deeply"));
    let neg = format!("fn f(a: f32) -> f32 = {}a", "-".repeat(5000));
    let (_, e) = parse(&neg);
    assert!(e[0].message.contains("nested too deeply"));
}

#[test]
fn errors_recover_at_the_next_item() {
    let (m, e) =
        parse("fn f(a: f32) -> f32 = a +\nfn g(a f32) -> f32 = a\nfn h(a: f32) -> f32 = a");
    assert_eq!(e.len(), 2, "{e:?}");
    assert_eq!(m.items.len(), 1);
    assert_eq!(m.items[0].name.name, "h");
}
