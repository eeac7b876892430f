//! The loop ops (`loop`, `looptape`, `loopvjp`): counted loops whose steps
//! call the loop's body or VJP on state buffers.

use super::vector::Source;
use super::{log2_bytes, CallSite, LoopBufs, Read, Translator};
use crate::error::Error;
use crate::ir::VarId;
use crate::ops::Op;
use crate::types::{DType, Type};
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

    /// A loop statement `s` (`loop`, `looptape`, `loopvjp`) writing buffer
    /// `home`. The counted loops run here; each step calls the loop's body
    /// (or VJP), compiled as its own function, on state buffers of this
    /// function ([`LoopBufs`]). Steps happen in the interpreter's order, so
    /// results are bit-identical to `run_loop`. Buffers a step writes never
    /// alias the buffers it reads.
    pub(super) fn translate_loop_stmt(&mut self, s: usize, home: usize) -> Result<(), Error> {
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
        let arg = |i: usize| {
            stmt.args.get(i).copied().ok_or_else(|| {
                Error::internal(format!(
                    "backend: `{}` is missing an operand",
                    stmt.op.name()
                ))
            })
        };
        // An optional buffer: where the plan left it out, no step uses it
        // (the home stands in, never read or written through it).
        let opt = |t: &mut Self, k: Option<usize>| k.map_or(Ok(h), |k| t.buf(k));
        let rowbytes = self.b.ins().ishl_imm_u(width, log2_bytes(state.dtype));
        // A scan's sequence: its base and the bytes of one row; step `t`
        // passes row `t` to the body (and the VJP at state `t` gets it too).
        let seq = match lp.row() {
            Some(row) => {
                let xs = *stmt
                    .args
                    .last()
                    .ok_or_else(|| Error::internal("backend: a scan without its sequence"))?;
                let base = self.translate_in_buffer(xs, lb.seq)?;
                let w = self.translate_len(row.clone())?;
                Some((base, self.b.ins().ishl_imm_u(w, log2_bytes(row.dtype))))
            }
            None => None,
        };
        let scan = seq.is_some();
        // A loop that settles (`Loop::settles`): `loop` leaves at the first
        // step that changes no bit of the state, `looptape` copies the
        // state into the rest of its rows from then on (a flag skips the
        // body's calls), and `loopvjp` passes the cotangent over every such
        // step (`step_or_pass`).
        let settles = lp.settles && !scan;
        let dtype = state.dtype;
        // The inputs of a body call at step `t`: the state, and in a scan
        // row `t` of the sequence.
        let ins = move |t: &mut Self, st: ir::Value, step: ir::Value| -> Vec<ir::Value> {
            match seq {
                Some((base, rb)) => {
                    let off = t.b.ins().imul(step, rb);
                    vec![st, t.b.ins().iadd(base, off)]
                }
                None => vec![st],
            }
        };
        // With a run-time count, what a count of 0 does runs only then.
        let when_zero = |t: &mut Self, f: &mut dyn FnMut(&mut Self) -> Result<(), Error>| {
            if fixed.is_some() {
                return Ok(());
            }
            let z = t.b.ins().icmp_imm_s(IntCC::Equal, n, 0);
            let trips = t.b.ins().uextend(types::I64, z);
            t.translate_loop(trips, &mut |t, _| f(t))
        };
        match stmt.op {
            Op::Loop(..) => {
                let x = arg(0)?;
                if fixed == Some(0) {
                    return self.translate_fill(x, h, width);
                }
                let other = opt(self, lb.other)?;
                let body = self.call_site(l, false)?;
                let (cur, nxt) = self.translate_ping_pong(x, None, n, h, other, width)?;
                // One step; with `settles`, whether it changed nothing.
                let step = |t: &mut Self, i: ir::Value| -> Result<Option<ir::Value>, Error> {
                    let c = t.b.use_var(cur);
                    let o = t.b.use_var(nxt);
                    let args = ins(t, c, i);
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
                when_zero(self, &mut |t| t.translate_fill(x, h, width))
            }
            Op::LoopTape(_, k, _) => {
                // Row 0 is the final state, row 1 + j the state after j·k
                // steps. The initial state goes to row 1; the step ending a
                // segment writes the next checkpoint row, the last step row
                // 0, the others alternate between `a` and `b`.
                let x = arg(0)?;
                if fixed == Some(0) {
                    return self.translate_fill(x, h, width);
                }
                when_zero(self, &mut |t| t.translate_fill(x, h, width))?;
                let row1 = self.b.ins().iadd(h, rowbytes);
                let (a, b) = (opt(self, lb.a)?, opt(self, lb.b)?);
                let body = self.call_site(l, false)?;
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
                    let args = ins(t, c, i);
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
                self.translate_loop(trips, &mut |t, _| {
                    let c = t.b.use_var(cur);
                    let r = t.b.use_var(row);
                    // Rows 1 ..= ⌈n/k⌉: the first past the tape's end.
                    let up = t.b.ins().iadd_imm_s(n, k - 1);
                    let n_ckpt = t.b.ins().udiv_imm_s(up, k);
                    let rows = t.b.ins().iadd_imm_s(n_ckpt, 1);
                    let end = t.b.ins().imul(rows, rowbytes);
                    let end = t.b.ins().iadd(h, end);
                    let before = t.b.ins().icmp(IntCC::UnsignedLessThan, r, end);
                    let gap = t.b.ins().isub(end, r);
                    let zero = t.b.ins().iconst(types::I64, 0);
                    let gap = t.b.ins().select(before, gap, zero);
                    // An empty state has rows of 0 bytes: none to fill.
                    let one = t.b.ins().iconst(types::I64, 1);
                    let empty = t.b.ins().icmp_imm_s(IntCC::Equal, rowbytes, 0);
                    let per = t.b.ins().select(empty, one, rowbytes);
                    let left = t.b.ins().udiv(gap, per);
                    t.translate_loop(left, &mut |t, q| {
                        let off = t.b.ins().imul(q, rowbytes);
                        let dst = t.b.ins().iadd(r, off);
                        t.translate_copy(c, dst, width, dtype)
                    })?;
                    let home = t.b.ins().icmp(IntCC::Equal, c, h);
                    let len = t.b.ins().select(home, zero, width);
                    t.translate_copy(c, h, len, dtype)
                })
            }
            Op::LoopVjp(_, k, m, _) => {
                let (tv, g) = (arg(0)?, arg(1)?);
                let tape = self.translate_in_buffer(tv, lb.tape)?;
                // Seeded by the whole tape's cotangent (`VJP_TAPE`): row 0
                // starts the walk (`g`'s first `width` elements), row
                // `1 + j` joins at checkpoint `j`.
                let seed = if m & crate::ops::VJP_TAPE != 0 {
                    Some(self.translate_in_buffer(g, lb.seed)?)
                } else {
                    None
                };
                // With the sequence's cotangent (`VJP_SEQ`), row `j` of the
                // home is `[gx_j ; gs_j]`: the VJP at state `j` writes it
                // and reads `gs_{j+1}` from the row after (row `count`:
                // zeros and the final state's cotangent).
                let seq_rows = if m & crate::ops::VJP_SEQ != 0 {
                    // No row's cotangent for a loop that is not a scan.
                    let wx = match lp.row() {
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
                    Some((wxb, prow))
                } else {
                    None
                };
                let m = m & crate::ops::VJP_RECOMPUTE;
                // The step number, also where each state's cotangent goes.
                let indexed = scan || seq_rows.is_some();
                // The seed's first `width` elements (a fill would write
                // all of a seed of literal length).
                let seed_to = move |t: &mut Self, dst: ir::Value| match seed {
                    Some(p) => t.translate_copy(p, dst, width, dtype),
                    None => t.translate_fill(g, dst, width),
                };
                if fixed == Some(0) {
                    return match seq_rows {
                        Some(_) => Ok(()),
                        None => seed_to(self, h),
                    };
                }
                let other = opt(self, lb.other)?;
                let vjp = self.call_site(l, true)?;
                let k = u64::from(k.max(1));
                // Some segment may have states after its checkpoint to
                // recompute.
                let body = if fixed.unwrap_or(u64::MAX).min(k) >= 2 {
                    Some(self.call_site(l, false)?)
                } else {
                    None
                };
                // The cotangent alternates between the home and `other`,
                // unless each step has its own row.
                let gvars = match seq_rows {
                    Some(_) => None,
                    None => Some(self.translate_ping_pong(g, seed, n, h, other, width)?),
                };
                let seg = opt(self, lb.seg)?;
                let (a, b) = (opt(self, lb.a)?, opt(self, lb.b)?);
                // ⌈n/k⌉ segments; checkpoint j in row 1 + j.
                let up = self.b.ins().iadd_imm_s(n, k as i64 - 1);
                let n_seg = self.b.ins().udiv_imm_s(up, k as i64);
                let ckpt0 = self.b.ins().iadd(tape, rowbytes);
                // Where the cotangent of state `step` is (once written).
                let gs_at = move |t: &mut Self, step: ir::Value| -> ir::Value {
                    match (gvars, seq_rows) {
                        (Some((gcur, _)), _) => t.b.use_var(gcur),
                        (None, Some((wxb, prow))) => {
                            let off = t.b.ins().imul(step, prow);
                            let row = t.b.ins().iadd(h, off);
                            t.b.ins().iadd(row, wxb)
                        }
                        (None, None) => h,
                    }
                };
                // The VJP at state `step`, held in `st`: the cotangent
                // moves on.
                let vjp_step =
                    move |t: &mut Self, st: ir::Value, step: ir::Value| -> Result<(), Error> {
                        let mut args = ins(t, st, step);
                        match (gvars, seq_rows) {
                            (Some((gcur, gnxt)), _) => {
                                let gc = t.b.use_var(gcur);
                                let go = t.b.use_var(gnxt);
                                args.push(gc);
                                t.translate_call(vjp, &args, go)?;
                                t.translate_swap(gcur, gnxt, h, other);
                            }
                            (None, Some((_, prow))) => {
                                let off = t.b.ins().imul(step, prow);
                                let go = t.b.ins().iadd(h, off);
                                let next = t.b.ins().iadd_imm_s(step, 1);
                                let gc = gs_at(t, next);
                                args.push(gc);
                                t.translate_call(vjp, &args, go)?;
                            }
                            (None, None) => {
                                return Err(Error::internal(
                                    "backend: `loopvjp` without cotangent buffers",
                                ))
                            }
                        }
                        Ok(())
                    };
                // After the step at state `start + r` of segment `j`: at a
                // checkpoint (`r = 0`), the seed's row `1 + j` joins.
                let seed_add = move |t: &mut Self,
                                     j: ir::Value,
                                     start: ir::Value,
                                     r: ir::Value|
                      -> Result<(), Error> {
                    let Some(seed) = seed else { return Ok(()) };
                    let at_ckpt = t.b.ins().icmp_imm_s(IntCC::Equal, r, 0);
                    let zero = t.b.ins().iconst(types::I64, 0);
                    let len = t.b.ins().select(at_ckpt, width, zero);
                    let j1 = t.b.ins().iadd_imm_s(j, 1);
                    let off = t.b.ins().imul(j1, rowbytes);
                    let src = t.b.ins().iadd(seed, off);
                    let step = t.b.ins().iadd(start, r);
                    let dst = gs_at(t, step);
                    t.translate_accumulate(dst, src, len, dtype)
                };
                // In a loop that settles, a step that changed no bit of
                // the state (a frozen step, or one after the loop stopped)
                // passes the cotangent on (copied, keeping the alternation)
                // instead of calling the VJP: `next` holds the state after
                // the one at `st`, as `run_loop` does.
                let step_or_pass = move |t: &mut Self,
                                         st: ir::Value,
                                         next: ir::Value,
                                         step: ir::Value|
                      -> Result<(), Error> {
                    if !settles {
                        return vjp_step(t, st, step);
                    }
                    let same = t.translate_same(st, next, width, dtype)?;
                    t.translate_if(
                        same,
                        types::I64,
                        &mut |t| {
                            match gvars {
                                Some((gcur, gnxt)) => {
                                    let gc = t.b.use_var(gcur);
                                    let go = t.b.use_var(gnxt);
                                    t.translate_copy(gc, go, width, dtype)?;
                                    t.translate_swap(gcur, gnxt, h, other);
                                }
                                None => {
                                    // Every state's cotangent: this one's
                                    // row gets the next one's.
                                    let next = t.b.ins().iadd_imm_s(step, 1);
                                    let gc = gs_at(t, next);
                                    let go = gs_at(t, step);
                                    t.translate_copy(gc, go, width, dtype)?;
                                }
                            }
                            Ok(t.b.ins().iconst(types::I64, 0))
                        },
                        &mut |t| {
                            vjp_step(t, st, step)?;
                            Ok(t.b.ins().iconst(types::I64, 0))
                        },
                    )?;
                    Ok(())
                };
                // A settling loop: the segments before the one where it
                // had stopped (`run_loop`'s `settled_segments`).
                let walked = match body.filter(|_| settles) {
                    Some(body) => {
                        let probe = if m == 0 { seg } else { a };
                        Some(self.translate_settled_segments(
                            n_seg,
                            ckpt0,
                            tape,
                            rowbytes,
                            width,
                            dtype,
                            &mut |t, st, j| {
                                let start = t.b.ins().imul_imm_s(j, k as i64);
                                let args = ins(t, st, start);
                                t.translate_call(body, &args, probe)?;
                                t.translate_same(st, probe, width, dtype)
                            },
                        )?)
                    }
                    None => None,
                };
                self.translate_loop(n_seg, &mut |t, jj| {
                    // Segment j = segments-1-jj: states j*k .. j*k+len-1,
                    // with len = min(k, count - j*k).
                    let last = t.b.ins().iadd_imm_s(n_seg, -1);
                    let j = t.b.ins().isub(last, jj);
                    let start = t.b.ins().imul_imm_s(j, k as i64);
                    let rest = t.b.ins().isub(n, start);
                    let kv = t.translate_count(k);
                    let short = t.b.ins().icmp(IntCC::UnsignedLessThan, rest, kv);
                    let len = t.b.ins().select(short, rest, kv);
                    let len1 = t.b.ins().iadd_imm_s(len, -1);
                    let off = t.b.ins().imul(j, rowbytes);
                    let ckpt = t.b.ins().iadd(ckpt0, off);
                    // The state after the segment: the next checkpoint, or
                    // the final state (row 0) after the last segment.
                    let after = if settles {
                        let is_last = t.b.ins().icmp_imm_s(IntCC::Equal, jj, 0);
                        let next_ckpt = t.b.ins().iadd(ckpt, rowbytes);
                        t.b.ins().select(is_last, tape, next_ckpt)
                    } else {
                        ckpt
                    };
                    let walk = |t: &mut Self| -> Result<(), Error> {
                        if m == 0 {
                            // States 1 .. len-1 into rows 0 .. len-2 of `seg`,
                            // then the VJP backwards over them and the
                            // checkpoint.
                            if let Some(body) = body {
                                let prev = t.translate_var(ckpt);
                                t.translate_loop(len1, &mut |t, r| {
                                    let p = t.b.use_var(prev);
                                    let ro = t.b.ins().imul(r, rowbytes);
                                    let o = t.b.ins().iadd(seg, ro);
                                    let sr = t.step_at(indexed, start, r);
                                    let args = ins(t, p, sr);
                                    t.translate_call(body, &args, o)?;
                                    t.b.def_var(prev, o);
                                    Ok(())
                                })?;
                            }
                            t.translate_loop(len, &mut |t, rr| {
                                let r = t.b.ins().isub(len1, rr);
                                let r1 = t.b.ins().iadd_imm_s(r, -1);
                                let ro = t.b.ins().imul(r1, rowbytes);
                                let in_seg = t.b.ins().iadd(seg, ro);
                                let at_ckpt = t.b.ins().icmp_imm_s(IntCC::Equal, r, 0);
                                let st = t.b.ins().select(at_ckpt, ckpt, in_seg);
                                let sr = t.step_at(indexed, start, r);
                                if settles {
                                    // State r+1: row r of `seg`, or after the segment.
                                    let ro1 = t.b.ins().imul(r, rowbytes);
                                    let next_in_seg = t.b.ins().iadd(seg, ro1);
                                    let at_end = t.b.ins().icmp(IntCC::Equal, r, len1);
                                    let next = t.b.ins().select(at_end, after, next_in_seg);
                                    step_or_pass(t, st, next, sr)?;
                                } else {
                                    vjp_step(t, st, sr)?;
                                }
                                seed_add(t, j, start, r)
                            })
                        } else {
                            // Each state recomputed from the checkpoint when the
                            // VJP needs it, alternating between `a` and `b`.
                            t.translate_loop(len, &mut |t, rr| {
                                let r = t.b.ins().isub(len1, rr);
                                let cur = t.translate_var(ckpt);
                                if let Some(body) = body {
                                    let nxt = t.translate_var(a);
                                    t.translate_loop(r, &mut |t, q| {
                                        let c = t.b.use_var(cur);
                                        let o = t.b.use_var(nxt);
                                        let sq = t.step_at(indexed, start, q);
                                        let args = ins(t, c, sq);
                                        t.translate_call(body, &args, o)?;
                                        t.translate_swap(cur, nxt, a, b);
                                        Ok(())
                                    })?;
                                }
                                let st = t.b.use_var(cur);
                                let sr = t.step_at(indexed, start, r);
                                if !settles {
                                    vjp_step(t, st, sr)?;
                                    return seed_add(t, j, start, r);
                                }
                                // State r+1: after the segment, or one more step
                                // into the buffer `st` is not in.
                                let at_end = t.b.ins().icmp(IntCC::Equal, r, len1);
                                let next = t.translate_if(
                                    at_end,
                                    types::I64,
                                    &mut |_| Ok(after),
                                    &mut |t| match body {
                                        Some(body) => {
                                            let on_a = t.b.ins().icmp(IntCC::Equal, st, a);
                                            let o = t.b.ins().select(on_a, b, a);
                                            let args = ins(t, st, sr);
                                            t.translate_call(body, &args, o)?;
                                            Ok(o)
                                        }
                                        None => Ok(after),
                                    },
                                )?;
                                step_or_pass(t, st, next, sr)?;
                                seed_add(t, j, start, r)
                            })
                        }
                    };
                    // Past the stop (`walked`), every state of the
                    // segment is the final one: each step passes the
                    // cotangent on, with no step run.
                    let Some(walked) = walked else {
                        return walk(t);
                    };
                    let frozen = t.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, j, walked);
                    t.translate_if(
                        frozen,
                        types::I64,
                        &mut |t| {
                            match gvars {
                                // One copy for an odd `len`, two for an
                                // even one: the alternation's parity is
                                // kept, and the cotangent leaves a seed
                                // read in place (a walk must not write
                                // its operand).
                                Some((gcur, gnxt)) => {
                                    let odd = t.b.ins().band_imm_s(len, 1);
                                    let two = t.b.ins().iconst(types::I64, 2);
                                    let copies = t.b.ins().isub(two, odd);
                                    t.translate_loop(copies, &mut |t, _| {
                                        let gc = t.b.use_var(gcur);
                                        let go = t.b.use_var(gnxt);
                                        t.translate_copy(gc, go, width, dtype)?;
                                        t.translate_swap(gcur, gnxt, h, other);
                                        Ok(())
                                    })?;
                                }
                                // Every state's row gets the next one's.
                                None => t.translate_loop(len, &mut |t, rr| {
                                    let r = t.b.ins().isub(len1, rr);
                                    let step = t.b.ins().iadd(start, r);
                                    let next = t.b.ins().iadd_imm_s(step, 1);
                                    let gc = gs_at(t, next);
                                    let go = gs_at(t, step);
                                    t.translate_copy(gc, go, width, dtype)
                                })?,
                            }
                            let zero = t.b.ins().iconst(types::I64, 0);
                            seed_add(t, j, start, zero)?;
                            Ok(zero)
                        },
                        &mut |t| {
                            walk(t)?;
                            Ok(t.b.ins().iconst(types::I64, 0))
                        },
                    )?;
                    Ok(())
                })?;
                if seq_rows.is_some() {
                    return Ok(());
                }
                when_zero(self, &mut |t| seed_to(t, h))
            }
            other => Err(Error::internal(format!(
                "backend: `{}` is not a loop op",
                other.name()
            ))),
        }
    }

    /// `run_loop`'s `settled_segments`: of the `n_seg` checkpoints (row
    /// `j` at `ckpt0 + j·rowbytes`), the first with the bits of the final
    /// state (at `last`), by bisection, if `frozen(state, j)` (1 when its
    /// step leaves it unchanged) holds there; else `n_seg`.
    #[allow(clippy::too_many_arguments)]
    fn translate_settled_segments(
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
    fn translate_in_buffer(&mut self, v: VarId, copy: Option<usize>) -> Result<ir::Value, Error> {
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
    fn step_at(&mut self, scan: bool, start: ir::Value, r: ir::Value) -> ir::Value {
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
    fn translate_ping_pong(
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
    fn translate_swap(
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
    fn translate_same(
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
    fn translate_copy(
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
    fn translate_zero(
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
    fn translate_accumulate(
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
    fn translate_var(&mut self, x: ir::Value) -> cranelift_frontend::Variable {
        let v = self.b.declare_var(types::I64);
        self.b.def_var(v, x);
        v
    }

    /// A count as a 64-bit constant (loops compare it unsigned).
    fn translate_count(&mut self, n: u64) -> ir::Value {
        self.b
            .ins()
            .iconst(types::I64, i64::from_ne_bytes(n.to_ne_bytes()))
    }

    /// Write the `len` elements of `v` (as its consumers read them) to
    /// `base`.
    fn translate_fill(&mut self, v: VarId, base: ir::Value, len: ir::Value) -> Result<(), Error> {
        let dtype = self.f.ty(v).dtype;
        self.translate_map(Source::Elem(v), dtype, base, len)
    }

    /// Loop `l`'s body (or VJP) ready to call: a stack slot for its buffer
    /// table, with its scratch pointers stored once.
    fn call_site(&mut self, l: usize, vjp: bool) -> Result<CallSite, Error> {
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
    fn translate_call(
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
