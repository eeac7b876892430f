//! Ahead-of-time compilation: the same lowering as the JIT ([`super::jit`]),
//! into a [`cranelift_object::ObjectModule`] for the host, emitted as a
//! relocatable object file a C linker links.
//!
//! Each entry is an exported function with the backend's ABI
//! (`void entry(void *const *bufs, const int64_t *dims)`, see
//! [`crate::backend`]); the loop bodies and VJPs it calls are local
//! functions of the same object (named `ENTRY.loopL.body` /
//! `ENTRY.loopL.vjp`); libm calls are undefined symbols of the C library
//! (`sin`, `expf`, ...), resolved with `-lm`. With the runtime library
//! (`compile_object`'s `runtime`), the object also calls what the JIT
//! calls, by the names that library exports (`egrad_dgemm`, the builtin
//! kernels, ...; [`runtime_symbols`]). Code is position-independent
//! (it links into PIE executables and shared libraries) and compiled for the
//! host CPU, like the JIT's.

use super::jit::{cl_err, host_isa, lower, runtime_symbols, EntryDecl, LibmNames, Lowered};
use super::BackendOptions;
use crate::error::Error;
use crate::ir::{Function, VarId};
use crate::types::Type;
use cranelift_module::{default_libcall_names, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};

/// One exported entry point of an object file.
#[derive(Clone, Copy, Debug)]
pub struct ObjectEntry<'a> {
    /// The exported symbol (a C identifier).
    pub symbol: &'a str,
    pub func: &'a Function,
    /// Values kept in memory (see [`super::compile_keeping`]).
    pub keep: &'a [VarId],
}

/// The buffer table of one entry: what a caller passes.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryLayout {
    /// Number of inputs (the function's parameters, in order).
    pub n_inputs: usize,
    /// Number of outputs (its returned positions, in order).
    pub n_outputs: usize,
    /// The scratch buffers after the outputs, in table order, with their
    /// types (shapes in the function's size parameters); those of the loop
    /// bodies and VJPs it calls included.
    pub scratch: Vec<Type>,
}

/// An emitted object file.
#[derive(Clone, Debug)]
pub struct ObjectCode {
    /// The object file's bytes (ELF, Mach-O or COFF, as the host uses).
    pub bytes: Vec<u8>,
    /// Per entry, in the order given.
    pub layouts: Vec<EntryLayout>,
    /// The runtime library's functions the object calls (sorted); empty
    /// when it links with the C library alone.
    pub runtime_calls: Vec<String>,
}

/// Compile `entries` into one object file for the host.
///
/// With `runtime`, the object may call egrad's runtime library (the C
/// program links it): the matrix kernel, the whole-array math kernels, the
/// builtin kernels and egrad's own math functions, as the JIT does under
/// `opts`. Without, it calls only the C library: the loop nest and the
/// inline math kernels, which give the same bits (`BackendOptions::gemm`,
/// `BackendOptions::wide`); a builtin kernel or an own math function is
/// then the caller's to refuse.
pub fn compile_object(
    entries: &[ObjectEntry<'_>],
    opts: &BackendOptions,
    runtime: bool,
) -> Result<ObjectCode, Error> {
    let opts = &BackendOptions {
        gemm: opts.gemm && runtime,
        wide: opts.wide && runtime,
        ..*opts
    };
    let isa = host_isa(opts.verify, true)?;
    let builder = ObjectBuilder::new(isa, "egrad", default_libcall_names())
        .map_err(|e| cl_err("object builder", e))?;
    let mut module = ObjectModule::new(builder);
    let mut layouts = Vec::with_capacity(entries.len());
    for e in entries {
        if !is_c_identifier(e.symbol) {
            return Err(Error::Usage(format!(
                "`{}` is not a C identifier, so it cannot name an exported symbol",
                e.symbol
            )));
        }
        let decl = EntryDecl {
            name: e.symbol,
            linkage: Linkage::Export,
            libm: LibmNames::C,
        };
        let Lowered { funcs, plan, .. } = lower(&mut module, e.func, e.keep, &decl, opts)?;
        for (fid, mut ctx) in funcs {
            module
                .define_function(fid, &mut ctx)
                .map_err(|err| cl_err("compile", err))?;
        }
        layouts.push(EntryLayout {
            n_inputs: plan.n_inputs,
            n_outputs: plan.n_outputs,
            scratch: plan.scratch.clone(),
        });
    }
    let known = runtime_symbols();
    let mut runtime_calls: Vec<String> = module
        .declarations()
        .get_functions()
        .filter(|(_, d)| d.linkage == Linkage::Import)
        .filter_map(|(_, d)| d.name.clone())
        .filter(|n| known.contains(&n.as_str()))
        .collect();
    runtime_calls.sort();
    runtime_calls.dedup();
    if !runtime && !runtime_calls.is_empty() {
        return Err(Error::Internal(format!(
            "an object file without the runtime library calls {}",
            runtime_calls.join(", ")
        )));
    }
    let bytes = module
        .finish()
        .emit()
        .map_err(|e| cl_err("emit object", e))?;
    Ok(ObjectCode {
        bytes,
        layouts,
        runtime_calls,
    })
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_c_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
