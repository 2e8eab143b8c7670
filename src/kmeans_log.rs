//! What a k-means run records after every iteration: its line (with the stages' times and bytes
//! on a team, and the attempts that failed), the progress bar, the checkpoint, and the
//! per-iteration CSVs beside the vocabulary (`iterations.csv`; `stages.csv` on a team).

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use vocab_pipeline::kmeans::State;
use vocab_pipeline::kmeans::engine::StepReport;
use vocab_pipeline::kmeans::files::save_checkpoint;

use crate::settings::KmeansSettings;

/// What a run records after every iteration: its line (with the stages' times and bytes on a
/// team, and the attempts that failed), the progress bar, the checkpoint, the per-iteration
/// CSVs beside the vocabulary.
pub struct Iterations<'a, 'w> {
    args: &'a KmeansSettings,
    /// Vectors (for the share pruning kept).
    n: usize,
    /// The input's checksum (the checkpoint's).
    checksum: u32,
    bar: &'a crate::progress::Progress,
    out: &'a RefCell<&'w mut dyn Write>,
    iterations_csv: PathBuf,
    stages_csv: PathBuf,
    /// Rows of the stages CSV so far.
    stage_rows: Vec<String>,
    /// What the run recorded so far, as written.
    recorded: PerIteration,
}

/// What a k-means run recorded per iteration, as it wrote it beside the vocabulary:
/// `stages.csv` (the stages' seconds and bytes) on a team, `iterations.csv` in one process.
/// Handed on in memory to whoever reports on the run; read back only for a run of an earlier
/// process ([`PerIteration::read`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerIteration {
    /// The CSV's text (header first; empty when nothing was recorded).
    pub csv: String,
    /// Whether it holds the stages of a team's iterations.
    pub team: bool,
}

/// The `*_seconds` columns of a team's `stages.csv`, in the order a report shows them.
pub const STAGE_SECONDS: [&str; 5] = [
    "broadcast_seconds",
    "map_seconds",
    "stage1_seconds",
    "stage2_seconds",
    "stage3_seconds",
];

impl PerIteration {
    /// What the run that wrote `vocabulary` recorded (nothing if it recorded nothing).
    pub fn read(vocabulary: &Path) -> Self {
        let at = |name| vocab_pipeline::features::manifest_path(vocabulary, name);
        match std::fs::read_to_string(at("stages.csv")) {
            Ok(csv) => Self { csv, team: true },
            Err(_) => Self {
                csv: std::fs::read_to_string(at("iterations.csv")).unwrap_or_default(),
                team: false,
            },
        }
    }

    /// Mean seconds of each of the [`STAGE_SECONDS`] over a team's iterations, found by column
    /// name (none in one process).
    pub fn stage_means(&self) -> Option<Vec<f64>> {
        if !self.team {
            return None;
        }
        let mut lines = self.csv.lines();
        let header: Vec<&str> = lines.next()?.split(',').collect();
        let columns: Vec<usize> = STAGE_SECONDS
            .iter()
            .map(|name| header.iter().position(|h| h == name))
            .collect::<Option<_>>()?;
        let mut sums = [0.0; STAGE_SECONDS.len()];
        let mut rows = 0.0;
        for line in lines {
            let cols: Vec<&str> = line.split(',').collect();
            for (s, &c) in sums.iter_mut().zip(&columns) {
                *s += cols.get(c)?.parse::<f64>().ok()?;
            }
            rows += 1.0;
        }
        (rows > 0.0).then(|| sums.iter().map(|s| s / rows).collect())
    }
}

impl<'a, 'w> Iterations<'a, 'w> {
    pub fn new(
        args: &'a KmeansSettings,
        n: usize,
        checksum: u32,
        start: Option<&State>,
        bar: &'a crate::progress::Progress,
        out: &'a RefCell<&'w mut dyn Write>,
    ) -> Self {
        let iterations_csv =
            vocab_pipeline::features::manifest_path(&args.team.out, "iterations.csv");
        let stages_csv = vocab_pipeline::features::manifest_path(&args.team.out, "stages.csv");
        // Cluster rows of earlier iterations survive a resume.
        let stage_rows: Vec<String> = match (start, std::fs::read_to_string(&stages_csv)) {
            (Some(state), Ok(text)) => text
                .lines()
                .skip(1)
                .filter(|line| {
                    line.split(',')
                        .next()
                        .and_then(|i| i.parse::<u64>().ok())
                        .is_some_and(|i| i <= state.iteration)
                })
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        };
        Self {
            args,
            n,
            checksum,
            bar,
            out,
            iterations_csv,
            stages_csv,
            stage_rows,
            recorded: PerIteration::default(),
        }
    }

    /// What the run recorded, as it wrote it (a resumed run that had nothing left to do:
    /// what the process before it wrote).
    pub fn finish(self) -> PerIteration {
        if self.recorded.csv.is_empty() {
            return PerIteration::read(&self.args.team.out);
        }
        self.recorded
    }

    /// Records the iteration that brought the run to `state` (`report`: on a team).
    pub fn record(&mut self, state: &State, report: Option<&StepReport>) -> anyhow::Result<()> {
        let args = self.args;
        let last = state.history.last().copied().context("an iteration ran")?;
        let kept = if args.team.assignment.pruned() {
            format!(
                " kept {:.1}%",
                100.0 * last.kept as f64 / self.n.max(1) as f64
            )
        } else {
            String::new()
        };
        let stages = report.map_or_else(String::new, |r| format!(" {}", r.summary()));
        self.bar.suspend(|| -> std::io::Result<()> {
            let mut out = self.out.borrow_mut();
            if let Some(r) = report {
                for f in &r.failures {
                    writeln!(out, "  attempt failed: {f}")?;
                }
            }
            writeln!(
                out,
                "iter {} inertia {:.6e} seconds {:.3}{kept}{stages}",
                last.iteration, last.inertia, last.seconds
            )
        })?;
        self.bar.set_position(state.iteration);
        let assignment = &args.team.assignment.key()[..];
        save_checkpoint(&args.team.out, state, args.seed, self.checksum, assignment)?;
        if args.exit_after_iteration == Some(state.iteration) {
            eprintln!(
                "kmeans: exiting after iteration {} (fault injection)",
                state.iteration
            );
            std::process::exit(3);
        }
        let mut csv = String::from("iteration,inertia,seconds,splits,kept\n");
        for h in &state.history {
            let _ = writeln!(
                csv,
                "{},{},{},{},{}",
                h.iteration, h.inertia, h.seconds, h.splits, h.kept
            );
        }
        vocab_pipeline::kmeans::files::write_text(&self.iterations_csv, &csv)?;
        if !self.recorded.team {
            self.recorded.csv = csv;
        }
        if let Some(r) = report {
            (self.stage_rows).push(format!("{},{}", last.iteration, r.csv_row()));
            let text = format!(
                "iteration,{}\n{}\n",
                StepReport::CSV_HEADER,
                self.stage_rows.join("\n")
            );
            vocab_pipeline::kmeans::files::write_text(&self.stages_csv, &text)?;
            self.recorded = PerIteration {
                csv: text,
                team: true,
            };
        }
        Ok(())
    }
}
