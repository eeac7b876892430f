//! Random programs: the generator's types and helpers. See `mod.rs`.

#[allow(unused_imports)]
use super::*;

pub(crate) fn mix(seed: u64) -> u64 {
    Rng(seed).next_u64()
}

thread_local! {
    /// Constructs written while generating the current program (on this
    /// thread), with the text that shows them: counted for the coverage line
    /// when that text is in the final program.
    pub(crate) static TAGS: std::cell::RefCell<Vec<(&'static str, String)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

pub(crate) fn tag(name: &'static str, text: &str) {
    TAGS.with(|t| t.borrow_mut().push((name, text.to_string())));
}

// ---------------------------------------------------------------- types

/// A dimension: the loss's `N`, `M` (`K` in helpers) or `N-1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum D {
    N,
    M,
    N1,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Ty {
    S,
    V(D),
    Mt(D, D),
}

pub(crate) const ALL_DIMS: [D; 3] = [D::N, D::M, D::N1];

impl Ty {
    pub(crate) fn is_array(self) -> bool {
        self != Ty::S
    }
    /// The type of `x[k]`.
    pub(crate) fn row(self) -> Option<Ty> {
        match self {
            Ty::S => None,
            Ty::V(_) => Some(Ty::S),
            Ty::Mt(_, c) => Some(Ty::V(c)),
        }
    }
    pub(crate) fn lead(self) -> Option<D> {
        match self {
            Ty::S => None,
            Ty::V(d) | Ty::Mt(d, _) => Some(d),
        }
    }
    /// An upper bound of the number of elements.
    pub(crate) fn len_max(self) -> f64 {
        match self {
            Ty::S => 1.0,
            Ty::V(d) => dim_max(d),
            Ty::Mt(a, b) => dim_max(a) * dim_max(b),
        }
    }
    pub(crate) fn uses_n1(self) -> bool {
        matches!(self, Ty::V(D::N1) | Ty::Mt(D::N1, _) | Ty::Mt(_, D::N1))
    }
    /// This type with its dims renamed (None if a dim has no image).
    pub(crate) fn map(self, f: &dyn Fn(D) -> Option<D>) -> Option<Ty> {
        Some(match self {
            Ty::S => Ty::S,
            Ty::V(d) => Ty::V(f(d)?),
            Ty::Mt(a, b) => Ty::Mt(f(a)?, f(b)?),
        })
    }
}

pub(crate) const N_MAX: usize = 5;
pub(crate) const M_MAX: usize = 3;

pub(crate) fn dim_max(d: D) -> f64 {
    match d {
        D::N => N_MAX as f64,
        D::M => M_MAX as f64,
        D::N1 => (N_MAX - 1) as f64,
    }
}

/// The largest magnitude a generated value may have before it is wrapped.
pub(crate) const LIMIT: f64 = 8.0;

// ---------------------------------------------------------------- expressions

/// A generated expression.
#[derive(Clone, Debug)]
pub(crate) struct Ex {
    /// Source text, always an operand (a name, a call, parenthesized, ...).
    pub(crate) s: String,
    /// An upper bound of the magnitude of every element.
    pub(crate) b: f64,
    /// An array whose elements are generically distinct (no structural ties,
    /// so `max/` and `min/` have a unique argmax).
    pub(crate) var: bool,
    /// Depends on the index of the enclosing `tabulate`.
    pub(crate) tab: bool,
    /// Uses only ops that `tabulate` can apply to stacked values (so a
    /// helper made of it can be called with `x[i]`).
    pub(crate) ts: bool,
    /// Known at compile time (made of literals and static numbers).
    pub(crate) k: bool,
}

impl Ex {
    pub(crate) fn leaf(s: impl Into<String>, b: f64, var: bool) -> Ex {
        Ex {
            s: s.into(),
            b,
            var,
            tab: false,
            ts: true,
            k: false,
        }
    }
    pub(crate) fn lit(x: f64) -> Ex {
        Ex {
            s: fmt_lit(x),
            b: x.abs(),
            var: false,
            tab: false,
            ts: true,
            k: true,
        }
    }
    /// A compound of `parts`: flags combined, text and bound given.
    pub(crate) fn of(s: String, b: f64, var: bool, parts: &[&Ex]) -> Ex {
        Ex {
            s,
            b,
            var,
            tab: parts.iter().any(|p| p.tab),
            ts: parts.iter().all(|p| p.ts),
            k: parts.iter().all(|p| p.k),
        }
    }
    pub(crate) fn not_ts(mut self) -> Ex {
        self.ts = false;
        self
    }
}

pub(crate) fn fmt_lit(x: f64) -> String {
    let s = format!("{x}");
    if x < 0.0 {
        format!("({s})")
    } else {
        s
    }
}

/// A condition (a bool expression).
#[derive(Clone, Debug)]
pub(crate) struct Cond {
    pub(crate) s: String,
    pub(crate) tab: bool,
    pub(crate) ts: bool,
}

/// A name in scope.
#[derive(Clone, Debug)]
pub(crate) struct Var {
    pub(crate) name: String,
    pub(crate) ty: Ty,
    pub(crate) b: f64,
    pub(crate) var: bool,
    pub(crate) tab: bool,
    pub(crate) k: bool,
    pub(crate) used: bool,
}

/// A parameter of a helper.
#[derive(Clone, Debug)]
pub(crate) enum HParam {
    Dyn(Ty),
    StaticInt,
    StaticReal,
    StaticBool,
    /// `n: i64`, a run-time loop count: passed `n` where the caller has
    /// one, or a literal.
    RunCount(u64),
    /// `static k: i64`, the depth of a static recursion: passed a literal
    /// from 1 to 4.
    Depth,
    /// `kind: i64[N]`: passed the loss's `kind` (see `MATCH_PARAMS`).
    Kind,
    /// `kk: i64[2]`, a key: passed one in scope or `random_key(c)`.
    Key,
}

/// A helper function the generator may call.
#[derive(Clone, Debug)]
pub(crate) struct Helper {
    pub(crate) name: String,
    pub(crate) params: Vec<HParam>,
    /// Result types in the helper's dims (N, M = `K`, N1 = `N-1`).
    pub(crate) rets: Vec<Ty>,
    /// Bound of the results (infinite: unknown, e.g. a gradient).
    pub(crate) b: f64,
    pub(crate) ts: bool,
    /// Its array arguments must be `var` (it takes `max/` or `min/` of them).
    pub(crate) needs_var: bool,
    /// Uses `N-1`: only called where N >= 2 (from the loss, with N = N).
    pub(crate) uses_n1: bool,
    /// Generic over the element type (`fn h[T, N](v: T[N], a: T) -> T`):
    /// some argument must be typed (not only numbers).
    pub(crate) generic: bool,
    /// Runs a loop (a long `iterate`): not called inside `tabulate` or a
    /// loop's step, and never differentiated by a derivative helper.
    pub(crate) has_loop: bool,
    /// A user primitive (a function with its own derivative rules, or a
    /// native kernel), or calls one: never written in the text of a
    /// `tabulate` body (egrad refuses one on values of its index).
    pub(crate) prim: bool,
    /// A native kernel, or calls one: never differentiated by a
    /// derivative helper (a kernel's VJP has no derivative).
    pub(crate) kernel: bool,
    /// Tags recorded with the text of each call (see `tag`).
    pub(crate) tags: Vec<&'static str>,
}

/// The length of a `tabulate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Len {
    D(D),
    /// The literal 2 (N >= 2 in the loss).
    Two,
    /// `N-2` (empty when N = 2).
    N2,
    /// An integer length (1 or 2): a part of `concat`.
    Lit(u64),
    /// `M-1` (`K-1` in helpers; empty when it is 1).
    M1,
}

#[derive(Clone, Debug)]
pub(crate) struct Tab {
    pub(crate) len: Len,
    pub(crate) idx: String,
}

/// Generation state for one function body.
pub(crate) struct Gen<'r> {
    pub(crate) rng: &'r mut Rng,
    pub(crate) env: Vec<Var>,
    pub(crate) helpers: Vec<Helper>,
    pub(crate) tab: Option<Tab>,
    /// The smallest value N may have here (2 in the loss, 1 in helpers).
    pub(crate) n_min: u64,
    /// Literal sizes (the loss sometimes has them).
    pub(crate) lit: Option<(u64, u64)>,
    pub(crate) m_name: &'static str,
    pub(crate) allow_n1: bool,
    pub(crate) fresh: usize,
    /// Static integer parameter usable as an `iterate` count.
    pub(crate) static_count: Option<String>,
    /// Inside the text of a `tabulate` body (also where values are
    /// hoisted out of it): no `tabulate` may be written here.
    pub(crate) no_tabulate: bool,
    /// Long `iterate`s (real loops) `gen` may still write at random (0 in
    /// programs without loops, which then draw exactly what they drew
    /// before loops were generated).
    pub(crate) long_left: u32,
    /// Loops that may still be written inside a loop's step.
    pub(crate) nest_left: u32,
    /// How many loop steps are being generated (1: a loop's step, 2: the
    /// step of a loop inside it).
    pub(crate) in_long: u32,
    /// Inside a short `iterate`'s or an `iterate_until`'s step: no long
    /// `iterate` here (a count of 0 would drop it, and the count multiplies
    /// its cost).
    pub(crate) no_long: u32,
    /// A long `iterate`, or a call of a helper that has one, was written.
    pub(crate) made_loop: bool,
    /// The function has a run-time count `n: i64`: long iterates may use
    /// it as their count, with a step size for this count.
    pub(crate) rt_count: Option<u64>,
    /// The next helper call (not those in its arguments) is of a helper
    /// that takes a run-time count.
    pub(crate) only_rt: bool,
    /// The next helper call (not those in its arguments) is of this helper.
    pub(crate) only_helper: Option<String>,
    /// Parameters of the loss that no derivative takes (`xs: f64[N]`,
    /// `Xs: f64[N, M]`): the sequences a `scan` that is a loop may read.
    pub(crate) seqs: Vec<(String, Ty)>,
    /// Scans `gen` may still write at random (0 in programs without the
    /// newer constructs, which then draw exactly what they drew before).
    pub(crate) scan_left: u32,
    /// Long `iterate`s with a tuple state of mixed shapes still to write
    /// (0 in programs without them, which then draw what they drew
    /// before).
    pub(crate) mixed_left: u32,
    /// The next `loop_of` (a state of mixed shapes) also carries an `i64`
    /// step counter, last in its tuple, that its first component's step
    /// reads.
    pub(crate) counter_next: bool,
    /// `reverse` and `concat` may be written.
    pub(crate) cat: bool,
    /// The run-time integer parameters of the loss (empty elsewhere, and in
    /// programs without them, which then draw what they drew before).
    pub(crate) ints: Vec<IntParam>,
    /// The helper with an `i64` result (see `gen_int_helper`), and a bound
    /// of its result.
    pub(crate) int_helper: Option<(String, f64)>,
    /// Nested `tabulate`s may be written (`EGRAD_RANDOM_NEST`; false
    /// elsewhere, and in programs without them, which then draw what they
    /// drew before).
    pub(crate) nest: bool,
    /// Values that depend on the index of `tabulate` may be indexed
    /// (`(X[i] .* w)[c]`, `[i]`, `[k]`, `[ix[i]]`; `EGRAD_RANDOM_NEST` too).
    pub(crate) stack_ix: bool,
    /// The `tabulate`s enclosing the current one (`tab`), outermost first:
    /// empty unless a nested `tabulate` is being generated.
    pub(crate) outer: Vec<Tab>,
    /// `match` may be written (`EGRAD_RANDOM_MATCH`; false elsewhere, and
    /// in programs without it, which then draw what they drew before).
    pub(crate) matches: bool,
    /// The loss's run-time parameters a `match` may take apart (`kind:
    /// i64[N]`, `mode: i64`, `robust: bool`, `mask: bool[N]`; empty
    /// elsewhere).
    pub(crate) mparams: Vec<&'static str>,
    /// Noise from keys may be drawn in expressions (`EGRAD_RANDOM_KEYS`;
    /// false elsewhere, and in programs without it).
    pub(crate) noise: bool,
    /// Keys in scope outside loops' steps (texts of `i64[2]` values: the
    /// loss's `key`, `random_key(seed)`, the keys its draws gave).
    pub(crate) keys: Vec<String>,
    /// The matrix states of the short `iterate`s written in the text of a
    /// `tabulate` body (hoisted, not depending on its index): egrad takes
    /// them for values of the index, and refuses a `matmul` of two of them
    /// (see the module doc), which is not written.
    pub(crate) tab_states: Vec<String>,
    /// User primitives (functions with their own derivative rules, native
    /// kernels) may be called at random (`EGRAD_RANDOM_CUSTOM`,
    /// `EGRAD_RANDOM_KERNELS`; false elsewhere, and in programs without
    /// them, which then draw what they drew before).
    pub(crate) prims: bool,
    /// The next helper call (not those in its arguments) is of a user
    /// primitive or a helper calling one.
    pub(crate) only_prim: bool,
    /// A user primitive (or a helper calling one) was called; a native
    /// kernel (or a helper calling one) was.
    pub(crate) made_prim: bool,
    pub(crate) made_kernel: bool,
}

pub(crate) const LITS: &[f64] = &[0.5, 1.5, 2.0, 0.25, 3.0, 1.0, 0.75, -0.5, -2.0];
