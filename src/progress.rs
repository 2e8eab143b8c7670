//! Progress bars (indicatif) and end-of-stage summaries.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressState, ProgressStyle};

/// The bar's line, within 80 columns: prefix 10, elapsed 8, bar 22, counts (up to 13 for
/// 123456/123456), rate (up to 8), eta (3 to 8) and the spaces come to at most 77; the message
/// takes what is left of the terminal's width (indicatif cuts it there).
const TEMPLATE: &str =
    "{prefix:>10} {elapsed_precise:.dim} [{bar:20}] {pos}/{len} {rate} eta {eta} {wide_msg}";

/// How the user wants to be told about progress.
#[derive(Debug, Clone, Copy)]
pub struct Ui {
    /// No progress bars.
    pub quiet: bool,
}

impl Ui {
    /// A bar over `len` items; hidden when quiet or when stderr is not a terminal. However it
    /// ends (finished, an error, a panic), it clears itself: no stale bar stays on the screen.
    pub fn bar(&self, len: u64, what: &str) -> ProgressBar {
        let target = if self.quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let style = ProgressStyle::with_template(TEMPLATE)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .with_key(
                "rate",
                |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{}/s", rounded(state.per_sec()));
                },
            )
            .progress_chars("=> ");
        ProgressBar::with_draw_target(Some(len), target)
            .with_style(style)
            .with_prefix(what.to_string())
            .with_finish(ProgressFinish::AndClear)
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
}
