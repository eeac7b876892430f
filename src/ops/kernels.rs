//! Native kernels: Rust functions a program calls by name, with the shape
//! rule that types a call and the VJP that differentiates it
//! ([`register_kernel`]). A call is one op, `kernel K n x1 .. xn`
//! ([`Op::Kernel`](super::Op::Kernel)): the e-graph keeps it whole, the interpreter calls the
//! function on the arguments' elements, and native code calls it through
//! [`egrad_kernel_call`] on the arguments' buffers. Reverse mode applies
//! the kernel's VJP, one function per argument, registered with it as
//! kernels of their own.
//!
//! Kernels take and give `f64` arrays (rank 1 or more). They live in the
//! process: an object file (`egrad build`) cannot call them.

use crate::types::{DType, Type};
use std::sync::{OnceLock, RwLock};

/// A kernel's computation: the arguments' elements (row-major, one slice
/// per argument) in, the result's elements out (`out` has as many
/// elements as the shape rule's type; write every one).
pub type KernelFn = fn(args: &[&[f64]], out: &mut [f64]);

/// The type of a call from its arguments' types, or why the arguments do
/// not fit (shown at the call).
pub type ShapeRule = fn(args: &[Type]) -> Result<Type, ShapeError>;

/// Why a call's arguments do not fit a kernel: what a [`ShapeRule`] says
/// (`Argument`, `Other`), or the checks egrad makes before and after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeError {
    /// Argument `index` (from 0) does not fit, for the reason given.
    Argument {
        /// Which argument.
        index: usize,
        /// Why, one line.
        why: String,
    },
    /// The arguments together do not fit, for the reason given.
    Other(String),
    /// The call has another number of arguments than the kernel takes.
    Arity {
        /// The kernel.
        kernel: String,
        /// How many it takes.
        takes: usize,
        /// How many the call has.
        got: usize,
    },
    /// An argument is not an `f64` array of rank 1 or more.
    NotF64Array {
        /// The kernel.
        kernel: String,
        /// The argument's type.
        got: Type,
    },
    /// The shape rule gave a type that is not an `f64` array.
    BadResult {
        /// The kernel.
        kernel: String,
        /// The rule's type.
        got: Type,
    },
    /// No kernel has this id (ids come from the registry, so a bug).
    Unknown(u32),
}

impl std::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShapeError::Argument { index, why } => write!(f, "argument {}: {why}", index + 1),
            ShapeError::Other(why) => f.write_str(why),
            ShapeError::Arity { kernel, takes, got } => {
                write!(f, "`{kernel}` takes {takes} arguments, got {got}")
            }
            ShapeError::NotF64Array { kernel, got } => {
                write!(f, "`{kernel}` takes f64 arrays (rank 1 or more), got {got}")
            }
            ShapeError::BadResult { kernel, got } => write!(
                f,
                "the shape rule of `{kernel}` gives {got}; a kernel gives an f64 array"
            ),
            ShapeError::Unknown(id) => write!(f, "there is no kernel {id}"),
        }
    }
}

impl std::error::Error for ShapeError {}

/// Why [`register_kernel`] refused a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelError {
    /// The name is not one a program can call (letters, digits and `_`,
    /// not starting with a digit).
    BadName(String),
    /// The kernel takes no arguments.
    NoArguments(String),
    /// The VJP list is neither empty nor one function per argument.
    VjpCount {
        /// The kernel.
        name: String,
        /// Its arguments.
        arity: usize,
        /// Its VJP functions.
        vjps: usize,
    },
    /// A kernel of this name is registered already (kernels are never
    /// replaced).
    Duplicate(String),
}

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelError::BadName(n) => write!(f, "`{n}` is not a name a program can call"),
            KernelError::NoArguments(n) => write!(f, "the kernel `{n}` takes no arguments"),
            KernelError::VjpCount { name, arity, vjps } => write!(
                f,
                "the kernel `{name}` takes {arity} arguments but has {vjps} VJP functions (one per argument, or none)"
            ),
            KernelError::Duplicate(n) => write!(f, "a kernel named `{n}` is already registered"),
        }
    }
}

impl std::error::Error for KernelError {}

/// A refused kernel is a usage error (so `?` works in a function that
/// returns [`Error`](crate::error::Error)).
impl From<KernelError> for crate::error::Error {
    fn from(e: KernelError) -> Self {
        crate::error::Error::Usage(e.to_string())
    }
}

/// A native kernel as registered.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The name programs call it by.
    pub name: String,
    /// How many arguments it takes.
    pub arity: usize,
    /// The result's type from the arguments' types.
    pub shape: ShapeRule,
    /// The computation.
    pub forward: KernelFn,
    /// Per argument `i`: `(x1 .. xn, cotangent of the result) -> cotangent
    /// of x_i` (the argument's type). Empty: the kernel has no derivative
    /// (differentiating through it is an error).
    pub vjp: Vec<KernelFn>,
    /// The cost model's price per result element, in flops.
    pub flops: f64,
}

/// One registered kernel and, for a VJP, whose argument it differentiates.
#[derive(Clone, Debug)]
struct Entry {
    kernel: Kernel,
    /// For the VJP of argument `i` of kernel `k`: `(k, i)`.
    vjp_of: Option<(u32, usize)>,
    /// For a kernel with a VJP: the ids of its VJP functions, by argument.
    vjp_ids: Vec<u32>,
    /// For the JVP of kernel `k` (the builtin ones have one): `k`.
    jvp_of: Option<u32>,
    /// For a kernel with a JVP: its id.
    jvp_id: Option<u32>,
}

fn registry() -> &'static RwLock<Vec<Entry>> {
    static R: OnceLock<RwLock<Vec<Entry>>> = OnceLock::new();
    R.get_or_init(|| {
        let mut r = Vec::new();
        for (k, jvp) in builtin_kernels() {
            let id = push_kernel(&mut r, k.clone());
            let jid = r.len() as u32;
            r.push(Entry {
                kernel: Kernel {
                    name: format!("{}.jvp", k.name),
                    arity: 2 * k.arity,
                    shape: vjp_shape,
                    forward: jvp,
                    vjp: Vec::new(),
                    flops: k.flops,
                },
                vjp_of: None,
                vjp_ids: Vec::new(),
                jvp_of: Some(id),
                jvp_id: None,
            });
            r[id as usize].jvp_id = Some(jid);
        }
        BUILTIN_ENTRIES.get_or_init(|| r.len());
        RwLock::new(r)
    })
}

/// How many registry entries the builtin kernels take (their VJPs and
/// JVPs included): they come first.
static BUILTIN_ENTRIES: OnceLock<usize> = OnceLock::new();

/// Is kernel `id` one of egrad's builtin ones (or one's VJP or JVP)?
pub fn is_builtin(id: u32) -> bool {
    let _ = registry();
    (id as usize) < BUILTIN_ENTRIES.get().copied().unwrap_or(0)
}

/// The kernels every program may call ([`crate::linalg`]): `cholesky(A)`,
/// `solve_lower(L, B)` (`L⁻¹ B`), `solve_lower_t(L, B)` (`L⁻ᵀ B`),
/// `solve(A, B)` (`A⁻¹ B`), `inv(A)` and the one behind `slogdet`, with
/// their VJPs.
fn builtin_kernels() -> Vec<(Kernel, KernelFn)> {
    use super::sort;
    use crate::linalg;
    let kernel =
        |name: &str, arity, shape: ShapeRule, forward: KernelFn, vjp: &[KernelFn]| Kernel {
            name: name.into(),
            arity,
            shape,
            forward,
            vjp: vjp.to_vec(),
            flops: 64.0,
        };
    vec![
        (
            kernel(
                "cholesky",
                1,
                square_shape,
                |a, out| linalg::cholesky(a[0], out),
                &[linalg::cholesky_vjp],
            ),
            linalg::cholesky_jvp,
        ),
        (
            kernel(
                "solve_lower",
                2,
                solve_shape,
                |a, out| linalg::solve_lower(a[0], a[1], out),
                &[linalg::solve_lower_vjp_l, linalg::solve_lower_vjp_b],
            ),
            linalg::solve_lower_jvp,
        ),
        (
            kernel(
                "solve_lower_t",
                2,
                solve_shape,
                |a, out| linalg::solve_lower_t(a[0], a[1], out),
                &[linalg::solve_lower_t_vjp_l, linalg::solve_lower_t_vjp_b],
            ),
            linalg::solve_lower_t_jvp,
        ),
        (
            kernel(
                "solve",
                2,
                solve_shape,
                |a, out| linalg::solve(a[0], a[1], out),
                &[linalg::solve_vjp_a, linalg::solve_vjp_b],
            ),
            linalg::solve_jvp,
        ),
        (
            kernel(
                "inv",
                1,
                square_shape,
                |a, out| linalg::inv(a[0], out),
                &[linalg::inv_vjp],
            ),
            linalg::inv_jvp,
        ),
        // `[sign, log |det A|]`, which `slogdet(A)` and `logdet(A)` read
        // (`lang::check`); its name is no identifier, so no program calls
        // it directly.
        (
            kernel(
                SLOGDET,
                1,
                |args| {
                    square_shape(args)?;
                    Ok(Type::array(DType::F64, vec![crate::types::Dim::Lit(2)]))
                },
                |a, out| linalg::slogdet(a[0], out),
                &[linalg::slogdet_vjp],
            ),
            linalg::slogdet_jvp,
        ),
        // The eigenvalues (row 0) and eigenvectors (below) that `eigh(A)`
        // reads, hidden as `slogdet`'s.
        (
            kernel(
                EIGH,
                1,
                |args| {
                    let a = square_shape(args)?;
                    let rows = a.shape[0].plus(&crate::types::Dim::Lit(1)).ok_or_else(|| {
                        ShapeError::Other(format!("`eigh` of {a}: its size overflows"))
                    })?;
                    Ok(Type::array(DType::F64, vec![rows, a.shape[1].clone()]))
                },
                |a, out| linalg::eigh(a[0], out),
                &[linalg::eigh_vjp],
            ),
            linalg::eigh_jvp,
        ),
        // Along the last axis (`super::sort`): the array and its last
        // axis's length, hidden as `slogdet`'s; `sort`, `argsort`,
        // `top_k`, `cumsum` and `cumprod` call them.
        (
            kernel(
                SORT,
                2,
                along_last_shape,
                sort::sort,
                &[sort::sort_vjp, sort::zero],
            ),
            sort::sort_jvp,
        ),
        (
            kernel(
                ARGSORT,
                2,
                along_last_shape,
                sort::argsort,
                &[sort::zero, sort::zero],
            ),
            sort::zero,
        ),
        (
            kernel(
                CUMSUM,
                2,
                along_last_shape,
                sort::cumsum,
                &[sort::cumsum_vjp, sort::zero],
            ),
            sort::cumsum_jvp,
        ),
        (
            kernel(
                CUMPROD,
                2,
                along_last_shape,
                sort::cumprod,
                &[sort::cumprod_vjp, sort::zero],
            ),
            sort::cumprod_jvp,
        ),
    ]
}

/// The builtin kernels along the last axis (see `builtin_kernels`).
pub const SORT: &str = "sort.last";
/// `argsort`'s kernel: the permutation as numbers.
pub const ARGSORT: &str = "argsort.last";
/// `cumsum`'s kernel.
pub const CUMSUM: &str = "cumsum.last";
/// `cumprod`'s kernel.
pub const CUMPROD: &str = "cumprod.last";

/// A kernel along the last axis: an array of rank 1 or more and the
/// length of its last axis (`f64[1]`); the result has the array's type.
fn along_last_shape(args: &[Type]) -> Result<Type, ShapeError> {
    let a = &args[0];
    if a.rank() == 0 {
        return Err(ShapeError::Argument {
            index: 0,
            why: format!("an array is needed, but this is {a}"),
        });
    }
    Ok(a.clone())
}

/// The builtin kernel behind `slogdet` and `logdet`.
pub const SLOGDET: &str = "slogdet.lu";

/// The builtin kernel behind `eigh`.
pub const EIGH: &str = "eigh.packed";

/// `cholesky`'s argument: a square matrix.
fn square_shape(args: &[Type]) -> Result<Type, ShapeError> {
    let a = &args[0];
    if a.rank() != 2 || a.shape[0] != a.shape[1] {
        return Err(ShapeError::Argument {
            index: 0,
            why: format!("a square matrix (`f64[N, N]`) is needed, but this is {a}"),
        });
    }
    Ok(a.clone())
}

/// A triangular solve's arguments: a square matrix `f64[N, N]` and a
/// right-hand side `f64[N]` or `f64[N, M]`, whose type the solution has.
fn solve_shape(args: &[Type]) -> Result<Type, ShapeError> {
    square_shape(&args[..1])?;
    let (l, b) = (&args[0], &args[1]);
    if b.rank() > 2 || b.shape[0] != l.shape[0] {
        return Err(ShapeError::Argument {
            index: 1,
            why: format!(
                "the right-hand side must be `f64[{}]` or `f64[{}, M]`, but it is {b}",
                l.shape[0], l.shape[0]
            ),
        });
    }
    Ok(b.clone())
}

fn with<T>(f: impl FnOnce(&[Entry]) -> T) -> T {
    let r = registry().read().unwrap_or_else(|p| p.into_inner());
    f(&r)
}

/// Register `kernel` for every program parsed from now on in this process;
/// its id. A name already registered is refused (kernels are never
/// replaced, so compiled code never calls a function other than the one
/// it was compiled for), and so is a VJP list that is neither empty nor
/// one function per argument.
pub fn register_kernel(kernel: Kernel) -> Result<u32, KernelError> {
    if kernel.name.is_empty()
        || !kernel
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        || kernel.name.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(KernelError::BadName(kernel.name));
    }
    if kernel.arity == 0 {
        return Err(KernelError::NoArguments(kernel.name));
    }
    if !kernel.vjp.is_empty() && kernel.vjp.len() != kernel.arity {
        return Err(KernelError::VjpCount {
            name: kernel.name,
            arity: kernel.arity,
            vjps: kernel.vjp.len(),
        });
    }
    let mut r = registry().write().unwrap_or_else(|p| p.into_inner());
    if r.iter().any(|e| e.kernel.name == kernel.name) {
        return Err(KernelError::Duplicate(kernel.name));
    }
    Ok(push_kernel(&mut r, kernel))
}

/// Add `kernel` and its VJPs to the registry `r`; its id.
fn push_kernel(r: &mut Vec<Entry>, kernel: Kernel) -> u32 {
    let id = r.len() as u32;
    let vjps = kernel.vjp.clone();
    let n = kernel.arity;
    r.push(Entry {
        kernel: kernel.clone(),
        vjp_of: None,
        vjp_ids: Vec::new(),
        jvp_of: None,
        jvp_id: None,
    });
    let mut ids = Vec::new();
    for (i, f) in vjps.into_iter().enumerate() {
        ids.push(r.len() as u32);
        r.push(Entry {
            kernel: Kernel {
                name: format!("{}.vjp{i}", kernel.name),
                arity: n + 1,
                shape: vjp_shape,
                forward: f,
                vjp: Vec::new(),
                flops: kernel.flops,
            },
            vjp_of: Some((id, i)),
            vjp_ids: Vec::new(),
            jvp_of: None,
            jvp_id: None,
        });
    }
    r[id as usize].vjp_ids = ids;
    id
}

/// The type of a VJP's result: that of the argument it differentiates,
/// which [`vjp_type`] knows; as a shape rule it is not consulted (a VJP
/// call is typed by its annotation).
fn vjp_shape(_: &[Type]) -> Result<Type, ShapeError> {
    Err(ShapeError::Other(
        "a kernel's VJP is typed by its argument".to_string(),
    ))
}

/// The id of the kernel called `name`, if one is registered (its VJPs are
/// not callable by name).
pub fn kernel_id(name: &str) -> Option<u32> {
    with(|r| {
        r.iter()
            .position(|e| e.kernel.name == name && e.vjp_of.is_none())
            .map(|i| i as u32)
    })
}

/// The kernel `id` (a copy).
pub fn kernel(id: u32) -> Option<Kernel> {
    with(|r| r.get(id as usize).map(|e| e.kernel.clone()))
}

/// The id of kernel `id`'s JVP (the arguments, then their tangents, in;
/// the result's tangent out), if it has one: the builtin kernels do.
pub fn kernel_jvp(id: u32) -> Option<u32> {
    with(|r| r.get(id as usize).and_then(|e| e.jvp_id))
}

/// The id of the VJP of argument `i` of kernel `id`, if it has one.
pub fn kernel_vjp(id: u32, i: usize) -> Option<u32> {
    with(|r| r.get(id as usize).and_then(|e| e.vjp_ids.get(i).copied()))
}

/// The type of a call of kernel `id` on arguments of types `args`: its
/// shape rule's (a VJP's: the argument's it differentiates), which must
/// be an `f64` array, as must every argument.
pub fn kernel_type(id: u32, args: &[Type]) -> Result<Type, ShapeError> {
    let (k, vjp_of, jvp_of) = with(|r| {
        r.get(id as usize)
            .map(|e| (e.kernel.clone(), e.vjp_of, e.jvp_of))
            .ok_or(ShapeError::Unknown(id))
    })?;
    if args.len() != k.arity {
        return Err(ShapeError::Arity {
            kernel: k.name,
            takes: k.arity,
            got: args.len(),
        });
    }
    if let Some(a) = args.iter().find(|a| a.dtype != DType::F64 || a.is_scalar()) {
        return Err(ShapeError::NotF64Array {
            kernel: k.name,
            got: a.clone(),
        });
    }
    let t = match (vjp_of, jvp_of) {
        (Some((_, i)), _) => args[i].clone(),
        // The tangent has the primal's type.
        (None, Some(p)) => return kernel_type(p, &args[..k.arity / 2]),
        (None, None) => (k.shape)(args)?,
    };
    if t.dtype != DType::F64 || t.is_scalar() {
        return Err(ShapeError::BadResult {
            kernel: k.name,
            got: t,
        });
    }
    Ok(t)
}

/// Run kernel `id`: `args` are the arguments' elements, `out` the
/// result's. A kernel that panics writes NaN, for the interpreter and
/// native code alike (never unwinding into JIT code), and so does a
/// missing kernel (it cannot happen: ids come from the registry, which
/// never shrinks).
pub fn call_kernel(id: u32, args: &[&[f64]], out: &mut [f64]) {
    match with(|r| r.get(id as usize).map(|e| e.kernel.forward)) {
        Some(f) => {
            let run = std::panic::AssertUnwindSafe(|| f(args, &mut *out));
            if std::panic::catch_unwind(run).is_err() {
                out.fill(f64::NAN);
            }
        }
        None => out.fill(f64::NAN),
    }
}

/// The flops per result element of kernel `id`, for the cost model.
pub(super) fn kernel_flops(id: u32) -> f64 {
    with(|r| r.get(id as usize).map_or(1.0, |e| e.kernel.flops))
}

/// What native code calls: kernel `id` on `n` arguments (pointers and
/// element counts in `ptrs` and `lens`) into `out` (`out_len` elements).
///
/// # Safety
///
/// `ptrs` and `lens` point to `n` values each; `ptrs[i]` to `lens[i]`
/// readable `f64`s; `out` to `out_len` writable `f64`s, not overlapping
/// the arguments. The JIT's code calls it so.
pub unsafe extern "C" fn egrad_kernel_call(
    id: u64,
    n: u64,
    ptrs: *const *const f64,
    lens: *const u64,
    out: *mut f64,
    out_len: u64,
) {
    let n = n as usize;
    // SAFETY: the caller's contract above.
    let (ptrs, lens) = unsafe {
        (
            std::slice::from_raw_parts(ptrs, n),
            std::slice::from_raw_parts(lens, n),
        )
    };
    let args: Vec<&[f64]> = ptrs
        .iter()
        .zip(lens)
        .map(|(&p, &l)| {
            if l == 0 {
                &[][..]
            } else {
                // SAFETY: `p` points to `l` readable f64s (the contract).
                unsafe { std::slice::from_raw_parts(p, l as usize) }
            }
        })
        .collect();
    let out: &mut [f64] = if out_len == 0 {
        &mut []
    } else {
        // SAFETY: `out` points to `out_len` writable f64s (the contract).
        unsafe { std::slice::from_raw_parts_mut(out, out_len as usize) }
    };
    // (A kernel that panics gives NaN: `call_kernel` never unwinds.)
    call_kernel(id as u32, &args, out);
}
