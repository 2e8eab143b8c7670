//! Progress: bars on a terminal (indicatif), plain lines at a steady interval in a log (stderr
//! redirected to a file, as under Slurm, `nohup` or CI), nothing with `--quiet`. Every stage's
//! progress goes through [`Ui::bar`], so every stage has all three.

use std::io::{IsTerminal, Write};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressState, ProgressStyle};

/// The bar's line, within 80 columns: prefix 10, bar 14, counts (up to 13 for 123456/123456),
/// rate (up to 8), eta (up to 8) and the spaces come to at most 60, so the message keeps at
/// least 20 columns of an 80-column terminal (indicatif cuts it at the terminal's width).
const TEMPLATE: &str = "{prefix:>10} [{bar:12}] {pos}/{len} {rate} eta {eta} {wide_msg}";

/// Seconds between progress lines in a log unless `--log-every` says otherwise.
pub const DEFAULT_LOG_EVERY: u64 = 15;

/// How the user wants to be told about progress.
#[derive(Debug, Clone, Copy)]
pub struct Ui {
    /// No progress at all (summaries are still printed).
    pub quiet: bool,
    /// Seconds between progress lines when stderr is not a terminal.
    pub log_every: u64,
}

impl Default for Ui {
    fn default() -> Self {
        Self {
            quiet: false,
            log_every: DEFAULT_LOG_EVERY,
        }
    }
}

impl Ui {
    /// The progress of one stage over `len` items: a bar on a terminal, which clears itself
    /// however the stage ends (finished, an error, a panic); a plain line every
    /// [`Ui::log_every`] seconds and one when it finishes when stderr is not a terminal;
    /// nothing when quiet.
    pub fn bar(&self, len: u64, what: &str) -> Progress {
        if self.quiet {
            Progress::Bar(ProgressBar::hidden())
        } else if std::io::stderr().is_terminal() {
            Progress::Bar(terminal_bar(len, what))
        } else {
            let every = Duration::from_secs(self.log_every.max(1));
            Progress::Lines(Lines::start(len, what, every, Box::new(std::io::stderr())))
        }
    }
}

fn terminal_bar(len: u64, what: &str) -> ProgressBar {
    let style = ProgressStyle::with_template(TEMPLATE)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key(
            "rate",
            |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}/s", rounded(state.per_sec()));
            },
        )
        .progress_chars("=> ");
    ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr())
        .with_style(style)
        .with_prefix(what.to_string())
        .with_finish(ProgressFinish::AndClear)
}

/// One stage's progress, drawn as the [`Ui`] chose.
pub enum Progress {
    /// A terminal's bar (or a hidden one).
    Bar(ProgressBar),
    /// Lines in a log.
    Lines(Lines),
}

impl Progress {
    /// `n` more items done.
    pub fn inc(&self, n: u64) {
        match self {
            Self::Bar(bar) => bar.inc(n),
            Self::Lines(lines) => lines.update(|s| s.pos = s.pos.saturating_add(n)),
        }
    }

    /// `pos` items done.
    pub fn set_position(&self, pos: u64) {
        match self {
            Self::Bar(bar) => bar.set_position(pos),
            Self::Lines(lines) => lines.update(|s| s.pos = pos),
        }
    }

    /// What the stage is doing now, after the counts.
    pub fn set_message(&self, message: impl Into<String>) {
        let message = message.into();
        match self {
            Self::Bar(bar) => bar.set_message(message),
            Self::Lines(lines) => lines.update(|s| s.message = message),
        }
    }

    /// Time since the stage began.
    pub fn elapsed(&self) -> Duration {
        match self {
            Self::Bar(bar) => bar.elapsed(),
            Self::Lines(lines) => lines.started.elapsed(),
        }
    }

    /// Runs `f` (which prints) with the bar out of its way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match self {
            Self::Bar(bar) => bar.suspend(f),
            Self::Lines(_) => f(),
        }
    }

    /// The stage is done: the bar clears itself; a log gets the stage's last line.
    pub fn finish(self) {
        match self {
            Self::Bar(bar) => bar.finish_and_clear(),
            Self::Lines(mut lines) => lines.stop(true),
        }
    }
}

/// A stage's counts as a log line shows them.
#[derive(Debug, Clone)]
struct State {
    what: String,
    len: u64,
    pos: u64,
    message: String,
}

/// Plain progress lines: a thread writes the stage's line every `every` (whether or not it
/// moved, so a log shows a long step is alive), and [`Lines::stop`] writes the last one.
pub struct Lines {
    state: Arc<Mutex<State>>,
    started: Instant,
    sink: Arc<Mutex<Box<dyn Write + Send>>>,
    stop: Option<Sender<()>>,
    ticker: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Lines {
    fn start(len: u64, what: &str, every: Duration, sink: Box<dyn Write + Send>) -> Self {
        let state = Arc::new(Mutex::new(State {
            what: what.to_string(),
            len,
            pos: 0,
            message: String::new(),
        }));
        let sink = Arc::new(Mutex::new(sink));
        let started = Instant::now();
        let (stop, stopped) = mpsc::channel::<()>();
        let (s, k) = (Arc::clone(&state), Arc::clone(&sink));
        let ticker = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    let line = line(&lock(&s), started.elapsed(), false);
                    let _ = writeln!(lock(&k), "{line}");
                }
            })
            .ok();
        Self {
            state,
            started,
            sink,
            stop: Some(stop),
            ticker,
        }
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut lock(&self.state));
    }

    /// Stops the ticker; with `last`, writes the stage's closing line.
    fn stop(&mut self, last: bool) {
        let Some(stop) = self.stop.take() else {
            return;
        };
        drop(stop);
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
        if last {
            let line = line(&lock(&self.state), self.started.elapsed(), true);
            let _ = writeln!(lock(&self.sink), "{line}");
        }
    }
}

impl Drop for Lines {
    /// A stage that ends in an error stops its lines without claiming it finished.
    fn drop(&mut self) {
        self.stop(false);
    }
}

/// `features: 600/1500 (40%), 31/s, 19 s so far, about 29 s left; 60000 patches`, or, done,
/// `features: 1500/1500 done in 48 s (31/s)`.
fn line(state: &State, elapsed: Duration, done: bool) -> String {
    let secs = elapsed.as_secs_f64();
    let rate = state.pos as f64 / secs.max(1e-9);
    let mut line = format!("{}: {}/{}", state.what, state.pos, state.len);
    if done {
        line.push_str(&format!(" done in {} ({}/s)", seconds(secs), rounded(rate)));
        return line;
    }
    if state.len > 0 {
        let percent = (state.pos as f64 / state.len as f64 * 100.0).min(100.0);
        line.push_str(&format!(" ({percent:.0}%)"));
    }
    line.push_str(&format!(", {}/s, {} so far", rounded(rate), seconds(secs)));
    if state.pos > 0 && state.pos < state.len {
        let left = state.len.saturating_sub(state.pos) as f64 / rate;
        line.push_str(&format!(", about {} left", seconds(left)));
    }
    if !state.message.is_empty() {
        line.push_str("; ");
        line.push_str(&state.message);
    }
    line
}

/// Seconds for people: `48 s`, `12 min 5 s`, `2 h 3 min`.
fn seconds(secs: f64) -> String {
    if !secs.is_finite() {
        return "-".into();
    }
    let s = secs.round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// A rate for people: whole numbers from 10 up, one decimal below.
fn rounded(rate: f64) -> String {
    if !rate.is_finite() {
        "-".into()
    } else if rate >= 10.0 {
        format!("{rate:.0}")
    } else {
        format!("{rate:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_rounded_and_the_template_parses() {
        assert_eq!(rounded(1234.5678), "1235");
        assert_eq!(rounded(2.46), "2.5");
        assert_eq!(rounded(f64::INFINITY), "-");
        assert!(ProgressStyle::with_template(TEMPLATE).is_ok());
    }

    #[test]
    fn times_read_as_people_say_them() {
        assert_eq!(seconds(48.4), "48 s");
        assert_eq!(seconds(725.0), "12 min 5 s");
        assert_eq!(seconds(7380.0), "2 h 3 min");
        assert_eq!(seconds(f64::NAN), "-");
    }

    #[test]
    fn a_line_says_counts_rate_and_time_left() {
        let state = State {
            what: "features".into(),
            len: 1500,
            pos: 600,
            message: "60000 patches".into(),
        };
        assert_eq!(
            line(&state, Duration::from_secs(20), false),
            "features: 600/1500 (40%), 30/s, 20 s so far, about 30 s left; 60000 patches"
        );
        assert_eq!(
            line(&state, Duration::from_secs(20), true),
            "features: 600/1500 done in 20 s (30/s)"
        );
        let start = State { pos: 0, ..state };
        assert_eq!(
            line(&start, Duration::from_secs(3), false),
            "features: 0/1500 (0%), 0.0/s, 3 s so far; 60000 patches"
        );
    }

    /// A sink the test reads back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_come_at_the_interval_and_once_at_the_end() {
        let sink = Shared::default();
        let lines = Lines::start(
            10,
            "kmeans",
            Duration::from_millis(40),
            Box::new(sink.clone()),
        );
        let progress = Progress::Lines(lines);
        progress.set_position(4);
        // Ten intervals: at least one line at the interval even on a loaded machine.
        std::thread::sleep(Duration::from_millis(400));
        progress.finish();
        let text = String::from_utf8(lock(&sink.0).clone()).expect("utf-8 lines");
        let all: Vec<&str> = text.lines().collect();
        assert!(all.len() >= 2, "{text}");
        assert!(all[0].starts_with("kmeans: 4/10 (40%)"), "{text}");
        assert!(
            all.last()
                .is_some_and(|l| l.starts_with("kmeans: 4/10 done in")),
            "{text}"
        );
        assert_eq!(all.iter().filter(|l| l.contains("done")).count(), 1);
    }

    #[test]
    fn a_stage_that_fails_does_not_say_done() {
        let sink = Shared::default();
        let lines = Lines::start(3, "encode", Duration::from_secs(60), Box::new(sink.clone()));
        drop(Progress::Lines(lines));
        assert!(lock(&sink.0).is_empty());
    }
}
