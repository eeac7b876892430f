//! The loop ops (`loop`, `looptape`, `loopvjp`): counted loops whose steps
//! call the loop's body or VJP on state buffers.

use super::vector::Source;
use super::{CallSite, LoopBufs, Read, Translator};
use crate::error::Error;
use crate::ir::VarId;
use crate::types::DType;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{self, types, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind};

impl<'a, 'b> Translator<'a, 'b> {
    /// The buffers of a live loop statement (see [`LoopBufs`]).
    pub(super) fn loop_bufs(&self, v: VarId) -> Result<LoopBufs, Error> {
        self.plan
            .loop_bufs
            .get(v.index())
            .copied()
            .flatten()
            .ok_or_else(|| Error::internal("backend: a loop statement without its buffers"))
    }

    /// `run_loop`'s `settled_segments`: of the `n_seg` checkpoints (row
    /// `j` at `ckpt0 + j·rowbytes`), the first with the bits of the final
    /// state (at `last`), by bisection, if `frozen(state, j)` (1 when its
    /// step leaves it unchanged) holds there; else `n_seg`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn translate_settled_segments(
        &mut self,
        n_seg: ir::Value,
        ckpt0: ir::Value,
        last: ir::Value,
        rowbytes: ir::Value,
        width: ir::Value,
        dtype: DType,
        frozen: &mut dyn FnMut(&mut Self, ir::Value, ir::Value) -> Result<ir::Value, Error>,
    ) -> Result<ir::Value, Error> {
        let zero = self.b.ins().iconst(types::I64, 0);
        let lo = self.translate_var(zero);
        let hi = self.translate_var(n_seg);
        // At most 64 halvings of a 64-bit range.
        let rounds = self.b.ins().iconst(types::I64, 65);
        self.translate_loop_until(rounds, &mut |t, _| {
            let l = t.b.use_var(lo);
            let h = t.b.use_var(hi);
            let open = t.b.ins().icmp(IntCC::UnsignedLessThan, l, h);
            t.translate_if(
                open,
                types::I64,
                &mut |t| {
                    let half = t.b.ins().isub(h, l);
                    let half = t.b.ins().ushr_imm_u(half, 1);
                    let mid = t.b.ins().iadd(l, half);
                    let off = t.b.ins().imul(mid, rowbytes);
                    let row = t.b.ins().iadd(ckpt0, off);
                    let same = t.translate_same(row, last, width, dtype)?;
                    let mid1 = t.b.ins().iadd_imm_s(mid, 1);
                    let l2 = t.b.ins().select(same, l, mid1);
                    let h2 = t.b.ins().select(same, mid, h);
                    t.b.def_var(lo, l2);
                    t.b.def_var(hi, h2);
                    Ok(t.b.ins().iconst(types::I64, 0))
                },
                &mut |t| Ok(t.b.ins().iconst(types::I64, 0)),
            )?;
            let l = t.b.use_var(lo);
            let h = t.b.use_var(hi);
            let done = t.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, l, h);
            Ok(t.b.ins().uextend(types::I64, done))
        })?;
        let walked = self.translate_var(n_seg);
        let l = self.b.use_var(lo);
        let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, l, n_seg);
        self.translate_if(
            inside,
            types::I64,
            &mut |t| {
                let off = t.b.ins().imul(l, rowbytes);
                let row = t.b.ins().iadd(ckpt0, off);
                let f = frozen(t, row, l)?;
                let w = t.b.ins().select(f, l, n_seg);
                t.b.def_var(walked, w);
                Ok(w)
            },
            &mut |_| Ok(n_seg),
        )?;
        Ok(self.b.use_var(walked))
    }

    /// The buffer holding the whole of `v`: its own, or `copy` (a scratch
    /// buffer the plan set aside) filled with it now.
    pub(super) fn translate_in_buffer(
        &mut self,
        v: VarId,
        copy: Option<usize>,
    ) -> Result<ir::Value, Error> {
        if let Read::Buf(kb) = self.read(v)? {
            return self.buf(kb);
        }
        let kb = copy.ok_or_else(|| {
            Error::internal(format!(
                "backend: %{} is read whole but has no buffer",
                self.f.var_name(v)
            ))
        })?;
        let p = self.buf(kb)?;
        let len = self.translate_len(self.f.ty(v).clone())?;
        self.translate_fill(v, p, len)?;
        Ok(p)
    }

    /// The step number `start + r` a scan's body call reads its row at
    /// (and a walk giving every state's cotangent writes it at; not
    /// computed for other loops, which do not use it).
    pub(super) fn step_at(&mut self, scan: bool, start: ir::Value, r: ir::Value) -> ir::Value {
        if scan {
            self.b.ins().iadd(start, r)
        } else {
            r
        }
    }

    /// Start `n >= 1` steps alternating between buffers `h` and `other`
    /// so that the last step writes `h` (the parity of the run-time count
    /// `n` picks the first): returns the variables holding the buffer the
    /// next step reads and the one it writes. An operand in a buffer is
    /// read there by the first step (as is `at`, where given: a buffer
    /// whose first `width` elements are the operand); any other is first
    /// written to the buffer the first step does not write.
    pub(super) fn translate_ping_pong(
        &mut self,
        x: VarId,
        at: Option<ir::Value>,
        n: ir::Value,
        h: ir::Value,
        other: ir::Value,
        width: ir::Value,
    ) -> Result<(cranelift_frontend::Variable, cranelift_frontend::Variable), Error> {
        let odd = self.b.ins().band_imm_s(n, 1);
        let first = self.b.ins().select(odd, h, other);
        let spare = self.b.ins().select(odd, other, h);
        let src = match (at, self.read(x)?) {
            (Some(p), _) => p,
            (None, Read::Buf(k)) => self.buf(k)?,
            _ => {
                self.translate_fill(x, spare, width)?;
                spare
            }
        };
        Ok((self.translate_var(src), self.translate_var(first)))
    }

    /// After a step that wrote `nxt`: the next reads it and writes the
    /// other of `p` and `q`.
    pub(super) fn translate_swap(
        &mut self,
        cur: cranelift_frontend::Variable,
        nxt: cranelift_frontend::Variable,
        p: ir::Value,
        q: ir::Value,
    ) {
        let o = self.b.use_var(nxt);
        self.b.def_var(cur, o);
        let on_p = self.b.ins().icmp(IntCC::Equal, o, p);
        let n = self.b.ins().select(on_p, q, p);
        self.b.def_var(nxt, n);
    }

    /// 1 if the `width` elements of `dtype` at `a` and at `b` have the same
    /// bits, else 0 (an `i64`).
    pub(super) fn translate_same(
        &mut self,
        a: ir::Value,
        b: ir::Value,
        width: ir::Value,
        dtype: DType,
    ) -> Result<ir::Value, Error> {
        let it = if dtype == DType::F32 {
            types::I32
        } else {
            types::I64
        };
        let zero = self.b.ins().iconst(types::I64, 0);
        let acc = self.translate_var(zero);
        let flags = MemFlagsData::trusted();
        self.translate_loop(width, &mut |t, i| {
            let pa = t.translate_addr(dtype, a, i);
            let pb = t.translate_addr(dtype, b, i);
            let x = t.b.ins().load(it, flags, pa, 0);
            let y = t.b.ins().load(it, flags, pb, 0);
            let mut d = t.b.ins().bxor(x, y);
            if it != types::I64 {
                d = t.b.ins().uextend(types::I64, d);
            }
            let sofar = t.b.use_var(acc);
            let d = t.b.ins().bor(sofar, d);
            t.b.def_var(acc, d);
            Ok(())
        })?;
        let diff = self.b.use_var(acc);
        let same = self.b.ins().icmp_imm_s(IntCC::Equal, diff, 0);
        Ok(self.b.ins().uextend(types::I64, same))
    }

    /// Copy the `width` elements of `dtype` at `src` to `dst`.
    pub(super) fn translate_copy(
        &mut self,
        src: ir::Value,
        dst: ir::Value,
        width: ir::Value,
        dtype: DType,
    ) -> Result<(), Error> {
        let it = if dtype == DType::F32 {
            types::I32
        } else {
            types::I64
        };
        self.translate_loop(width, &mut |t, i| {
            let ps = t.translate_addr(dtype, src, i);
            let x = t.b.ins().load(it, MemFlagsData::trusted(), ps, 0);
            let pd = t.translate_addr(dtype, dst, i);
            t.b.ins().store(MemFlagsData::trusted(), x, pd, 0);
            Ok(())
        })
    }

    /// `len` zeros of `dtype` at `dst`.
    pub(super) fn translate_zero(
        &mut self,
        dst: ir::Value,
        len: ir::Value,
        dtype: DType,
    ) -> Result<(), Error> {
        self.translate_loop(len, &mut |t, i| {
            let z = match dtype {
                DType::F32 => t.b.ins().f32const(0.0),
                DType::F64 => t.b.ins().f64const(0.0),
                DType::I64 | DType::Bool => t.b.ins().iconst(types::I64, 0),
            };
            let pd = t.translate_addr(dtype, dst, i);
            t.b.ins().store(MemFlagsData::trusted(), z, pd, 0);
            Ok(())
        })
    }

    /// `dst[i] = dst[i] + src[i]` for the `len` floats of `dtype` there.
    pub(super) fn translate_accumulate(
        &mut self,
        dst: ir::Value,
        src: ir::Value,
        len: ir::Value,
        dtype: DType,
    ) -> Result<(), Error> {
        let ft = match dtype {
            DType::F32 => types::F32,
            DType::F64 => types::F64,
            DType::I64 | DType::Bool => {
                return Err(Error::internal("backend: a cotangent of integers"))
            }
        };
        self.translate_loop(len, &mut |t, i| {
            let pd = t.translate_addr(dtype, dst, i);
            let ps = t.translate_addr(dtype, src, i);
            let x = t.b.ins().load(ft, MemFlagsData::trusted(), pd, 0);
            let y = t.b.ins().load(ft, MemFlagsData::trusted(), ps, 0);
            let z = t.b.ins().fadd(x, y);
            t.b.ins().store(MemFlagsData::trusted(), z, pd, 0);
            Ok(())
        })
    }

    /// A fresh 64-bit variable holding `x`.
    pub(super) fn translate_var(&mut self, x: ir::Value) -> cranelift_frontend::Variable {
        let v = self.b.declare_var(types::I64);
        self.b.def_var(v, x);
        v
    }

    /// A count as a 64-bit constant (loops compare it unsigned).
    pub(super) fn translate_count(&mut self, n: u64) -> ir::Value {
        self.b
            .ins()
            .iconst(types::I64, i64::from_ne_bytes(n.to_ne_bytes()))
    }

    /// Write the `len` elements of `v` (as its consumers read them) to
    /// `base`.
    pub(super) fn translate_fill(
        &mut self,
        v: VarId,
        base: ir::Value,
        len: ir::Value,
    ) -> Result<(), Error> {
        let dtype = self.f.ty(v).dtype;
        self.translate_map(Source::Elem(v), dtype, base, len)
    }

    /// Loop `l`'s body (or VJP) ready to call: a stack slot for its buffer
    /// table, with its scratch pointers stored once.
    pub(super) fn call_site(&mut self, l: usize, vjp: bool) -> Result<CallSite, Error> {
        let plan = self.plan;
        let lp = plan
            .loops
            .get(l)
            .ok_or_else(|| Error::internal(format!("backend: no plan for loop {l}")))?;
        let refs = self.loop_refs.get(l).copied().unwrap_or_default();
        let (callee, func) = if vjp {
            (lp.vjp.as_ref(), refs.vjp)
        } else {
            (lp.body.as_ref(), refs.body)
        };
        let (Some(callee), Some(func)) = (callee, func) else {
            return Err(Error::internal(format!(
                "backend: loop {l}'s {} is not compiled",
                if vjp { "VJP" } else { "body" }
            )));
        };
        let n = callee.plan.n_buffers();
        let size =
            u32::try_from(8 * n).map_err(|_| Error::internal("backend: too many buffers"))?;
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            size,
            3,
        ));
        let table = self.b.ins().stack_addr(types::I64, slot, 0);
        let first = callee.plan.n_inputs + callee.plan.n_outputs;
        for (i, &k) in callee.scratch.iter().enumerate() {
            let p = self.buf(k)?;
            let off = i32::try_from(8 * (first + i))
                .map_err(|_| Error::internal("backend: too many buffers"))?;
            self.b.ins().store(MemFlagsData::trusted(), p, table, off);
        }
        Ok(CallSite {
            func,
            table,
            n_inputs: callee.plan.n_inputs,
        })
    }

    /// One call: the input pointers and the output pointer into the
    /// callee's table, then `callee(table, dims)`.
    pub(super) fn translate_call(
        &mut self,
        site: CallSite,
        ins: &[ir::Value],
        out: ir::Value,
    ) -> Result<(), Error> {
        if ins.len() != site.n_inputs {
            return Err(Error::internal(
                "backend: a loop call with the wrong inputs",
            ));
        }
        for (i, &p) in ins.iter().chain(std::iter::once(&out)).enumerate() {
            let off =
                i32::try_from(8 * i).map_err(|_| Error::internal("backend: too many buffers"))?;
            self.b
                .ins()
                .store(MemFlagsData::trusted(), p, site.table, off);
        }
        let dims = self
            .dims_ptr
            .ok_or_else(|| Error::internal("backend: a call before the entry block"))?;
        self.b.ins().call(site.func, &[site.table, dims]);
        Ok(())
    }
}
