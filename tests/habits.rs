//! Python's and NumPy's habits, and misspelt names: each program is
//! rejected with one diagnostic at the habit (its text under the caret,
//! at `line:col`), whose help says what to write; and what it says to
//! write, put in the program, checks.

use egrad::{Error, Program};

/// How the help's egrad form is tried.
enum Fix {
    /// The help's first `code` replaces the text under the caret.
    Span,
    /// The help's first `code` replaces the call whose name is under the
    /// caret (through its closing parenthesis).
    Call,
    /// The help names this form (its first `code` contains it), and this
    /// whole program, written with it, checks.
    Program(&'static str, &'static str),
}

struct Case {
    src: &'static str,
    /// `line:col` of the caret.
    at: &'static str,
    /// The text under the caret.
    caret: &'static str,
    /// A piece of the message.
    says: &'static str,
    fix: Fix,
}

const fn case(
    src: &'static str,
    at: &'static str,
    caret: &'static str,
    says: &'static str,
    fix: Fix,
) -> Case {
    Case {
        src,
        at,
        caret,
        says,
        fix,
    }
}

use Fix::{Call, Program as Prog, Span};

const HABITS: &[Case] = &[
    case("fn f(x: f64) -> f64 = x ** 2", "1:23", "x ** 2", "no `**` operator", Span),
    case("fn f(x: f64) -> f64 = -x ** 2 + 1.0", "1:24", "x ** 2", "no `**`", Span),
    case(
        "fn f(A: f64[2, 3], B: f64[3, 4]) -> f64[2, 4] = A @ B",
        "1:49",
        "A @ B",
        "no `@` operator",
        Span,
    ),
    case(
        "fn f[B, I, O](X: f64[B, I], W: f64[I, O], b: f64[O]) -> f64[B, O] =\n  tanh(2.0 * X @ W + b)",
        "2:8",
        "2.0 * X @ W",
        "the matrix product is `matmul`",
        Span,
    ),
    case("fn f[N](x: f64[N]) -> f64 = sum(x)", "1:29", "sum", "unknown function `sum`", Call),
    case("fn f[N](x: f64[N]) -> f64 = np.sum(x)", "1:29", "np.sum(x)", "no modules", Span),
    case("fn f[N](x: f64[N]) -> f64 = jnp.sum(x * x)", "1:29", "jnp.sum(x * x)", "no modules", Span),
    case("fn f[N](x: f64[N]) -> f64 = x.sum()", "1:29", "x.sum()", "no methods", Span),
    case("fn f[N](x: f64[N]) -> f64 = (x - 1.0).max()", "1:29", "(x - 1.0).max()", "no methods", Span),
    case("fn f[N](w: f64[N]) -> f64 = max(w)", "1:29", "max(w)", "the reduction `max/`", Span),
    case("fn f[N](w: f64[N]) -> f64 = 1.0 + min(w - 1.0)", "1:35", "min(w - 1.0)", "reduction `min/`", Span),
    case(
        "fn f(x: f64) -> f64 {\n  let y = 2.0 * x\n  return y\n}",
        "3:3",
        "return y",
        "no `return`",
        Span,
    ),
    case("fn f(x: f64) -> f64 = return x * 2.0", "1:23", "return x * 2.0", "no `return`", Span),
    case(
        "fn f[N](x: f64[N]) -> f64 {\n  let s = 0.0\n  for i in range(N):\n    s += x[i]\n  s\n}",
        "3:3",
        "for i in range(N):",
        "no `for` loops",
        Prog("+/tabulate[n](i => ...)", "fn f[N](x: f64[N]) -> f64 = +/tabulate[N](i => x[i])"),
    ),
    case(
        "fn f(x: f64) -> f64 {\n  while x > 1.0:\n    x = x / 2.0\n  x\n}",
        "2:3",
        "while x > 1.0:",
        "no `while` loops",
        Prog(
            "iterate_until(n, init, s => done, s => step)",
            "fn f(x: f64) -> f64 = iterate_until(100, x, s => s <= 1.0, s => s / 2.0)",
        ),
    ),
    case(
        "def f(x):\n    return x @ x\n\nfn g(x: f64) -> f64 = x",
        "1:1",
        "def",
        "with `fn`, not `def`",
        Prog("fn name[N](x: f64[N]) -> f64 = ...", "fn name[N](x: f64[N]) -> f64 = +/x"),
    ),
    case("fn f(x: f64[4]) -> f64[2] = x[1:3]", "1:29", "x[1:3]", "no slices", Span),
    case("fn f(x: f64[4]) -> f64[3] = x[:3]", "1:29", "x[:3]", "no slices", Span),
    case("fn f(x: f64[3, 2]) -> f64[3] = x[:, 0]", "1:32", "x[:, 0]", "no slices", Span),
    case("fn f(x: f64[3, 2]) -> f64[2] = x[1, :]", "1:32", "x[1, :]", "no slices", Span),
    case("fn f[N](x: f64[N]) -> f64[N] = x[::-1]", "1:32", "x[::-1]", "no slices", Span),
    case(
        "fn f[N](x: f64[N]) -> f64[N-1] = x[1:]",
        "1:34",
        "x[1:]",
        "no slices",
        Prog("tabulate[N-1](i => x[i + 1])", "fn f[N](x: f64[N]) -> f64[N-1] = tabulate[N-1](i => x[i + 1])"),
    ),
    case(
        "fn f(x: f64[3]) -> f64 = x[-1]",
        "1:28",
        "-1",
        "index -1 is negative",
        Prog("reverse(x)[0]", "fn f(x: f64[3]) -> f64 = reverse(x)[0]"),
    ),
    case(
        "fn f[N](x: f64[N]) -> f64 = +/x / len(x)",
        "1:35",
        "len",
        "unknown function `len`",
        Prog("N", "fn f[N](x: f64[N]) -> f64 = +/x / f64(N)"),
    ),
    case(
        "fn f[N](x: f64[N]) -> f64 = +/x / x.shape[0]",
        "1:35",
        "x.shape",
        "no methods or attributes",
        Prog("fn f[N](x: f64[N])", "fn f[N](x: f64[N]) -> f64 = +/x / N"),
    ),
    case("fn f(x: f64[3, 2]) -> f64[2, 3] = x.T", "1:35", "x.T", "`.T` is NumPy's", Span),
    case("fn f(x: f64[6]) -> f64[2, 3] = x.reshape(2, 3)", "1:32", "x.reshape(2, 3)", "no methods", Span),
    case("fn f[N](x: f64[N]) -> f64[N] = np.exp(x)", "1:32", "np.exp(x)", "no modules", Span),
    case("fn f[N](x: f64[N]) -> f64[N] = jnp.tanh(x) + 1.0", "1:32", "jnp.tanh(x)", "no modules", Span),
    case("fn f[N](x: f64[N]) -> f64[N] = jax.nn.softmax(x)", "1:32", "jax.nn.softmax(x)", "no modules", Span),
    case("fn f[N](x: f64[N]) -> f64[N] = jax.nn.relu(x)", "1:32", "jax.nn.relu(x)", "no modules", Span),
    case(
        "fn f[N](A: f64[N, N], b: f64[N]) -> f64[N] = np.linalg.solve(A, b)",
        "1:46",
        "np.linalg.solve(A, b)",
        "no modules",
        Span,
    ),
    case("fn f[N](x: f64[N]) -> f64[N] = np.maximum(x, 0)", "1:32", "np.maximum(x, 0)", "no modules", Span),
    case(
        "fn f[N](x: f64[N]) -> f64[N] = np.where(x > 0, x, 0.0)",
        "1:32",
        "np.where(x > 0, x, 0.0)",
        "no modules",
        Span,
    ),
    case("fn f(r: f64) -> f64 = math.pi * r * r", "1:23", "math.pi", "no modules", Span),
    case("fn f[N](x: f64[N]) -> f64 = np.linalg.det(x)", "1:29", "np.linalg.det(x)", "no modules", Prog("logdet", "fn f[N](x: f64[N, N]) -> f64 = logdet(x)")),
    case("fn f(x: f64) -> f64 = if True { x } else { 0.0 }", "1:26", "True", "unknown name `True`", Span),
    case("fn f(x: f64) -> bool = False", "1:24", "False", "unknown name `False`", Span),
    case(
        "fn f(x: f64) -> f64 = None",
        "1:23",
        "None",
        "unknown name `None`",
        Prog("0.0", "fn f(x: f64) -> f64 = 0.0"),
    ),
    case("fn f(x: f64) -> f64 = if x > 0 and x < 1 { x } else { 0.0 }", "1:32", "and", "`and` as `&&`", Span),
    case("fn f(x: f64) -> f64 = if x < 0 or x > 1 { x } else { 0.0 }", "1:32", "or", "`or` as `||`", Span),
    case("fn f(x: f64) -> f64 = if not x > 0 { x } else { 0.0 }", "1:26", "not x > 0", "`not` as `!`", Span),
    case(
        "fn f(x: f64) -> f64 {\n  let y = x\n  y += 1\n  y\n}",
        "3:3",
        "y += 1",
        "no `+=`",
        Span,
    ),
    case(
        "fn f(x: f64, a: f64) -> f64 {\n  let y = x\n  y *= a + 1\n  y\n}",
        "3:3",
        "y *= a + 1",
        "no `*=`",
        Span,
    ),
    case(
        "fn f(x: f64) -> f64 {\n  let y = x\n  y = y + 1\n  y\n}",
        "3:3",
        "y = y + 1",
        "binds names with `let`",
        Span,
    ),
    case(
        "fn f(x: f64[3]) -> f64[3] {\n  x[0] = 1.0\n  x\n}",
        "2:3",
        "x[0] = 1.0",
        "never changed in place",
        Prog("scatter_add", "fn f(x: f64[3]) -> f64[3] = scatter_add(x, 0, 1.0 - x[0])"),
    ),
    case(
        "fn f(x: f64) -> f64 = iterate(3, x, lambda s: s * 2.0)",
        "1:37",
        "lambda s:",
        "not with `lambda`",
        Span,
    ),
    case(
        "fn f[T](xs: f64[T]) -> f64 = scan(xs, 0.0, lambda s, x: s + x)",
        "1:44",
        "lambda s, x:",
        "not with `lambda`",
        Span,
    ),
    case(
        "fn f(x: f64) -> f64 {\n  if x > 0:\n    x\n  else:\n    0.0\n}",
        "2:3",
        "if x > 0:",
        "braces, not `:`",
        Prog("if c { a } else { b }", "fn f(x: f64) -> f64 {\n  if x > 0 {\n    x\n  } else {\n    0.0\n  }\n}"),
    ),
    case(
        "fn f(x: f64) -> f64 = if x > 0 { x } else: 0.0",
        "1:38",
        "else:",
        "braces, not `:`",
        Prog("if c { a } else { b }", "fn f(x: f64) -> f64 = if x > 0 { x } else { 0.0 }"),
    ),
    case(
        "fn f(x: f64) -> f64 = if x > 0 { x } elif x < 0 { -x } else { 0.0 }",
        "1:38",
        "elif",
        "`elif` as `else if`",
        Span,
    ),
    case("fn f(x: f64) -> f64 = x if x > 0 else 0.0", "1:23", "x if x > 0 else 0.0", "`if` comes first", Span),
    case(
        "import numpy as np\nfn f(x: f64) -> f64 = x",
        "1:1",
        "import numpy as np",
        "no imports",
        Prog("", "fn f(x: f64) -> f64 = x"),
    ),
    case(
        "@jax.jit\ndef f(x):\n    return x @ x\nfn g(x: f64) -> f64 = x",
        "1:1",
        "@jax.jit",
        "no decorators",
        Prog("", "fn g(x: f64) -> f64 = x"),
    ),
    case("fn f(x: f64) -> f64 = x # the identity", "1:25", "#", "comments start with `//`", Span),
    case(
        "fn f(x: f64) -> f64 = print(x)",
        "1:23",
        "print",
        "unknown function `print`",
        Prog("egrad run", "fn f(x: f64) -> f64 = x"),
    ),
    case(
        "fn f(x: f64) -> f64 {\n  let y = 2.0 * x\n  return(y)\n}",
        "3:3",
        "return",
        "unknown function `return`",
        Call,
    ),
    case("fn f(n: i64) -> f64 = float(n)", "1:23", "float", "unknown function `float`", Call),
    case("fn f[N](x: f64[N]) -> i64[N] = arange(N)", "1:32", "arange", "unknown function `arange`", Call),
];

/// Names misspelt, of every kind: the help says `did you mean `name`?`,
/// and the name, in its place, checks.
const NEAR: &[Case] = &[
    case(
        "fn f(alpha: f64) -> f64 = alpah * 2.0",
        "1:27",
        "alpah",
        "unknown name `alpah`",
        Span,
    ),
    case(
        "fn f(x: f64) -> f64 {\n  let total = x * x\n  totl + 1.0\n}",
        "3:3",
        "totl",
        "unknown name `totl`",
        Span,
    ),
    case(
        "fn f[Num](x: f64[Num]) -> f64 = +/x / Nmu",
        "1:39",
        "Nmu",
        "unknown name `Nmu`",
        Span,
    ),
    case(
        "fn square(x: f64) -> f64 = x * x\nfn g(x: f64) -> f64 = sqaure(x)",
        "2:23",
        "sqaure",
        "unknown function `sqaure`",
        Span,
    ),
    case(
        "fn f(x: f64) -> f64 = tanhh(x)",
        "1:23",
        "tanhh",
        "unknown function `tanhh`",
        Span,
    ),
    case(
        "fn f[N](x: f64[N]) -> f64[N] = sofmtax(x)",
        "1:32",
        "sofmtax",
        "unknown function",
        Span,
    ),
    case(
        "fn f(A: f64[3, 3]) -> f64[3, 3] = choleksy(A)",
        "1:35",
        "choleksy",
        "unknown function",
        Span,
    ),
    case(
        "fn f(x: f64) -> f64 = iterrate(3, x, s => s * x)",
        "1:23",
        "iterrate",
        "unknown function",
        Span,
    ),
    case(
        "fn f(x: f64) -> f64 {\n  lett y = x\n  y\n}",
        "2:3",
        "lett",
        "unknown keyword `lett`",
        Span,
    ),
    case(
        "fnn f(x: f64) -> f64 = x",
        "1:1",
        "fnn",
        "unknown keyword `fnn`",
        Span,
    ),
    case(
        "fn f(x: f64) -> f64 = if x > 0 { x } esle { 0.0 }",
        "1:38",
        "esle",
        "unknown keyword `esle`",
        Span,
    ),
    case(
        "fn f(x: f46) -> f64 = x",
        "1:9",
        "f46",
        "unknown type `f46`",
        Span,
    ),
    case(
        "fn f(x: flaot) -> f64 = x",
        "1:9",
        "flaot",
        "unknown type `flaot`",
        Span,
    ),
    case(
        "fn f(x: float) -> f64 = x",
        "1:9",
        "float",
        "unknown type `float`",
        Span,
    ),
    case(
        "fn f[T](x: Tt) -> T = x\nfn g(x: f64) -> f64 = f(x)",
        "1:12",
        "Tt",
        "unknown type `Tt`",
        Span,
    ),
    case(
        "fn f[Rows](x: f64[Rows], y: f64[Rwos]) -> f64 = +/x",
        "1:33",
        "Rwos",
        "unknown size parameter `Rwos`",
        Span,
    ),
    case(
        "@gard(x)\nfn f(x: f64) -> f64 = x * x",
        "1:2",
        "gard",
        "unknown attribute `@gard`",
        Span,
    ),
];

/// Far from every name in scope: nothing is suggested.
const FAR: &[(&str, &str)] = &[
    (
        "fn f(alpha: f64) -> f64 = zzzz * 2.0",
        "unknown name `zzzz`",
    ),
    ("fn f(x: f64) -> f64 = q * x", "unknown name `q`"),
    (
        "fn f(x: f64) -> f64 = frobnicate(x)",
        "unknown function `frobnicate`",
    ),
    ("fn f(x: matrix) -> f64 = 1.0", "unknown type `matrix`"),
    ("fn f(x: f16) -> f64 = 1.0", "unknown type `f16`"),
    (
        "fn f[N](x: f64[Q]) -> f64 = 1.0",
        "unknown size parameter `Q`",
    ),
    (
        "@compile\nfn f(x: f64) -> f64 = x",
        "unknown attribute `@compile`",
    ),
    (
        "fn f(x: f64) -> f64 {\n  banana y = x\n  y\n}",
        "expected a line break",
    ),
];

/// The first `code` of `s`.
fn first_code(s: &str) -> Option<&str> {
    let a = s.find('`')? + 1;
    let b = a + s[a..].find('`')?;
    Some(&s[a..b])
}

fn diagnostics(src: &str) -> (String, Vec<egrad::Diagnostic>) {
    match Program::parse_named("t.eg", src) {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e @ Error::Source(_)) => {
            let text = e.to_string();
            let Error::Source(d) = e else { unreachable!() };
            (text, d.items)
        }
        Err(e) => panic!("{src}\n{e}"),
    }
}

fn checks(src: &str) {
    if let Err(e) = Program::parse_named("fixed.eg", src) {
        panic!("the suggested program does not check:\n{src}\n{e}");
    }
}

/// Runs one case; `one` asks for exactly one diagnostic (no cascade).
fn run(c: &Case, one: bool) {
    let (text, items) = diagnostics(c.src);
    let Some(d) = items.iter().find(|d| d.message.contains(c.says)) else {
        panic!("{}\nno diagnostic says {:?}:\n{text}", c.src, c.says);
    };
    assert!(
        !one || items.len() == 1,
        "{}\nmore than one error:\n{text}",
        c.src
    );
    let (s, e) = (d.span.start as usize, d.span.end as usize);
    assert_eq!(&c.src[s..e], c.caret, "{}\n{text}", c.src);
    let line = c.src[..s].matches('\n').count() + 1;
    let col = s - c.src[..s].rfind('\n').map_or(0, |k| k + 1) + 1;
    assert_eq!(format!("{line}:{col}"), c.at, "{text}");
    assert!(
        text.contains(&format!("t.eg:{}", c.at)) && text.contains('^'),
        "{text}"
    );
    let help = d
        .helps
        .first()
        .unwrap_or_else(|| panic!("{}\nno help:\n{text}", c.src));
    assert!(text.contains(&format!("= help: {help}")), "{text}");
    let form = first_code(help);
    match &c.fix {
        Fix::Span | Fix::Call => {
            let form = form.unwrap_or_else(|| panic!("no form in {help:?}"));
            let form = form.strip_prefix('@').unwrap_or(form);
            let end = match c.fix {
                Fix::Call => s + c.src[s..].find(')').expect("a call") + 1,
                _ => e,
            };
            checks(&format!("{}{form}{}", &c.src[..s], &c.src[end..]));
        }
        Fix::Program(piece, program) => {
            assert!(
                help.contains(piece) || d.notes.iter().any(|n| n.contains(piece)),
                "{help}"
            );
            checks(program);
        }
    }
}

#[test]
fn python_and_numpy_habits_say_what_to_write() {
    for c in HABITS {
        run(c, true);
    }
}

#[test]
fn misspelt_names_of_every_kind_suggest_the_nearest() {
    for c in NEAR {
        run(c, false);
        let (_, items) = diagnostics(c.src);
        let d = items.iter().find(|d| d.message.contains(c.says)).unwrap();
        assert!(d.helps[0].starts_with("did you mean `"), "{:?}", d.helps);
    }
}

#[test]
fn far_names_suggest_nothing() {
    for (src, says) in FAR {
        let (text, items) = diagnostics(src);
        let d = items.iter().find(|d| d.message.contains(says));
        let d = d.unwrap_or_else(|| panic!("{src}\n{text}"));
        assert!(d.helps.is_empty(), "{src}\n{text}");
        assert!(!text.contains("did you mean"), "{text}");
    }
}

/// The words of the habits are still names where a name is valid.
#[test]
fn habit_words_are_still_names() {
    checks("fn f(np: f64, and: f64) -> f64 = np * and");
    checks("fn f(x: f64) -> f64 {\n  let not = x\n  let lambda = not * 2.0\n  let return = lambda\n  return\n}");
    checks("fn f(for: f64, print: f64) -> f64 = for + print");
    checks("fn f[N](x: f64[N]) -> f64 = max/x - min/x + max(x[0], 1.0)");
    checks("fn sum[N](x: f64[N]) -> f64 = +/x\nfn g[N](x: f64[N]) -> f64 = sum(x)");
    checks("@grad(x)\nfn f(x: f64) -> f64 = x * x");
    // A program's own functions of those names are called as before.
    checks("fn print(x: f64) -> f64 = x\nfn not(x: f64) -> f64 = -x\nfn g(x: f64) -> f64 = not(print(x))");
}
