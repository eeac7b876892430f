//! The progress hook (`Options::progress`): saturation, `explore` and
//! timing tell it what they do, in order, and nothing they compute depends
//! on it.

use egrad::internals::explore::{explore, Timing};
use egrad::{optimize_gradient, Options, Program, ProgressEvent};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PROGRAM: &str = "fn f[N](x: f64[N]) -> f64 = +/(sin(x) .* exp(x) .* x)\n\
                       @grad(x)\nfn df[N](x: f64[N]) -> f64[N] = f(x)\n";

/// Options that record every event into the returned log.
fn recording(options: Options) -> (Options, Arc<Mutex<Vec<ProgressEvent>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let options = options.progress(move |e: &ProgressEvent| sink.lock().unwrap().push(e.clone()));
    (options, log)
}

/// The iterations of each saturation in `events` are numbered 1, 2, 3, ...
/// Returns how many saturations ran (a run starts at iteration 1).
fn check_saturations(events: &[ProgressEvent]) -> usize {
    let mut runs = 0;
    let mut last = 0;
    for e in events {
        let ProgressEvent::Saturation {
            function,
            iteration,
            nodes,
            classes,
        } = e
        else {
            panic!("not a saturation event: {e:?}")
        };
        assert!(!function.is_empty());
        assert!(*nodes >= *classes && *classes > 0, "{e:?}");
        if *iteration == 1 {
            runs += 1;
        } else {
            assert_eq!(*iteration, last + 1, "iterations out of order: {events:?}");
        }
        last = *iteration;
    }
    runs
}

#[test]
fn saturation_tells_each_iteration_in_order() {
    let program = Program::parse(PROGRAM).unwrap();
    let (options, log) = recording(Options::default().function("df"));
    let g = optimize_gradient(&program, &options).unwrap();
    let events = log.lock().unwrap().clone();
    assert_eq!(check_saturations(&events), 1, "{events:?}");
    let report = g.optimized.saturation.as_ref().unwrap();
    assert_eq!(report.stop_reason, "saturated");
    // egg runs the hook at the start of every iteration, the last one (which
    // finds nothing to do) included.
    assert_eq!(events.len(), report.iterations, "{events:?}");
    let ProgressEvent::Saturation {
        function, nodes, ..
    } = &events[0]
    else {
        unreachable!()
    };
    assert_eq!(function, "df");
    assert!(*nodes > 0);
    let ProgressEvent::Saturation { nodes, classes, .. } = events.last().unwrap() else {
        unreachable!()
    };
    assert_eq!((*nodes, *classes), (report.nodes, report.classes));
}

#[test]
fn explore_tells_each_lambda_then_compiling_then_timing() {
    let program = Program::parse(PROGRAM).unwrap();
    let (options, log) = recording(Options::default().function("df").dim("N", 64));
    let lambdas = [0.0, 1.0, 1e6];
    let inputs = vec![egrad::Value::f64(
        &(0..64).map(|i| i as f64 / 64.0).collect::<Vec<_>>(),
    )];
    let timing = Timing {
        budget: Duration::from_millis(150),
        min_calls: 1,
    };
    let e = explore(&program, &options, &lambdas, Some(&inputs), timing).unwrap();
    let events = log.lock().unwrap().clone();

    // Each λ in turn, each followed by its saturation's iterations.
    let mut at = 0;
    for (i, &lambda) in lambdas.iter().enumerate() {
        assert_eq!(
            events[at],
            ProgressEvent::Optimizing {
                index: i + 1,
                count: 3,
                lambda
            }
        );
        at += 1;
        let n = events[at..]
            .iter()
            .take_while(|e| matches!(e, ProgressEvent::Saturation { .. }))
            .count();
        assert_eq!(check_saturations(&events[at..at + n]), 1, "{events:?}");
        at += n;
    }
    // Then each distinct program compiled, in order.
    let distinct = e.points.iter().filter(|p| p.same_as.is_none()).count();
    assert!(distinct >= 2, "{e}");
    for i in 0..distinct {
        assert_eq!(
            events[at],
            ProgressEvent::Compiling {
                index: i + 1,
                count: distinct
            }
        );
        at += 1;
    }
    // Then timing, from 0 on, the clock going forward.
    let mut last = None;
    for ev in &events[at..] {
        let ProgressEvent::Timing {
            programs,
            elapsed,
            budget,
        } = ev
        else {
            panic!("not a timing event: {ev:?}")
        };
        assert_eq!(*programs, distinct);
        assert!(*budget >= Duration::from_millis(150) * distinct as u32);
        assert!(elapsed <= budget, "past its own total: {ev:?}");
        match last {
            None => assert_eq!(*elapsed, Duration::ZERO),
            Some(l) => assert!(*elapsed >= l),
        }
        last = Some(*elapsed);
    }
    assert!(last.is_some(), "no timing event: {events:?}");
}

/// Timing that must take more samples than its budget allows (each sample
/// lasts at least 100 µs a program) tells a total it does not run past:
/// the line read "timing 3 programs: 0.4 of 0.0 s" before.
#[test]
fn timing_never_runs_past_its_own_total() {
    let program = Program::parse(PROGRAM).unwrap();
    let (options, log) = recording(Options::default().function("df").dim("N", 64));
    let inputs = vec![egrad::Value::f64(&vec![0.5; 64])];
    let timing = Timing {
        budget: Duration::from_millis(1),
        min_calls: 1500,
    };
    explore(&program, &options, &[0.0, 1e6], Some(&inputs), timing).unwrap();
    let events = log.lock().unwrap().clone();
    let timing: Vec<(Duration, Duration)> = events
        .iter()
        .filter_map(|e| match e {
            ProgressEvent::Timing {
                elapsed, budget, ..
            } => Some((*elapsed, *budget)),
            _ => None,
        })
        .collect();
    // 1500 samples of two programs take at least 0.3 s: told more than once.
    assert!(timing.len() >= 2, "{events:?}");
    for &(elapsed, total) in &timing {
        assert!(elapsed <= total, "{elapsed:?} of {total:?}: {timing:?}");
    }
    // The totals told once samples were taken foresee the 0.3 s.
    assert!(timing[1].1 >= Duration::from_millis(290), "{timing:?}");
}

/// What is computed is the same with and without a hook: the programs, the
/// model's figures and the results, bit for bit.
#[test]
fn the_hook_changes_nothing() {
    let program = Program::parse(PROGRAM).unwrap();
    let plain = Options::default().function("df").dim("N", 64);
    let (hooked, log) = recording(plain.clone());

    let a = optimize_gradient(&program, &plain).unwrap();
    let b = optimize_gradient(&program, &hooked).unwrap();
    assert_eq!(a.optimized.after.to_string(), b.optimized.after.to_string());
    let (ra, rb) = (
        a.optimized.saturation.clone().unwrap(),
        b.optimized.saturation.clone().unwrap(),
    );
    assert_eq!(
        (ra.iterations, ra.nodes, ra.classes, ra.stop_reason),
        (rb.iterations, rb.nodes, rb.classes, rb.stop_reason)
    );

    let lambdas = [0.0, 0.25, 1e6];
    let x: Vec<f64> = (0..64).map(|i| (i as f64).sin()).collect();
    let inputs = vec![egrad::Value::f64(&x)];
    let timing = Timing {
        budget: Duration::from_millis(20),
        min_calls: 1,
    };
    let ea = explore(&program, &plain, &lambdas, Some(&inputs), timing).unwrap();
    let eb = explore(&program, &hooked, &lambdas, Some(&inputs), timing).unwrap();
    assert!(!log.lock().unwrap().is_empty());
    for (p, q) in ea.points.iter().zip(&eb.points) {
        assert_eq!(
            (p.flops, p.residual_bytes, p.same_as, p.buffer_bytes),
            (q.flops, q.residual_bytes, q.same_as, q.buffer_bytes)
        );
        assert_eq!(p.outputs.len(), q.outputs.len());
        for (u, v) in p.outputs.iter().zip(&q.outputs) {
            assert!(u.bits_eq(v), "{u:?} vs {v:?}");
        }
    }
    // Without timing the whole table is the same, text and JSON.
    let ea = explore(&program, &plain, &lambdas, None, timing).unwrap();
    let eb = explore(&program, &hooked, &lambdas, None, timing).unwrap();
    assert_eq!(ea.to_string(), eb.to_string());
    assert_eq!(ea.to_json(), eb.to_json());
}
