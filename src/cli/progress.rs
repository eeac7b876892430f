//! Progress on stderr: the library's [`Progress`] hook drawn with
//! indicatif as one spinner line (saturation iterations, the λ `explore`
//! is at, compiling and timing).
//!
//! Only on a terminal, only once a command has run for [`DELAY`] (so a
//! quick command prints nothing), and never on stdout, whose output is the
//! same with or without it. `--quiet` turns it off. The line is cleared
//! when the command's options are dropped, before the command's output is
//! printed.

use egrad::{Progress, ProgressEvent};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long a command runs before its progress shows.
pub const DELAY: Duration = Duration::from_secs(1);

/// The hook for a command's options: none with `--quiet` or when stderr is
/// not a terminal.
pub fn hook(quiet: bool) -> Progress {
    if quiet || !std::io::stderr().is_terminal() {
        return Progress::none();
    }
    let display = Display {
        state: Arc::new(Mutex::new(State {
            start: Instant::now(),
            lines: Lines::default(),
            bar: None,
            waiting: false,
            done: false,
        })),
    };
    Progress::new(move |e| display.tell(e))
}

/// The spinner's state. `Display` is owned by the hook: when the last copy
/// of the options goes, it is dropped and clears the line (on the thread
/// that drops it, the command's).
struct Display {
    state: Arc<Mutex<State>>,
}

struct State {
    start: Instant,
    lines: Lines,
    /// The spinner, once shown.
    bar: Option<ProgressBar>,
    /// A thread is waiting to show the spinner at `start + DELAY`.
    waiting: bool,
    /// The command is over: show nothing more.
    done: bool,
}

impl State {
    fn show(&mut self) {
        if self.done || self.bar.is_some() {
            return;
        }
        // Elapsed time counts from the command's start, not the spinner's.
        let bar = ProgressBar::new_spinner().with_elapsed(self.start.elapsed());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed:>3} {msg}") {
            bar.set_style(style);
        }
        bar.set_message(self.lines.text());
        bar.enable_steady_tick(Duration::from_millis(100));
        self.bar = Some(bar);
    }
}

impl Display {
    fn tell(&self, e: &ProgressEvent) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.lines.update(e);
        if let Some(bar) = &s.bar {
            bar.set_message(s.lines.text());
        } else if s.start.elapsed() >= DELAY {
            s.show();
        } else if !s.waiting {
            // Show the spinner at `start + DELAY` even if no event comes
            // then (a long iteration, a long compile). The thread holds no
            // strong reference, so it never keeps the display alive.
            s.waiting = true;
            let wait = DELAY.saturating_sub(s.start.elapsed());
            let weak: Weak<Mutex<State>> = Arc::downgrade(&self.state);
            std::thread::spawn(move || {
                std::thread::sleep(wait);
                if let Some(state) = weak.upgrade() {
                    state.lock().unwrap_or_else(|p| p.into_inner()).show();
                }
            });
        }
    }
}

impl Drop for Display {
    fn drop(&mut self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.done = true;
        if let Some(bar) = s.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// What the line says: the step (the λ explored, compiling, timing) and,
/// within it, saturation.
#[derive(Default, Debug, PartialEq)]
struct Lines {
    step: String,
    saturation: String,
}

impl Lines {
    fn update(&mut self, e: &ProgressEvent) {
        match e {
            ProgressEvent::Saturation {
                function,
                iteration,
                nodes,
                classes,
            } => {
                self.saturation = format!(
                    "saturating `{function}`: iteration {iteration}, {nodes} e-nodes, {classes} e-classes"
                );
            }
            ProgressEvent::Optimizing {
                index,
                count,
                lambda,
            } => {
                self.step = format!("λ = {lambda} ({index} of {count})");
                self.saturation.clear();
            }
            ProgressEvent::Compiling { index, count } => {
                self.step = format!("compiling program {index} of {count}");
                self.saturation.clear();
            }
            ProgressEvent::Timing {
                programs,
                elapsed,
                budget,
            } => {
                self.step = format!(
                    "timing {programs} program{}: {:.1} of {:.1} s",
                    if *programs == 1 { "" } else { "s" },
                    elapsed.as_secs_f64(),
                    budget.as_secs_f64()
                );
                self.saturation.clear();
            }
            _ => {}
        }
    }

    fn text(&self) -> String {
        match (self.step.is_empty(), self.saturation.is_empty()) {
            (_, true) => self.step.clone(),
            (true, false) => self.saturation.clone(),
            (false, false) => format!("{}: {}", self.step, self.saturation),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_follows_the_events() {
        let mut l = Lines::default();
        l.update(&ProgressEvent::Optimizing {
            index: 2,
            count: 7,
            lambda: 0.25,
        });
        assert_eq!(l.text(), "λ = 0.25 (2 of 7)");
        l.update(&ProgressEvent::Saturation {
            function: "df".into(),
            iteration: 3,
            nodes: 120,
            classes: 80,
        });
        assert_eq!(
            l.text(),
            "λ = 0.25 (2 of 7): saturating `df`: iteration 3, 120 e-nodes, 80 e-classes"
        );
        l.update(&ProgressEvent::Compiling { index: 1, count: 2 });
        assert_eq!(l.text(), "compiling program 1 of 2");
        l.update(&ProgressEvent::Timing {
            programs: 2,
            elapsed: Duration::from_millis(300),
            budget: Duration::from_millis(600),
        });
        assert_eq!(l.text(), "timing 2 programs: 0.3 of 0.6 s");
    }

    #[test]
    fn quiet_means_no_hook() {
        assert!(!hook(true).is_some());
    }
}
