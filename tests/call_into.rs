//! `CompiledFunction::call_into`: borrowed arguments, caller-provided
//! outputs and a reusable workspace. Results must be bit for bit those of
//! `CompiledFunction::call`; a call with the shapes the workspace is bound
//! for must not allocate at all; and every wrong argument, output or
//! workspace must be an error before native code runs.

use egrad::internals::backend::{
    self, BackendOptions, CompiledFunction, NativeArg, NativeOut, Workspace,
};
use egrad::internals::ir::interp;
use egrad::internals::ir::{parse_functions, Function};
use egrad::internals::suite;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;
use egrad::{optimize_gradient, CompiledGradient, Options};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;

/// Counts the allocations of the current thread (each test runs on its own
/// thread, so tests running at the same time do not disturb the count).
struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn count_one() {
    // During thread teardown the counter may be gone: nothing to count.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every method forwards to `System` unchanged; counting touches
// only a thread-local `Cell` (const-initialised, no destructor: it does
// not allocate).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by this thread while `f` runs.
fn allocations<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let before = ALLOCS.with(Cell::get);
    let r = f();
    let after = ALLOCS.with(Cell::get);
    (after - before, r)
}

/// An argument's data in the native layout.
enum Owned {
    F64(Vec<f64>, Vec<usize>),
    F32(Vec<f32>, Vec<usize>),
    I64(i64),
    Bools(Vec<i64>, Vec<usize>),
}

impl Owned {
    fn of(v: &Value) -> Owned {
        match v.dtype {
            DType::F64 => Owned::F64(v.data.clone(), v.shape.clone()),
            DType::F32 => Owned::F32(v.data.iter().map(|&x| x as f32).collect(), v.shape.clone()),
            DType::I64 => Owned::I64(v.as_scalar() as i64),
            DType::Bool => {
                Owned::Bools(v.data.iter().map(|&x| x as i64).collect(), v.shape.clone())
            }
        }
    }

    fn arg(&self) -> NativeArg<'_> {
        match self {
            Owned::F64(d, s) => NativeArg::f64(d, s),
            Owned::F32(d, s) => NativeArg::f32(d, s),
            Owned::I64(n) => NativeArg::i64(*n),
            Owned::Bools(d, s) => NativeArg::bools(d, s),
        }
    }
}

fn owned(values: &[Value]) -> Vec<Owned> {
    values.iter().map(Owned::of).collect()
}

fn args(owned: &[Owned]) -> Vec<NativeArg<'_>> {
    owned.iter().map(Owned::arg).collect()
}

/// An output buffer, filled with NaN so a result element the native code
/// failed to write shows.
enum OutBuf {
    F64(Vec<f64>),
    F32(Vec<f32>),
    Bool(Vec<i64>),
}

impl OutBuf {
    fn out(&mut self) -> NativeOut<'_> {
        match self {
            OutBuf::F64(v) => NativeOut::F64(v),
            OutBuf::F32(v) => NativeOut::F32(v),
            OutBuf::Bool(v) => NativeOut::Bool(v),
        }
    }

    fn data(&self) -> Vec<f64> {
        match self {
            OutBuf::F64(v) => v.clone(),
            OutBuf::F32(v) => v.iter().map(|&x| x as f64).collect(),
            OutBuf::Bool(v) => v.iter().map(|&x| x as f64).collect(),
        }
    }

    fn all_nan(&self) -> bool {
        self.data().iter().all(|x| x.is_nan())
    }
}

/// NaN-filled output buffers of the right dtypes and lengths for `args`.
fn out_bufs(native: &CompiledFunction, args: &[NativeArg<'_>]) -> Vec<OutBuf> {
    let f = native.function();
    let shapes = native
        .output_shapes(args)
        .unwrap_or_else(|e| panic!("output_shapes: {e}"));
    assert_eq!(shapes.len(), f.rets.len());
    f.rets
        .iter()
        .zip(&shapes)
        .map(|(r, shape)| {
            let n = shape.iter().product();
            match f.ty(*r).dtype {
                DType::F32 => OutBuf::F32(vec![f32::NAN; n]),
                DType::F64 | DType::I64 => OutBuf::F64(vec![f64::NAN; n]),
                // Not 0 or 1, so an element not written shows.
                DType::Bool => OutBuf::Bool(vec![-1; n]),
            }
        })
        .collect()
}

fn outs(bufs: &mut [OutBuf]) -> Vec<NativeOut<'_>> {
    bufs.iter_mut().map(OutBuf::out).collect()
}

/// `call_into` on `values` with `ws` equals `call` bit for bit; returns the
/// allocations of the `call_into` itself.
fn same_as_call(
    native: &CompiledFunction,
    values: &[Value],
    ws: &mut Workspace,
    what: &str,
) -> usize {
    let refs: Vec<&Value> = values.iter().collect();
    let want = native
        .call(&refs)
        .unwrap_or_else(|e| panic!("{what}: call: {e}"));
    let owned = owned(values);
    let args = args(&owned);
    let mut bufs = out_bufs(native, &args);
    let mut o = outs(&mut bufs);
    let (n, r) = allocations(|| native.call_into(&args, &mut o, ws));
    r.unwrap_or_else(|e| panic!("{what}: call_into: {e}"));
    drop(o);
    assert_eq!(bufs.len(), want.len(), "{what}: number of outputs");
    for (k, (b, w)) in bufs.iter().zip(&want).enumerate() {
        let got = b.data();
        assert_eq!(got.len(), w.data.len(), "{what}: output {k} length");
        let same = got
            .iter()
            .zip(&w.data)
            .all(|(g, w)| g.to_bits() == w.to_bits());
        assert!(
            same,
            "{what}: output {k} differs\n  call_into: {got:?}\n  call:      {:?}",
            w.data
        );
    }
    let prepared = native.prepare(&refs).expect("prepare");
    assert_eq!(
        ws.scratch_bytes(),
        prepared.scratch_bytes(),
        "{what}: scratch bytes"
    );
    n
}

/// Call `call_into` three times with the same arguments (values changed
/// between calls, shapes not): the second and third calls allocate
/// nothing, and every call matches `call`.
fn no_allocation_when_shapes_repeat(native: &CompiledFunction, values: &[Value], what: &str) {
    let mut ws = native.workspace();
    let mut owned = owned(values);
    let mut bufs = {
        let a = args(&owned);
        out_bufs(native, &a)
    };
    for round in 0..3 {
        // New values, same shapes: the workspace stays bound.
        if round == 2 {
            for o in &mut owned {
                match o {
                    Owned::F64(d, _) => d.iter_mut().for_each(|x| *x *= 0.5),
                    Owned::F32(d, _) => d.iter_mut().for_each(|x| *x *= 0.5),
                    Owned::I64(_) => {}
                    // Flipped: still 0 or 1.
                    Owned::Bools(d, _) => d.iter_mut().for_each(|x| *x = 1 - *x),
                }
            }
        }
        let a = args(&owned);
        let mut o = outs(&mut bufs);
        let (n, r) = allocations(|| native.call_into(&a, &mut o, &mut ws));
        r.unwrap_or_else(|e| panic!("{what}: call_into: {e}"));
        if round > 0 {
            assert_eq!(n, 0, "{what}: call {} allocated {n} time(s)", round + 1);
        } else {
            assert!(n > 0, "{what}: the first call binds (and allocates)");
        }
    }
    // The last call against `call` on the halved values.
    let halved: Vec<Value> = values
        .iter()
        .map(|v| match v.dtype {
            DType::I64 => v.clone(),
            _ => Value::array(
                v.dtype,
                v.shape.clone(),
                v.data.iter().map(|x| x * 0.5).collect(),
            ),
        })
        .collect();
    let hrefs: Vec<&Value> = halved.iter().collect();
    let want = native.call(&hrefs).expect("call");
    for (k, (b, w)) in bufs.iter().zip(&want).enumerate() {
        let got = b.data();
        let same = got.len() == w.data.len()
            && got
                .iter()
                .zip(&w.data)
                .all(|(g, w)| g.to_bits() == w.to_bits());
        assert!(
            same,
            "{what}: output {k} of the third call differs from call"
        );
    }
    // And a fresh workspace's call on the original values.
    let mut fresh = native.workspace();
    same_as_call(native, values, &mut fresh, what);
}

/// A suite benchmark's value-and-gradient program, compiled, with its
/// inputs.
fn gradient(key: &str) -> (CompiledGradient, Vec<Value>) {
    let b = suite::benchmark(key).expect("a suite benchmark");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(b.example);
    let program = Program::from_file(&path).unwrap_or_else(|e| panic!("{key}: {e}"));
    let inputs = b.values(DType::F64);
    let refs: Vec<&Value> = inputs.iter().collect();
    let loss = program.ir(b.loss_fn).expect("loss function");
    let dims = interp::bind_args(loss, &refs).unwrap_or_else(|e| panic!("{key}: {e}"));
    let opts = Options {
        dims,
        ..Options::default()
    }
    .function(b.grad_fn);
    let g = optimize_gradient(&program, &opts).unwrap_or_else(|e| panic!("{key}: {e}"));
    let compiled = g
        .compile_with(&BackendOptions::verified())
        .unwrap_or_else(|e| panic!("{key}: {e}"));
    (compiled, inputs)
}

/// Deterministic values in (-0.9, 0.9).
fn sample(dtype: DType, shape: &[usize], seed: usize) -> Value {
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|i| ((i * 7 + seed * 13 + 1) as f64 * 0.37).sin() * 0.9)
        .collect();
    Value::array(dtype, shape.to_vec(), data)
}

fn samples(dtype: DType, shapes: &[&[usize]]) -> Vec<Value> {
    shapes
        .iter()
        .enumerate()
        .map(|(i, s)| sample(dtype, s, i))
        .collect()
}

fn ir(text: &str) -> Function {
    let fs = parse_functions(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    fs.into_iter().next().expect("one function")
}

/// `mlp2[B, I, H, O](W1[I,H], b1[H], W2[H,O], b2[O], X[B,I], Y[B,O])`.
fn mlp2_shapes(b: usize, i: usize, h: usize, o: usize) -> Vec<Vec<usize>> {
    vec![
        vec![i, h],
        vec![h],
        vec![h, o],
        vec![o],
        vec![b, i],
        vec![b, o],
    ]
}

fn mlp2_values(b: usize, i: usize, h: usize, o: usize) -> Vec<Value> {
    let shapes = mlp2_shapes(b, i, h, o);
    let shapes: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    samples(DType::F64, &shapes)
}

#[test]
fn mlp2_gradient_matches_call_at_several_sizes() {
    let (compiled, inputs) = gradient("mlp2");
    let native = compiled.native();
    let mut ws = native.workspace();
    same_as_call(native, &inputs, &mut ws, "mlp2 suite inputs");
    // Same shapes again: no rebinding, no allocation.
    let n = same_as_call(native, &inputs, &mut ws, "mlp2 suite inputs again");
    assert_eq!(n, 0, "mlp2: the second call allocated");
    // New sizes rebind the same workspace, and back again.
    for (b, i, h, o) in [(5, 3, 4, 2), (1, 1, 1, 1), (17, 9, 6, 3), (5, 3, 4, 2)] {
        let what = format!("mlp2 B={b} I={i} H={h} O={o}");
        same_as_call(native, &mlp2_values(b, i, h, o), &mut ws, &what);
    }
    same_as_call(native, &inputs, &mut ws, "mlp2 suite inputs after others");
}

#[test]
fn logistic_gradient_matches_call_at_several_sizes() {
    let (compiled, inputs) = gradient("logistic");
    let native = compiled.native();
    let mut ws = native.workspace();
    same_as_call(native, &inputs, &mut ws, "logistic suite inputs");
    for (m, k) in [(7usize, 3usize), (64, 16), (1, 1), (0, 4)] {
        let values = samples(DType::F64, &[&[k], &[m, k], &[m]]);
        same_as_call(native, &values, &mut ws, &format!("logistic M={m} K={k}"));
    }
}

#[test]
fn euler_ode_gradient_with_its_loop_matches_call() {
    let (compiled, inputs) = gradient("euler_ode");
    let native = compiled.native();
    let mut ws = native.workspace();
    same_as_call(native, &inputs, &mut ws, "euler_ode suite inputs");
    for (k, c) in [(0.3, 0.1), (2.0, 0.0), (-1.0, 0.5)] {
        let values = vec![Value::scalar(DType::F64, k), Value::scalar(DType::F64, c)];
        let n = same_as_call(native, &values, &mut ws, &format!("euler_ode k={k} c={c}"));
        assert_eq!(n, 0, "euler_ode: scalars of the same shapes allocated");
    }
}

/// An f32 function with a scalar and an array result.
const F32_LOSS_AND_GRAD: &str = "fn lg[N](%w: f32[N], %x: f32[N], %y: f32) -> (f32, f32[N]) {
  %0: f32[N] = mul %w %x
  %pred: f32 = sum %0
  %err: f32 = sub %pred %y
  %l: f32 = mul %err %err
  %1: f32 = add %err %err
  %2: f32[N] = bcast %1
  %w.ct: f32[N] = mul %2 %x
  ret %l, %w.ct
}";

#[test]
fn f32_function_matches_call() {
    let f = ir(F32_LOSS_AND_GRAD);
    let native = backend::compile(&f, &BackendOptions::verified()).expect("compile");
    let mut ws = native.workspace();
    for n in [3usize, 0, 1, 33, 3] {
        let values = samples(DType::F32, &[&[n], &[n], &[]]);
        same_as_call(&native, &values, &mut ws, &format!("f32 N={n}"));
    }
    // Scalars borrowed in place.
    let (w, x, y) = ([1.0f32, 2.0, 3.0], [4.0f32, 5.0, 6.0], 0.5f32);
    let (mut l, mut g) = ([f32::NAN], [f32::NAN; 3]);
    let shape = [3];
    native
        .call_into(
            &[
                NativeArg::f32(&w, &shape),
                NativeArg::f32(&x, &shape),
                NativeArg::scalar_f32(&y),
            ],
            &mut [NativeOut::F32(&mut l), NativeOut::F32(&mut g)],
            &mut ws,
        )
        .expect("call_into");
    assert_eq!(l[0], 31.5 * 31.5);
    assert_eq!(g, [252.0, 315.0, 378.0]);
}

/// `tests/loops_backend.rs`'s vector loop with a run-time count `n` (an
/// `i64` argument): its tape has `ceil(n/2)+1` rows, so the count sizes
/// outputs and scratch.
const RUN_TIME_COUNT: &str = "fn vec[N, n](%n: i64, %x: T[N], %c: T[N], %a: T) -> (T[N], T[ceil(n/2)+1, N], T[N], T[N], T[N], T[N], T[N], T[N], T[N], T[N], T) {
  loop 0 xn {
    fn vec.body[N, n](%s: T[N]) -> T[N] {
      %0: T = const 0.9
      %1: T[N] = bcast %0
      %2: T[N] = mul %s %1
      %3: T[N] = sin %2
      %4: T = sum %3
      %5: T = const 0.01
      %6: T = mul %4 %5
      %7: T[N] = bcast %6
      %8: T[N] = add %3 %7
      ret %8
    }
    fn vec.vjp[N, n](%s: T[N], %g: T[N]) -> T[N] {
      %0: T = const 0.9
      %1: T[N] = bcast %0
      %2: T[N] = mul %s %1
      %3: T[N] = cos %2
      %4: T = sum %g
      %5: T = const 0.01
      %6: T = mul %4 %5
      %7: T[N] = bcast %6
      %8: T[N] = add %g %7
      %9: T[N] = mul %8 %3
      %10: T[N] = mul %9 %1
      ret %10
    }
  }
  %y: T[N] = loop 0 %x
  %t: T[ceil(n/2)+1, N] = looptape 0 2 %x
  %g0: T[N] = loopvjp 0 2 0 %t %c
  %g1: T[N] = loopvjp 0 2 1 %t %c
  %cc: T[N] = mul %c %c
  %g2: T[N] = loopvjp 0 2 0 %t %cc
  %ab: T[N] = bcast %a
  %g3: T[N] = loopvjp 0 2 1 %t %ab
  %tz: T[ceil(n/2)+1, N] = zero
  %g4: T[N] = loopvjp 0 2 0 %tz %c
  %xx: T[N] = sin %x
  %y2: T[N] = loop 0 %xx
  %y3: T[N] = loop 0 %ab
  %s: T = sum %y
  ret %y, %t, %g0, %g1, %g2, %g3, %g4, %y2, %y3, %y, %s
}";

fn run_time_count(dtype: &str) -> CompiledFunction {
    let f = ir(&RUN_TIME_COUNT.replace('T', dtype));
    backend::compile(&f, &BackendOptions::verified()).expect("compile")
}

fn count_values(dtype: DType, count: u64, n: usize) -> Vec<Value> {
    vec![
        Value::scalar(DType::I64, count as f64),
        sample(dtype, &[n], 0),
        sample(dtype, &[n], 1),
        Value::scalar(dtype, -0.4),
    ]
}

#[test]
fn run_time_count_rebinds_on_a_new_count() {
    for (dtype, name) in [(DType::F32, "f32"), (DType::F64, "f64")] {
        let native = run_time_count(name);
        let mut ws = native.workspace();
        for (count, n) in [(5u64, 3usize), (5, 3), (0, 3), (33, 1), (7, 17), (5, 3)] {
            let what = format!("{name} n={count} N={n}");
            same_as_call(&native, &count_values(dtype, count, n), &mut ws, &what);
        }
    }
}

/// The second and third calls with the same shapes allocate nothing, for
/// every kind of function here: gradients with matrix products, a loop
/// with its tape and VJP, f32, and an `i64` count.
#[test]
fn repeated_shapes_do_not_allocate() {
    for key in ["mlp2", "logistic", "euler_ode"] {
        let (compiled, inputs) = gradient(key);
        no_allocation_when_shapes_repeat(compiled.native(), &inputs, key);
    }
    let f = ir(F32_LOSS_AND_GRAD);
    let native = backend::compile(&f, &BackendOptions::verified()).expect("compile");
    no_allocation_when_shapes_repeat(&native, &samples(DType::F32, &[&[9], &[9], &[]]), "f32");
    for (dtype, name) in [(DType::F32, "f32"), (DType::F64, "f64")] {
        let native = run_time_count(name);
        let what = format!("run-time count {name}");
        no_allocation_when_shapes_repeat(&native, &count_values(dtype, 7, 5), &what);
    }
}

/// `call_into` on `args` with NaN-filled outputs `bufs` fails with an
/// error whose message contains `needle` and whose `param` is `param`;
/// no native code ran (the outputs are still NaN).
fn refused(
    native: &CompiledFunction,
    args: &[NativeArg<'_>],
    bufs: &mut [OutBuf],
    ws: &mut Workspace,
    param: Option<usize>,
    needle: &str,
) {
    let mut o = outs(bufs);
    let e = native
        .call_into(args, &mut o, ws)
        .expect_err(&format!("expected an error mentioning {needle:?}"));
    drop(o);
    assert_eq!(e.param, param, "{e}");
    assert!(e.message.contains(needle), "{needle:?} not in: {e}");
    assert!(bufs.iter().all(OutBuf::all_nan), "native code ran: {e}");
}

#[test]
fn wrong_arguments_are_errors_before_native_code_runs() {
    let (compiled, inputs) = gradient("mlp2");
    let native = compiled.native();
    let good = owned(&inputs);
    let good_args = args(&good);
    let mut ws = native.workspace();
    let mut bufs = out_bufs(native, &good_args);

    // Wrong argument count.
    refused(
        native,
        &good_args[..5],
        &mut bufs,
        &mut ws,
        None,
        "takes 6 argument(s), got 5",
    );
    // Wrong dtype: f32 data for `b1: f64[H]`.
    let b1: Vec<f32> = inputs[1].data.iter().map(|&x| x as f32).collect();
    let mut a = good_args.clone();
    a[1] = NativeArg::f32(&b1, &inputs[1].shape);
    refused(
        native,
        &a,
        &mut bufs,
        &mut ws,
        Some(1),
        "`b1` must be f64, got f32",
    );
    // An i64 for an array.
    let mut a = good_args.clone();
    a[3] = NativeArg::i64(3);
    refused(
        native,
        &a,
        &mut bufs,
        &mut ws,
        Some(3),
        "`b2` must be f64, got i64",
    );
    // Data length not matching the shape.
    let short = &inputs[4].data[..inputs[4].data.len() - 1];
    let mut a = good_args.clone();
    a[4] = NativeArg::f64(short, &inputs[4].shape);
    refused(native, &a, &mut bufs, &mut ws, Some(4), "argument `X` has");
    let mut a = good_args.clone();
    let wrong_shape = [inputs[4].shape[0], inputs[4].shape[1] + 1];
    a[4] = NativeArg::f64(&inputs[4].data, &wrong_shape);
    refused(native, &a, &mut bufs, &mut ws, Some(4), "but its shape");
    // A shape not matching the signature: `X: f64[B, I]` with another `I`
    // than `W1: f64[I, H]` (data of the right length for the shape).
    let x = sample(DType::F64, &[inputs[4].shape[0], inputs[0].shape[0] + 1], 3);
    let mut a = good_args.clone();
    a[4] = NativeArg::f64(&x.data, &x.shape);
    refused(native, &a, &mut bufs, &mut ws, Some(4), "disagree on `I`");
    // The wrong rank.
    let mut a = good_args.clone();
    let flat = [inputs[4].data.len()];
    a[4] = NativeArg::f64(&inputs[4].data, &flat);
    refused(
        native,
        &a,
        &mut bufs,
        &mut ws,
        Some(4),
        "got a value of rank 1",
    );

    // Wrong number of outputs.
    {
        let mut o = outs(&mut bufs);
        let e = native
            .call_into(&good_args, &mut o[..4], &mut ws)
            .expect_err("too few outputs");
        assert_eq!(e.param, None);
        assert!(e.message.contains("returns 5 value(s), got 4"), "{e}");
    }
    assert!(bufs.iter().all(OutBuf::all_nan));
    // An output of the wrong dtype.
    let mut wrong = out_bufs(native, &good_args);
    let n = wrong[2].data().len();
    wrong[2] = OutBuf::F32(vec![f32::NAN; n]);
    refused(
        native,
        &good_args,
        &mut wrong,
        &mut ws,
        None,
        "output 2 of `mlp2_grad` must be an f64 buffer, got f32",
    );
    // An output of the wrong length, each way.
    for delta in [-1isize, 1] {
        let mut wrong = out_bufs(native, &good_args);
        let n = wrong[3].data().len();
        wrong[3] = OutBuf::F64(vec![f64::NAN; n.wrapping_add_signed(delta)]);
        refused(
            native,
            &good_args,
            &mut wrong,
            &mut ws,
            None,
            &format!("output 3 of `mlp2_grad` must have {n} element(s)"),
        );
    }
    // A workspace of another function.
    let (other, _) = gradient("logistic");
    let mut theirs = other.native().workspace();
    refused(
        native,
        &good_args,
        &mut bufs,
        &mut theirs,
        None,
        "made for another compiled function (`logistic_grad`), not `mlp2_grad`",
    );

    // After all that, the workspace still works.
    let mut o = outs(&mut bufs);
    native
        .call_into(&good_args, &mut o, &mut ws)
        .expect("good arguments");
    drop(o);
    assert!(bufs.iter().all(|b| !b.all_nan()));
    same_as_call(native, &inputs, &mut ws, "mlp2 after errors");
}

#[test]
fn wrong_output_lengths_after_new_sizes_are_errors() {
    // The output lengths are checked against the sizes of this call, not
    // those the workspace was bound for before.
    let f = ir(F32_LOSS_AND_GRAD);
    let native = backend::compile(&f, &BackendOptions::verified()).expect("compile");
    let mut ws = native.workspace();
    same_as_call(
        &native,
        &samples(DType::F32, &[&[4], &[4], &[]]),
        &mut ws,
        "N=4",
    );
    let bigger = owned(&samples(DType::F32, &[&[6], &[6], &[]]));
    let a = args(&bigger);
    let mut bufs = vec![OutBuf::F32(vec![f32::NAN]), OutBuf::F32(vec![f32::NAN; 4])];
    refused(
        &native,
        &a,
        &mut bufs,
        &mut ws,
        None,
        "output 1 of `lg` must have 6 element(s) at these sizes, got 4",
    );
    same_as_call(
        &native,
        &samples(DType::F32, &[&[6], &[6], &[]]),
        &mut ws,
        "N=6",
    );
}

/// `bind_workspace` gives each result's shape at the arguments' sizes
/// (what a caller that allocates its own outputs sizes them by), and the
/// `call_into` after it binds nothing again. A workspace holds no borrow
/// of its function: kept after the function is dropped, it is refused by
/// the next function compiled, even one of the same program (which may
/// live at the same address).
#[test]
fn bound_workspaces_give_output_shapes_and_belong_to_one_function() {
    let f = ir(F32_LOSS_AND_GRAD);
    let native = backend::compile(&f, &BackendOptions::verified()).expect("compile");
    let mut ws = native.workspace();
    assert_eq!(ws.output_shape(0), None);
    for n in [4usize, 9, 0, 4] {
        let values = samples(DType::F32, &[&[n], &[n], &[]]);
        let owned = owned(&values);
        let a = args(&owned);
        native.bind_workspace(&a, &mut ws).expect("bind");
        assert_eq!(ws.output_shape(0), Some(&[][..]));
        assert_eq!(ws.output_shape(1), Some(&[n][..]));
        assert_eq!(ws.output_shape(2), None);
        // Bound already: the call allocates nothing.
        let mut bufs = out_bufs(&native, &a);
        let mut o = outs(&mut bufs);
        let (allocs, r) = allocations(|| native.call_into(&a, &mut o, &mut ws));
        r.expect("call_into");
        assert_eq!(allocs, 0, "N={n}");
    }
    drop(native);
    let again = backend::compile(&f, &BackendOptions::verified()).expect("compile");
    let values = samples(DType::F32, &[&[4], &[4], &[]]);
    let owned = owned(&values);
    let err = again
        .bind_workspace(&args(&owned), &mut ws)
        .expect_err("a workspace of a dropped function");
    assert!(
        err.message
            .contains("made for another compiled function (`lg`), not `lg`"),
        "{}",
        err.message
    );
}

#[test]
fn wrong_i64_arguments_are_errors() {
    let native = run_time_count("f64");
    let values = count_values(DType::F64, 5, 3);
    let good = owned(&values);
    let good_args = args(&good);
    let mut ws = native.workspace();
    let mut bufs = out_bufs(&native, &good_args);
    for n in [-1i64, (1 << 53) + 1, i64::MAX, i64::MIN] {
        let mut a = good_args.clone();
        a[0] = NativeArg::i64(n);
        refused(
            &native,
            &a,
            &mut bufs,
            &mut ws,
            Some(0),
            &if n < 0 {
                format!("argument `n` is a count and must not be negative, got {n}")
            } else {
                format!("argument `n` = {n} is larger than 2^53")
            },
        );
    }
    // A float for the count.
    let five = 5.0f64;
    let mut a = good_args.clone();
    a[0] = NativeArg::scalar_f64(&five);
    refused(
        &native,
        &a,
        &mut bufs,
        &mut ws,
        Some(0),
        "`n` must be an i64 scalar",
    );
    // A scalar whose data is not one element.
    let two = [1.0f64, 2.0];
    let mut a = good_args.clone();
    a[3] = NativeArg::f64(&two, &[]);
    refused(
        &native,
        &a,
        &mut bufs,
        &mut ws,
        Some(3),
        "argument `a` has 2 element(s)",
    );
    same_as_call(&native, &values, &mut ws, "run-time count after errors");
}
