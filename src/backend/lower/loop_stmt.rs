//! A loop statement (`loop`, `looptape`, `loopvjp`): what its cases share,
//! and the `loop` and `looptape` cases (`loopvjp` is in `loop_vjp`).

use super::{log2_bytes, LoopBufs, Read, Translator};
use crate::error::Error;
use crate::ir::{Loop, Stmt, VarId};
use crate::ops::Op;
use crate::types::{DType, Type};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{self, types, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind};

/// What every case of a loop statement shares, computed (and emitted)
/// once before the case's own code.
#[derive(Clone, Copy)]
pub(super) struct LoopStmt<'f> {
    /// The statement.
    pub stmt: &'f Stmt,
    /// Its loop's number, and the loop.
    pub l: usize,
    pub lp: &'f Loop,
    /// The statement's buffers (see [`LoopBufs`]).
    pub lb: LoopBufs,
    /// The count: known (`Some`) or read from `dims` at run time.
    pub fixed: Option<u64>,
    /// The count's value.
    pub n: ir::Value,
    /// The elements of the state.
    pub width: ir::Value,
    /// The base of the home buffer.
    pub h: ir::Value,
    /// The bytes of one state.
    pub rowbytes: ir::Value,
    /// A scan's sequence: its base and the bytes of one row.
    pub seq: Option<(ir::Value, ir::Value)>,
    /// Whether the loop is a scan.
    pub scan: bool,
    /// Whether the loop settles (and is not a scan).
    pub settles: bool,
    /// The state's element type.
    pub dtype: DType,
}

impl LoopStmt<'_> {
    /// Operand `i` of the statement.
    pub fn arg(&self, i: usize) -> Result<VarId, Error> {
        self.stmt.args.get(i).copied().ok_or_else(|| {
            Error::internal(format!(
                "backend: `{}` is missing an operand",
                self.stmt.op.name()
            ))
        })
    }
}

impl<'a, 'b> Translator<'a, 'b> {
    /// A loop statement `s` (`loop`, `looptape`, `loopvjp`) writing buffer
    /// `home`. The counted loops run here; each step calls the loop's body
    /// (or VJP), compiled as its own function, on state buffers of this
    /// function ([`LoopBufs`]). Steps happen in the interpreter's order, so
    /// results are bit-identical to `run_loop`. Buffers a step writes never
    /// alias the buffers it reads.
    pub(super) fn translate_loop_stmt(&mut self, s: usize, home: usize) -> Result<(), Error> {
        let cx = self.loop_stmt(s, home)?;
        match cx.stmt.op {
            Op::Loop(..) => self.translate_plain_loop(&cx),
            Op::LoopTape(_, k, _) => self.translate_loop_tape(&cx, k),
            Op::LoopVjp(_, k, m, _) => self.translate_loop_vjp(&cx, k, m),
            other => Err(Error::internal(format!(
                "backend: `{}` is not a loop op",
                other.name()
            ))),
        }
    }

    /// The shared part of loop statement `s` writing buffer `home` (see
    /// [`LoopStmt`]), emitting the count, the state's width and bytes and,
    /// in a scan, the sequence's base and row bytes.
    fn loop_stmt(&mut self, s: usize, home: usize) -> Result<LoopStmt<'a>, Error> {
        let f = self.f;
        let stmt = &f.stmts[s];
        let l = stmt
            .op
            .loop_id()
            .ok_or_else(|| Error::internal("backend: not a loop op"))?;
        let lp = f
            .loops
            .get(l)
            .ok_or_else(|| Error::internal(format!("backend: there is no loop {l}")))?;
        let lb = self.loop_bufs(stmt.var)?;
        // The count: known (`Some`) or read from `dims` at run time.
        let fixed = lp.static_count();
        let state = lp.state().clone();
        let n = self.translate_len(Type::array(state.dtype, vec![lp.count.clone()]))?;
        let width = self.translate_len(state.clone())?;
        let h = self.buf(home)?;
        let rowbytes = self.b.ins().ishl_imm_u(width, log2_bytes(state.dtype));
        // A scan's sequence: its base and the bytes of one row; step `t`
        // passes row `t` to the body (and the VJP at state `t` gets it too).
        let seq = match lp.row() {
            Some(row) => {
                let xs = *stmt.args[..stmt.op.arity().min(stmt.args.len())]
                    .last()
                    .ok_or_else(|| Error::internal("backend: a scan without its sequence"))?;
                let base = self.translate_in_buffer(xs, lb.seq)?;
                let w = self.translate_len(row.clone())?;
                Some((base, self.b.ins().ishl_imm_u(w, log2_bytes(row.dtype))))
            }
            None => None,
        };
        let scan = seq.is_some();
        self.loop_caps = self.capture_pointers(stmt)?;
        // A loop that settles (`Loop::settles`): `loop` leaves at the first
        // step that changes no bit of the state, `looptape` copies the
        // state into the rest of its rows from then on (a flag skips the
        // body's calls), and `loopvjp` passes the cotangent over every such
        // step (`step_or_pass`).
        let settles = lp.settles && !scan;
        Ok(LoopStmt {
            stmt,
            l,
            lp,
            lb,
            fixed,
            n,
            width,
            h,
            rowbytes,
            seq,
            scan,
            settles,
            dtype: state.dtype,
        })
    }

    /// An optional buffer: where the plan left it out, no step uses it
    /// (the home stands in, never read or written through it).
    pub(super) fn loop_opt_buf(
        &mut self,
        cx: &LoopStmt,
        k: Option<usize>,
    ) -> Result<ir::Value, Error> {
        k.map_or(Ok(cx.h), |k| self.buf(k))
    }

    /// The inputs of a body call at step `step`: the state `st`, in a
    /// scan row `step` of the sequence, then the captures.
    pub(super) fn loop_ins(
        &mut self,
        cx: &LoopStmt,
        st: ir::Value,
        step: ir::Value,
    ) -> Vec<ir::Value> {
        let mut ins = match cx.seq {
            Some((base, rb)) => {
                let off = self.b.ins().imul(step, rb);
                vec![st, self.b.ins().iadd(base, off)]
            }
            None => vec![st],
        };
        ins.extend(self.loop_caps.iter().copied());
        ins
    }

    /// Where the body reads each capture of loop statement `stmt` (its
    /// operands after the fixed ones): an array's buffer, or a scalar
    /// stored once in a stack slot.
    fn capture_pointers(&mut self, stmt: &Stmt) -> Result<Vec<ir::Value>, Error> {
        let fixed = stmt.op.arity().min(stmt.args.len());
        let mut ptrs = Vec::new();
        for &c in &stmt.args[fixed..] {
            if self.read(c)? == Read::Scalar {
                let x = self.scalar(c)?;
                let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    8,
                    3,
                ));
                let p = self.b.ins().stack_addr(types::I64, slot, 0);
                self.b.ins().store(MemFlagsData::trusted(), x, p, 0);
                ptrs.push(p);
            } else {
                ptrs.push(self.translate_in_buffer(c, None)?);
            }
        }
        Ok(ptrs)
    }

    /// With a run-time count, what a count of 0 does (`f`) runs only then.
    pub(super) fn loop_when_zero(
        &mut self,
        cx: &LoopStmt,
        f: &mut dyn FnMut(&mut Self) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if cx.fixed.is_some() {
            return Ok(());
        }
        let z = self.b.ins().icmp_imm_s(IntCC::Equal, cx.n, 0);
        let trips = self.b.ins().uextend(types::I64, z);
        self.translate_loop(trips, &mut |t, _| f(t))
    }

    /// A `loop` statement: the state alternates between the home and the
    /// `other` buffer; a loop that settles stops at the first step that
    /// changes nothing.
    fn translate_plain_loop(&mut self, cx: &LoopStmt) -> Result<(), Error> {
        let (n, h, width, dtype, settles) = (cx.n, cx.h, cx.width, cx.dtype, cx.settles);
        let x = cx.arg(0)?;
        if cx.fixed == Some(0) {
            return self.translate_fill(x, h, width);
        }
        let other = self.loop_opt_buf(cx, cx.lb.other)?;
        let body = self.call_site(cx.l, false)?;
        let (cur, nxt) = self.translate_ping_pong(x, None, n, h, other, width)?;
        // One step; with `settles`, whether it changed nothing.
        let step = |t: &mut Self, i: ir::Value| -> Result<Option<ir::Value>, Error> {
            let c = t.b.use_var(cur);
            let o = t.b.use_var(nxt);
            let args = t.loop_ins(cx, c, i);
            t.translate_call(body, &args, o)?;
            t.translate_swap(cur, nxt, h, other);
            settles
                .then(|| t.translate_same(c, o, width, dtype))
                .transpose()
        };
        if settles {
            self.translate_loop_until(n, &mut |t, i| {
                step(t, i)?.ok_or_else(|| Error::internal("backend: a settling step"))
            })?;
            // Stopped early, the state may be in the other buffer.
            let c = self.b.use_var(cur);
            let home = self.b.ins().icmp(IntCC::Equal, c, h);
            let zero = self.b.ins().iconst(types::I64, 0);
            let len = self.b.ins().select(home, zero, width);
            self.translate_copy(c, h, len, dtype)?;
        } else {
            self.translate_loop(n, &mut |t, i| step(t, i).map(|_| ()))?;
        }
        self.loop_when_zero(cx, &mut |t| t.translate_fill(x, h, width))
    }

    /// A `looptape` statement with checkpoints every `k` steps.
    ///
    /// Row 0 is the final state, row 1 + j the state after j·k steps. The
    /// initial state goes to row 1; the step ending a segment writes the
    /// next checkpoint row, the last step row 0, the others alternate
    /// between `a` and `b`.
    fn translate_loop_tape(&mut self, cx: &LoopStmt, k: u32) -> Result<(), Error> {
        let (n, h, width, dtype, settles) = (cx.n, cx.h, cx.width, cx.dtype, cx.settles);
        let rowbytes = cx.rowbytes;
        let x = cx.arg(0)?;
        if cx.fixed == Some(0) {
            return self.translate_fill(x, h, width);
        }
        self.loop_when_zero(cx, &mut |t| t.translate_fill(x, h, width))?;
        let row1 = self.b.ins().iadd(h, rowbytes);
        let (a, b) = (
            self.loop_opt_buf(cx, cx.lb.a)?,
            self.loop_opt_buf(cx, cx.lb.b)?,
        );
        let body = self.call_site(cx.l, false)?;
        let k = i64::from(k.max(1));
        // Only when there are steps: the tape then has row 1.
        let nz = self.b.ins().icmp_imm_s(IntCC::NotEqual, n, 0);
        let trips = self.b.ins().uextend(types::I64, nz);
        self.translate_loop(trips, &mut |t, _| t.translate_fill(x, row1, width))?;
        let cur = self.translate_var(row1);
        let zero = self.b.ins().iconst(types::I64, 0);
        let step = self.translate_var(zero);
        let row2 = self.b.ins().iadd(row1, rowbytes);
        let row = self.translate_var(row2);
        // One step; with `settles`, whether it changed nothing.
        let step1 = |t: &mut Self, i: ir::Value| -> Result<Option<ir::Value>, Error> {
            let c = t.b.use_var(cur);
            let sp = t.b.use_var(step);
            let s1 = t.b.ins().iadd_imm_s(sp, 1);
            let seg_end = t.b.ins().icmp_imm_s(IntCC::Equal, s1, k);
            let i1 = t.b.ins().iadd_imm_s(i, 1);
            let all_end = t.b.ins().icmp(IntCC::Equal, i1, n);
            let on_a = t.b.ins().icmp(IntCC::Equal, c, a);
            let between = t.b.ins().select(on_a, b, a);
            let r = t.b.use_var(row);
            let o = t.b.ins().select(seg_end, r, between);
            let o = t.b.ins().select(all_end, h, o);
            let args = t.loop_ins(cx, c, i);
            t.translate_call(body, &args, o)?;
            t.b.def_var(cur, o);
            let zero = t.b.ins().iconst(types::I64, 0);
            let sp = t.b.ins().select(seg_end, zero, s1);
            t.b.def_var(step, sp);
            let next_row = t.b.ins().iadd(r, rowbytes);
            let r = t.b.ins().select(seg_end, next_row, r);
            t.b.def_var(row, r);
            settles
                .then(|| t.translate_same(c, o, width, dtype))
                .transpose()
        };
        if !settles {
            return self.translate_loop(n, &mut |t, i| step1(t, i).map(|_| ()));
        }
        // A step that changed nothing stops the loop: every later
        // state is this one, so it fills the checkpoints not yet
        // written and the final row (a bound far above the steps
        // taken costs no step).
        self.translate_loop_until(n, &mut |t, i| {
            step1(t, i)?.ok_or_else(|| Error::internal("backend: a settling step"))
        })?;
        // Only when there were steps (else `cur` is no row).
        self.translate_loop(trips, &mut |t, _| t.translate_tape_rest(cx, k, cur, row))
    }

    /// After a settling `looptape` (checkpoints every `k` steps) stopped:
    /// the state in `cur` fills the rows from `row` to the tape's end, and
    /// row 0 (the home) unless it is there already.
    fn translate_tape_rest(
        &mut self,
        cx: &LoopStmt,
        k: i64,
        cur: cranelift_frontend::Variable,
        row: cranelift_frontend::Variable,
    ) -> Result<(), Error> {
        let (n, h, width, dtype, rowbytes) = (cx.n, cx.h, cx.width, cx.dtype, cx.rowbytes);
        let c = self.b.use_var(cur);
        let r = self.b.use_var(row);
        // Rows 1 ..= ⌈n/k⌉: the first past the tape's end.
        let up = self.b.ins().iadd_imm_s(n, k - 1);
        let n_ckpt = self.b.ins().udiv_imm_s(up, k);
        let rows = self.b.ins().iadd_imm_s(n_ckpt, 1);
        let end = self.b.ins().imul(rows, rowbytes);
        let end = self.b.ins().iadd(h, end);
        let before = self.b.ins().icmp(IntCC::UnsignedLessThan, r, end);
        let gap = self.b.ins().isub(end, r);
        let zero = self.b.ins().iconst(types::I64, 0);
        let gap = self.b.ins().select(before, gap, zero);
        // An empty state has rows of 0 bytes: none to fill.
        let one = self.b.ins().iconst(types::I64, 1);
        let empty = self.b.ins().icmp_imm_s(IntCC::Equal, rowbytes, 0);
        let per = self.b.ins().select(empty, one, rowbytes);
        let left = self.b.ins().udiv(gap, per);
        self.translate_loop(left, &mut |t, q| {
            let off = t.b.ins().imul(q, rowbytes);
            let dst = t.b.ins().iadd(r, off);
            t.translate_copy(c, dst, width, dtype)
        })?;
        let home = self.b.ins().icmp(IntCC::Equal, c, h);
        let len = self.b.ins().select(home, zero, width);
        self.translate_copy(c, h, len, dtype)
    }
}
