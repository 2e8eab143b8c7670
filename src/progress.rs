//! Progress bars (indicatif) and end-of-stage summaries.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How the user wants to be told about progress.
#[derive(Debug, Clone, Copy)]
pub struct Ui {
    /// No progress bars.
    pub quiet: bool,
}

impl Ui {
    /// A bar over `len` items; hidden when quiet or when stderr is not a terminal.
    pub fn bar(&self, len: u64, what: &str) -> ProgressBar {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        if self.quiet {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        let style = ProgressStyle::with_template(
            "{prefix:>10} [{elapsed_precise}] {wide_bar} {pos}/{len} {per_sec} eta {eta} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(what.to_string());
        bar
    }
}
