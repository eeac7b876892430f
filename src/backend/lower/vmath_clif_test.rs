//! The Cranelift-emitted vector math kernels compute the scalar Rust
//! kernels' bits in every lane, on `f64`, `f64x2`, `f32` and `f32x4`, NaN
//! payloads included: each (function, type) is JIT-compiled as a loop
//! `dst[i] = f(src[i])` over vectors (or scalars) and run on random bit
//! patterns, special values and value ranges.

use crate::backend::lower::vmath_clif::emit;
use crate::vmath::VFn;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, BlockArg, InstBuilder, MemFlagsData, Type};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};

extern "C" fn fb_sin_f64(x: f64) -> f64 {
    VFn::Sin.std_f64(x)
}
extern "C" fn fb_cos_f64(x: f64) -> f64 {
    VFn::Cos.std_f64(x)
}
extern "C" fn fb_sin_f32(x: f32) -> f32 {
    VFn::Sin.std_f32(x)
}
extern "C" fn fb_cos_f32(x: f32) -> f32 {
    VFn::Cos.std_f32(x)
}

fn fallback_name(f: VFn, lane: Type) -> Option<&'static str> {
    match (f, lane == types::F64) {
        (VFn::Sin, true) => Some("vm_sin_f64"),
        (VFn::Cos, true) => Some("vm_cos_f64"),
        (VFn::Sin, false) => Some("vm_sin_f32"),
        (VFn::Cos, false) => Some("vm_cos_f32"),
        _ => None,
    }
}

fn module() -> JITModule {
    let mut flags = settings::builder();
    for (k, v) in [
        ("opt_level", "speed"),
        ("is_pic", "false"),
        ("use_colocated_libcalls", "false"),
        ("enable_verifier", "true"),
    ] {
        flags.set(k, v).expect("flag");
    }
    let isa = cranelift_native::builder()
        .expect("host ISA")
        .finish(settings::Flags::new(flags))
        .expect("ISA");
    let mut jb = JITBuilder::with_isa(isa, default_libcall_names());
    jb.symbol("vm_sin_f64", fb_sin_f64 as *const u8);
    jb.symbol("vm_cos_f64", fb_cos_f64 as *const u8);
    jb.symbol("vm_sin_f32", fb_sin_f32 as *const u8);
    jb.symbol("vm_cos_f32", fb_cos_f32 as *const u8);
    JITModule::new(jb)
}

type Kernel = unsafe extern "C" fn(*const u8, *mut u8, i64);

/// `fn(src, dst, n)`: `dst[i] = f(src[i])` for `i < n`, `src`/`dst` holding
/// `n` values of `ty`.
fn compile(m: &mut JITModule, f: VFn, ty: Type) -> Kernel {
    let ptr = m.target_config().pointer_type();
    let mut sig = m.make_signature();
    sig.params.push(AbiParam::new(ptr));
    sig.params.push(AbiParam::new(ptr));
    sig.params.push(AbiParam::new(types::I64));
    let name = format!("{}_{}", f.name(), ty);
    let id = m
        .declare_function(&name, Linkage::Local, &sig)
        .expect("declare");
    let mut ctx = m.make_context();
    ctx.func.signature = sig;
    let lane = ty.lane_type();
    let fallback = fallback_name(f, lane).map(|n| {
        let mut s = m.make_signature();
        s.params.push(AbiParam::new(lane));
        s.returns.push(AbiParam::new(lane));
        let fid = m.declare_function(n, Linkage::Import, &s).expect("import");
        m.declare_func_in_func(fid, &mut ctx.func)
    });
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let entry = b.create_block();
    let header = b.create_block();
    let body = b.create_block();
    let exit = b.create_block();
    b.append_block_params_for_function_params(entry);
    let i = b.append_block_param(header, types::I64);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let (src, dst, n) = {
        let p = b.block_params(entry);
        (p[0], p[1], p[2])
    };
    let zero = b.ins().iconst(types::I64, 0);
    b.ins().jump(header, &[BlockArg::Value(zero)]);
    b.switch_to_block(header);
    let more = b.ins().icmp(IntCC::SignedLessThan, i, n);
    b.ins().brif(more, body, &[], exit, &[]);
    b.switch_to_block(body);
    b.seal_block(body);
    let off = b.ins().imul_imm_s(i, i64::from(ty.bytes()));
    let off = if ptr == types::I64 {
        off
    } else {
        b.ins().ireduce(ptr, off)
    };
    let flags = MemFlagsData::new().with_notrap();
    let sa = b.ins().iadd(src, off);
    let x = b.ins().load(ty, flags, sa, 0);
    let y = emit(&mut b, ty, f, x, fallback).expect("supported");
    let da = b.ins().iadd(dst, off);
    b.ins().store(flags, y, da, 0);
    let i1 = b.ins().iadd_imm_s(i, 1);
    b.ins().jump(header, &[BlockArg::Value(i1)]);
    b.seal_block(header);
    b.switch_to_block(exit);
    b.seal_block(exit);
    b.ins().return_(&[]);
    b.finalize(m.target_config());
    m.define_function(id, &mut ctx).expect("define");
    m.clear_context(&mut ctx);
    m.finalize_definitions().expect("finalize");
    let code = m.get_finalized_function(id);
    // SAFETY: the function was just compiled with this signature.
    unsafe { std::mem::transmute::<*const u8, Kernel>(code) }
}

struct Rng(u64);

impl Rng {
    /// splitmix64's stream: the suite's mixer of the state, then a step.
    fn next(&mut self) -> u64 {
        let z = crate::internals::suite::splitmix64(self.0);
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z
    }
    fn uniform(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * ((self.next() >> 11) as f64 * 2f64.powi(-53))
    }
}

/// Random bit patterns, special values, and uniform samples of ranges
/// where the kernels switch paths; a multiple of 4 values.
fn inputs64(n: usize) -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7FF0_0000_0000_0001),
        f64::from_bits(0xFFF4_0000_0000_1234),
        f64::MIN_POSITIVE,
        f64::from_bits(1),
        -f64::from_bits(1),
        f64::MAX,
        -f64::MAX,
        1.0,
        -1.0,
        710.0,
        -746.0,
        1048576.0,
        -1048576.5,
    ];
    let mut r = Rng(42);
    for _ in 0..n {
        v.push(f64::from_bits(r.next()));
    }
    for (a, b) in [
        (-800.0, 800.0),
        (-2.0, 2.0),
        (-1.0, 0.0),
        (-1e-300, 1e-300),
        (-2e6, 2e6),
        (0.0, 25.0),
    ] {
        for _ in 0..n / 4 {
            v.push(r.uniform(a, b));
        }
    }
    while !v.len().is_multiple_of(4) {
        v.push(0.5);
    }
    v
}

fn inputs32(n: usize) -> Vec<f32> {
    let mut v: Vec<f32> = inputs64(0).iter().map(|&x| x as f32).collect();
    v.extend([
        f32::from_bits(0x7F80_0001),
        f32::from_bits(0xFFC0_1234),
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        4096.0,
        -4096.5,
        89.0,
        -104.0,
    ]);
    let mut r = Rng(43);
    for _ in 0..n {
        v.push(f32::from_bits(r.next() as u32));
    }
    for (a, b) in [
        (-110.0, 100.0),
        (-2.0, 2.0),
        (-1.0, 0.0),
        (-1e-37, 1e-37),
        (-5000.0, 5000.0),
        (0.0, 12.0),
    ] {
        for _ in 0..n / 4 {
            v.push(r.uniform(a, b) as f32);
        }
    }
    while !v.len().is_multiple_of(4) {
        v.push(0.5);
    }
    v
}

const SAMPLES: usize = 400_000;

/// How many of `got` differ in bits from `want` (for inputs `xs`), with
/// the first difference; `None` when all agree.
fn mismatches<T, B>(xs: &[T], got: &[T], want: &[B], bits: impl Fn(T) -> B) -> Option<String>
where
    T: Copy + std::fmt::LowerExp,
    B: Copy + PartialEq + std::fmt::LowerHex,
{
    let differ = |(&y, &w): (&T, &B)| bits(y) != w;
    let diffs = got.iter().zip(want).filter(|&p| differ(p)).count();
    let i = got.iter().zip(want).position(differ)?;
    Some(format!(
        "{diffs} differ, e.g. x = {:e} ({:#x}): {:#x} vs {:#x}",
        xs[i],
        bits(xs[i]),
        bits(got[i]),
        want[i]
    ))
}

#[test]
fn cranelift_kernels_match_scalar_bits() {
    let mut m = module();
    let xs64 = inputs64(SAMPLES);
    let xs32 = inputs32(SAMPLES);
    let mut bad = Vec::new();
    for f in VFn::ALL {
        let want64: Vec<u64> = xs64.iter().map(|&x| f.eval_f64(x).to_bits()).collect();
        let want32: Vec<u32> = xs32.iter().map(|&x| f.eval_f32(x).to_bits()).collect();
        for ty in [types::F64, types::F64X2] {
            let k = compile(&mut m, f, ty);
            let mut out = vec![0f64; xs64.len()];
            let n = (xs64.len() / ty.lane_count() as usize) as i64;
            // SAFETY: both buffers hold n values of ty.
            unsafe { k(xs64.as_ptr().cast(), out.as_mut_ptr().cast(), n) };
            if let Some(e) = mismatches(&xs64, &out, &want64, f64::to_bits) {
                bad.push(format!("{} {ty}: {e}", f.name()));
            }
        }
        for ty in [types::F32, types::F32X4] {
            let k = compile(&mut m, f, ty);
            let mut out = vec![0f32; xs32.len()];
            let n = (xs32.len() / ty.lane_count() as usize) as i64;
            // SAFETY: both buffers hold n values of ty.
            unsafe { k(xs32.as_ptr().cast(), out.as_mut_ptr().cast(), n) };
            if let Some(e) = mismatches(&xs32, &out, &want32, f32::to_bits) {
                bad.push(format!("{} {ty}: {e}", f.name()));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
