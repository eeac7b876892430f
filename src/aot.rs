//! Ahead-of-time export (`egrad build`): an object file with native entry
//! points and a C header that declares them, documents every argument and
//! the residual layout, and wraps each entry in a `static inline` function
//! that builds the backend's buffer table and dims array (what
//! [`CompiledFunction::prepare`](crate::backend::CompiledFunction::prepare)
//! builds for the JIT).
//!
//! For a gradient (a `@grad` function, or a scalar function differentiated
//! with respect to some parameters) the object holds three entries compiled
//! from the optimized value-and-gradient program and its residual plan
//! ([`split`]):
//!
//! * `F_value_and_grad`: inputs → value, gradients (exactly the program the
//!   JIT runs, with the stored residuals kept in memory);
//! * `F_forward`: inputs → value, and the stored residuals written into one
//!   residual buffer at the plan's offsets (8-byte aligned, program order);
//! * `F_pullback`: the inputs the pullback reads in place, the residual
//!   buffer and the output cotangent `ct` → gradients. The optimized program
//!   is seeded with cotangent 1 (and the optimizer may have folded that 1
//!   away), so the pullback computes the gradients for cotangent 1 and
//!   multiplies each by `ct` at the end: with `ct = 1` this is bit for bit
//!   the gradients of `F_value_and_grad`; for another `ct` it is the same
//!   linear map up to one rounding per element.
//!
//! For any other function the object holds one entry, `F`.

use crate::backend::{self, BackendOptions, EntryLayout, ObjectCode, ObjectEntry};
use crate::error::span::Span;
use crate::error::{Error, Result};
use crate::ir::interp::is_count;
use crate::ir::{Function, Param, Stmt, VarId, VarInfo};
use crate::ops::{kernels, Op};
use crate::pipeline::{optimize_gradient, optimize_ir, GradProgram, Options};
use crate::program::Program;
use crate::residuals::{cut, Cut};
use crate::types::size::Size;
use crate::types::{DType, Dim, Type};
use std::collections::HashSet;
use std::fmt::Write as _;

#[path = "aot/residuals.rs"]
mod residuals;

/// Split `g`'s optimized value-and-gradient program into forward and
/// pullback along `g.residuals` (`residuals::cut`),
/// the pullback taking the cotangent `ct` as its last parameter and scaling
/// each gradient by it.
pub fn split(g: &GradProgram) -> Result<Cut> {
    let vg = g.value_and_grad_ir();
    let internal = |m: String| Error::internal(format!("aot: {m}"));
    let Cut {
        mut forward,
        mut pullback,
        inputs,
        stored,
    } = cut(vg, &g.residuals).map_err(|e| internal(e.to_string()))?;
    forward.name = format!("{}_forward", g.name);
    pullback.name = format!("{}_pullback", g.name);
    let value = vg.rets[0];
    // The pullback scales each gradient by the cotangent.
    let grads = std::mem::take(&mut pullback.rets);
    let dtype = vg.ty(value).dtype;
    let mut names: HashSet<String> = vg.vars.iter().map(|v| v.name.clone()).collect();
    let mut fresh = |f: &mut Function, hint: &str, ty: Type| -> VarId {
        let mut name = hint.to_string();
        let mut k = 1;
        while names.contains(&name) {
            name = format!("{hint}.{k}");
            k += 1;
        }
        names.insert(name.clone());
        f.vars.push(VarInfo { name, ty });
        VarId((f.vars.len() - 1) as u32)
    };
    let ct = fresh(&mut pullback, "ct", Type::scalar(dtype));
    pullback.params.push(Param {
        var: ct,
        span: Span::default(),
    });
    for (k, &gv) in grads.iter().enumerate() {
        let ty = vg.ty(gv).clone();
        if ty.dtype != dtype {
            return Err(Error::Usage(format!(
                "`{}`: the gradient for `{}` is {} but the value is {dtype}; the pullback's cotangent cannot scale both (export the function without mixing element types)",
                g.name, g.wrt.get(k).map(String::as_str).unwrap_or("?"), ty.dtype
            )));
        }
        let factor = if ty.is_scalar() {
            ct
        } else {
            let b = fresh(&mut pullback, "ct.bcast", ty.clone());
            pullback.stmts.push(Stmt {
                var: b,
                op: Op::Bcast,
                args: [ct].into_iter().collect(),
            });
            b
        };
        let out = fresh(&mut pullback, "grad.ct", ty);
        pullback.stmts.push(Stmt {
            var: out,
            op: Op::Mul,
            args: [gv, factor].into_iter().collect(),
        });
        pullback.rets.push(out);
    }
    for f in [&forward, &pullback] {
        f.validate()
            .map_err(|e| internal(format!("split: invalid IR: {e}")))?;
    }
    Ok(Cut {
        forward,
        pullback,
        inputs,
        stored,
    })
}

/// What `egrad build` exports.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// The function.
    pub function: String,
    /// Export the gradient (forward, pullback, value_and_grad) of a plain
    /// scalar function; a `@grad` function always is. The parameters come
    /// from [`Options::wrt`] (default all).
    pub gradient: bool,
    /// Optimizer options (the function in them is ignored).
    pub options: Options,
    /// The source file, for the header's first comment.
    pub source: String,
    /// Compile against egrad's runtime library even where the object could
    /// do without: its matrix kernel and whole-array math kernels, as the
    /// JIT runs them (faster, the same bits). A function that calls a
    /// builtin kernel (`cholesky`, ...) or egrad's own math (`digamma`)
    /// always does.
    pub runtime: bool,
}

/// An object file and its C header.
#[derive(Clone, Debug)]
pub struct Built {
    /// The object file's bytes (ELF on Linux), to link with `-lm`.
    pub object: Vec<u8>,
    /// The C header declaring the entry points.
    pub header: String,
    /// The exported symbols (the raw entries).
    pub symbols: Vec<String>,
    /// The functions of egrad's runtime library the object calls (sorted);
    /// when there are any, the C program links `libegrad_runtime.a` after
    /// the object (the header says how).
    pub runtime_calls: Vec<String>,
}

/// Compile `opts.function` of `program` ahead of time.
pub fn build(program: &Program, opts: &BuildOptions) -> Result<Built> {
    let name = &opts.function;
    if !backend::is_c_identifier(name) {
        return Err(Error::Usage(format!(
            "`{name}` is not a C identifier, so it cannot name the exported symbols"
        )));
    }
    let calls_runtime = match program.ir(name) {
        Ok(f) => runtime_needed(name, f)?,
        Err(_) => false,
    };
    let runtime = opts.runtime || calls_runtime;
    let gradient = opts.gradient || program.grad_spec(name).is_some();
    // The optimizer's backend options (without the runtime library, the
    // object runs the loop nest and inline math: the same bits).
    let bopts = BackendOptions {
        verify: BackendOptions::default().verify,
        ..opts.options.backend
    };
    if gradient {
        if program.grad_spec(name).is_none() {
            // A clear error for a function that does not exist.
            program.ir(name)?;
        }
        let g = optimize_gradient(program, &opts.options.clone().function(name.clone()))?;
        let sp = split(&g)?;
        let stored_vars = g.stored();
        let syms = [
            format!("{name}_value_and_grad_raw"),
            format!("{name}_forward_raw"),
            format!("{name}_pullback_raw"),
        ];
        let entries = [
            ObjectEntry {
                symbol: &syms[0],
                func: g.value_and_grad_ir(),
                keep: &stored_vars,
            },
            ObjectEntry {
                symbol: &syms[1],
                func: &sp.forward,
                keep: &[],
            },
            ObjectEntry {
                symbol: &syms[2],
                func: &sp.pullback,
                keep: &[],
            },
        ];
        unchecked(name, &entries)?;
        let runtime = runtime || own_functions(&entries);
        let code = backend::compile_object(&entries, &bopts, runtime)?;
        let header = gradient_header(opts, &g, &sp, &code)?;
        Ok(Built {
            object: code.bytes,
            header,
            symbols: syms.to_vec(),
            runtime_calls: code.runtime_calls,
        })
    } else {
        let f = program.ir(name)?.clone();
        let f = optimize_ir(&f, &opts.options)?.after;
        let sym = format!("{name}_raw");
        let entries = [ObjectEntry {
            symbol: &sym,
            func: &f,
            keep: &[],
        }];
        unchecked(name, &entries)?;
        let runtime = runtime || own_functions(&entries);
        let code = backend::compile_object(&entries, &bopts, runtime)?;
        let header = function_header(opts, &f, &code)?;
        Ok(Built {
            object: code.bytes,
            header,
            symbols: vec![sym],
            runtime_calls: code.runtime_calls,
        })
    }
}

/// Does function `f` (before optimization) call egrad's runtime library
/// for certain: a builtin kernel (`cholesky`, ...)? A native kernel a
/// program registered lives in that process only: an error.
fn runtime_needed(name: &str, f: &Function) -> Result<bool> {
    let kernels = |f: &Function| -> Vec<u32> {
        f.stmts
            .iter()
            .filter_map(|s| match s.op {
                Op::Kernel(k, _) => Some(k),
                _ => None,
            })
            .collect()
    };
    let all: Vec<u32> = kernels(f)
        .into_iter()
        .chain(f.loops.iter().flat_map(|l| kernels(&l.body)))
        .collect();
    if let Some(&k) = all.iter().find(|&&k| !kernels::is_builtin(k)) {
        let what = kernels::kernel(k).map_or(String::new(), |k| format!(" `{}`", k.name));
        return Err(Error::Usage(format!(
            "`egrad build` cannot compile `{name}`: it calls the native kernel{what}, which lives in the process that registered it (use the library's JIT)"
        )));
    }
    Ok(!all.is_empty())
}

/// Do the `entries` (a gradient's included, where `lgamma`'s derivative
/// calls `digamma`) call a math function that is egrad's own (`digamma`,
/// `trigamma`, `tetragamma`), which the runtime library holds, not the C library?
fn own_functions(entries: &[ObjectEntry<'_>]) -> bool {
    let own = |f: &Function| {
        f.stmts
            .iter()
            .any(|s| matches!(s.op, Op::Math(m) if !m.in_c_library()))
    };
    entries
        .iter()
        .any(|e| own(e.func) || e.func.loops.iter().any(|l| own(&l.body)))
}

/// Native code reports an index out of range in status slots the JIT
/// provides before `dims`; an object file's C signature has none yet. So
/// every index the `entries` compute must provably lie inside (the states
/// a loop's gradient reads back from its tape do).
fn unchecked(name: &str, entries: &[ObjectEntry<'_>]) -> Result<()> {
    if entries.iter().all(|e| backend::checks_nothing(e.func)) {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "`egrad build` cannot compile `{name}` yet: it indexes with run-time values, whose range checks report through the JIT (use `egrad run`, or the library)"
    )))
}

const C_KEYWORDS: &[&str] = &[
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "true", "false", "NULL",
];

/// C names, unique within one header's wrappers (locals are `egrad_*`).
#[derive(Default)]
struct Namer {
    used: HashSet<String>,
}

impl Namer {
    fn name(&mut self, hint: &str) -> String {
        let mut base: String = hint
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if base.is_empty() || base.starts_with(|c: char| c.is_ascii_digit()) {
            base.insert(0, '_');
        }
        if C_KEYWORDS.contains(&base.as_str()) || base.starts_with("egrad_") {
            base.push('_');
        }
        let mut name = base.clone();
        let mut k = 2;
        while !self.used.insert(name.clone()) {
            name = format!("{base}_{k}");
            k += 1;
        }
        name
    }
}

fn c_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        // A bool is 0 or 1 (see `DType::Bool`).
        DType::I64 | DType::Bool => "int64_t",
    }
}

/// The size parameters of a header, with their C names.
struct Sizes {
    names: Vec<(String, String)>,
}

impl Sizes {
    fn c(&self, p: &str) -> &str {
        self.names
            .iter()
            .find(|(n, _)| n == p)
            .map(|(_, c)| c.as_str())
            .unwrap_or("0")
    }

    /// `int64_t N, int64_t M` (or nothing).
    fn params(&self) -> Vec<String> {
        self.names
            .iter()
            .map(|(_, c)| format!("int64_t {c}"))
            .collect()
    }

    /// `N, M`.
    fn args(&self) -> String {
        self.names
            .iter()
            .map(|(_, c)| c.clone())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A dimension as a signed C expression.
    fn dim(&self, d: &Dim) -> String {
        match d {
            Dim::Lit(k) => format!("INT64_C({k})"),
            Dim::Param(p) => self.c(p).to_string(),
            Dim::Sub(p, k) => format!("egrad_iadd({}, -INT64_C({k}))", self.c(p)),
            Dim::Rows(p, k) => format!(
                "(egrad_iadd({}, INT64_C({})) / INT64_C({k}) + INT64_C(1))",
                self.c(p),
                k.saturating_sub(1)
            ),
            Dim::Expr(s) => {
                // `2*N*M - N + 1` as saturating products and sums:
                // `egrad_iadd(egrad_iadd(egrad_imul(egrad_imul(INT64_C(2), N), M), egrad_imul(INT64_C(-1), N)), INT64_C(1))`.
                let mut out: Option<String> = None;
                for (c, ps) in s.terms() {
                    let mut ps = ps.iter().map(|p| self.c(p).to_string());
                    let mut t = match (c, ps.next()) {
                        (1, Some(p)) => p,
                        (_, Some(p)) => format!("egrad_imul(INT64_C({c}), {p})"),
                        (_, None) => format!("INT64_C({c})"),
                    };
                    for p in ps {
                        t = format!("egrad_imul({t}, {p})");
                    }
                    out = Some(match out {
                        None => t,
                        Some(o) => format!("egrad_iadd({o}, {t})"),
                    });
                }
                out.unwrap_or_else(|| "INT64_C(0)".into())
            }
        }
    }

    /// The element count of `ty` as a `size_t` expression.
    fn count(&self, ty: &Type) -> String {
        if ty.is_scalar() {
            return "(size_t)1".into();
        }
        let mut it = ty
            .shape
            .iter()
            .map(|d| format!("egrad_extent({})", self.dim(d)));
        let first = it.next().unwrap_or_else(|| "(size_t)1".into());
        it.fold(first, |a, e| format!("egrad_mul({a}, {e})"))
    }

    /// The bytes of `ty`.
    fn bytes(&self, ty: &Type) -> String {
        format!(
            "egrad_mul({}, (size_t){})",
            self.count(ty),
            ty.dtype.bytes()
        )
    }

    /// The C parameter list: the sizes, then `params` (`void` if empty).
    fn signature(&self, params: &[String]) -> String {
        let mut all = self.params();
        all.extend(params.iter().cloned());
        if all.is_empty() {
            "void".into()
        } else {
            all.join(", ")
        }
    }
}

/// The size conditions of `f` (and its loops) as C expressions: what
/// [`bind_args`](crate::ir::interp::bind_args) checks about the sizes.
fn size_conditions(f: &Function, sizes: &Sizes, out: &mut Vec<String>) {
    for l in &f.loops {
        size_conditions(&l.body, sizes, out);
        if let Some(v) = &l.vjp {
            size_conditions(v, sizes, out);
        }
    }
    let mut push = |c: String| {
        if !out.contains(&c) {
            out.push(c);
        }
    };
    for v in &f.vars {
        for d in &v.ty.shape {
            match d {
                Dim::Sub(p, k) => push(format!("{} >= INT64_C({k})", sizes.c(p))),
                Dim::Expr(_) if d.may_be_negative() => push(format!("{} >= 0", sizes.dim(d))),
                _ => {}
            }
        }
    }
    for s in &f.stmts {
        let (Some(a), Some(k)) = (s.args.first(), s.op.payload()) else {
            continue;
        };
        let (rows, taken) = match s.op {
            Op::Slice(_) => (&f.ty(*a).shape, f.ty(s.var).shape.first()),
            Op::Index(_) => (&f.ty(*a).shape, Some(&Dim::Lit(1))),
            Op::Pad(_) => (&f.ty(s.var).shape, f.ty(*a).shape.first()),
            Op::Unindex(_) => (&f.ty(s.var).shape, Some(&Dim::Lit(1))),
            _ => continue,
        };
        // Rows that fit at every size (`N+1` rows from 1 of an `N`) need
        // no test (and C compilers warn about one that always holds).
        let fits = |h: &Dim, t: &Dim| {
            let k = Size::constant(i64::try_from(k).ok()?);
            h.size()?.sub(&t.size()?)?.sub(&k)
        };
        match (rows.first(), taken) {
            (Some(h), Some(t)) if fits(h, t).is_some_and(|d| !d.may_be_negative()) => {}
            (Some(h), Some(t)) => push(format!(
                "{} >= {} + INT64_C({k})",
                sizes.dim(h),
                sizes.dim(t)
            )),
            _ => push("0".into()),
        }
    }
}

/// One argument of a wrapper.
struct CArg {
    /// The C declaration (`const double *x`).
    decl: String,
    /// Its documentation line.
    doc: String,
}

fn input_arg(name: &str, ty: &Type, what: &str) -> CArg {
    let t = c_type(ty.dtype);
    if ty.is_scalar() {
        CArg {
            decl: format!("{t} {name}"),
            doc: format!("{name}: {ty}, {what}, by value"),
        }
    } else {
        CArg {
            decl: format!("const {t} *{name}"),
            doc: format!("{name}: {ty}, {what}, dense row-major"),
        }
    }
}

fn output_arg(name: &str, ty: &Type, what: &str) -> CArg {
    let t = c_type(ty.dtype);
    let how = if ty.is_scalar() {
        "one element written"
    } else {
        "dense row-major, written"
    };
    CArg {
        decl: format!("{t} *{name}"),
        doc: format!("{name}: {ty}, {what}, {how}"),
    }
}

/// An input's C argument (none for a run-time count, which is its size
/// argument `size`) and buffer-table slot.
fn push_input(
    name: &str,
    ty: &Type,
    what: &str,
    size: Option<&str>,
    args: &mut Vec<CArg>,
    slots: &mut Vec<String>,
    locals: &mut Vec<String>,
) {
    match size {
        Some(size) => {
            let local = format!("egrad_in_{name}");
            locals.push(format!("int64_t {local} = {size};"));
            slots.push(format!("(void *)&{local}"));
        }
        None => {
            args.push(input_arg(name, ty, what));
            slots.push(input_slot(name, ty, locals));
        }
    }
}

/// A buffer-table slot for an input: its pointer expression, and a local
/// copy for a scalar passed by value.
fn input_slot(name: &str, ty: &Type, locals: &mut Vec<String>) -> String {
    if ty.is_scalar() {
        let local = format!("egrad_in_{name}");
        locals.push(format!("{} {local} = {name};", c_type(ty.dtype)));
        format!("(void *)&{local}")
    } else {
        format!("(void *){name}")
    }
}

/// Emit the scratch-size function and the wrapper of one entry.
#[allow(clippy::too_many_arguments)]
fn emit_entry(
    h: &mut String,
    public: &str,
    check: &str,
    summary: &str,
    sizes: &Sizes,
    args: &[CArg],
    locals: &[String],
    slots: &[String],
    layout: &EntryLayout,
) -> Result<()> {
    let raw = format!("{public}_raw");
    if slots.len() != layout.n_inputs + layout.n_outputs {
        return Err(Error::internal(format!(
            "aot: `{public}` passes {} buffers but its code reads {} inputs and {} outputs",
            slots.len(),
            layout.n_inputs,
            layout.n_outputs
        )));
    }
    let nbufs = slots.len() + layout.scratch.len();
    let _ = writeln!(h, "/* ---- {public}: {summary} ---- */\n");
    let _ = writeln!(
        h,
        "/* The native entry (backend ABI): bufs[0..{}] the arguments, bufs[{}..{}] the results,\n * bufs[{}..{nbufs}] scratch buffers; dims the size parameters in order. */",
        layout.n_inputs,
        layout.n_inputs,
        slots.len(),
        slots.len()
    );
    let _ = writeln!(h, "void {raw}(void *const *bufs, const int64_t *dims);\n");
    let _ = writeln!(
        h,
        "/* Bytes of scratch memory `{public}` needs at these sizes ({} buffer(s), each 16-byte aligned\n * within the block). */",
        layout.scratch.len()
    );
    let _ = writeln!(
        h,
        "static inline size_t {public}_scratch_bytes({}) {{",
        sizes.signature(&[])
    );
    for (_, c) in &sizes.names {
        let _ = writeln!(h, "    (void){c};");
    }
    // One statement per buffer (a nested sum would nest as deep as there
    // are buffers, past what a C compiler parses).
    let _ = writeln!(h, "    size_t egrad_n = 0;");
    for ty in &layout.scratch {
        let _ = writeln!(
            h,
            "    egrad_n = egrad_add(egrad_n, EGRAD_ROUND16({}));",
            sizes.bytes(ty)
        );
    }
    let _ = writeln!(h, "    return egrad_n;\n}}\n");

    let _ = writeln!(h, "/* {public}: {summary}");
    for a in args {
        let _ = writeln!(h, " *   {}", a.doc);
    }
    let _ = writeln!(
        h,
        " *   scratch: {public}_scratch_bytes({}) bytes, 16-byte aligned (malloc's are); NULL if that is 0",
        sizes.args()
    );
    let _ = writeln!(
        h,
        " * Returns 0, or -1 without running anything when the sizes are out of range\n * ({check}). */"
    );
    let mut params: Vec<String> = args.iter().map(|a| a.decl.clone()).collect();
    params.push("void *scratch".into());
    let _ = writeln!(
        h,
        "static inline int {public}({}) {{",
        sizes.signature(&params)
    );
    let _ = writeln!(h, "    if ({check}({}) != 0) return -1;", sizes.args());
    let dims: Vec<&str> = sizes.names.iter().map(|(_, c)| c.as_str()).collect();
    let _ = writeln!(
        h,
        "    int64_t egrad_dims[{}] = {{{}}};",
        dims.len().max(1),
        if dims.is_empty() {
            "0".to_string()
        } else {
            dims.join(", ")
        }
    );
    for l in locals {
        let _ = writeln!(h, "    {l}");
    }
    let _ = writeln!(h, "    void *egrad_bufs[{}];", nbufs.max(1));
    for (k, s) in slots.iter().enumerate() {
        let _ = writeln!(h, "    egrad_bufs[{k}] = {s};");
    }
    if layout.scratch.is_empty() {
        let _ = writeln!(h, "    (void)scratch;");
    } else {
        let _ = writeln!(h, "    char *egrad_s = (char *)scratch;");
        let _ = writeln!(h, "    size_t egrad_off = 0;");
        for (k, ty) in layout.scratch.iter().enumerate() {
            let _ = writeln!(
                h,
                "    egrad_bufs[{}] = egrad_s + egrad_off; /* {ty} */",
                slots.len() + k
            );
            if k + 1 < layout.scratch.len() {
                let _ = writeln!(
                    h,
                    "    egrad_off = egrad_add(egrad_off, EGRAD_ROUND16({}));",
                    sizes.bytes(ty)
                );
            }
        }
    }
    let _ = writeln!(h, "    {raw}(egrad_bufs, egrad_dims);");
    let _ = writeln!(h, "    return 0;\n}}\n");
    Ok(())
}

fn header_start(opts: &BuildOptions, what: &str, code: &ObjectCode) -> String {
    let guard: String = format!("EGRAD_{}_H", opts.function.to_ascii_uppercase());
    let link = if code.runtime_calls.is_empty() {
        "Link the object file with the C math library: cc main.c OBJECT.o -lm".to_string()
    } else {
        format!(
            "The object calls egrad's runtime library ({}), which `egrad build` writes beside it:\n * cc main.c OBJECT.o libegrad_runtime.a -lm -lpthread -ldl",
            code.runtime_calls.join(", ")
        )
    };
    format!(
        "/* Generated by `egrad build` from {} (function `{}`): {what}.\n * Do not edit. {link} */\n#ifndef {guard}\n#define {guard}\n\n#include <stddef.h>\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n{SIZE_ARITHMETIC}#ifndef EGRAD_ROUND16\n#define EGRAD_ROUND16(n) egrad_round((n), (size_t)16)\n#endif\n\n",
        opts.source, opts.function
    )
}

/// The header's size arithmetic: sizes and byte counts saturate instead of
/// wrapping (or, for the signed extents, overflowing, which C leaves
/// undefined), so a size too large for this machine comes out as
/// `SIZE_MAX`, which `malloc` refuses, never as a small wrapped number.
const SIZE_ARITHMETIC: &str = "#ifndef EGRAD_SIZE_ARITHMETIC
#define EGRAD_SIZE_ARITHMETIC
/* Size arithmetic that saturates instead of wrapping: a byte count too large for a size_t
 * is SIZE_MAX (which malloc refuses), and an extent too large for an int64_t is INT64_MAX. */
static inline int64_t egrad_iadd(int64_t a, int64_t b) {
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}
static inline int64_t egrad_imul(int64_t a, int64_t b) {
    if (a == 0 || b == 0) return 0;
    if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
              : (b > 0 ? a < INT64_MIN / b : a < INT64_MAX / b))
        return (a > 0) == (b > 0) ? INT64_MAX : INT64_MIN;
    return a * b;
}
static inline size_t egrad_extent(int64_t n) {
    if (n < 0 || (uint64_t)n > (uint64_t)SIZE_MAX) return SIZE_MAX;
    return (size_t)n;
}
static inline size_t egrad_mul(size_t a, size_t b) {
    return (b != 0 && a > SIZE_MAX / b) ? SIZE_MAX : a * b;
}
static inline size_t egrad_add(size_t a, size_t b) {
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}
static inline size_t egrad_round(size_t n, size_t to) {
    return n > SIZE_MAX - (to - 1) ? SIZE_MAX : (n + (to - 1)) & ~(to - 1);
}
#endif

";

const HEADER_END: &str = "#ifdef __cplusplus\n}\n#endif\n\n#endif\n";

/// Emit `PREFIX_check_sizes`.
fn emit_check(h: &mut String, prefix: &str, sizes: &Sizes, funcs: &[&Function]) {
    let mut conds: Vec<String> = sizes
        .names
        .iter()
        .map(|(_, c)| format!("{c} >= 0"))
        .collect();
    for f in funcs {
        size_conditions(f, sizes, &mut conds);
    }
    let _ = writeln!(
        h,
        "/* 0 when the size parameters are valid (every length non-negative, every row a slice or\n * index reads in range), else -1. Every wrapper checks it first. The arrays passed must have\n * the documented shapes at these sizes: the native code trusts them. */"
    );
    let _ = writeln!(
        h,
        "static inline int {prefix}check_sizes({}) {{",
        sizes.signature(&[])
    );
    for (_, c) in &sizes.names {
        let _ = writeln!(h, "    (void){c};");
    }
    for c in conds {
        let _ = writeln!(h, "    if (!({c})) return -1;");
    }
    let _ = writeln!(h, "    return 0;\n}}\n");
}

fn sizes_of(f: &Function, namer: &mut Namer) -> Sizes {
    Sizes {
        names: f
            .size_params
            .iter()
            .map(|p| (p.clone(), namer.name(p)))
            .collect(),
    }
}

fn function_header(opts: &BuildOptions, f: &Function, code: &ObjectCode) -> Result<String> {
    let prefix = format!("{}_", opts.function);
    let layout = &code.layouts[0];
    let mut h = header_start(opts, "one entry point", code);
    let mut namer = Namer::default();
    let sizes = sizes_of(f, &mut namer);
    emit_check(&mut h, &prefix, &sizes, &[f]);
    let mut args = Vec::new();
    let mut locals = Vec::new();
    let mut slots = Vec::new();
    for p in &f.params {
        let (n, ty) = (f.var_name(p.var), f.ty(p.var));
        let c = namer.name(n);
        // A run-time count is given once, as its size argument.
        let size = is_count(f, p).then(|| sizes.c(n).to_string());
        push_input(
            &c,
            ty,
            "argument",
            size.as_deref(),
            &mut args,
            &mut slots,
            &mut locals,
        );
    }
    for (k, r) in f.rets.iter().enumerate() {
        let c = namer.name(&format!("out{k}"));
        args.push(output_arg(&c, f.ty(*r), &format!("result {k}")));
        slots.push(format!("(void *){c}"));
    }
    namer.name("scratch");
    emit_entry(
        &mut h,
        &opts.function,
        &format!("{prefix}check_sizes"),
        "the function",
        &sizes,
        &args,
        &locals,
        &slots,
        layout,
    )?;
    h.push_str(HEADER_END);
    Ok(h)
}

fn gradient_header(
    opts: &BuildOptions,
    g: &GradProgram,
    sp: &Cut,
    code: &ObjectCode,
) -> Result<String> {
    let layouts = &code.layouts;
    let vg = g.value_and_grad_ir();
    let name = &opts.function;
    let prefix = format!("{name}_");
    let mut h = header_start(
        opts,
        &format!(
            "value_and_grad, forward and pullback of `{}` with respect to {}",
            g.primal.name,
            g.wrt_text()
        ),
        code,
    );
    let mut namer = Namer::default();
    let sizes = sizes_of(vg, &mut namer);
    let inputs: Vec<(String, Type)> = vg
        .params
        .iter()
        .map(|p| (namer.name(vg.var_name(p.var)), vg.ty(p.var).clone()))
        .collect();
    // A run-time count is given once, as its size argument.
    let counts: Vec<Option<String>> = vg
        .params
        .iter()
        .map(|p| is_count(vg, p).then(|| sizes.c(vg.var_name(p.var)).to_string()))
        .collect();
    let value_ty = vg.ty(vg.rets[0]).clone();
    let value = namer.name("value");
    let grads: Vec<(String, Type)> = g
        .wrt
        .iter()
        .zip(&vg.rets[1..])
        .map(|(w, r)| (namer.name(&format!("grad_{w}")), vg.ty(*r).clone()))
        .collect();
    let residuals = namer.name("residuals");
    let ct = namer.name("ct");
    namer.name("scratch");

    emit_check(&mut h, &prefix, &sizes, &[vg, &sp.forward, &sp.pullback]);

    // The residual layout.
    let offsets = residuals::emit_layout(&mut h, &prefix, &sizes, g);

    // The inputs `ix` (every one for value_and_grad and forward), as an
    // entry takes them.
    let inputs_of = |ix: &[usize], what: &str| {
        let (mut args, mut slots, mut locals) = (Vec::new(), Vec::new(), Vec::new());
        for &i in ix {
            let (c, ty) = &inputs[i];
            let size = counts[i].as_deref();
            push_input(c, ty, what, size, &mut args, &mut slots, &mut locals);
        }
        (args, locals, slots)
    };
    let every: Vec<usize> = (0..inputs.len()).collect();
    // The stored residuals' slots (an entry with none ignores the buffer).
    let push_residuals = |slots: &mut Vec<String>, locals: &mut Vec<String>| {
        residuals::slots(&prefix, &sizes, (&residuals, offsets.len()), slots, locals)
    };
    // The gradients, as outputs.
    let push_grads = |args: &mut Vec<CArg>, slots: &mut Vec<String>, what: &str| {
        for ((c, ty), w) in grads.iter().zip(&g.wrt) {
            args.push(output_arg(c, ty, &format!("{what}the gradient for `{w}`")));
            slots.push(format!("(void *){c}"));
        }
    };

    // value_and_grad
    let (mut args, locals, mut slots) = inputs_of(&every, "argument");
    args.push(output_arg(&value, &value_ty, "the value"));
    slots.push(format!("(void *){value}"));
    push_grads(&mut args, &mut slots, "");
    emit_entry(
        &mut h,
        &format!("{prefix}value_and_grad"),
        &format!("{prefix}check_sizes"),
        "the value and the gradients",
        &sizes,
        &args,
        &locals,
        &slots,
        &layouts[0],
    )?;

    // forward
    let (mut args, mut locals, mut slots) = inputs_of(&every, "argument");
    args.push(output_arg(&value, &value_ty, "the value"));
    slots.push(format!("(void *){value}"));
    args.push(CArg {
        decl: format!("void *{residuals}"),
        doc: format!(
            "{residuals}: the residual buffer, {prefix}residual_bytes({}) bytes, 8-byte aligned, written",
            sizes.args()
        ),
    });
    push_residuals(&mut slots, &mut locals);
    emit_entry(
        &mut h,
        &format!("{prefix}forward"),
        &format!("{prefix}check_sizes"),
        "the value, and the residuals the pullback needs",
        &sizes,
        &args,
        &locals,
        &slots,
        &layouts[1],
    )?;

    // pullback
    let same = "argument (the same as given to the forward)";
    let (mut args, mut locals, mut slots) = inputs_of(&sp.inputs, same);
    args.push(CArg {
        decl: format!("const void *{residuals}"),
        doc: format!("{residuals}: the residual buffer {prefix}forward wrote, read"),
    });
    push_residuals(&mut slots, &mut locals);
    args.push(input_arg(&ct, &value_ty, "the cotangent of the value"));
    slots.push(input_slot(&ct, &value_ty, &mut locals));
    push_grads(&mut args, &mut slots, "ct times ");
    emit_entry(
        &mut h,
        &format!("{prefix}pullback"),
        &format!("{prefix}check_sizes"),
        "the gradients times the cotangent ct, from the residuals (ct = 1: the gradients of value_and_grad, bit for bit)",
        &sizes,
        &args,
        &locals,
        &slots,
        &layouts[2],
    )?;
    h.push_str(HEADER_END);
    Ok(h)
}
