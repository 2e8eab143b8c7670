//! Where a photo stage's results come from when other nodes compute them: [`Rounds`] on a
//! team, and [`Journal`], rounds saved on disk so an interrupted job takes them back.

use std::ops::Range;
use std::path::{Path, PathBuf};

use vocab_pipeline::features::{FeaturesError, Outcome, Source};

use super::wire::{Expect, Reader, Value, put_outcomes, take_piece};

/// A photo stage's source of results fed by rounds on a team: `round` does the photos of a
/// range (on whichever members it has) and returns their results in order; it is told the
/// range of the round after, so that the members can start on it early.
pub struct Rounds<F> {
    round: F,
    /// Photos per round.
    per_round: usize,
    total: usize,
}

impl<F> std::fmt::Debug for Rounds<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rounds")
            .field("per_round", &self.per_round)
            .field("total", &self.total)
            .finish()
    }
}

impl<F> Rounds<F> {
    /// Rounds of `per_round` photos of a collection of `total`.
    pub fn new(round: F, per_round: usize, total: usize) -> Self {
        Self {
            round,
            per_round: per_round.max(1),
            total,
        }
    }
}

impl<T, E, F> Source<T> for Rounds<F>
where
    E: std::error::Error + Send + Sync + 'static,
    F: FnMut(Range<usize>, Option<Range<usize>>) -> Result<Vec<Outcome<T>>, E>,
{
    fn next(&mut self, from: usize) -> Result<Option<Vec<Outcome<T>>>, FeaturesError> {
        if from >= self.total {
            return Ok(None);
        }
        let end = self.total.min(from.saturating_add(self.per_round));
        let after = end..self.total.min(end.saturating_add(self.per_round));
        (self.round)(from..end, (!after.is_empty()).then_some(after))
            .map(Some)
            .map_err(|e| FeaturesError::Source(Box::new(e)))
    }
}

/// Rounds already done, kept on disk beside the stage's output, so that a stage interrupted on the
/// way (a driver killed, a job ended with a rank) resumes where it stopped: [`Journaled`] serves
/// a saved round instead of asking the team again. A round is one file (`<start>.round`,
/// written whole or not at all): magic, the photo range, the CRC-32 of the body, and the body
/// in the pieces' layout, read back with the same checks.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    /// What a round holds (its photos aside), for checking saved rounds.
    expect: Expect,
}

/// Opens a saved round's file.
const ROUND_MAGIC: [u8; 8] = *b"VOCABRND";

impl Journal {
    /// The journal in `dir` (created if absent) of the job named `key` (a digest of everything
    /// its results depend on: settings, photos, vocabulary), whose rounds hold what `expect`
    /// says (`PhotoStage::expect`). Rounds saved under another key (an earlier run with other
    /// settings writing the same file) are removed.
    pub fn open(dir: &Path, key: &str, expect: Expect) -> std::io::Result<Self> {
        // The run's own folder: a link there would be read, cleared or written through.
        vocab_pipeline::output::not_a_link(dir)?;
        let key_file = dir.join("job.key");
        let same = std::fs::read_to_string(&key_file).is_ok_and(|k| k == key);
        if !same && dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        vocab_pipeline::output::create_dir_all(dir)?;
        if !same {
            vocab_pipeline::atomic::write(&key_file, key.as_bytes())?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            expect,
        })
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub(super) fn path(&self, start: usize) -> PathBuf {
        self.dir.join(format!("{start:010}.round"))
    }

    /// The round saved at `from` (photos `from..end` with `end <= total`), if there is a whole
    /// one; a file that is damaged or does not fit is named on stderr and the round redone.
    pub fn load<T: Value>(&self, from: usize, total: usize) -> Option<Vec<Outcome<T>>> {
        let path = self.path(from);
        let bytes = std::fs::read(&path).ok()?;
        let read = || -> Result<Vec<Outcome<T>>, String> {
            let mut input = Reader { bytes: &bytes };
            if input.take(8)? != ROUND_MAGIC {
                return Err("not a saved round".into());
            }
            let start = u64::from_le_bytes(input.take(8)?.try_into().map_err(|_| "short")?);
            let end = u64::from_le_bytes(input.take(8)?.try_into().map_err(|_| "short")?);
            let crc = input.u32()?;
            if start != from as u64 || end <= start || end > total as u64 {
                return Err(format!("photos {start}..{end} of {total}"));
            }
            if crc32fast::hash(input.bytes) != crc {
                return Err("checksum mismatch".into());
            }
            let expect = self.expect.of((end - start) as usize);
            take_piece::<T>(input.bytes, &expect).map(|(_, outcomes)| outcomes)
        };
        match read() {
            Ok(outcomes) => Some(outcomes),
            Err(reason) => {
                eprintln!("{}: {reason}; doing these photos again", path.display());
                None
            }
        }
    }

    /// Saves the round of `outcomes` that starts at `from` (atomically).
    pub fn save<T: Value>(&self, from: usize, outcomes: &[Outcome<T>]) -> std::io::Result<()> {
        let mut body = 0f64.to_le_bytes().to_vec();
        put_outcomes(&mut body, outcomes);
        let mut bytes = ROUND_MAGIC.to_vec();
        bytes.extend_from_slice(&(from as u64).to_le_bytes());
        bytes.extend_from_slice(&((from + outcomes.len()) as u64).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        bytes.extend_from_slice(&body);
        vocab_pipeline::atomic::write(&self.path(from), &bytes)
    }

    /// Removes the journal (the stage finished).
    pub fn remove(self) -> std::io::Result<()> {
        std::fs::remove_dir_all(&self.dir)
    }
}

/// A source whose rounds are saved in a [`Journal`] as they come, and served from it when an
/// earlier run saved them.
#[derive(Debug)]
pub struct Journaled<'j, S> {
    inner: S,
    journal: &'j Journal,
    total: usize,
    /// Photos served from the journal.
    pub resumed: usize,
}

impl<'j, S> Journaled<'j, S> {
    /// `inner`'s rounds through `journal`, for a collection of `total` photos.
    pub fn new(inner: S, journal: &'j Journal, total: usize) -> Self {
        Self {
            inner,
            journal,
            total,
            resumed: 0,
        }
    }
}

impl<T: Value, S: Source<T>> Source<T> for Journaled<'_, S> {
    fn next(&mut self, from: usize) -> Result<Option<Vec<Outcome<T>>>, FeaturesError> {
        if let Some(saved) = self.journal.load::<T>(from, self.total) {
            self.resumed += saved.len();
            return Ok(Some(saved));
        }
        let batch = self.inner.next(from)?;
        if let Some(outcomes) = &batch {
            self.journal.save(from, outcomes).map_err(|source| {
                FeaturesError::Source(Box::new(vocab_pipeline::store::StoreError::Io {
                    path: self.journal.path(from),
                    source,
                }))
            })?;
        }
        Ok(batch)
    }
}
