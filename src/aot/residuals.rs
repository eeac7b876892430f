//! The residual buffer's layout in a gradient's C header: its comment,
//! `F_residual_offsets` (every offset from the one before, then the
//! buffer's bytes), `F_residual_bytes`, `F_residual_offset_*`, and the
//! wrappers' slots for the stored residuals. Linear in the number of
//! residuals.

use super::{Namer, Sizes};
use crate::pipeline::GradProgram;
use crate::residuals::ResidualKind;
use crate::types::Type;
use std::fmt::Write as _;

/// The residual layout's comment and its size and offset functions; the
/// stored residuals, each with its C name and type, in buffer order.
/// Linear in the number of residuals: one function computes every offset
/// from the one before (a sum spelled out per residual was quadratic: 182
/// MB of header for a 10,000-operation gradient).
pub(super) fn emit_layout(
    h: &mut String,
    prefix: &str,
    sizes: &Sizes,
    g: &GradProgram,
) -> Vec<(String, Type)> {
    let _ = writeln!(
        h,
        "/* Residual layout: the values the pullback reads (the plan the JIT compiles; --lambda,\n * --dim and the optimizer decide what is stored and what is recomputed).\n * The residual buffer holds the stored ones, each at an 8-byte aligned offset, in order;\n * it must be 8-byte aligned ({prefix}residual_bytes bytes)."
    );
    let mut offsets = Vec::new();
    let mut bytes = Vec::new();
    let mut res_namer = Namer::default();
    for r in &g.residuals.residuals {
        match r.kind {
            ResidualKind::Input => {
                let _ = writeln!(
                    h,
                    " *   %{}: {}  input `{}`, read in place: pass it to {prefix}pullback",
                    r.name, r.ty, r.name
                );
            }
            ResidualKind::Constant => {
                let _ = writeln!(
                    h,
                    " *   %{}: {}  constant, recomputed by the pullback, not stored",
                    r.name, r.ty
                );
            }
            ResidualKind::Stored => {
                let c = res_namer.name(&r.name);
                let _ = writeln!(
                    h,
                    " *   %{}: {}  stored: {c} at {prefix}residual_offset_{c}(), {} bytes",
                    r.name,
                    r.ty,
                    sizes.bytes(&r.ty)
                );
                offsets.push((c, r.ty.clone()));
                bytes.push(sizes.bytes(&r.ty));
            }
        }
    }
    let _ = writeln!(h, " */");
    let _ = writeln!(
        h,
        "#ifndef EGRAD_ROUND8\n#define EGRAD_ROUND8(n) egrad_round((n), (size_t)8)\n#endif\n"
    );
    let voids: String = sizes
        .names
        .iter()
        .map(|(_, c)| format!("    (void){c};\n"))
        .collect();
    let n = offsets.len();
    let mut fill = String::from("    egrad_offsets[0] = (size_t)0;\n");
    for (k, b) in bytes.iter().enumerate() {
        let _ = writeln!(
            fill,
            "    egrad_offsets[{}] = egrad_add(egrad_offsets[{k}], EGRAD_ROUND8({b}));",
            k + 1
        );
    }
    let _ = writeln!(
        h,
        "/* The offsets of the stored residuals in the residual buffer, in the order above, then the\n * buffer's bytes: egrad_offsets must hold {} values. */\nstatic inline void {prefix}residual_offsets({}) {{\n{voids}{fill}}}\n",
        n + 1,
        sizes.signature(&["size_t *egrad_offsets".to_string()])
    );
    let call = offsets_call(prefix, sizes, "egrad_o");
    let _ = writeln!(
        h,
        "/* Bytes of the residual buffer {prefix}forward writes and {prefix}pullback reads. */\nstatic inline size_t {prefix}residual_bytes({}) {{\n    size_t egrad_o[{}];\n    {call};\n    return egrad_o[{n}];\n}}\n",
        sizes.signature(&[]),
        n + 1,
    );
    for (k, (c, ty)) in offsets.iter().enumerate() {
        let _ = writeln!(
            h,
            "/* Offset of residual {c} ({ty}) in the residual buffer. */\nstatic inline size_t {prefix}residual_offset_{c}({}) {{\n    size_t egrad_o[{}];\n    {call};\n    return egrad_o[{k}];\n}}\n",
            sizes.signature(&[]),
            n + 1,
        );
    }
    offsets
}

/// The call of `PREFIX_residual_offsets` filling the array `out`.
fn offsets_call(prefix: &str, sizes: &Sizes, out: &str) -> String {
    let args = sizes.args();
    let sep = if args.is_empty() { "" } else { ", " };
    format!("{prefix}residual_offsets({args}{sep}{out})")
}

/// The stored residuals' slots of a wrapper reading or writing the buffer
/// `residuals` (`n` residuals): their offsets computed once per call.
pub(super) fn slots(
    prefix: &str,
    sizes: &Sizes,
    (residuals, n): (&str, usize),
    slots: &mut Vec<String>,
    locals: &mut Vec<String>,
) {
    if n == 0 {
        locals.push(format!("(void){residuals};"));
        return;
    }
    locals.push(format!("size_t egrad_roff[{}];", n + 1));
    locals.push(format!("{};", offsets_call(prefix, sizes, "egrad_roff")));
    for k in 0..n {
        slots.push(format!("(void *)((char *){residuals} + egrad_roff[{k}])"));
    }
}
