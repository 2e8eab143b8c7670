//! The mutation harness of `eval/robustness/`: every reader of vocab's inputs fed seeded mutants of
//! a valid file (bit flips, extreme bytes, truncations, appended junk, spliced ranges, header fields
//! set to extremes with their checksums made valid again, text tokens set to extremes, lines
//! dropped or doubled). Every outcome must be a result that holds or a clear error (naming the
//! file, for files), never a panic, within a stated memory bound per mutant.
//!
//! Shared by the full run (`cargo run --release -p vocab-cluster --example mutants`) and the small
//! seeded slice in the tests (`cluster/tests/mutants/main.rs`).

#![allow(dead_code)] // each of the two roots uses part of it

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

// The parts, beside this file: named by their paths, since a plain `mod` would be looked for
// beside it from the example (which declares this file by `#[path]`) but under `engine/` from
// the tests.
#[path = "mutations.rs"]
mod mutations;
#[path = "readers.rs"]
mod readers;

pub use mutations::mutate;
pub use readers::readers;

/// An allocator that counts the bytes held and their peak: the memory a mutant makes a reader
/// take (declared `#[global_allocator]` by each root).
pub struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            HELD.fetch_sub(layout.size(), Ordering::Relaxed);
            let now = HELD.fetch_add(new_size, Ordering::Relaxed) + new_size;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
}

/// A small seeded generator (splitmix64): mutants are reproducible from (reader, seed, index).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// How a reader's input may be fixed up after a mutation so that it passes its checksums and the
/// mutant reaches the checks behind them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fixup {
    /// Nothing to fix.
    None,
    /// vocab's binary feature format: the payload CRC (24..28) and the header CRC (28..32).
    FeatureFile,
    /// PNG: every chunk's CRC.
    Png,
}

/// A binary integer field of a header: offset and width in bytes (little endian unless PNG).
pub type Field = (usize, usize);

/// What happened to one mutant.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Read, and the result holds (values finite, sizes consistent).
    Accepted,
    /// Refused with a clear error.
    Refused,
    /// A failure of the harness's rules: a panic, an unclear error, a result that does not hold.
    Failed(String),
}

/// How a reader reads a mutant: `Ok` when what it read holds, `Err(message)` for a refusal (the
/// message is what a user would see).
pub type ReadFn = Box<dyn Fn(&Path) -> Result<(), String> + Sync>;

/// One reader under test: its seed files and how to read a mutant.
pub struct Reader {
    /// Name in the results (`features-bin`).
    pub name: &'static str,
    /// The file name a mutant is written to (the error must name it).
    pub file: &'static str,
    /// A valid input.
    pub seed: Vec<u8>,
    /// Integer fields of its header, for the "extreme field" mutation.
    pub fields: Vec<Field>,
    /// Checksums to recompute.
    pub fixup: Fixup,
    /// Memory a mutant may make the reader hold, in bytes.
    pub memory: usize,
    /// Reads the mutant at `path` (in a scratch folder also holding the reader's other files):
    /// `Ok` when the result holds, `Err(message)` for a refusal.
    pub read: ReadFn,
    /// Other files the reader needs beside the mutant (written before each mutant).
    pub beside: Vec<(&'static str, Vec<u8>)>,
}

/// One mutant through `reader` in `scratch`: the outcome, the peak bytes allocated over the
/// baseline and the milliseconds it took.
pub fn run_one(reader: &Reader, scratch: &Path, bytes: &[u8]) -> (Outcome, usize, f64) {
    for (name, data) in &reader.beside {
        std::fs::write(scratch.join(name), data).expect("write beside");
    }
    let path = scratch.join(reader.file);
    std::fs::write(&path, bytes).expect("write mutant");
    let base = HELD.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let started = Instant::now();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (reader.read)(&path)));
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let outcome = match result {
        Err(payload) => {
            let what = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Outcome::Failed(format!("panic: {what}"))
        }
        Ok(Ok(())) => Outcome::Accepted,
        Ok(Err(message)) if message.trim().is_empty() => Outcome::Failed("an empty error".into()),
        Ok(Err(message)) if message.contains("panicked") => {
            Outcome::Failed(format!("a panic reported as an error: {message}"))
        }
        Ok(Err(_)) => Outcome::Refused,
    };
    let outcome = match outcome {
        Outcome::Accepted | Outcome::Refused if peak > reader.memory => Outcome::Failed(format!(
            "held {peak} bytes, more than the bound of {}",
            reader.memory
        )),
        other => other,
    };
    (outcome, peak, ms)
}

/// The tally of one reader's run.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub mutants: usize,
    pub accepted: usize,
    pub refused: usize,
    pub failed: Vec<(usize, String)>,
    pub peak: usize,
    pub slowest_ms: f64,
    pub seconds: f64,
}

/// `count` mutants of `reader` from `seed`, in a scratch folder of their own.
pub fn run(reader: &Reader, seed: u64, count: usize) -> Tally {
    let scratch = tempfile::tempdir().expect("scratch");
    let mut tally = Tally::default();
    let started = Instant::now();
    for i in 0..count {
        let mut rng = Rng::new(seed ^ (i as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
        let bytes = mutate(reader, &mut rng);
        let (outcome, peak, ms) = run_one(reader, scratch.path(), &bytes);
        tally.mutants += 1;
        tally.peak = tally.peak.max(peak);
        tally.slowest_ms = tally.slowest_ms.max(ms);
        match outcome {
            Outcome::Accepted => tally.accepted += 1,
            Outcome::Refused => tally.refused += 1,
            Outcome::Failed(why) => tally.failed.push((i, why)),
        }
    }
    tally.seconds = started.elapsed().as_secs_f64();
    tally
}

/// Where a reader's failures are written, one line each: index and why.
pub fn failures_text(tally: &Tally) -> String {
    tally
        .failed
        .iter()
        .map(|(i, why)| format!("{i}: {why}\n"))
        .collect()
}

/// The scratch folder's path for a reader (unused by the in-process readers; kept for spawns).
pub fn scratch_of(root: &Path, reader: &str) -> PathBuf {
    root.join(reader)
}
