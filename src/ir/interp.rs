//! The reference interpreter: runs IR functions on [`Value`]s, one op at a
//! time through the op table's evaluator. It is the oracle the JIT and the
//! rewrite rules are checked against.

use super::memory;
use super::{Function, Loop};
use crate::ops::Op;
use crate::types::size::{Misfit, Size, Unifier};
use crate::types::value::Value;
use crate::types::{DType, Dim, Type};
use indexmap::IndexMap;
use std::fmt;

/// Concrete values of size parameters, bound from argument shapes.
pub type Dims = IndexMap<String, u64>;

/// A run-time argument does not fit the function's signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError {
    /// The offending parameter (None: the argument count is wrong, or a
    /// check failed while running).
    pub param: Option<usize>,
    /// What is wrong, one line.
    pub message: String,
    /// A run-time check that failed (an index outside its array): the
    /// source span of the index, packed as by `site_span`.
    pub site: Option<u64>,
    /// The run would need more memory than the limit
    /// (`egrad::memory`), or more than this machine can count.
    pub limit: bool,
}

/// The source span `(start, end)` of a run-time check packed into an op's
/// payload (`gather`, `scatter`): `start << 32 | end`.
pub fn pack_site(start: u32, end: u32) -> u64 {
    (u64::from(start) << 32) | u64::from(end)
}

/// The `(start, end)` byte offsets packed by [`pack_site`].
pub fn site_span(site: u64) -> (u32, u32) {
    ((site >> 32) as u32, site as u32)
}

impl ArgError {
    /// A run refused by the memory limit (or too large to count).
    pub fn too_large(message: String) -> ArgError {
        ArgError {
            param: None,
            message,
            site: None,
            limit: true,
        }
    }

    /// A failed run-time index check at `site` (see `pack_site`).
    pub fn out_of_range(site: u64, index: i64, len: i64) -> ArgError {
        ArgError {
            limit: false,
            param: None,
            message: format!("index {index} is out of range for an array of length {len}"),
            site: Some(site),
        }
    }
}

/// So that `?` takes it into a `Box<dyn std::error::Error>`.
impl std::error::Error for ArgError {}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What [`bind_args`] reads of a run-time argument: its dtype, its shape
/// and, for an `i64` parameter, its value. Implemented by [`Value`] and by
/// the backend's borrowed native arguments
/// ([`NativeArg`](crate::backend::NativeArg)), so both are checked by the
/// same code with the same messages.
pub trait ArgShape {
    /// The element type.
    fn dtype(&self) -> DType;
    /// Concrete extents, outermost first; empty for a scalar.
    fn shape(&self) -> &[usize];
    /// The number an `i64` parameter takes from this argument (checked to
    /// be a scalar and a non-negative integer), or `None` if it has none.
    fn scalar(&self) -> Option<f64>;
    /// For a `bool` argument, its first element that is neither 0 nor 1.
    fn non_bool(&self) -> Option<f64>;
}

/// The largest run-time count egrad takes: 2^53, the largest integer up
/// to which every integer is exact in `f64` (which the interpreter and the
/// size checks compute in).
pub const MAX_COUNT: u64 = 1 << 53;

/// Why `x` (written `shown`) cannot be the value of the `i64` parameter
/// `name`, if it cannot: not a whole number, negative, or above
/// [`MAX_COUNT`].
pub fn count_problem(name: &str, x: f64, shown: &str) -> Option<String> {
    if x.is_nan() || x.fract() != 0.0 {
        Some(format!(
            "argument `{name}` is a count and must be a whole number, got {shown}"
        ))
    } else if x < 0.0 {
        Some(format!(
            "argument `{name}` is a count and must not be negative, got {shown}"
        ))
    } else if x > MAX_COUNT as f64 {
        Some(format!(
            "argument `{name}` = {shown} is larger than 2^53 = {MAX_COUNT}, the largest count egrad takes (counts must be exact in f64)"
        ))
    } else {
        None
    }
}

/// Why `x` (written `shown`) cannot be the value of the `i64` parameter
/// `name` declared `data` (a value, not a count), if it cannot: not a whole
/// number, or beyond ±[`MAX_COUNT`] (where `f64` is no longer exact).
pub fn data_problem(name: &str, x: f64, shown: &str) -> Option<String> {
    if x.is_nan() || x.fract() != 0.0 {
        Some(format!(
            "argument `{name}` is an i64 and must be a whole number, got {shown}"
        ))
    } else if x.abs() > MAX_COUNT as f64 {
        Some(format!(
            "argument `{name}` = {shown} is beyond ±2^53 = {MAX_COUNT}, the largest i64 number egrad takes (they must be exact in f64)"
        ))
    } else {
        None
    }
}

/// Is parameter `p` of `f` a count: a scalar `i64` that is the size
/// parameter of its name (one declared `data` in the source is not)?
pub fn is_count(f: &Function, p: &crate::ir::Param) -> bool {
    let ty = f.ty(p.var);
    ty.dtype == DType::I64 && ty.is_scalar() && f.size_params.iter().any(|s| s == f.var_name(p.var))
}

/// A `bool` argument must hold only 0 (false) and 1 (true): argument `i`
/// of `f`, when that parameter is a bool.
pub fn check_bool<A: ArgShape + ?Sized>(f: &Function, i: usize, a: &A) -> Result<(), ArgError> {
    let Some(p) = f.params.get(i) else {
        return Ok(());
    };
    if f.ty(p.var).dtype != DType::Bool || a.dtype() != DType::Bool {
        return Ok(());
    }
    match a.non_bool() {
        None => Ok(()),
        Some(x) => Err(ArgError {
            limit: false,
            site: None,
            param: Some(i),
            message: format!(
                "argument `{}` must be true or false (1 or 0), got {x}",
                f.var_name(p.var)
            ),
        }),
    }
}

impl ArgShape for Value {
    fn dtype(&self) -> DType {
        self.dtype
    }

    fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The first element, whatever the dtype.
    fn scalar(&self) -> Option<f64> {
        self.data.first().copied()
    }

    fn non_bool(&self) -> Option<f64> {
        self.data.iter().copied().find(|&x| x != 0.0 && x != 1.0)
    }
}

/// Check argument count, dtypes and ranks, and bind every size parameter
/// from the shapes (a parameter seen twice must agree).
pub fn bind_args<A: ArgShape + ?Sized>(f: &Function, args: &[&A]) -> Result<Dims, ArgError> {
    if args.len() != f.params.len() {
        return Err(ArgError {
            limit: false,
            site: None,
            param: None,
            message: format!(
                "`{}` takes {} argument(s), got {}",
                f.name,
                f.params.len(),
                args.len()
            ),
        });
    }
    let mut unifier = Unifier::new();
    for (i, (p, a)) in f.params.iter().zip(args).enumerate() {
        let name = f.var_name(p.var);
        let ty = f.ty(p.var);
        if ty.dtype == DType::I64 && ty.is_scalar() {
            // A run-time integer: the size parameter of its name (a count),
            // or a value declared `data`.
            let x = match (a.shape().is_empty(), a.scalar()) {
                (true, Some(x)) => x,
                _ => {
                    return Err(ArgError {
                        limit: false,
                        site: None,
                        param: Some(i),
                        message: format!("argument `{name}` must be an i64 scalar"),
                    })
                }
            };
            let count = is_count(f, p);
            let problem = match count {
                true => count_problem(name, x, &x.to_string()),
                false => data_problem(name, x, &x.to_string()),
            };
            if let Some(message) = problem {
                return Err(ArgError {
                    limit: false,
                    site: None,
                    param: Some(i),
                    message,
                });
            }
            if count {
                let (pattern, actual) = ([Dim::Param(name.to_string())], [Dim::Lit(x as u64)]);
                if let Err(m) = unifier.add(i, &pattern, &actual) {
                    return Err(misfit(f, i, &m, &unifier, &shape_of(args)));
                }
            }
            continue;
        }
        if a.dtype() != ty.dtype {
            return Err(ArgError {
                limit: false,
                site: None,
                param: Some(i),
                message: format!("argument `{name}` must be {}, got {}", ty.dtype, a.dtype()),
            });
        }
        check_bool(f, i, *a)?;
        if a.shape().len() != ty.rank() {
            return Err(ArgError {
                limit: false,
                site: None,
                param: Some(i),
                message: format!(
                    "argument `{name}` must be {}, got a value of rank {}",
                    describe_rank(ty),
                    a.shape().len()
                ),
            });
        }
        if ty.shape.iter().any(|d| matches!(d, Dim::Rows(..))) {
            return Err(ArgError {
                limit: false,
                site: None,
                param: Some(i),
                message: format!("parameter `{name}` has the size of a loop's tape ({ty}); parameters need sizes of their own"),
            });
        }
        let actual: Vec<Dim> = a.shape().iter().map(|&n| Dim::Lit(n as u64)).collect();
        if let Err(m) = unifier.add(i, &ty.shape, &actual) {
            return Err(misfit(f, i, &m, &unifier, &shape_of(args)));
        }
    }
    if let Some((i, m)) = unifier.finish().first() {
        return Err(misfit(f, *i, m, &unifier, &shape_of(args)));
    }
    let mut dims = Dims::new();
    for p in &f.size_params {
        match unifier.bound.get(p) {
            Some(Dim::Lit(n)) => {
                dims.insert(p.clone(), *n);
            }
            _ => {
                // A size parameter no argument mentions: only outputs use it.
                return Err(ArgError {
                    limit: false,
                    site: None,
                    param: None,
                    message: format!(
                        "size parameter `{p}` of `{}` is not bound by any argument",
                        f.name
                    ),
                });
            }
        }
    }
    check_bounds(f, &dims)?;
    Ok(dims)
}

/// Sizes must make every computed dimension non-negative (`N-1` needs
/// `N >= 1`) and every row a `slice` or `index` reads must exist. Checked
/// here, before any code runs, so generated code never reads outside an
/// array. Loop bodies and their VJPs are checked too (they run at the same
/// sizes).
fn check_bounds(f: &Function, dims: &Dims) -> Result<(), ArgError> {
    for l in &f.loops {
        check_bounds(&l.body, dims)?;
        if let Some(v) = &l.vjp {
            check_bounds(v, dims)?;
        }
    }
    let get = |p: &str| dims.get(p).copied();
    let fail = |message: String| {
        Err(ArgError {
            limit: false,
            site: None,
            param: None,
            message,
        })
    };
    for v in &f.vars {
        for d in &v.ty.shape {
            if d.extent(&get).is_some() {
                continue;
            }
            if let Dim::Sub(p, k) = d {
                let n = get(p).unwrap_or(0);
                return fail(format!(
                    "`{}` needs `{p}` >= {k} (it uses arrays of length {p}-{k}), but `{p}` = {n}",
                    f.name
                ));
            }
            if let Dim::Expr(_) = d {
                let shown: Vec<String> = d
                    .params()
                    .into_iter()
                    .map(|p| format!("`{p}` = {}", get(p).unwrap_or(0)))
                    .collect();
                let why = if d.may_be_negative() {
                    "negative"
                } else {
                    "too large"
                };
                return fail(format!(
                    "`{}` uses arrays of length {d}, which is {why} at these sizes ({})",
                    f.name,
                    shown.join(", ")
                ));
            }
        }
    }
    for s in &f.stmts {
        let (Some(a), Some(k)) = (s.args.first(), s.op.payload()) else {
            continue;
        };
        let (rows, taken, what) = match s.op {
            Op::Slice(_) => (&f.ty(*a).shape, f.ty(s.var).shape.first(), "rows"),
            Op::Index(_) => (&f.ty(*a).shape, Some(&Dim::Lit(1)), "row"),
            // The adjoints write rows at the same places.
            Op::Pad(_) => (&f.ty(s.var).shape, f.ty(*a).shape.first(), "rows"),
            Op::Unindex(_) => (&f.ty(s.var).shape, Some(&Dim::Lit(1)), "row"),
            _ => continue,
        };
        let have = rows.first().and_then(|d| d.extent(&get));
        let need = taken
            .and_then(|d| d.extent(&get))
            .and_then(|l| l.checked_add(k));
        match (have, need) {
            (Some(h), Some(n)) if n <= h => {}
            _ => {
                return fail(format!(
                    "`{}` reads {what} from {k} of an array of length {}, which is out of range at these sizes",
                    f.name,
                    rows.first().map(|d| d.to_string()).unwrap_or_default()
                ))
            }
        }
    }
    Ok(())
}

/// The shape of argument `j` as size binding reads it: a count (an `i64`
/// scalar) is the one-axis shape of its value.
fn shape_of<'a, A: ArgShape + ?Sized>(args: &'a [&'a A]) -> impl Fn(usize) -> Vec<usize> + 'a {
    move |j| match (args[j].shape().is_empty(), args[j].scalar()) {
        (true, Some(x)) => vec![x.max(0.0) as usize],
        _ => args[j].shape().to_vec(),
    }
}

/// Where argument `j` (of `shape`) gives a size parameter at `axis`: "its
/// length", "axis 1 of its shape [2, 3]", or "its value" for a count.
fn whence(f: &Function, j: usize, axis: usize, shape: &[usize]) -> String {
    let ty = f.ty(f.params[j].var);
    if ty.is_scalar() {
        "its value".into()
    } else if ty.rank() == 1 {
        "its length".into()
    } else {
        format!("axis {axis} of its shape {shape:?}")
    }
}

/// The error for argument `i` (shapes from `shapes`) that does not fit its
/// parameter's type (see [`Misfit`]).
fn misfit(
    f: &Function,
    i: usize,
    m: &Misfit,
    u: &Unifier,
    shapes: &dyn Fn(usize) -> Vec<usize>,
) -> ArgError {
    let p = &f.params[i];
    let (name, ty) = (f.var_name(p.var), f.ty(p.var));
    let axis = m.axis();
    let shape = shapes(i);
    let n = shape.get(axis).copied().unwrap_or(0);
    let d = ty
        .shape
        .get(axis)
        .cloned()
        .unwrap_or(Dim::Param(name.to_string()));
    let value = |q: &str| match u.bound.get(q) {
        Some(Dim::Lit(v)) => Some(*v),
        _ => None,
    };
    // `N` = 3 (from argument `x`), for the bound parameters of `d`.
    let sizes = || {
        let shown: Vec<String> = d
            .params()
            .into_iter()
            .filter_map(|q| {
                let v = value(q)?;
                Some(match u.from.get(q) {
                    Some(&j) if j != i => {
                        format!(
                            "`{q}` = {v} from argument `{}`",
                            f.var_name(f.params[j].var)
                        )
                    }
                    _ => format!("`{q}` = {v}"),
                })
            })
            .collect();
        shown.join(", ")
    };
    let message = match (m, &d) {
        (Misfit::Mismatch(_), Dim::Lit(k)) => {
            format!("argument `{name}` must have length {k}, got {n}")
        }
        (Misfit::Mismatch(_), Dim::Param(q)) => {
            // Either argument may be the wrong one: name both, each with
            // the axis it gives `q` from.
            let k = value(q).unwrap_or(0);
            match u.from.get(q).filter(|&&j| j != i) {
                Some(&j) => {
                    let at = f.ty(f.params[j].var).shape.iter().position(|d| d == &Dim::Param(q.clone()));
                    let other = f.var_name(f.params[j].var);
                    format!(
                        "arguments `{other}` and `{name}` disagree on `{q}`: `{other}` gives {k} ({}), `{name}` gives {n} ({})",
                        whence(f, j, at.unwrap_or(0), &shapes(j)),
                        whence(f, i, axis, &shape)
                    )
                }
                // `x: f64[N, N]` given a [2, 3]: `N` twice, differently.
                None => match ty.shape.iter().position(|d| d == &Dim::Param(q.clone())) {
                    Some(first) if first != axis => format!(
                        "argument `{name}` gives `{q}` twice, differently: {} (axis {first}) and {n} (axis {axis}) of its shape {shape:?}",
                        shape.get(first).copied().unwrap_or(0),
                    ),
                    _ => format!("argument `{name}` has length {n}, but `{q}` = {k}"),
                },
            }
        }
        (Misfit::Mismatch(_), _) => {
            // The size at the bound parameters (`N*M` is 0 at `M` = 0).
            let with = |q: &str| Some(value(q).map_or_else(|| Size::param(q), |v| Size::constant(v as i64)));
            let want = d.size().and_then(|s| s.substitute(&with));
            match want.as_ref().and_then(Size::as_constant) {
                Some(c) if c < 0 => format!(
                    "argument `{name}` has length {n}, but its type {ty} needs {d}, which is negative at these sizes ({})",
                    sizes()
                ),
                _ => format!(
                    "argument `{name}` has length {n}, but its type {ty} needs {d} = {} ({})",
                    want.map_or_else(|| d.to_string(), |w| w.to_string()),
                    sizes()
                ),
            }
        }
        (Misfit::Negative(_, q, v), _) => format!(
            "argument `{name}` has length {n}, too short for its type {ty}: `{q}` would be {v}"
        ),
        (Misfit::Fraction(_, q), _) => format!(
            "argument `{name}` has length {n}, but its type {ty} needs a length {d} for a whole number `{q}`{}",
            if d.params().len() > 1 { format!(" ({})", sizes()) } else { String::new() }
        ),
        (Misfit::Undetermined(_, q), _) => format!(
            "argument `{name}` of type {ty} does not give `{q}` at these sizes ({}), and no other argument does",
            sizes()
        ),
    };
    ArgError {
        limit: false,
        site: None,
        param: Some(i),
        message,
    }
}

fn describe_rank(t: &Type) -> String {
    if t.is_scalar() {
        format!("a {} scalar", t.dtype)
    } else {
        format!("{t}")
    }
}

/// Concrete shape of a type under bound size parameters.
pub fn concrete_shape(t: &Type, dims: &Dims) -> Vec<usize> {
    t.shape
        .iter()
        .map(|d| d.extent(&|p| dims.get(p).copied()).unwrap_or(0) as usize)
        .collect()
}

/// Run `f` on `args`.
pub fn run(f: &Function, args: &[&Value]) -> Result<Vec<Value>, ArgError> {
    let dims = bind_args(f, args)?;
    let bytes = args.iter().try_fold(0u64, |b, a| {
        b.checked_add(memory::bytes_of(a.data.len(), 8)?)
    });
    memory::check(bytes, &format!("interpreting `{}`", f.name)).map_err(ArgError::too_large)?;
    super::work::Work::interpreted(f)
        .check(&dims, || format!("interpreting `{}`", f.name))
        .map_err(ArgError::too_large)?;
    let args: Vec<Value> = args.iter().map(|a| (*a).clone()).collect();
    // Read once a run, not once a loop step (it reads `/proc`).
    let outer = BUDGET.replace(Some(memory::budget()));
    let out = exec(f, args, &dims);
    BUDGET.set(outer);
    out
}

thread_local! {
    /// The memory budget of the run in progress on this thread
    /// ([`memory::budget`] when it began).
    static BUDGET: std::cell::Cell<Option<memory::Budget>> = const { std::cell::Cell::new(None) };
}

/// An index of a `gather` or `scatter` outside its array: the first one,
/// as an error at the op's source place.
fn check_indices(op: Op, vals: &[&Value], out_shape: &[usize]) -> Result<(), ArgError> {
    let (site, idx, rows) = match op {
        Op::Gather(site) => (site, vals[1], vals[0].shape[0]),
        Op::Scatter(site) => (site, vals[0], out_shape[0]),
        _ => return Ok(()),
    };
    match idx.data.iter().find(|&&k| !(k >= 0.0 && k < rows as f64)) {
        Some(&k) => Err(ArgError::out_of_range(site, k as i64, rows as i64)),
        None => Ok(()),
    }
}

/// Run a validated function on arguments that fit it under `dims`.
fn exec(f: &Function, args: Vec<Value>, dims: &Dims) -> Result<Vec<Value>, ArgError> {
    let mut env: Vec<Option<Value>> = vec![None; f.vars.len()];
    // Bytes of the values held (each element an f64), checked against the
    // memory limit before each new value is computed.
    let mut held: Option<u64> = Some(0);
    for (p, a) in f.params.iter().zip(args) {
        held = held.and_then(|h| h.checked_add(memory::bytes_of(a.data.len(), 8)?));
        env[p.var.index()] = Some(a);
    }
    // The arguments are held already: mapped, and counted.
    let budget = BUDGET
        .get()
        .unwrap_or_else(memory::budget)
        .counting_held(held.unwrap_or(0));
    let live = f.live();
    for s in f.stmts.iter().filter(|s| live[s.var.index()]) {
        let ty = f.ty(s.var);
        let shape = concrete_shape(ty, dims);
        let n = shape.iter().try_fold(1usize, |a, &k| a.checked_mul(k));
        held = held.and_then(|h| h.checked_add(memory::bytes_of(n?, 8)?));
        // The message is made only on failure: this runs per statement.
        if held.is_none_or(|h| !budget.allows(h)) {
            budget
                .check(held, &format!("interpreting `{}`", f.name))
                .map_err(ArgError::too_large)?;
        }
        let vals: Vec<&Value> = s
            .value_operands()
            .iter()
            .map(|a| {
                env[a.index()]
                    .as_ref()
                    .expect("validated IR: defined before use")
            })
            .collect();
        check_indices(s.op, &vals, &shape)?;
        let v = match s.op.loop_id() {
            Some(l) => run_loop(&f.loops[l], s.op, &vals, &shape, dims)?,
            None => s.op.eval(&vals, ty.dtype, &shape),
        };
        env[s.var.index()] = Some(v);
    }
    Ok(f.rets
        .iter()
        .map(|r| {
            env[r.index()]
                .clone()
                .expect("validated IR: returns are defined")
        })
        .collect())
}

/// One application of a one-argument, one-result function (a loop's body).
fn apply(f: &Function, args: Vec<Value>, dims: &Dims) -> Result<Value, ArgError> {
    Ok(exec(f, args, dims)?
        .pop()
        .expect("validated IR: a loop body has one result"))
}

/// The number of segments of a settling loop's tape (`segments`
/// checkpoints in rows `1 ..= segments`, the final state in row 0) before
/// the one where the loop had stopped: the first checkpoint with the final
/// state's bits, found by bisection, if its step leaves it unchanged
/// (`frozen(state, j)`, one step of the body); else all of them. From a
/// state its step leaves unchanged every later state is that one, so the
/// pullback passes the cotangent over those segments without running a
/// step (a bound far above the steps taken costs no step). Before the stop
/// no state has the final state's bits (its step would have left it
/// unchanged), so the checkpoints that have them are a suffix.
fn settled_segments<E>(
    segments: u64,
    tape_row: &dyn Fn(u64) -> Value,
    mut frozen: impl FnMut(&Value, u64) -> Result<bool, E>,
) -> Result<u64, E> {
    let last = tape_row(0);
    let same = |a: &Value| {
        a.data
            .iter()
            .zip(&last.data)
            .all(|(x, y)| x.to_bits() == y.to_bits())
    };
    let (mut lo, mut hi) = (0, segments);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if same(&tape_row(mid + 1)) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    if lo < segments && frozen(&tape_row(lo + 1), lo)? {
        Ok(lo)
    } else {
        Ok(segments)
    }
}

/// The state of a loop's steps: its body, a scan's sequence, the
/// captures and the sizes.
struct Steps<'a> {
    lp: &'a Loop,
    seq: Option<&'a Value>,
    captures: &'a [&'a Value],
    dims: &'a Dims,
}

impl Steps<'_> {
    /// Row `t` of a scan's sequence (nothing for a loop).
    fn row(&self, t: u64) -> Vec<Value> {
        let Some(xs) = self.seq else {
            return Vec::new();
        };
        let shape = xs.shape.get(1..).unwrap_or(&[]).to_vec();
        let w: usize = shape.iter().product();
        let t = t as usize;
        vec![Value {
            dtype: xs.dtype,
            shape,
            data: xs.data[t * w..(t + 1) * w].to_vec(),
        }]
    }

    /// Step `t` of the body from state `s`.
    fn step_at(&self, s: Value, t: u64) -> Result<Value, ArgError> {
        let mut a = vec![s];
        a.extend(self.row(t));
        a.extend(self.captures.iter().map(|c| (*c).clone()));
        apply(&self.lp.body, a, self.dims)
    }
}

/// Whether two values have the same bits.
fn same(a: &Value, b: &Value) -> bool {
    a.data
        .iter()
        .zip(&b.data)
        .all(|(x, y)| x.to_bits() == y.to_bits())
}

/// `loopvjp` (and `scanvjp`) of `count` steps, checkpoints every `k`
/// steps, mode bits `m` (see [`Op::LoopVjp`]).
fn run_loop_vjp(
    steps: &Steps,
    (k, m): (u32, u32),
    args: &[&Value],
    out_shape: &[usize],
    count: u64,
    settles: bool,
) -> Result<Value, ArgError> {
    let (lp, dims) = (steps.lp, steps.dims);
    let row = |t: u64| steps.row(t);
    let step_at = |s: Value, t: u64| steps.step_at(s, t);
    // Both modes compute the same states; the interpreter recomputes
    // each segment once.
    let vjp = lp.vjp.as_ref().expect("validated IR: loopvjp has a VJP");
    let tape = args[0];
    let st = lp.state();
    let shape: Vec<usize> = st
        .shape
        .iter()
        .map(|d| d.extent(&|p| dims.get(p).copied()).unwrap_or(0) as usize)
        .collect();
    let width: usize = shape.iter().product();
    let dtype = st.dtype;
    let row_of = |v: &Value, r: u64| {
        let from = (r * width as u64) as usize;
        Value {
            dtype,
            shape: shape.clone(),
            data: v.data[from..from + width].to_vec(),
        }
    };
    let tape_row = |r: u64| row_of(tape, r);
    // Seeded by the whole tape's cotangent: its row 0, and row
    // `1 + j` joins at state `j·k`.
    let seed = (m & crate::ops::VJP_TAPE != 0).then_some(args[1]);
    let mut g = match seed {
        Some(gt) => row_of(gt, 0),
        None => args[1].clone(),
    };
    // With the sequence's cotangent: the rows `[gx ; gs]`, the VJP
    // returning one such row per state.
    let seq = m & crate::ops::VJP_SEQ != 0;
    let packed = *out_shape.get(1).unwrap_or(&0);
    let wx = packed.saturating_sub(width);
    let mut seq_rows = vec![0.0; if seq { out_shape[0] * packed } else { 0 }];
    if seq {
        let last = count as usize * packed + wx;
        seq_rows[last..last + width].copy_from_slice(&g.data);
    }
    let k = u64::from(k);
    let segments = count.div_ceil(k);
    // The segments before the loop stopped; the rest only pass the
    // cotangent on (`settled_segments`).
    let walked = if settles && count.min(k) >= 2 {
        settled_segments(segments, &tape_row, |s: &Value, t| {
            Ok(same(&step_at(s.clone(), t * k)?, s))
        })?
    } else {
        segments
    };
    for j in (0..segments).rev() {
        let end = ((j + 1) * k).min(count);
        let mut states = Vec::new();
        if j >= walked {
            // Every state of the segment is the final one: each
            // step passes the cotangent on.
            if seq {
                for t in j * k..end {
                    let at = t as usize * packed + wx;
                    seq_rows[at..at + width].copy_from_slice(&g.data);
                }
            }
        } else {
            states.push(tape_row(j + 1));
            for t in j * k..end - 1 {
                let next = step_at(states[states.len() - 1].clone(), t)?;
                states.push(next);
            }
        }
        if !states.is_empty() {
            // The state after the segment: the next checkpoint, or the
            // final state (row 0).
            let after = tape_row(if j + 1 < segments { j + 2 } else { 0 });
            // State `j*k + i` goes with row `j*k + i`.
            for i in (0..states.len()).rev() {
                // In a loop that settles, a step that changed no bit
                // of the state (a frozen step, or the steps after the
                // loop stopped) passes the cotangent on unchanged.
                let t = j * k + i as u64;
                if settles && same(&states[i], states.get(i + 1).unwrap_or(&after)) {
                    if seq {
                        let at = t as usize * packed + wx;
                        seq_rows[at..at + width].copy_from_slice(&g.data);
                    }
                    continue;
                }
                let s = states[i].clone();
                let mut a = vec![s];
                a.extend(row(t));
                a.push(g);
                let out = apply(vjp, a, dims)?;
                g = if seq {
                    let at = t as usize * packed;
                    seq_rows[at..at + packed].copy_from_slice(&out.data);
                    Value {
                        dtype,
                        shape: shape.clone(),
                        data: out.data[wx..].to_vec(),
                    }
                } else {
                    out
                };
            }
        }
        if let Some(gt) = seed {
            // State j·k: the tape's row 1 + j.
            // Added in the state's precision, as native code does.
            for (e, x) in g.data.iter_mut().zip(&row_of(gt, j + 1).data) {
                *e = match dtype {
                    crate::types::DType::F32 => f64::from(*e as f32 + *x as f32),
                    _ => *e + x,
                };
            }
            if seq {
                let at = (j * k) as usize * packed + wx;
                seq_rows[at..at + width].copy_from_slice(&g.data);
            }
        }
    }
    Ok(if seq {
        Value {
            dtype,
            shape: out_shape.to_vec(),
            data: seq_rows,
        }
    } else {
        g
    })
}

/// `loop`, `looptape` and `loopvjp`, and their scan forms (see [`Op::Loop`]).
fn run_loop(
    lp: &Loop,
    op: Op,
    args: &[&Value],
    out_shape: &[usize],
    dims: &Dims,
) -> Result<Value, ArgError> {
    // A scan's step `t` also reads row `t` of its sequence (the last of
    // the fixed operands); every step reads the captures after them.
    let fixed = op.arity().min(args.len());
    let steps = Steps {
        lp,
        seq: lp.is_scan().then(|| args[fixed - 1]),
        captures: &args[fixed..],
        dims,
    };
    let step_at = |s: Value, t: u64| steps.step_at(s, t);
    let count = lp.count.extent(&|p| dims.get(p).copied()).unwrap_or(0);
    // A loop that settles stops stepping at the first step that changes
    // no bit of the state (every later step would give it again), as the
    // backend does.
    let settles = lp.settles && !lp.is_scan();
    Ok(match op {
        Op::Loop(..) => {
            let mut s = args[0].clone();
            for t in 0..count {
                let next = step_at(s.clone(), t)?;
                let settled = settles && same(&next, &s);
                s = next;
                if settled {
                    break;
                }
            }
            s
        }
        Op::LoopTape(_, k, _) => {
            // Row 0: the final state; row 1 + j: the state after j·k steps.
            let k = u64::from(k);
            let mut s = args[0].clone();
            // Row 0 is written last; the tape is allocated once.
            let width = s.data.len();
            let mut rows = Vec::with_capacity(out_shape.iter().product());
            rows.resize(width, 0.0);
            for t in 0..count {
                if t % k == 0 {
                    rows.extend_from_slice(&s.data);
                }
                let next = step_at(s.clone(), t)?;
                let settled = settles && same(&next, &s);
                s = next;
                if settled {
                    // Every later checkpoint is this state: fill them
                    // without visiting the steps (a bound far above the
                    // steps taken costs nothing).
                    let written = t / k + 1;
                    for _ in written..count.div_ceil(k) {
                        rows.extend_from_slice(&s.data);
                    }
                    break;
                }
            }
            rows[..width].copy_from_slice(&s.data);
            Value {
                dtype: s.dtype,
                shape: out_shape.to_vec(),
                data: rows,
            }
        }
        Op::LoopVjp(_, k, m, _) => run_loop_vjp(&steps, (k, m), args, out_shape, count, settles)?,
        _ => unreachable!("run_loop is called for loop ops"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_functions;
    use crate::types::DType;

    /// `loop` runs the body `count` times; `looptape` keeps every k-th state
    /// and the last; `loopvjp` chains the body's VJP backwards over the
    /// recomputed states, so it equals the VJP of the unrolled loop.
    #[test]
    fn runs_loops_their_tapes_and_their_vjps() {
        let f = &parse_functions(crate::ir::tests::HALVING).unwrap()[0];
        let x = Value::f64(&[0.3, -1.2]);
        let out = run(f, &[&x]).unwrap();
        let mut s = [0.3f64, -1.2];
        let mut states = vec![s];
        for _ in 0..7 {
            s = [(s[0] * 0.5).sin(), (s[1] * 0.5).sin()];
            states.push(s);
        }
        assert_eq!(out[0].data, s.to_vec());
        let rows: Vec<f64> = [7, 0, 2, 4, 6].iter().flat_map(|&i| states[i]).collect();
        // Rows: the final state 7, then states 0, 2, 4, 6.
        assert_eq!(out[1].shape, vec![5, 2]);
        assert_eq!(out[1].data, rows);
        // The seed is x itself: g_i = x_i * prod_t 0.5 cos(0.5 s_t,i).
        for i in 0..2 {
            let mut g = [0.3f64, -1.2][i];
            for st in states[..7].iter().rev() {
                g *= 0.5 * (0.5 * st[i]).cos();
            }
            assert!(
                (out[2].data[i] - g).abs() < 1e-15,
                "{} vs {g}",
                out[2].data[i]
            );
        }
    }

    #[test]
    fn runs_the_seed_loss() {
        let f = &parse_functions(
            "fn loss[N](%w: f32[N], %x: f32[N], %y: f32) -> f32 {
  %0: f32[N] = mul %w %x
  %pred: f32 = sum %0
  %err: f32 = sub %pred %y
  %1: f32 = mul %err %err
  ret %1
}",
        )
        .unwrap()[0];
        let w = Value::f32(&[1.0, 2.0, 3.0]);
        let x = Value::f32(&[4.0, 5.0, 6.0]);
        let y = Value::scalar(DType::F32, 0.5);
        let out = run(f, &[&w, &x, &y]).unwrap();
        assert_eq!(out[0].as_scalar(), 31.5 * 31.5);
        let short = Value::f32(&[4.0, 5.0]);
        let e = run(f, &[&w, &short, &y]).unwrap_err();
        assert_eq!(e.param, Some(1));
        assert!(
            e.message.contains("arguments `w` and `x` disagree on `N`: `w` gives 3 (its length), `x` gives 2 (its length)"),
            "{e}"
        );
    }
}
