//! The `loopvjp` case of a loop statement: the VJP walked backwards over
//! the tape's segments, each state stored or recomputed from its
//! checkpoint.

use super::loop_stmt::LoopStmt;
use super::{log2_bytes, CallSite, Translator};
use crate::error::Error;
use crate::ir::VarId;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{self, types, InstBuilder};
use cranelift_frontend::Variable;

/// What the steps of a `loopvjp` share (beyond [`LoopStmt`]).
#[derive(Clone, Copy)]
struct Vjp<'f> {
    cx: LoopStmt<'f>,
    /// The whole tape's cotangent (`VJP_TAPE`), in a buffer.
    seed: Option<ir::Value>,
    /// With the sequence's cotangent (`VJP_SEQ`): the bytes before a row's
    /// `gs` part, and the bytes of one row of the home.
    seq_rows: Option<(ir::Value, ir::Value)>,
    /// `VJP_RECOMPUTE` (non-zero: every state recomputed from its
    /// checkpoint when the VJP needs it).
    m: u32,
    /// The step number, also where each state's cotangent goes.
    indexed: bool,
    /// The buffer the cotangent alternates with the home.
    other: ir::Value,
    vjp: CallSite,
    /// Steps per segment.
    k: u64,
    /// The body, where some segment may have states to recompute.
    body: Option<CallSite>,
    /// The cotangent's ping-pong variables, unless each step has its row.
    gvars: Option<(Variable, Variable)>,
    seg: ir::Value,
    a: ir::Value,
    b: ir::Value,
    /// The tape, the number of segments and the first checkpoint's row.
    tape: ir::Value,
    n_seg: ir::Value,
    ckpt0: ir::Value,
    /// A settling loop: the first segment past the stop.
    walked: Option<ir::Value>,
}

/// One segment `j` of a `loopvjp`'s walk: states `start .. start+len-1`.
#[derive(Clone, Copy)]
struct Segment {
    j: ir::Value,
    start: ir::Value,
    len: ir::Value,
    len1: ir::Value,
    /// The segment's checkpoint.
    ckpt: ir::Value,
    /// The state after the segment (only read where the loop settles).
    after: ir::Value,
}

impl<'a, 'b> Translator<'a, 'b> {
    /// A `loopvjp` statement with checkpoints every `k` steps and mode
    /// bits `m` (`VJP_TAPE`, `VJP_SEQ`, `VJP_RECOMPUTE`).
    pub(super) fn translate_loop_vjp(
        &mut self,
        cx: &LoopStmt<'a>,
        k: u32,
        m: u32,
    ) -> Result<(), Error> {
        let (n, h, width, dtype) = (cx.n, cx.h, cx.width, cx.dtype);
        let (tv, g) = (cx.arg(0)?, cx.arg(1)?);
        let tape = self.translate_in_buffer(tv, cx.lb.tape)?;
        // Seeded by the whole tape's cotangent (`VJP_TAPE`): row 0
        // starts the walk (`g`'s first `width` elements), row
        // `1 + j` joins at checkpoint `j`.
        let seed = if m & crate::ops::VJP_TAPE != 0 {
            Some(self.translate_in_buffer(g, cx.lb.seed)?)
        } else {
            None
        };
        let seq_rows = if m & crate::ops::VJP_SEQ != 0 {
            Some(self.vjp_seq_rows(cx, g, seed)?)
        } else {
            None
        };
        let m = m & crate::ops::VJP_RECOMPUTE;
        // The step number, also where each state's cotangent goes.
        let indexed = cx.scan || seq_rows.is_some();
        // The seed's first `width` elements (a fill would write
        // all of a seed of literal length).
        let seed_to = move |t: &mut Self, dst: ir::Value| match seed {
            Some(p) => t.translate_copy(p, dst, width, dtype),
            None => t.translate_fill(g, dst, width),
        };
        if cx.fixed == Some(0) {
            return match seq_rows {
                Some(_) => Ok(()),
                None => seed_to(self, h),
            };
        }
        let other = self.loop_opt_buf(cx, cx.lb.other)?;
        let vjp = self.call_site(cx.l, true)?;
        let k = u64::from(k.max(1));
        // Some segment may have states after its checkpoint to
        // recompute.
        let body = if cx.fixed.unwrap_or(u64::MAX).min(k) >= 2 {
            Some(self.call_site(cx.l, false)?)
        } else {
            None
        };
        // The cotangent alternates between the home and `other`,
        // unless each step has its own row.
        let gvars = match seq_rows {
            Some(_) => None,
            None => Some(self.translate_ping_pong(g, seed, n, h, other, width)?),
        };
        let seg = self.loop_opt_buf(cx, cx.lb.seg)?;
        let (a, b) = (
            self.loop_opt_buf(cx, cx.lb.a)?,
            self.loop_opt_buf(cx, cx.lb.b)?,
        );
        // ⌈n/k⌉ segments; checkpoint j in row 1 + j.
        let up = self.b.ins().iadd_imm_s(n, k as i64 - 1);
        let n_seg = self.b.ins().udiv_imm_s(up, k as i64);
        let ckpt0 = self.b.ins().iadd(tape, cx.rowbytes);
        // A settling loop: the segments before the one where it
        // had stopped (`run_loop`'s `settled_segments`).
        let walked = match body.filter(|_| cx.settles) {
            Some(body) => {
                let probe = if m == 0 { seg } else { a };
                Some(self.translate_settled_segments(
                    n_seg,
                    ckpt0,
                    tape,
                    cx.rowbytes,
                    width,
                    dtype,
                    &mut |t, st, j| {
                        let start = t.b.ins().imul_imm_s(j, k as i64);
                        let args = t.loop_ins(cx, st, start);
                        t.translate_call(body, &args, probe)?;
                        t.translate_same(st, probe, width, dtype)
                    },
                )?)
            }
            None => None,
        };
        let v = Vjp {
            cx: *cx,
            seed,
            seq_rows,
            m,
            indexed,
            other,
            vjp,
            k,
            body,
            gvars,
            seg,
            a,
            b,
            tape,
            n_seg,
            ckpt0,
            walked,
        };
        self.translate_loop(n_seg, &mut |t, jj| t.translate_vjp_segment(&v, jj))?;
        if seq_rows.is_some() {
            return Ok(());
        }
        self.loop_when_zero(cx, &mut |t| seed_to(t, h))
    }

    /// With the sequence's cotangent (`VJP_SEQ`), row `j` of the home is
    /// `[gx_j ; gs_j]`: the VJP at state `j` writes it and reads
    /// `gs_{j+1}` from the row after (row `count`: zeros and the final
    /// state's cotangent, written here). Returns the bytes before `gs` in
    /// a row and the bytes of a row.
    fn vjp_seq_rows(
        &mut self,
        cx: &LoopStmt,
        g: VarId,
        seed: Option<ir::Value>,
    ) -> Result<(ir::Value, ir::Value), Error> {
        let (n, h, width, dtype) = (cx.n, cx.h, cx.width, cx.dtype);
        // No row's cotangent for a loop that is not a scan.
        let wx = match cx.lp.row() {
            Some(row) => self.translate_len(row.clone())?,
            None => self.b.ins().iconst(types::I64, 0),
        };
        let wxb = self.b.ins().ishl_imm_u(wx, log2_bytes(dtype));
        let pw = self.b.ins().iadd(wx, width);
        let prow = self.b.ins().ishl_imm_u(pw, log2_bytes(dtype));
        let off = self.b.ins().imul(n, prow);
        let last = self.b.ins().iadd(h, off);
        self.translate_zero(last, wx, dtype)?;
        let gs = self.b.ins().iadd(last, wxb);
        match seed {
            Some(p) => self.translate_copy(p, gs, width, dtype)?,
            None => self.translate_fill(g, gs, width)?,
        }
        Ok((wxb, prow))
    }

    /// Where the cotangent of state `step` is (once written).
    fn vjp_gs_at(&mut self, v: &Vjp, step: ir::Value) -> ir::Value {
        match (v.gvars, v.seq_rows) {
            (Some((gcur, _)), _) => self.b.use_var(gcur),
            (None, Some((wxb, prow))) => {
                let off = self.b.ins().imul(step, prow);
                let row = self.b.ins().iadd(v.cx.h, off);
                self.b.ins().iadd(row, wxb)
            }
            (None, None) => v.cx.h,
        }
    }

    /// The VJP at state `step`, held in `st`: the cotangent moves on.
    fn vjp_step(&mut self, v: &Vjp, st: ir::Value, step: ir::Value) -> Result<(), Error> {
        let mut args = self.loop_ins(&v.cx, st, step);
        match (v.gvars, v.seq_rows) {
            (Some((gcur, gnxt)), _) => {
                let gc = self.b.use_var(gcur);
                let go = self.b.use_var(gnxt);
                args.push(gc);
                self.translate_call(v.vjp, &args, go)?;
                self.translate_swap(gcur, gnxt, v.cx.h, v.other);
            }
            (None, Some((_, prow))) => {
                let off = self.b.ins().imul(step, prow);
                let go = self.b.ins().iadd(v.cx.h, off);
                let next = self.b.ins().iadd_imm_s(step, 1);
                let gc = self.vjp_gs_at(v, next);
                args.push(gc);
                self.translate_call(v.vjp, &args, go)?;
            }
            (None, None) => {
                return Err(Error::internal(
                    "backend: `loopvjp` without cotangent buffers",
                ))
            }
        }
        Ok(())
    }

    /// After the step at state `start + r` of segment `j`: at a
    /// checkpoint (`r = 0`), the seed's row `1 + j` joins.
    fn vjp_seed_add(
        &mut self,
        v: &Vjp,
        j: ir::Value,
        start: ir::Value,
        r: ir::Value,
    ) -> Result<(), Error> {
        let Some(seed) = v.seed else { return Ok(()) };
        let at_ckpt = self.b.ins().icmp_imm_s(IntCC::Equal, r, 0);
        let zero = self.b.ins().iconst(types::I64, 0);
        let len = self.b.ins().select(at_ckpt, v.cx.width, zero);
        let j1 = self.b.ins().iadd_imm_s(j, 1);
        let off = self.b.ins().imul(j1, v.cx.rowbytes);
        let src = self.b.ins().iadd(seed, off);
        let step = self.b.ins().iadd(start, r);
        let dst = self.vjp_gs_at(v, step);
        self.translate_accumulate(dst, src, len, v.cx.dtype)
    }

    /// In a loop that settles, a step that changed no bit of the state (a
    /// frozen step, or one after the loop stopped) passes the cotangent on
    /// (copied, keeping the alternation) instead of calling the VJP:
    /// `next` holds the state after the one at `st`, as `run_loop` does.
    fn vjp_step_or_pass(
        &mut self,
        v: &Vjp,
        st: ir::Value,
        next: ir::Value,
        step: ir::Value,
    ) -> Result<(), Error> {
        let (width, dtype) = (v.cx.width, v.cx.dtype);
        if !v.cx.settles {
            return self.vjp_step(v, st, step);
        }
        let same = self.translate_same(st, next, width, dtype)?;
        self.translate_if(
            same,
            types::I64,
            &mut |t| {
                match v.gvars {
                    Some((gcur, gnxt)) => {
                        let gc = t.b.use_var(gcur);
                        let go = t.b.use_var(gnxt);
                        t.translate_copy(gc, go, width, dtype)?;
                        t.translate_swap(gcur, gnxt, v.cx.h, v.other);
                    }
                    None => {
                        // Every state's cotangent: this one's
                        // row gets the next one's.
                        let next = t.b.ins().iadd_imm_s(step, 1);
                        let gc = t.vjp_gs_at(v, next);
                        let go = t.vjp_gs_at(v, step);
                        t.translate_copy(gc, go, width, dtype)?;
                    }
                }
                Ok(t.b.ins().iconst(types::I64, 0))
            },
            &mut |t| {
                t.vjp_step(v, st, step)?;
                Ok(t.b.ins().iconst(types::I64, 0))
            },
        )?;
        Ok(())
    }

    /// Step `jj` of the walk over the segments, backwards: segment
    /// `j = n_seg-1-jj`, states `j*k .. j*k+len-1`, with
    /// `len = min(k, count - j*k)`.
    fn translate_vjp_segment(&mut self, v: &Vjp, jj: ir::Value) -> Result<(), Error> {
        let (n, rowbytes) = (v.cx.n, v.cx.rowbytes);
        let last = self.b.ins().iadd_imm_s(v.n_seg, -1);
        let j = self.b.ins().isub(last, jj);
        let start = self.b.ins().imul_imm_s(j, v.k as i64);
        let rest = self.b.ins().isub(n, start);
        let kv = self.translate_count(v.k);
        let short = self.b.ins().icmp(IntCC::UnsignedLessThan, rest, kv);
        let len = self.b.ins().select(short, rest, kv);
        let len1 = self.b.ins().iadd_imm_s(len, -1);
        let off = self.b.ins().imul(j, rowbytes);
        let ckpt = self.b.ins().iadd(v.ckpt0, off);
        // The state after the segment: the next checkpoint, or
        // the final state (row 0) after the last segment.
        let after = if v.cx.settles {
            let is_last = self.b.ins().icmp_imm_s(IntCC::Equal, jj, 0);
            let next_ckpt = self.b.ins().iadd(ckpt, rowbytes);
            self.b.ins().select(is_last, v.tape, next_ckpt)
        } else {
            ckpt
        };
        let sg = Segment {
            j,
            start,
            len,
            len1,
            ckpt,
            after,
        };
        // Past the stop (`walked`), every state of the
        // segment is the final one: each step passes the
        // cotangent on, with no step run.
        let Some(walked) = v.walked else {
            return self.vjp_walk(v, &sg);
        };
        let frozen = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, j, walked);
        self.translate_if(
            frozen,
            types::I64,
            &mut |t| t.vjp_frozen_segment(v, &sg),
            &mut |t| {
                t.vjp_walk(v, &sg)?;
                Ok(t.b.ins().iconst(types::I64, 0))
            },
        )?;
        Ok(())
    }

    /// A segment past a settling loop's stop: the cotangent passes over
    /// each of its steps, and the seed joins at its checkpoint. Returns a
    /// zero (`translate_if`'s value).
    fn vjp_frozen_segment(&mut self, v: &Vjp, sg: &Segment) -> Result<ir::Value, Error> {
        let (width, dtype) = (v.cx.width, v.cx.dtype);
        let Segment {
            j,
            start,
            len,
            len1,
            ..
        } = *sg;
        match v.gvars {
            // One copy for an odd `len`, two for an
            // even one: the alternation's parity is
            // kept, and the cotangent leaves a seed
            // read in place (a walk must not write
            // its operand).
            Some((gcur, gnxt)) => {
                let odd = self.b.ins().band_imm_s(len, 1);
                let two = self.b.ins().iconst(types::I64, 2);
                let copies = self.b.ins().isub(two, odd);
                self.translate_loop(copies, &mut |t, _| {
                    let gc = t.b.use_var(gcur);
                    let go = t.b.use_var(gnxt);
                    t.translate_copy(gc, go, width, dtype)?;
                    t.translate_swap(gcur, gnxt, v.cx.h, v.other);
                    Ok(())
                })?;
            }
            // Every state's row gets the next one's.
            None => self.translate_loop(len, &mut |t, rr| {
                let r = t.b.ins().isub(len1, rr);
                let step = t.b.ins().iadd(start, r);
                let next = t.b.ins().iadd_imm_s(step, 1);
                let gc = t.vjp_gs_at(v, next);
                let go = t.vjp_gs_at(v, step);
                t.translate_copy(gc, go, width, dtype)
            })?,
        }
        let zero = self.b.ins().iconst(types::I64, 0);
        self.vjp_seed_add(v, j, start, zero)?;
        Ok(zero)
    }

    /// The VJP over the states of a segment, backwards: stored in `seg`
    /// first, or (`VJP_RECOMPUTE`) each recomputed when needed.
    fn vjp_walk(&mut self, v: &Vjp, sg: &Segment) -> Result<(), Error> {
        if v.m == 0 {
            self.vjp_walk_stored(v, sg)
        } else {
            self.vjp_walk_recompute(v, sg)
        }
    }

    /// States 1 .. len-1 of a segment into rows 0 .. len-2 of `seg`, then
    /// the VJP backwards over them and the checkpoint.
    fn vjp_walk_stored(&mut self, v: &Vjp, sg: &Segment) -> Result<(), Error> {
        let (seg, rowbytes, indexed) = (v.seg, v.cx.rowbytes, v.indexed);
        let Segment {
            j,
            start,
            len,
            len1,
            ckpt,
            after,
            ..
        } = *sg;
        if let Some(body) = v.body {
            let prev = self.translate_var(ckpt);
            self.translate_loop(len1, &mut |t, r| {
                let p = t.b.use_var(prev);
                let ro = t.b.ins().imul(r, rowbytes);
                let o = t.b.ins().iadd(seg, ro);
                let sr = t.step_at(indexed, start, r);
                let args = t.loop_ins(&v.cx, p, sr);
                t.translate_call(body, &args, o)?;
                t.b.def_var(prev, o);
                Ok(())
            })?;
        }
        self.translate_loop(len, &mut |t, rr| {
            let r = t.b.ins().isub(len1, rr);
            let r1 = t.b.ins().iadd_imm_s(r, -1);
            let ro = t.b.ins().imul(r1, rowbytes);
            let in_seg = t.b.ins().iadd(seg, ro);
            let at_ckpt = t.b.ins().icmp_imm_s(IntCC::Equal, r, 0);
            let st = t.b.ins().select(at_ckpt, ckpt, in_seg);
            let sr = t.step_at(indexed, start, r);
            if v.cx.settles {
                // State r+1: row r of `seg`, or after the segment.
                let ro1 = t.b.ins().imul(r, rowbytes);
                let next_in_seg = t.b.ins().iadd(seg, ro1);
                let at_end = t.b.ins().icmp(IntCC::Equal, r, len1);
                let next = t.b.ins().select(at_end, after, next_in_seg);
                t.vjp_step_or_pass(v, st, next, sr)?;
            } else {
                t.vjp_step(v, st, sr)?;
            }
            t.vjp_seed_add(v, j, start, r)
        })
    }

    /// Each state of a segment recomputed from the checkpoint when the VJP
    /// needs it, alternating between `a` and `b`.
    fn vjp_walk_recompute(&mut self, v: &Vjp, sg: &Segment) -> Result<(), Error> {
        let (a, b, indexed) = (v.a, v.b, v.indexed);
        let Segment {
            j,
            start,
            len,
            len1,
            ckpt,
            after,
            ..
        } = *sg;
        self.translate_loop(len, &mut |t, rr| {
            let r = t.b.ins().isub(len1, rr);
            let cur = t.translate_var(ckpt);
            if let Some(body) = v.body {
                let nxt = t.translate_var(a);
                t.translate_loop(r, &mut |t, q| {
                    let c = t.b.use_var(cur);
                    let o = t.b.use_var(nxt);
                    let sq = t.step_at(indexed, start, q);
                    let args = t.loop_ins(&v.cx, c, sq);
                    t.translate_call(body, &args, o)?;
                    t.translate_swap(cur, nxt, a, b);
                    Ok(())
                })?;
            }
            let st = t.b.use_var(cur);
            let sr = t.step_at(indexed, start, r);
            if !v.cx.settles {
                t.vjp_step(v, st, sr)?;
                return t.vjp_seed_add(v, j, start, r);
            }
            // State r+1: after the segment, or one more step
            // into the buffer `st` is not in.
            let at_end = t.b.ins().icmp(IntCC::Equal, r, len1);
            let next = t.translate_if(
                at_end,
                types::I64,
                &mut |_| Ok(after),
                &mut |t| match v.body {
                    Some(body) => {
                        let on_a = t.b.ins().icmp(IntCC::Equal, st, a);
                        let o = t.b.ins().select(on_a, b, a);
                        let args = t.loop_ins(&v.cx, st, sr);
                        t.translate_call(body, &args, o)?;
                        Ok(o)
                    }
                    None => Ok(after),
                },
            )?;
            t.vjp_step_or_pass(v, st, next, sr)?;
            t.vjp_seed_add(v, j, start, r)
        })
    }
}
