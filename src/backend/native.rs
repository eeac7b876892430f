//! Calling compiled code on the caller's own memory: borrowed arguments
//! ([`NativeArg`]), caller-provided output buffers ([`NativeOut`]) and a
//! reusable [`Workspace`] for the scratch buffers and the buffer table, so a
//! hot loop calls [`CompiledFunction::call_into`] with no heap allocation
//! per call.

use super::jit::{check_status, CompiledFunction, NativeBuf};
use super::lower::STATUS_SLOTS;
use crate::ir::interp::{
    bind_args, check_bool, concrete_shape, count_problem, data_problem, is_count, ArgError,
    ArgShape, MAX_COUNT,
};
use crate::ir::memory;
use crate::types::{DType, Type};

/// A borrowed run-time argument for [`CompiledFunction::call_into`], in the
/// native layout: a dense row-major array of `f64` or `f32` with its shape
/// (a scalar has shape `&[]` and one element), or the value of an `i64`
/// parameter (which binds the size parameter of its name).
///
/// The data is read in place: it is never copied or converted, and native
/// code never writes it.
#[derive(Clone, Copy, Debug)]
pub enum NativeArg<'a> {
    /// An `f64` array (or scalar) of shape `shape`.
    F64 {
        /// The elements, row-major.
        data: &'a [f64],
        /// The extents, outermost first (empty for a scalar).
        shape: &'a [usize],
    },
    /// An `f32` array (or scalar) of shape `shape`.
    F32 {
        /// The elements, row-major.
        data: &'a [f32],
        /// The extents, outermost first (empty for a scalar).
        shape: &'a [usize],
    },
    /// The value of an `i64` scalar parameter.
    I64(i64),
    /// An `i64` array of shape `shape` (indices, counts).
    I64s {
        /// The elements, row-major.
        data: &'a [i64],
        /// The extents, outermost first.
        shape: &'a [usize],
    },
    /// The value of a `bool` scalar parameter.
    Bool(bool),
    /// A `bool` array of shape `shape`, in native code's representation:
    /// an `i64` 0 (false) or 1 (true) per element, read in place (any
    /// other value is an argument error).
    Bools {
        /// The elements, row-major: each 0 or 1.
        data: &'a [i64],
        /// The extents, outermost first.
        shape: &'a [usize],
    },
}

impl<'a> NativeArg<'a> {
    /// An `f64` array of shape `shape` (`data.len()` must be the product of
    /// the extents; checked by [`CompiledFunction::call_into`]).
    pub fn f64(data: &'a [f64], shape: &'a [usize]) -> NativeArg<'a> {
        NativeArg::F64 { data, shape }
    }

    /// An `f32` array of shape `shape`.
    pub fn f32(data: &'a [f32], shape: &'a [usize]) -> NativeArg<'a> {
        NativeArg::F32 { data, shape }
    }

    /// An `f64` scalar, read in place.
    pub fn scalar_f64(x: &'a f64) -> NativeArg<'a> {
        NativeArg::F64 {
            data: std::slice::from_ref(x),
            shape: &[],
        }
    }

    /// An `f32` scalar, read in place.
    pub fn scalar_f32(x: &'a f32) -> NativeArg<'a> {
        NativeArg::F32 {
            data: std::slice::from_ref(x),
            shape: &[],
        }
    }

    /// The value of an `i64` parameter.
    pub fn i64(n: i64) -> NativeArg<'a> {
        NativeArg::I64(n)
    }

    /// An `i64` array of shape `shape`.
    pub fn i64s(data: &'a [i64], shape: &'a [usize]) -> NativeArg<'a> {
        NativeArg::I64s { data, shape }
    }

    /// The value of a `bool` parameter.
    pub fn bool(b: bool) -> NativeArg<'a> {
        NativeArg::Bool(b)
    }

    /// A `bool` array of shape `shape`, as `i64` 0 (false) or 1 (true).
    pub fn bools(data: &'a [i64], shape: &'a [usize]) -> NativeArg<'a> {
        NativeArg::Bools { data, shape }
    }

    /// Elements of the data (1 for a scalar passed by value).
    fn data_len(&self) -> usize {
        match self {
            NativeArg::F64 { data, .. } => data.len(),
            NativeArg::F32 { data, .. } => data.len(),
            NativeArg::I64s { data, .. } | NativeArg::Bools { data, .. } => data.len(),
            NativeArg::I64(_) | NativeArg::Bool(_) => 1,
        }
    }

    /// The data for the buffer table. Native code only reads it.
    fn data_ptr(&self) -> *const u8 {
        match self {
            NativeArg::F64 { data, .. } => data.as_ptr().cast(),
            NativeArg::F32 { data, .. } => data.as_ptr().cast(),
            NativeArg::I64s { data, .. } | NativeArg::Bools { data, .. } => data.as_ptr().cast(),
            NativeArg::I64(_) | NativeArg::Bool(_) => std::ptr::null(),
        }
    }

    /// The value of a scalar passed by value (a `bool` as 0 or 1), or 0
    /// for an array (what the workspace remembers).
    fn int(&self) -> i64 {
        match self {
            NativeArg::I64(n) => *n,
            NativeArg::Bool(b) => i64::from(*b),
            NativeArg::F64 { .. }
            | NativeArg::F32 { .. }
            | NativeArg::I64s { .. }
            | NativeArg::Bools { .. } => 0,
        }
    }
}

impl ArgShape for NativeArg<'_> {
    fn dtype(&self) -> DType {
        match self {
            NativeArg::F64 { .. } => DType::F64,
            NativeArg::F32 { .. } => DType::F32,
            NativeArg::I64(_) | NativeArg::I64s { .. } => DType::I64,
            NativeArg::Bool(_) | NativeArg::Bools { .. } => DType::Bool,
        }
    }

    fn shape(&self) -> &[usize] {
        match self {
            NativeArg::F64 { shape, .. }
            | NativeArg::F32 { shape, .. }
            | NativeArg::I64s { shape, .. }
            | NativeArg::Bools { shape, .. } => shape,
            NativeArg::I64(_) | NativeArg::Bool(_) => &[],
        }
    }

    /// Only [`NativeArg::I64`] gives an `i64` parameter its value: a float
    /// for an `i64` parameter is an error.
    fn scalar(&self) -> Option<f64> {
        match self {
            NativeArg::I64(n) => Some(*n as f64),
            NativeArg::Bool(b) => Some(f64::from(u8::from(*b))),
            NativeArg::F64 { .. }
            | NativeArg::F32 { .. }
            | NativeArg::I64s { .. }
            | NativeArg::Bools { .. } => None,
        }
    }

    fn non_bool(&self) -> Option<f64> {
        match self {
            NativeArg::Bools { data, .. } => {
                data.iter().find(|&&x| x != 0 && x != 1).map(|&x| x as f64)
            }
            _ => None,
        }
    }
}

/// A caller-provided output buffer for [`CompiledFunction::call_into`]: one
/// per returned position, in order, of the returned value's dtype (`f64`
/// or `i64`), holding exactly its number of elements (1 for a
/// scalar; [`CompiledFunction::output_shapes`] gives the shapes). Every
/// element is overwritten; its previous contents are never read.
#[derive(Debug)]
pub enum NativeOut<'a> {
    /// For an `f64` result.
    F64(&'a mut [f64]),
    /// For an `f32` result.
    F32(&'a mut [f32]),
    /// For an `i64` result.
    I64(&'a mut [i64]),
    /// For a `bool` result: 0 (false) or 1 (true) per element.
    Bool(&'a mut [i64]),
}

impl NativeOut<'_> {
    fn dtype(&self) -> DType {
        match self {
            NativeOut::F64(_) => DType::F64,
            NativeOut::F32(_) => DType::F32,
            NativeOut::I64(_) => DType::I64,
            NativeOut::Bool(_) => DType::Bool,
        }
    }

    fn len(&self) -> usize {
        match self {
            NativeOut::F64(v) => v.len(),
            NativeOut::F32(v) => v.len(),
            NativeOut::I64(v) | NativeOut::Bool(v) => v.len(),
        }
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        match self {
            NativeOut::F64(v) => v.as_mut_ptr().cast(),
            NativeOut::F32(v) => v.as_mut_ptr().cast(),
            NativeOut::I64(v) | NativeOut::Bool(v) => v.as_mut_ptr().cast(),
        }
    }
}

/// What a workspace remembers of one argument it was bound for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ArgKey {
    dtype: DType,
    rank: usize,
    /// The value of an [`NativeArg::I64`], else 0.
    int: i64,
}

/// The reusable memory of [`CompiledFunction::call_into`]: the scratch
/// buffers the native code materialises intermediate values in (stored
/// residuals, loop states, unfused values), the buffer table, the values of
/// the size parameters, and the argument shapes these were sized for.
///
/// Made empty by [`CompiledFunction::workspace`] and sized on first use;
/// a later call with the same argument dtypes, shapes and `i64` values
/// reuses everything as it is (no heap allocation at all), and a call with
/// other shapes re-binds the sizes and resizes the scratch buffers in place
/// (allocating only when a buffer must grow). A workspace belongs to the
/// function that made it (each compiled function has a number of its own,
/// never reused in the process); giving it to another function is an
/// error. It holds no borrow of that function, so it can be kept beside it
/// (a pool of workspaces next to a shared function, as the Python
/// package keeps).
pub struct Workspace {
    /// The number of the function that made this workspace.
    owner: u64,
    owner_name: String,
    /// Whether the fields below are sized for the arguments in `key` and
    /// `shapes`.
    bound: bool,
    key: Vec<ArgKey>,
    /// The argument shapes, concatenated.
    shapes: Vec<usize>,
    /// Elements of each output.
    out_lens: Vec<usize>,
    /// The shape of each output, concatenated (`out_ranks` says where
    /// each ends).
    out_shapes: Vec<usize>,
    out_ranks: Vec<usize>,
    /// One value per size parameter, in order.
    dim_vals: Vec<i64>,
    /// One buffer per scratch slot of the plan.
    scratch: Vec<NativeBuf>,
    scratch_bytes: usize,
    /// The buffer of each `i64` parameter (its value; native code loads
    /// scalar parameters at entry but only uses an `i64` through `dims`).
    ints: Vec<i64>,
    /// The buffer table handed to native code: rewritten on every call
    /// before it runs, so between calls its pointers are never used.
    ptrs: Vec<*mut u8>,
}

// SAFETY: the raw pointers in `ptrs` are only written and handed to native
// code inside `call_into`, which takes the workspace by `&mut` and rewrites
// every entry first; they never point into memory the workspace shares with
// another thread after the call returns. Everything else is owned data.
unsafe impl Send for Workspace {}

impl Workspace {
    /// Bytes of the scratch buffers for the shapes last bound (inputs and
    /// outputs not counted), as [`Prepared::scratch_bytes`](super::Prepared::scratch_bytes).
    pub fn scratch_bytes(&self) -> usize {
        self.scratch_bytes
    }

    /// The shape of result `k` at the arguments the workspace was last
    /// bound for ([`CompiledFunction::bind_workspace`]); `None` before it
    /// is bound, or past the last result.
    pub fn output_shape(&self, k: usize) -> Option<&[usize]> {
        if !self.bound {
            return None;
        }
        let end = *self.out_ranks.get(k)?;
        let start = if k == 0 { 0 } else { self.out_ranks[k - 1] };
        self.out_shapes.get(start..end)
    }

    /// Do `args` have the dtypes, shapes and `i64` values the workspace is
    /// bound for? Allocates nothing.
    fn matches(&self, args: &[NativeArg<'_>]) -> bool {
        if !self.bound || args.len() != self.key.len() {
            return false;
        }
        let mut at = 0;
        for (a, k) in args.iter().zip(&self.key) {
            let shape = a.shape();
            if a.dtype() != k.dtype || shape.len() != k.rank || a.int() != k.int {
                return false;
            }
            if self.shapes.get(at..at + k.rank) != Some(shape) {
                return false;
            }
            at += k.rank;
        }
        true
    }
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("function", &self.owner_name)
            .field("bound", &self.bound)
            .field("dims", &self.dim_vals)
            .field("scratch_bytes", &self.scratch_bytes)
            .finish_non_exhaustive()
    }
}

/// Elements of a shape, `None` on overflow.
fn elements(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &k| a.checked_mul(k))
}

impl CompiledFunction {
    /// An empty [`Workspace`] for [`call_into`](Self::call_into) on this
    /// function; nothing is allocated for buffers until its first call.
    pub fn workspace(&self) -> Workspace {
        Workspace {
            owner: self.number,
            owner_name: self.func.name.clone(),
            bound: false,
            key: Vec::new(),
            shapes: Vec::new(),
            out_lens: Vec::new(),
            out_shapes: Vec::new(),
            out_ranks: Vec::new(),
            dim_vals: Vec::new(),
            scratch: Vec::new(),
            scratch_bytes: 0,
            ints: Vec::new(),
            ptrs: Vec::new(),
        }
    }

    /// The shapes of the results for these arguments (checked as
    /// [`call_into`](Self::call_into) checks them): what to size the
    /// [`NativeOut`] buffers by. Allocates; call it once, not per call.
    pub fn output_shapes(&self, args: &[NativeArg<'_>]) -> Result<Vec<Vec<usize>>, ArgError> {
        self.check_data(args)?;
        let refs: Vec<&NativeArg<'_>> = args.iter().collect();
        let dims = bind_args(&self.func, &refs)?;
        Ok(self
            .func
            .rets
            .iter()
            .map(|r| concrete_shape(self.func.ty(*r), &dims))
            .collect())
    }

    /// Check `args` as [`call_into`](Self::call_into) checks them and bind
    /// `ws` for them (allocating nothing when it is bound for their dtypes,
    /// shapes and `i64` values already): then
    /// [`Workspace::output_shape`] gives each result's shape, and a
    /// [`call_into`](Self::call_into) with these arguments and `ws` binds
    /// nothing again. What a caller that allocates the outputs itself
    /// calls first, instead of [`output_shapes`](Self::output_shapes).
    pub fn bind_workspace(
        &self,
        args: &[NativeArg<'_>],
        ws: &mut Workspace,
    ) -> Result<(), ArgError> {
        if ws.owner != self.number {
            return Err(ArgError {
                limit: false,
                site: None,
                param: None,
                message: format!(
                    "this workspace was made for another compiled function (`{}`), not `{}`",
                    ws.owner_name, self.func.name
                ),
            });
        }
        self.check_data(args)?;
        if !ws.matches(args) {
            self.bind(args, ws)?;
        }
        Ok(())
    }

    /// Run the native code on borrowed arguments, writing the results into
    /// the caller's buffers `outs` (one per returned position) and using
    /// `ws` (made by [`workspace`](Self::workspace) on this function) for
    /// scratch space.
    ///
    /// Before any native code runs, this checks that `ws` belongs to this
    /// function, that each argument's data has as many elements as its
    /// shape says, everything [`bind_args`] checks (argument count, dtypes,
    /// ranks, literal extents, agreeing size parameters, `i64` values, the
    /// bounds of computed sizes and of every row read), and that there is
    /// one output per returned position with the returned value's dtype and
    /// exactly its number of elements. Any failure is an [`ArgError`] and
    /// nothing runs.
    ///
    /// No heap allocation: when the arguments have the dtypes, shapes and
    /// `i64` values `ws` was last bound for, the call allocates nothing
    /// (the inputs are read in place, the outputs written in place, the
    /// scratch and buffer table reused); only other shapes re-bind the
    /// sizes (allocating as [`bind_args`] does) and resize the scratch
    /// buffers. An error allocates its message.
    ///
    /// Results are bit for bit those of [`call`](Self::call).
    pub fn call_into(
        &self,
        args: &[NativeArg<'_>],
        outs: &mut [NativeOut<'_>],
        ws: &mut Workspace,
    ) -> Result<(), ArgError> {
        self.bind_workspace(args, ws)?;
        let f = &self.func;
        if outs.len() != f.rets.len() {
            return Err(ArgError {
                limit: false,
                site: None,
                param: None,
                message: format!(
                    "`{}` returns {} value(s), got {} output buffer(s)",
                    f.name,
                    f.rets.len(),
                    outs.len()
                ),
            });
        }
        for (k, (o, r)) in outs.iter().zip(&f.rets).enumerate() {
            let want = f.ty(*r).dtype;
            if o.dtype() != want {
                return Err(ArgError {
                    limit: false,
                    site: None,
                    param: None,
                    message: format!(
                        "output {k} of `{}` must be an {want} buffer, got {}",
                        f.name,
                        o.dtype()
                    ),
                });
            }
        }
        for (k, (o, &n)) in outs.iter().zip(&ws.out_lens).enumerate() {
            if o.len() != n {
                return Err(ArgError {
                    limit: false,
                    site: None,
                    param: None,
                    message: format!(
                        "output {k} of `{}` must have {n} element(s) at these sizes, got {}",
                        f.name,
                        o.len()
                    ),
                });
            }
        }

        // The buffer table: inputs, outputs, scratch (sized by `bind`).
        let n_inputs = self.plan.n_inputs;
        let n_outputs = self.plan.n_outputs;
        debug_assert_eq!(ws.ptrs.len(), self.plan.n_buffers());
        let (ins, rest) = ws.ptrs.split_at_mut(n_inputs);
        let (out_ptrs, scratch_ptrs) = rest.split_at_mut(n_outputs);
        for (k, (slot, a)) in ins.iter_mut().zip(args).enumerate() {
            *slot = match a {
                // An `i64` parameter's buffer holds its value (as `prepare`
                // makes it); the native code reads the size from `dims`.
                NativeArg::I64(_) | NativeArg::Bool(_) => ws.ints[k..].as_mut_ptr().cast(),
                // SAFETY (of the cast to `*mut`): native code never writes
                // an input buffer. The plan (`lower::Plan`) numbers the
                // parameters' buffers first and only ever reads them
                // (`Read::Buf` of a parameter, or one load of a scalar
                // parameter at entry); every statement's home, every
                // returned store and every loop state or tape buffer is an
                // output or a scratch buffer, and a loop body or VJP called
                // on an input reads it as its own input.
                NativeArg::F64 { .. }
                | NativeArg::F32 { .. }
                | NativeArg::I64s { .. }
                | NativeArg::Bools { .. } => a.data_ptr().cast_mut(),
            };
        }
        for (slot, o) in out_ptrs.iter_mut().zip(outs.iter_mut()) {
            *slot = o.as_mut_ptr();
        }
        for (slot, b) in scratch_ptrs.iter_mut().zip(ws.scratch.iter_mut()) {
            *slot = b.as_mut_ptr();
        }
        // SAFETY: the module is alive (`self` is borrowed). `ptrs` holds one
        // pointer per input, output and scratch slot of the plan: inputs
        // with as many elements as their shapes (checked above) which
        // `bind_args` checked against the signature at the dims of
        // `dim_vals`; outputs with exactly their results' element counts
        // at those dims (checked above); scratch buffers sized from the
        // same dims by `bind`. `dim_vals` has one value per size
        // parameter. `ws.matches` (or a fresh `bind`) guarantees the dims
        // are those of these arguments, and the code indexes only within
        // these lengths (loops run over 0..len). The outputs are `&mut`
        // borrows, so they alias neither each other nor the inputs, and
        // every buffer outlives the call.
        ws.dim_vals[..STATUS_SLOTS].fill(0);
        unsafe { (self.entry)(ws.ptrs.as_ptr(), ws.dim_vals.as_mut_ptr().add(STATUS_SLOTS)) };
        check_status(&ws.dim_vals)
    }

    /// Each array argument's data must have as many elements as its shape,
    /// and a bool array's be 0 or 1 (checked at every call: the workspace
    /// does not bind again for new contents).
    fn check_data(&self, args: &[NativeArg<'_>]) -> Result<(), ArgError> {
        let f = &self.func;
        for (i, a) in args.iter().enumerate() {
            check_bool(f, i, a)?;
            let shape = a.shape();
            if elements(shape) == Some(a.data_len()) {
                continue;
            }
            let name = f
                .params
                .get(i)
                .map_or_else(|| format!("{i}"), |p| f.var_name(p.var).to_string());
            let need = elements(shape).map_or_else(|| "too many".to_string(), |n| n.to_string());
            return Err(ArgError {
                limit: false,
                site: None,
                param: (i < f.params.len()).then_some(i),
                message: format!(
                    "argument `{name}` has {} element(s), but its shape {shape:?} has {need}",
                    a.data_len()
                ),
            });
        }
        Ok(())
    }

    /// Bind the sizes of `args` and size `ws` for them: the values of the
    /// size parameters, the output lengths, the scratch buffers (resized in
    /// place) and the buffer table. `ws` is marked bound only on success.
    fn bind(&self, args: &[NativeArg<'_>], ws: &mut Workspace) -> Result<(), ArgError> {
        let f = &self.func;
        ws.bound = false;
        // An `i64` beyond 2^53 would not survive the float `bind_args`
        // reads; refuse it with `bind_args`'s own message.
        for (i, (p, a)) in f.params.iter().zip(args).enumerate() {
            if let NativeArg::I64(n) = *a {
                let count = is_count(f, p);
                let lowest = if count { 0 } else { -(MAX_COUNT as i64) };
                if f.ty(p.var).dtype == DType::I64 && !(lowest..=MAX_COUNT as i64).contains(&n) {
                    let name = f.var_name(p.var);
                    let problem = |x: f64| match count {
                        true => count_problem(name, x, &n.to_string()),
                        false => data_problem(name, x, &n.to_string()),
                    };
                    return Err(ArgError {
                        limit: false,
                        site: None,
                        param: Some(i),
                        message: problem(n as f64)
                            .unwrap_or_else(|| problem(f64::MAX).unwrap_or_default()),
                    });
                }
            }
        }
        let refs: Vec<&NativeArg<'_>> = args.iter().collect();
        let dims = bind_args(f, &refs)?;

        let too_big = |what: &str| {
            ArgError::too_large(format!("`{}`: the {what} is too large to allocate", f.name))
        };
        let sized = |ty: &Type| -> Result<usize, ArgError> {
            elements(&concrete_shape(ty, &dims))
                .filter(|n| {
                    n.checked_mul(ty.dtype.bytes())
                        .is_some_and(|b| b <= isize::MAX as usize)
                })
                .ok_or_else(|| too_big("result"))
        };
        ws.dim_vals.clear();
        ws.dim_vals.resize(STATUS_SLOTS, 0);
        for p in &f.size_params {
            let d = dims.get(p).copied().unwrap_or(0);
            ws.dim_vals
                .push(i64::try_from(d).map_err(|_| too_big("size parameter"))?);
        }
        ws.out_lens.clear();
        ws.out_shapes.clear();
        ws.out_ranks.clear();
        for r in &f.rets {
            ws.out_lens.push(sized(f.ty(*r))?);
            ws.out_shapes.extend(concrete_shape(f.ty(*r), &dims));
            ws.out_ranks.push(ws.out_shapes.len());
        }
        // Made only on failure: this runs before every call.
        let scratch_what = || format!("the scratch space of `{}`", f.name);
        // More bytes than a `u64` counts: the memory limit's own message.
        let beyond = || {
            ArgError::too_large(
                memory::check(None, &scratch_what())
                    .err()
                    .unwrap_or_default(),
            )
        };
        let mut scratch_lens = Vec::with_capacity(self.plan.scratch.len());
        let mut scratch_bytes = 0usize;
        for ty in &self.plan.scratch {
            let n = sized(ty).map_err(|_| beyond())?;
            scratch_bytes = scratch_bytes
                .checked_add(n * ty.dtype.bytes())
                .ok_or_else(beyond)?;
            scratch_lens.push(n);
        }
        let budget = memory::budget();
        if !budget.allows(scratch_bytes as u64) {
            budget
                .check(Some(scratch_bytes as u64), &scratch_what())
                .map_err(ArgError::too_large)?;
        }
        self.plan
            .work
            .check(&dims, || format!("running `{}`", f.name))
            .map_err(ArgError::too_large)?;
        self.plan
            .check_elements(&f.name, &dims)
            .map_err(ArgError::too_large)?;
        // Resize in place: a buffer keeps its memory when it is big enough.
        ws.scratch.truncate(self.plan.scratch.len());
        for (k, (ty, &n)) in self.plan.scratch.iter().zip(&scratch_lens).enumerate() {
            let reuse = match ws.scratch.get_mut(k) {
                Some(NativeBuf::F32(v)) if ty.dtype == DType::F32 => {
                    v.clear();
                    v.resize(n, 0.0);
                    true
                }
                Some(NativeBuf::F64(v)) if ty.dtype == DType::F64 => {
                    v.clear();
                    v.resize(n, 0.0);
                    true
                }
                _ => false,
            };
            if !reuse {
                let fresh = NativeBuf::zeros(ty.dtype, n);
                match ws.scratch.get_mut(k) {
                    Some(b) => *b = fresh,
                    None => ws.scratch.push(fresh),
                }
            }
        }
        ws.scratch_bytes = scratch_bytes;

        ws.ints.clear();
        ws.ints.extend(args.iter().map(|a| a.int()));
        ws.ptrs.clear();
        ws.ptrs
            .resize(self.plan.n_buffers(), std::ptr::null_mut::<u8>());
        ws.key.clear();
        ws.shapes.clear();
        for a in args {
            let shape = a.shape();
            ws.key.push(ArgKey {
                dtype: a.dtype(),
                rank: shape.len(),
                int: a.int(),
            });
            ws.shapes.extend_from_slice(shape);
        }
        ws.bound = true;
        Ok(())
    }
}
