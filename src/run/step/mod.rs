//! The step runner: cache keys, fingerprints, temporary folders renamed when finished, the work
//! directory's lock.
//!
//! Every step's output is a folder `WORK/<stage>/<label>-<key>/`, where `key` hashes the step's
//! own settings with the keys of its inputs. A step runs in `WORK/<stage>/.tmp-<label>-<key>/`,
//! and only a finished step is renamed to its key: a folder with a key is complete by
//! construction, so a re-run skips it, a changed setting changes the keys of exactly the steps
//! that depend on it, and an interrupted step is redone (k-means resumes from the checkpoint in
//! its temporary folder, the photo stages from the rounds they saved there; after Ctrl-C that
//! folder waits as `.resume-<label>-<key>/`, see `interrupt`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use serde::{Deserialize, Serialize};

mod keys;
mod work;

pub use keys::{digest, file_fingerprint, folder_fingerprint, short_hash};
pub use work::{WorkLock, check_work_folder, default_work};

/// The stages, in order (the names `--force` takes).
pub const STAGES: [&str; 8] = [
    "dataset",
    "features",
    "partition",
    "kmeans",
    "mixture",
    "encode",
    "svm",
    "report",
];

/// One stage of `vocab run` for one input: what it is called, what it depends on, how it runs.
pub trait Stage {
    /// What later stages and the report take from it.
    type Output;

    /// The stage's name, one of [`STAGES`].
    fn stage(&self) -> &'static str;

    /// The step's label within its stage (`k256`, `k256-class`).
    fn label(&self) -> String;

    /// The cache key: the step's own settings and the keys of its inputs, hashed.
    fn key(&self) -> String;

    /// Runs the step into the empty (or, for k-means, checkpointed) folder `tmp`, reporting to
    /// `out`; the output is what it made, in memory.
    fn run(&self, tmp: &Path, out: &mut dyn Write) -> anyhow::Result<Self::Output>;

    /// The output of the step from its finished folder, when it is cached.
    fn cached(&self, dir: &Path) -> anyhow::Result<Self::Output>;

    /// Whether an interrupted run of this step continues from what it left in its temporary
    /// folder (only partial files are removed) rather than from an empty folder.
    fn resumes(&self) -> bool {
        false
    }

    /// Whether this run can use the finished folder `dir` of its key. Keys say what a step
    /// computes, never where it ran; a step whose data another engine left elsewhere (a sample
    /// cut into partitions on nodes this machine cannot read) is made again here.
    fn usable(&self, _dir: &Path) -> bool {
        true
    }
}

/// A step's record in the run's summary and report.
#[derive(Debug, Clone)]
pub struct Step {
    /// Stage name.
    pub stage: &'static str,
    /// Step label.
    pub label: String,
    /// Cache key.
    pub key: String,
    /// Seconds the step took when it ran (in this run or, if cached, when it was made).
    pub seconds: f64,
    /// Whether this run found it finished.
    pub cached: bool,
}

/// `step.toml`, written into every finished step's folder.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    stage: String,
    label: String,
    key: String,
    seconds: f64,
}

/// Runs the steps of one `vocab run` in a work directory.
pub struct Runner {
    work: PathBuf,
    force_from: Option<usize>,
    /// The steps so far, in order.
    pub steps: Vec<Step>,
}

impl Runner {
    /// A runner over `work` (`force`: the stage from which cached steps are redone).
    pub fn new(work: &Path, force: Option<&str>) -> anyhow::Result<Self> {
        let force_from = match force {
            Some(name) => Some(STAGES.iter().position(|s| *s == name).with_context(|| {
                format!(
                    "--force {name}: not a stage (stages: {})",
                    STAGES.join(", ")
                )
            })?),
            None => None,
        };
        Ok(Self {
            work: work.to_path_buf(),
            force_from,
            steps: Vec::new(),
        })
    }

    /// The folder `stage` finishes in.
    pub fn folder<S: Stage>(&self, stage: &S) -> PathBuf {
        let (name, label, key) = (stage.stage(), stage.label(), stage.key());
        self.work.join(name).join(format!("{label}-{key}"))
    }

    /// Whether [`Runner::run`] would find `stage` finished (its folder there, usable, and not
    /// forced): what depends only on it need not be made again.
    pub fn done<S: Stage>(&self, stage: &S) -> bool {
        let done = self.folder(stage);
        let index = STAGES.iter().position(|s| *s == stage.stage()).unwrap_or(0);
        let forced = self.force_from.is_some_and(|f| index >= f);
        done.is_dir() && !forced && stage.usable(&done)
    }

    /// Runs `stage` unless its folder exists; returns the finished folder and the output.
    pub fn run<S: Stage>(&mut self, stage: &S) -> anyhow::Result<(PathBuf, S::Output)> {
        let (name, label, key) = (stage.stage(), stage.label(), stage.key());
        let dir = self.work.join(name);
        let done = dir.join(format!("{label}-{key}"));
        let old = dir.join(format!(".old-{label}-{key}"));
        let tmp = dir.join(format!(".tmp-{label}-{key}"));
        // What an interrupted resuming step saved (`interrupt`): its temporary folder again.
        let keep = dir.join(format!(".resume-{label}-{key}"));
        // A step's folders are the run's own: a link there would be followed out of the work
        // folder (read as a cached step, resumed, cleared or written through).
        for own in [&dir, &done, &old, &tmp, &keep] {
            vocab_pipeline::output::not_a_link(own)?;
        }
        recover(&done, &old)?;
        let index = STAGES.iter().position(|s| *s == name).unwrap_or(0);
        let forced = self.force_from.is_some_and(|f| index >= f);
        let elsewhere = done.is_dir() && !forced && !stage.usable(&done);
        if elsewhere {
            println!(
                "== {name} {label}: {} holds what another engine left elsewhere; made again here",
                done.display()
            );
        }
        if done.is_dir() && !forced && !elsewhere {
            let (seconds, output) = cached(stage, &done)?;
            self.steps.push(Step {
                stage: name,
                label,
                key,
                seconds,
                cached: true,
            });
            return Ok((done, output));
        }
        take_up(stage.resumes(), forced, &keep, &tmp)?;
        println!("== {name} {label}");
        super::interrupt::started(name, &label, tmp.clone(), stage.resumes().then_some(keep));
        let started = Instant::now();
        // The step writes into `tmp`; what it prints names the folder it is renamed to.
        let mut out = Relocate::new(&tmp, &done, std::io::stdout());
        let output = stage.run(&tmp, &mut out);
        if output.is_err() && super::interrupt::interrupted() {
            // Ctrl-C moved the step's folder away under it: the interruption ends the process
            // and says so; this error is not the step's.
            loop {
                std::thread::park();
            }
        }
        let output = output.with_context(|| {
            let over = if stage.resumes() {
                format!(
                    " (it resumes from what it saved in {}; `--force {name}` starts it over)",
                    tmp.display()
                )
            } else {
                String::new()
            };
            format!("stage {name} ({label}){over}")
        })?;
        out.flush().context("cannot write to stdout")?;
        let seconds = started.elapsed().as_secs_f64();
        let record = Record {
            stage: name.into(),
            label: label.clone(),
            key: key.clone(),
            seconds,
        };
        let text = toml::to_string(&record).context("cannot format the step's record")?;
        vocab_pipeline::atomic::write(&tmp.join("step.toml"), text.as_bytes())
            .with_context(|| format!("cannot write the record of {}", tmp.display()))?;
        super::interrupt::finishing(|| replace(&tmp, &done, &old))?;
        self.steps.push(Step {
            stage: name,
            label,
            key,
            seconds,
            cached: false,
        });
        Ok((done, output))
    }
}

/// The output of `stage`'s finished folder `done`, and the time it took when it ran (a folder
/// from before step.toml had seconds reads 0).
fn cached<S: Stage>(stage: &S, done: &Path) -> anyhow::Result<(f64, S::Output)> {
    let (name, label) = (stage.stage(), stage.label());
    let seconds = std::fs::read_to_string(done.join("step.toml"))
        .ok()
        .and_then(|t| toml::from_str::<Record>(&t).ok())
        .map_or(0.0, |r| r.seconds);
    println!(
        "== {name} {label}: cached, made in {seconds:.1} s ({})",
        done.display()
    );
    let output = stage.cached(done).with_context(|| {
        format!(
            "reading the cached step {}; if it is damaged, `--force {name}` makes it again (and \
             the steps after it)",
            done.display()
        )
    })?;
    Ok((seconds, output))
}

/// Makes the step's temporary folder `tmp` ready: a step that `resumes` takes up what an
/// interrupted run saved in `keep` or left in `tmp`, less its partial files; any other starts
/// over, and so does a `forced` one (what an earlier run left may be what is damaged).
fn take_up(resumes: bool, forced: bool, keep: &Path, tmp: &Path) -> anyhow::Result<()> {
    if forced {
        for stale in [keep, tmp] {
            if stale.is_dir() {
                std::fs::remove_dir_all(stale)
                    .with_context(|| format!("cannot clear {}", stale.display()))?;
            }
        }
    }
    if keep.is_dir() {
        if resumes && !tmp.exists() {
            std::fs::rename(keep, tmp)
                .with_context(|| format!("cannot take up {}", keep.display()))?;
        } else {
            std::fs::remove_dir_all(keep)
                .with_context(|| format!("cannot clear {}", keep.display()))?;
        }
    }
    if tmp.is_dir() {
        // A run was interrupted here. A stage that resumes (k-means from its checkpoint, the
        // photo stages from their saved rounds) loses only partial files; every other stage
        // starts over, so no half-written file of the killed run survives into the step.
        if resumes {
            remove_partial_files(tmp)?;
        } else {
            std::fs::remove_dir_all(tmp)
                .with_context(|| format!("cannot clear {}", tmp.display()))?;
        }
    }
    vocab_pipeline::output::create_dir_all(tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))
}

/// A line-buffered writer that shows the paths of a step's temporary folder as the folder it
/// becomes, so that what a step prints names files that exist after the run.
pub struct Relocate<W: Write> {
    from: String,
    to: String,
    line: Vec<u8>,
    inner: W,
}

impl<W: Write> Relocate<W> {
    /// Replaces `from` by `to` in every line written to `inner`.
    pub fn new(from: &Path, to: &Path, inner: W) -> Self {
        Self {
            from: from.display().to_string(),
            to: to.display().to_string(),
            line: Vec::new(),
            inner,
        }
    }

    fn emit(&mut self) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(&self.line).replace(&self.from, &self.to);
        self.line.clear();
        self.inner.write_all(text.as_bytes())
    }
}

impl<W: Write> Write for Relocate<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for &b in buf {
            self.line.push(b);
            if b == b'\n' {
                self.emit()?;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.line.is_empty() {
            self.emit()?;
        }
        self.inner.flush()
    }
}

/// Puts the finished step `tmp` in place of `done`, whose old folder (a step made again, by
/// `--force` or for another engine) stays until the new one is in place: it is first renamed to
/// `old`, then removed. A run killed between the renames leaves `old` and no `done`, which
/// [`recover`] puts back.
pub(crate) fn replace(tmp: &Path, done: &Path, old: &Path) -> anyhow::Result<()> {
    let had_old = done.is_dir();
    if had_old {
        std::fs::rename(done, old)
            .with_context(|| format!("cannot rename {} to {}", done.display(), old.display()))?;
    }
    std::fs::rename(tmp, done)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), done.display()))?;
    if had_old && let Err(e) = std::fs::remove_dir_all(old) {
        // The new step is in place; what is left of the old one goes on the next run.
        eprintln!(
            "warning: cannot remove the replaced step {}: {e}",
            old.display()
        );
    }
    Ok(())
}

/// After a run killed while [`replace`] swapped a step: the old step back when the new one did
/// not take its place, or the rest of the old one removed when it did.
pub(crate) fn recover(done: &Path, old: &Path) -> anyhow::Result<()> {
    if !old.exists() {
        return Ok(());
    }
    if done.exists() {
        if let Err(e) = std::fs::remove_dir_all(old) {
            eprintln!(
                "warning: cannot remove the replaced step {}: {e}",
                old.display()
            );
        }
        Ok(())
    } else {
        std::fs::rename(old, done)
            .with_context(|| format!("cannot restore {} from {}", done.display(), old.display()))
    }
}

/// Removes the temporary files of interrupted atomic writes under `dir`.
fn remove_partial_files(dir: &Path) -> anyhow::Result<()> {
    for entry in walkdir::WalkDir::new(dir) {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy();
        if entry.file_type().is_file() && name.starts_with(vocab_pipeline::atomic::TEMP_PREFIX) {
            std::fs::remove_file(entry.path())
                .with_context(|| format!("cannot remove {}", entry.path().display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
