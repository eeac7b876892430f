//! The Cranelift JIT: ISA and module set-up, the libm imports, compilation,
//! and the compiled function with its host-side calling wrapper. The
//! lowering into a module ([`lower`]) is generic over
//! [`cranelift_module::Module`]: the object-file writer
//! ([`super::object`]) uses it too.

use super::lower::{Import, Kernels, LoopRefs, Plan, Translator, STATUS_SLOTS};
use super::BackendOptions;
use crate::error::Error;
use crate::ir::interp::{bind_args, concrete_shape, ArgError};
use crate::ir::memory;
use crate::ir::{Function, VarId};
use crate::ops::{Math, Native};
use crate::types::value::Value;
use crate::types::DType;
use crate::vmath::VFn;
use cranelift_codegen::ir::{self, types, AbiParam, FuncRef, InstBuilder, UserFuncName};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};

/// Functions the generated code imports: pow (what Rust's `f32`/`f64`
/// methods, and so the reference interpreter, compute), sin and cos for the
/// rare lanes past egrad's kernels' range (the other elementary functions
/// are egrad's own kernels, `crate::vmath`, emitted inline or as functions
/// of the module), the C library's math functions ([`Native::CLib`] rows of
/// the math table), and egrad's matrix kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Libm {
    Sin,
    Cos,
    /// A math function of the C library (a [`Native::CLib`] row).
    Math(Math),
    /// Two operands.
    Pow,
    /// A matrix product through egrad's kernel (`crate::gemm`):
    /// `(m, k, n, a, rsa, csa, b, rsb, csb, c)`, all `i64`, no result.
    Gemm,
    /// Row sums of a product through egrad's kernel (`crate::gemv`):
    /// `(m, k, a, rsa, csa, b, rsb, csb, out)`, all `i64`, no result.
    RowDot,
    /// Column sums of a product (`crate::gemv`), the same operands.
    ColSum,
    /// A native kernel (`crate::ops::kernels`): `(id, n, ptrs, lens, out,
    /// out_len)`, all `i64`, no result.
    Kernel,
    /// A math function over a whole array through its block kernel
    /// (`crate::vmath::egrad_vmath_block_f64`): `(function, x, y, n)`, all
    /// `i64`, no result.
    Block,
}

// New functions go at the end: the order fixes the import ids in CLIF dumps.
// The math table's C functions are declared as they are first called, so a
// new row changes no other program's dump.
const LIBM: [Libm; 8] = [
    Libm::Sin,
    Libm::Cos,
    Libm::Pow,
    Libm::Gemm,
    Libm::RowDot,
    Libm::ColSum,
    Libm::Kernel,
    Libm::Block,
];
const DTYPES: [DType; 2] = [DType::F32, DType::F64];

macro_rules! libm_wrappers {
    ($($name:ident: $t:ty => $m:ident;)*) => {
        $(
            extern "C" fn $name(x: $t) -> $t {
                <$t>::$m(x)
            }
        )*
    };
}

libm_wrappers! {
    egrad_sin_f32: f32 => sin;
    egrad_cos_f32: f32 => cos;
    egrad_sin_f64: f64 => sin;
    egrad_cos_f64: f64 => cos;
}

extern "C" fn egrad_pow_f32(x: f32, y: f32) -> f32 {
    x.powf(y)
}

extern "C" fn egrad_pow_f64(x: f64, y: f64) -> f64 {
    x.powf(y)
}

impl Libm {
    /// The std function a vector math kernel falls back to for lanes past
    /// its range ([`VFn::has_fallback`]): sin and cos.
    pub(crate) fn fallback(f: VFn) -> Option<Libm> {
        match f {
            VFn::Sin => Some(Libm::Sin),
            VFn::Cos => Some(Libm::Cos),
            VFn::Exp | VFn::Log | VFn::Log1p | VFn::Expm1 | VFn::Tanh => None,
        }
    }

    /// Number of operands.
    pub(crate) fn arity(self) -> usize {
        match self {
            Libm::Pow => 2,
            Libm::Gemm => 10,
            Libm::RowDot | Libm::ColSum => 9,
            Libm::Kernel => 6,
            Libm::Block => 4,
            Libm::Sin | Libm::Cos | Libm::Math(_) => 1,
        }
    }

    /// The C library's function computing the same thing (what Rust's
    /// `f32`/`f64` methods call on this platform): the undefined symbol an
    /// object file imports, resolved by the C linker with `-lm`.
    pub(crate) fn c_symbol(self, dtype: DType) -> &'static str {
        use DType::*;
        use Libm::*;
        match (self, dtype) {
            (Sin, F32) => "sinf",
            (Cos, F32) => "cosf",
            (Pow, F32) => "powf",
            (Sin, F64 | I64 | Bool) => "sin",
            (Cos, F64 | I64 | Bool) => "cos",
            (Pow, F64 | I64 | Bool) => "pow",
            (Math(m), dtype) => m.c_symbol(dtype).unwrap_or(m.name()),
            // Not in the C library: egrad's runtime library's
            // (`runtime_symbols`).
            (Gemm, F32) => "egrad_sgemm",
            (Gemm, F64 | I64 | Bool) => "egrad_dgemm",
            (RowDot, F32) => "egrad_srowdot",
            (RowDot, F64 | I64 | Bool) => "egrad_drowdot",
            (ColSum, F32) => "egrad_scolsum",
            (ColSum, F64 | I64 | Bool) => "egrad_dcolsum",
            (Kernel, _) => "egrad_kernel_call",
            (Block, F32) => "egrad_vmath_block_f32",
            (Block, F64 | I64 | Bool) => "egrad_vmath_block_f64",
        }
    }

    fn symbol(self, dtype: DType) -> (&'static str, *const u8) {
        use DType::*;
        use Libm::*;
        match (self, dtype) {
            (Sin, F32) => ("egrad_sin_f32", egrad_sin_f32 as *const u8),
            (Cos, F32) => ("egrad_cos_f32", egrad_cos_f32 as *const u8),
            (Sin, F64 | I64 | Bool) => ("egrad_sin_f64", egrad_sin_f64 as *const u8),
            (Cos, F64 | I64 | Bool) => ("egrad_cos_f64", egrad_cos_f64 as *const u8),
            (Math(m), F32) => (
                m.c_symbol(F32).unwrap_or(m.name()),
                m.c_fns().1 as *const u8,
            ),
            (Math(m), F64 | I64 | Bool) => (
                m.c_symbol(F64).unwrap_or(m.name()),
                m.c_fns().0 as *const u8,
            ),
            (Pow, F32) => ("egrad_pow_f32", egrad_pow_f32 as *const u8),
            (Pow, F64 | I64 | Bool) => ("egrad_pow_f64", egrad_pow_f64 as *const u8),
            (Gemm, F32) => ("egrad_sgemm", crate::gemm::egrad_sgemm as *const u8),
            (Gemm, F64 | I64 | Bool) => ("egrad_dgemm", crate::gemm::egrad_dgemm as *const u8),
            (RowDot, F32) => ("egrad_srowdot", crate::gemv::egrad_srowdot as *const u8),
            (RowDot, F64 | I64 | Bool) => {
                ("egrad_drowdot", crate::gemv::egrad_drowdot as *const u8)
            }
            (ColSum, F32) => ("egrad_scolsum", crate::gemv::egrad_scolsum as *const u8),
            (ColSum, F64 | I64 | Bool) => {
                ("egrad_dcolsum", crate::gemv::egrad_dcolsum as *const u8)
            }
            (Kernel, _) => (
                "egrad_kernel_call",
                crate::ops::kernels::egrad_kernel_call as *const u8,
            ),
            (Block, F32) => (
                "egrad_vmath_block_f32",
                crate::vmath::egrad_vmath_block_f32 as *const u8,
            ),
            (Block, F64 | I64 | Bool) => (
                "egrad_vmath_block_f64",
                crate::vmath::egrad_vmath_block_f64 as *const u8,
            ),
        }
    }
}

pub(crate) fn cl_err(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::internal(format!("cranelift: {what}: {e:?}"))
}

/// The host's ISA with the backend's settings; `pic` for code linked into
/// an executable by the system linker (an object file), not for the JIT.
pub(crate) fn host_isa(verify: bool, pic: bool) -> Result<OwnedTargetIsa, Error> {
    let mut flags = settings::builder();
    for (k, v) in [
        ("opt_level", "speed"),
        ("use_colocated_libcalls", "false"),
        ("is_pic", if pic { "true" } else { "false" }),
        ("enable_verifier", if verify { "true" } else { "false" }),
    ] {
        flags.set(k, v).map_err(|e| cl_err(k, e))?;
    }
    let isa_builder = cranelift_native::builder().map_err(|e| cl_err("host ISA", e))?;
    isa_builder
        .finish(settings::Flags::new(flags))
        .map_err(|e| cl_err("ISA", e))
}

/// A JIT module for the host with the libm symbols registered.
fn new_module(verify: bool) -> Result<JITModule, Error> {
    let isa = host_isa(verify, false)?;
    let mut jb = JITBuilder::with_isa(isa, default_libcall_names());
    let clib = Math::ALL
        .iter()
        .filter(|m| matches!(m.native(), Native::CLib { .. }))
        .map(|&m| Libm::Math(m));
    for which in LIBM.into_iter().chain(clib) {
        for dtype in DTYPES {
            let (name, ptr) = which.symbol(dtype);
            jb.symbol(name, ptr);
        }
    }
    Ok(JITModule::new(jb))
}

/// The lowered functions, declared in `module` but not yet defined: the
/// entry, then the loop bodies and VJPs it calls (in declaration order).
pub(crate) struct Lowered {
    pub id: FuncId,
    pub funcs: Vec<(FuncId, Context)>,
    pub plan: Plan,
}

/// The functions native code may call that are egrad's runtime library's,
/// not the C library's, by their C names: what an object file that calls
/// them links (`libegrad_runtime.a`, whose exports are `src/runtime.rs`).
pub fn runtime_symbols() -> Vec<&'static str> {
    let math = Math::ALL
        .iter()
        .filter(|m| !m.in_c_library())
        .map(|&m| Libm::Math(m));
    let mut v: Vec<&'static str> = LIBM
        .into_iter()
        .filter(|l| !matches!(l, Libm::Sin | Libm::Cos | Libm::Pow))
        .chain(math)
        .flat_map(|l| DTYPES.map(|d| l.c_symbol(d)))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Which names the libm imports get: the JIT's registered wrappers, or the
/// C library's functions (an object file, linked with `-lm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LibmNames {
    Jit,
    C,
}

/// How the entry is declared in the module.
pub(crate) struct EntryDecl<'a> {
    /// The entry's symbol; its loop bodies and VJPs are named after it.
    pub name: &'a str,
    pub linkage: Linkage,
    pub libm: LibmNames,
}

const JIT_ENTRY: EntryDecl<'static> = EntryDecl {
    name: "egrad_entry",
    linkage: Linkage::Local,
    libm: LibmNames::Jit,
};

/// `fn(bufs: *const *mut u8, dims: *const i64)`: the entry's signature, and
/// every loop body's and VJP's.
fn abi_signature<M: Module>(module: &M) -> ir::Signature {
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(types::I64));
    sig.params.push(AbiParam::new(types::I64));
    sig
}

/// Declare `f` as `entry` in `module` and lower it (and the loop bodies and
/// VJPs it calls, local functions of the module) to CLIF; the caller
/// defines them.
pub(crate) fn lower<M: Module>(
    module: &mut M,
    f: &Function,
    keep: &[VarId],
    entry: &EntryDecl<'_>,
    opts: &BackendOptions,
) -> Result<Lowered, Error> {
    f.validate()
        .map_err(|e| Error::internal(format!("backend: invalid IR: {e}")))?;
    // A function with its own derivative rules is its value here.
    let plain;
    let f = if f.has_customs() {
        plain = f.without_customs();
        &plain
    } else {
        f
    };
    if module.target_config().pointer_type() != types::I64 {
        return Err(Error::internal("backend: only 64-bit hosts are supported"));
    }
    let kernels = Kernels {
        gemm: opts.gemm,
        wide: opts.wide,
        // The JIT's runs go through `bind` or `prepare`.
        checked: entry.libm == LibmNames::Jit,
    };
    let plan = Plan::new(f, keep, kernels)?;

    let sig = abi_signature(module);
    let id = module
        .declare_function(entry.name, entry.linkage, &sig)
        .map_err(|e| cl_err("declare", e))?;
    // The JIT declares every libm import up front, in a fixed order, so the
    // CLIF text is deterministic; an object file declares only those its
    // code calls (each an undefined symbol of the object).
    let mut imports: Vec<(Libm, DType, FuncId)> = Vec::new();
    if entry.libm == LibmNames::Jit {
        for which in LIBM {
            for dtype in DTYPES {
                let fid = declare_libm(module, which, dtype, entry.libm)?;
                imports.push((which, dtype, fid));
            }
        }
    }
    let mut funcs = Vec::new();
    let mut callees = Callees {
        names: entry.libm,
        entry: entry.name,
        libm: imports,
        kernels: Vec::new(),
    };
    let names = (id, entry.name);
    lower_function(module, f, &plan, names, opts, &mut callees, &mut funcs)?;
    funcs.sort_by_key(|(fid, _)| fid.as_u32());
    Ok(Lowered { id, funcs, plan })
}

/// Declare the import of `which` in `dtype` under the names `names`.
fn declare_libm<M: Module>(
    module: &mut M,
    which: Libm,
    dtype: DType,
    names: LibmNames,
) -> Result<FuncId, Error> {
    let t = match dtype {
        DType::F32 => types::F32,
        DType::F64 | DType::I64 | DType::Bool => types::F64,
    };
    let mut s = module.make_signature();
    if matches!(
        which,
        Libm::Gemm | Libm::RowDot | Libm::ColSum | Libm::Kernel | Libm::Block
    ) {
        // Sizes, pointers and strides; writes its result through `c`.
        for _ in 0..which.arity() {
            s.params.push(AbiParam::new(types::I64));
        }
    } else {
        for _ in 0..which.arity() {
            s.params.push(AbiParam::new(t));
        }
        s.returns.push(AbiParam::new(t));
    }
    let symbol = match names {
        LibmNames::Jit => which.symbol(dtype).0,
        LibmNames::C => which.c_symbol(dtype),
    };
    module
        .declare_function(symbol, Linkage::Import, &s)
        .map_err(|e| cl_err("declare import", e))
}

/// The functions the lowered code calls besides its loops' bodies and VJPs,
/// declared in the module as they are first needed.
struct Callees<'a> {
    names: LibmNames,
    /// The entry's symbol, which the kernels' names start with.
    entry: &'a str,
    libm: Vec<(Libm, DType, FuncId)>,
    /// egrad's vector math kernels, local functions of the module, each
    /// defined (pushed to the lowered functions) when declared.
    kernels: Vec<(VFn, ir::Type, FuncId)>,
}

impl Callees<'_> {
    fn libm<M: Module>(
        &mut self,
        module: &mut M,
        which: Libm,
        dtype: DType,
    ) -> Result<FuncId, Error> {
        if let Some(&(_, _, fid)) = self
            .libm
            .iter()
            .find(|(w, d, _)| *w == which && *d == dtype)
        {
            return Ok(fid);
        }
        let fid = declare_libm(module, which, dtype, self.names)?;
        self.libm.push((which, dtype, fid));
        Ok(fid)
    }

    /// Kernel `f` on `ty` as a function `fn(ty) -> ty` of the module.
    fn kernel<M: Module>(
        &mut self,
        module: &mut M,
        f: VFn,
        ty: ir::Type,
        out: &mut Vec<(FuncId, Context)>,
    ) -> Result<FuncId, Error> {
        if let Some(&(_, _, fid)) = self.kernels.iter().find(|(g, t, _)| *g == f && *t == ty) {
            return Ok(fid);
        }
        let mut sig = module.make_signature();
        sig.params.push(AbiParam::new(ty));
        sig.returns.push(AbiParam::new(ty));
        let name = format!("{}.{}.{ty}", self.entry, f.name());
        let fid = module
            .declare_function(&name, Linkage::Local, &sig)
            .map_err(|e| cl_err("declare", e))?;
        self.kernels.push((f, ty, fid));
        let mut ctx = module.make_context();
        ctx.func.signature = sig;
        ctx.func.name = UserFuncName::user(0, fid.as_u32());
        let fallback = match Libm::fallback(f) {
            Some(which) => {
                let dtype = if ty.lane_type() == types::F32 {
                    DType::F32
                } else {
                    DType::F64
                };
                let lid = self.libm(module, which, dtype)?;
                Some(module.declare_func_in_func(lid, &mut ctx.func))
            }
            None => None,
        };
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let block = b.create_block();
        b.append_block_params_for_function_params(block);
        b.switch_to_block(block);
        b.seal_block(block);
        let x = b.block_params(block)[0];
        let y = super::lower::emit_kernel(&mut b, ty, f, x, fallback).ok_or_else(|| {
            Error::internal(format!("backend: no `{}` kernel for {ty}", f.name()))
        })?;
        b.ins().return_(&[y]);
        b.finalize(module.target_config());
        out.push((fid, ctx));
        Ok(fid)
    }
}

/// Lower `f` (declared as `id`, named `name`, with the backend options
/// `opts`) and, first, the loop bodies
/// and VJPs its plan calls, each its own function with the entry's ABI
/// (declared after `f`, named after it). Pushes every lowered function to
/// `out`.
fn lower_function<M: Module>(
    module: &mut M,
    f: &Function,
    plan: &Plan,
    (id, name): (FuncId, &str),
    opts: &BackendOptions,
    callees: &mut Callees<'_>,
    out: &mut Vec<(FuncId, Context)>,
) -> Result<(), Error> {
    let sig = abi_signature(module);
    let mut loop_ids: Vec<(Option<FuncId>, Option<FuncId>)> = Vec::with_capacity(plan.loops.len());
    for (l, lp) in plan.loops.iter().enumerate() {
        let lf = f
            .loops
            .get(l)
            .ok_or_else(|| Error::internal(format!("backend: there is no loop {l}")))?;
        let mut ids = (None, None);
        for (part, callee, func) in [
            ("body", &lp.body, Some(&lf.body)),
            ("vjp", &lp.vjp, lf.vjp.as_ref()),
        ] {
            let Some(callee) = callee else {
                continue;
            };
            let func = func.ok_or_else(|| {
                Error::internal(format!("backend: loop {l} has no {part} to compile"))
            })?;
            let cname = format!("{name}.loop{l}.{part}");
            let cid = module
                .declare_function(&cname, Linkage::Local, &sig)
                .map_err(|e| cl_err("declare", e))?;
            lower_function(
                module,
                func,
                &callee.plan,
                (cid, &cname),
                opts,
                callees,
                out,
            )?;
            if part == "body" {
                ids.0 = Some(cid);
            } else {
                ids.1 = Some(cid);
            }
        }
        loop_ids.push(ids);
    }

    let defs = f.definitions();
    let f = (f, defs.as_slice());
    if plan.parts.len() == 1 {
        let ctx = lower_part(module, f, plan, id, 0, &loop_ids, opts, callees, out)?;
        out.push((id, ctx));
        return Ok(());
    }
    // A long function: its parts, each its own native function, and an
    // entry that calls them in turn (see `Plan::parts`).
    let mut part_ids = Vec::with_capacity(plan.parts.len());
    for k in 0..plan.parts.len() {
        let pname = format!("{name}.part{k}");
        let pid = module
            .declare_function(&pname, Linkage::Local, &sig)
            .map_err(|e| cl_err("declare", e))?;
        let ctx = lower_part(module, f, plan, pid, k, &loop_ids, opts, callees, out)?;
        out.push((pid, ctx));
        part_ids.push(pid);
    }
    let mut ctx = module.make_context();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    let refs: Vec<FuncRef> = part_ids
        .iter()
        .map(|&p| module.declare_func_in_func(p, &mut ctx.func))
        .collect();
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    for r in refs {
        b.ins().call(r, &params);
    }
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(module.target_config());
    out.push((id, ctx));
    Ok(())
}

/// Lower part `part` of `f` (all of it when its plan has one part; `defs`
/// its statements' definitions) as the function declared as `id`; the loop bodies and VJPs it calls are
/// `loop_ids`. Vector math kernels it compiles go to `out`.
#[allow(clippy::too_many_arguments)]
fn lower_part<M: Module>(
    module: &mut M,
    (f, defs): (&Function, &[Option<usize>]),
    plan: &Plan,
    id: FuncId,
    part: usize,
    loop_ids: &[(Option<FuncId>, Option<FuncId>)],
    opts: &BackendOptions,
    callees: &mut Callees<'_>,
    out: &mut Vec<(FuncId, Context)>,
) -> Result<Context, Error> {
    let mut ctx = module.make_context();
    ctx.func.signature = abi_signature(module);
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    let loop_refs: Vec<LoopRefs> = loop_ids
        .iter()
        .map(|&(body, vjp)| LoopRefs {
            body: body.map(|c| module.declare_func_in_func(c, &mut ctx.func)),
            vjp: vjp.map(|c| module.declare_func_in_func(c, &mut ctx.func)),
        })
        .collect();
    let mut fctx = FunctionBuilderContext::new();
    let target = module.target_config();
    let mut failed = None;
    let mut kernels = Vec::new();
    {
        let mut import = |func: &mut ir::Function, callee: Import| -> FuncRef {
            let fid = match callee {
                Import::Libm(which, dtype) => callees.libm(module, which, dtype),
                Import::Kernel(f, ty) => callees.kernel(module, f, ty, &mut kernels),
            };
            let fid = fid.unwrap_or_else(|e| {
                // Reported below; the function is never defined.
                failed = Some(e);
                id
            });
            module.declare_func_in_func(fid, func)
        };
        let b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let b = Translator::new(f, defs, plan, b, &mut import, loop_refs, *opts)
            .translate_function(part)?;
        b.finalize(target);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    out.append(&mut kernels);
    Ok(ctx)
}

/// The CLIF of `f` before Cranelift's optimisations (deterministic).
pub fn clif_text(f: &Function) -> Result<String, Error> {
    clif_text_with(f, &BackendOptions::default())
}

/// [`clif_text`] with other backend options.
pub fn clif_text_with(f: &Function, opts: &BackendOptions) -> Result<String, Error> {
    let mut module = new_module(false)?;
    let lowered = lower(&mut module, f, &[], &JIT_ENTRY, opts)?;
    // The entry, then the loop bodies and VJPs it calls.
    Ok(lowered
        .funcs
        .iter()
        .map(|(_, ctx)| ctx.func.display().to_string())
        .collect::<Vec<_>>()
        .join("\n"))
}

pub(super) type Entry = unsafe extern "C" fn(*const *mut u8, *mut i64);

/// The JIT module that owns a compiled function's code and data memory.
/// Nothing reads or writes it once the code is finalized; only
/// `CompiledFunction`'s `drop` takes it out, to free the memory.
struct OwnedModule(Option<JITModule>);

// SAFETY: `JITModule` is neither `Send` nor `Sync` because it holds raw
// pointers to its memory and interior-mutable symbol tables. After
// finalization no code touches the module through a shared reference (no
// method of `CompiledFunction` reads `module`), so sharing `&OwnedModule`
// between threads shares nothing; the finalized code it backs is immutable
// and reentrant. Moving it to another thread and freeing it there (`drop`,
// with exclusive access) only unmaps plain memory, which has no thread
// affinity.
unsafe impl Send for OwnedModule {}
// SAFETY: see above: nothing is accessed through `&OwnedModule`.
unsafe impl Sync for OwnedModule {}

/// A natively compiled function. Owns its JIT memory (freed on drop).
///
/// `Send + Sync`: the finalized code is immutable and reentrant (it writes
/// only the buffers and scratch of its call), so threads may call one
/// compiled function at once, each with its own [`Workspace`](super::Workspace)
/// or through [`CompiledFunction::call`].
pub struct CompiledFunction {
    /// `Some` until dropped; the entry pointer is valid only while it lives.
    module: OwnedModule,
    /// This function's number, never given to another in the process: the
    /// owner of its [`Workspace`](super::Workspace)s.
    pub(super) number: u64,
    pub(super) entry: Entry,
    pub(super) func: Function,
    pub(super) plan: Plan,
}

/// Compile `f` to native code.
pub fn compile(f: &Function, opts: &BackendOptions) -> Result<CompiledFunction, Error> {
    compile_keeping(f, opts, &[])
}

/// [`compile`], materialising the values of `keep` (used more than once)
/// in memory rather than recomputing them in each consumer: how a gradient
/// program honours the residuals its optimizer chose to store.
pub fn compile_keeping(
    f: &Function,
    opts: &BackendOptions,
    keep: &[VarId],
) -> Result<CompiledFunction, Error> {
    let mut module = new_module(opts.verify)?;
    let Lowered {
        id,
        mut funcs,
        plan,
    } = match lower(&mut module, f, keep, &JIT_ENTRY, opts) {
        Ok(l) => l,
        Err(e) => {
            // SAFETY: nothing compiled in this module is referenced anywhere.
            unsafe { module.free_memory() };
            return Err(e);
        }
    };
    let defined = funcs
        .iter_mut()
        .try_for_each(|(fid, ctx)| {
            module
                .define_function(*fid, ctx)
                .map_err(|e| cl_err("compile", e))
        })
        .and_then(|()| {
            module
                .finalize_definitions()
                .map_err(|e| cl_err("finalize", e))
        });
    if let Err(e) = defined {
        // SAFETY: no pointer into this module escaped.
        unsafe { module.free_memory() };
        return Err(e);
    }
    let code = module.get_finalized_function(id);
    // SAFETY: the function was declared with the signature
    // (pointer, pointer) -> () in the ISA's default (C) calling convention.
    let entry = unsafe { std::mem::transmute::<*const u8, Entry>(code) };
    /// The next [`CompiledFunction::number`].
    static NUMBERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    Ok(CompiledFunction {
        module: OwnedModule(Some(module)),
        number: NUMBERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        entry,
        func: f.clone(),
        plan,
    })
}

/// The failure the native code recorded in the status slots at the start
/// of `dims` (see [`STATUS_SLOTS`]), if any.
pub(super) fn check_status(dims: &[i64]) -> Result<(), ArgError> {
    match dims {
        [site, k, n, ..] if *site != 0 => Err(ArgError::out_of_range(*site as u64 - 1, *k, *n)),
        _ => Ok(()),
    }
}

/// `v` (all zeros) with every page of its memory written once, so that
/// the system maps them now (see [`NativeBuf::zeros`]). The writes are
/// volatile: storing a zero over a zero would otherwise be dropped.
fn touched<T: Copy + Default>(mut v: Vec<T>) -> Vec<T> {
    const PAGE: usize = 4096;
    let step = (PAGE / std::mem::size_of::<T>().max(1)).max(1);
    let p = v.as_mut_ptr();
    for i in (0..v.len()).step_by(step) {
        // SAFETY: `i < v.len()`, so `p.add(i)` is in the allocation.
        unsafe { std::ptr::write_volatile(p.add(i), T::default()) };
    }
    v
}

/// A buffer in the dtype's native layout.
pub(super) enum NativeBuf {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
}

impl NativeBuf {
    fn from_value(v: &Value) -> NativeBuf {
        match v.dtype {
            DType::F32 => NativeBuf::F32(v.data.iter().map(|&x| x as f32).collect()),
            DType::F64 => NativeBuf::F64(v.data.clone()),
            DType::I64 | DType::Bool => NativeBuf::I64(v.data.iter().map(|&x| x as i64).collect()),
        }
    }

    /// `n` zeros, their pages already mapped: a large zeroed allocation is
    /// mapped lazily by the system, and the first write to each page
    /// faults (about a microsecond each here), so a buffer first written
    /// by the native code would make its first run slower than the next
    /// by that much. Allocating is `prepare`'s part, so the pages are
    /// touched here.
    pub(super) fn zeros(dtype: DType, n: usize) -> NativeBuf {
        match dtype {
            DType::F32 => NativeBuf::F32(touched(vec![0.0; n])),
            DType::F64 => NativeBuf::F64(touched(vec![0.0; n])),
            DType::I64 | DType::Bool => NativeBuf::I64(touched(vec![0; n])),
        }
    }

    pub(super) fn as_mut_ptr(&mut self) -> *mut u8 {
        match self {
            NativeBuf::F32(v) => v.as_mut_ptr().cast(),
            NativeBuf::F64(v) => v.as_mut_ptr().cast(),
            NativeBuf::I64(v) => v.as_mut_ptr().cast(),
        }
    }

    fn into_f64(self) -> Vec<f64> {
        match self {
            NativeBuf::F32(v) => v.into_iter().map(|x| x as f64).collect(),
            NativeBuf::F64(v) => v,
            NativeBuf::I64(v) => v.into_iter().map(|x| x as f64).collect(),
        }
    }
}

impl CompiledFunction {
    /// Run the native code. Arguments are checked (count, dtype, rank,
    /// lengths) before any native code runs.
    pub fn call(&self, args: &[&Value]) -> Result<Vec<Value>, ArgError> {
        let mut p = self.prepare(args)?;
        p.run()?;
        Ok(p.into_outputs())
    }

    /// Check the arguments, convert them to native buffers and allocate the
    /// outputs and scratch space once; [`Prepared::run`] then runs the
    /// native code on those buffers as often as asked, without allocating
    /// (what benchmarks time).
    pub fn prepare(&self, args: &[&Value]) -> Result<Prepared<'_>, ArgError> {
        let f = &self.func;
        let dims = bind_args(f, args)?;
        let too_big = |what: &str| {
            ArgError::too_large(format!("`{}`: the {what} is too large to allocate", f.name))
        };
        let mut dim_vals = vec![0; STATUS_SLOTS];
        for p in &f.size_params {
            let d = dims.get(p).copied().unwrap_or(0);
            dim_vals.push(i64::try_from(d).map_err(|_| too_big("size parameter"))?);
        }
        let sized = |ty: &crate::types::Type| -> Result<(Vec<usize>, usize), ArgError> {
            let shape = concrete_shape(ty, &dims);
            let n = shape
                .iter()
                .try_fold(1usize, |a, &k| a.checked_mul(k))
                .filter(|n| {
                    n.checked_mul(ty.dtype.bytes())
                        .is_some_and(|b| b <= isize::MAX as usize)
                })
                .ok_or_else(|| too_big("result"))?;
            Ok((shape, n))
        };

        // Everything this call allocates, checked against the memory
        // limit before anything is: the arguments' native copies, the
        // results and the scratch buffers.
        let mut total: Option<u64> = Some(0);
        for a in args {
            total = total.and_then(|t| t.checked_add(memory::bytes_of(a.len(), a.dtype.bytes())?));
        }
        for r in &f.rets {
            let ty = f.ty(*r);
            let (_, n) = sized(ty)?;
            total = total.and_then(|t| t.checked_add(memory::bytes_of(n, ty.dtype.bytes())?));
        }
        // Scratch of more bytes than a `u64` counts: the memory limit's
        // own message, below.
        for ty in &self.plan.scratch {
            let n = sized(ty).ok().map(|(_, n)| n);
            total = total.and_then(|t| t.checked_add(memory::bytes_of(n?, ty.dtype.bytes())?));
        }
        memory::check(total, &format!("running `{}`", f.name)).map_err(ArgError::too_large)?;
        self.plan
            .work
            .check(&dims, || format!("running `{}`", f.name))
            .map_err(ArgError::too_large)?;
        self.plan
            .check_elements(&f.name, &dims)
            .map_err(ArgError::too_large)?;
        let mut bufs: Vec<NativeBuf> = Vec::with_capacity(self.plan.n_buffers());
        for a in args {
            bufs.push(NativeBuf::from_value(a));
        }
        let mut out_shapes = Vec::with_capacity(f.rets.len());
        for r in &f.rets {
            let ty = f.ty(*r);
            let (shape, n) = sized(ty)?;
            bufs.push(NativeBuf::zeros(ty.dtype, n));
            out_shapes.push((ty.dtype, shape));
        }
        let mut scratch_bytes = 0;
        for ty in &self.plan.scratch {
            let (_, n) = sized(ty)?;
            scratch_bytes += n * ty.dtype.bytes();
            bufs.push(NativeBuf::zeros(ty.dtype, n));
        }
        let ptrs: Vec<*mut u8> = bufs.iter_mut().map(NativeBuf::as_mut_ptr).collect();
        Ok(Prepared {
            scratch_bytes,
            owner: self,
            bufs,
            ptrs,
            dim_vals,
            out_shapes,
        })
    }

    /// The IR function this was compiled from.
    pub fn function(&self) -> &Function {
        &self.func
    }
}

/// A compiled function with its buffers bound ([`CompiledFunction::prepare`]).
pub struct Prepared<'a> {
    owner: &'a CompiledFunction,
    /// One buffer per input, output and scratch slot; `ptrs` points into
    /// them (a `Vec`'s heap buffer does not move when the `Vec` does).
    bufs: Vec<NativeBuf>,
    ptrs: Vec<*mut u8>,
    dim_vals: Vec<i64>,
    out_shapes: Vec<(DType, Vec<usize>)>,
    scratch_bytes: usize,
}

impl Prepared<'_> {
    /// Bytes of the intermediate arrays the native code materialises for
    /// these arguments (inputs and outputs not counted): what storing
    /// residuals and unfused values costs in memory, with the state buffers
    /// of loops and the scratch of the loop bodies and VJPs they call.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch_bytes
    }

    /// Run the native code once on the bound buffers (the outputs are
    /// overwritten; the inputs are only read). An index found outside its
    /// array at run time is an error (what was computed is then
    /// meaningless; nothing outside any buffer was read or written).
    pub fn run(&mut self) -> Result<(), ArgError> {
        self.dim_vals[..STATUS_SLOTS].fill(0);
        // SAFETY: the module is alive (borrowed from its owner); `ptrs`
        // holds one buffer per input, output and scratch slot, each sized
        // from the bound dims, and `dim_vals` the status slots then one
        // value per size parameter, which is exactly what the code indexes
        // (loops run over 0..len only, run-time indices are checked). The
        // buffers live as long as `self`.
        unsafe {
            (self.owner.entry)(
                self.ptrs.as_ptr(),
                self.dim_vals.as_mut_ptr().add(STATUS_SLOTS),
            )
        };
        check_status(&self.dim_vals)
    }

    /// The function this runs.
    pub fn function(&self) -> &Function {
        &self.owner.func
    }

    /// The outputs of the last run.
    pub fn into_outputs(self) -> Vec<Value> {
        let n_inputs = self.owner.plan.n_inputs;
        let Prepared {
            bufs, out_shapes, ..
        } = self;
        let outs = bufs.into_iter().skip(n_inputs);
        out_shapes
            .into_iter()
            .zip(outs)
            .map(|((dtype, shape), buf)| Value {
                dtype,
                shape,
                data: buf.into_f64(),
            })
            .collect()
    }
}

impl Drop for CompiledFunction {
    fn drop(&mut self) {
        if let Some(m) = self.module.0.take() {
            // SAFETY: `entry` points into this module's memory and is never
            // called again: `self` is being dropped.
            unsafe { m.free_memory() };
        }
    }
}

impl std::fmt::Debug for CompiledFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledFunction")
            .field("function", &self.func.name)
            .finish_non_exhaustive()
    }
}
