//! The plan's rates measured on this machine as it is now: a fraction of a second of the
//! features stage on some of the run's photos (or generated ones) and of the k-means
//! assignment kernel, each against the rate `rates` holds for the reference machine. A loaded
//! machine gives lower rates, and the plan says how loaded it was.

use std::path::Path;
use std::time::{Duration, Instant};

use vocab_pipeline::image_io::Collection;
use vocab_pipeline::kmeans::{self, Assignment, Init, Params};
use vocab_pipeline::partition::Rows;

use super::cost::DIMS;
use super::rates;
use crate::config::Config;

/// How long each measurement runs at least.
const BUDGET: Duration = Duration::from_millis(250);
/// Most photos the features measurement describes.
const MOST_PHOTOS: usize = 64;

/// This machine's speed now against the reference machine's: above 1 is faster.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Calibration {
    /// The photo stages' (decoding and describing photos).
    pub(super) photos: f64,
    /// The learning's and models' (the assignment kernel the run uses).
    pub(super) math: f64,
    /// The 1-minute load average and the cores, when the machine was busy.
    pub(super) busy: Option<(f64, usize)>,
}

impl Calibration {
    /// The reference machine's rates as they are.
    pub(super) const REFERENCE: Self = Self {
        photos: 1.0,
        math: 1.0,
        busy: None,
    };

    /// Measures the machine: the features stage of `config` over up to [`MOST_PHOTOS`] of
    /// `photos` (relative paths under a folder; generated photos when `None`), and the assignment
    /// kernel `config` uses.
    pub(super) fn measure(
        config: &Config,
        photos: Option<(&Path, &[String])>,
    ) -> anyhow::Result<Self> {
        // Before the measurements load it themselves.
        let busy = busy();
        let photos = photo_rate(config, photos)? / rates::FEATURE_PATCHES;
        let kernel = config.kmeans.assignment().unwrap_or_default().kernel();
        let reference = rates::rate_of(Assignment::Full(kernel));
        let math = assignment_rate(kernel)? / reference;
        Ok(Self { photos, math, busy })
    }
}

/// The 1-minute load average when it is at least half the cores (`/proc/loadavg`).
fn busy() -> Option<(f64, usize)> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let load: f64 = text.split_whitespace().next()?.parse().ok()?;
    (load >= 0.5 * cores as f64).then_some((load, cores))
}

/// Random patches described a second by the features stage (decoding included) over the
/// first photos of `photos`, as many as [`BUDGET`] takes.
fn photo_rate(config: &Config, photos: Option<(&Path, &[String])>) -> anyhow::Result<f64> {
    let tmp = tempfile::tempdir()?;
    let (root, paths) = match photos.filter(|(_, p)| !p.is_empty()) {
        Some((root, paths)) => (root.to_path_buf(), paths.to_vec()),
        None => {
            let root = tmp.path().join("photos");
            vocab_pipeline::synth::generate_photos(&root, 4, 1)?;
            let collection = Collection::open(&root, None)?;
            let paths = collection
                .photos()
                .iter()
                .map(|p| p.rel_path.clone())
                .collect();
            (root, paths)
        }
    };
    // As the reference rate was measured: 200 random patches a photo, decoding included, the
    // photos as they are (a patch side's resize is the config's work, not the machine's speed).
    let params = vocab_pipeline::features::FeatureParams {
        sampling: vocab_pipeline::patch::Sampling::Random {
            per_image: 200,
            seed: 1,
        },
        patch: None,
        descriptor: vocab_pipeline::features::Descriptor::Hog,
        ..config.features.params()?
    };
    let out = tmp.path().join("f.bin");
    let mut m = 4;
    loop {
        let listed: Vec<(String, Option<String>)> =
            paths.iter().take(m).map(|p| (p.clone(), None)).collect();
        let collection = Collection::listed(&root, listed)?;
        let started = Instant::now();
        let summary = vocab_pipeline::describe::extract(
            &collection,
            &params,
            &out,
            vocab_pipeline::store::Format::Bin,
            &|_| {},
        );
        let seconds = started.elapsed().as_secs_f64();
        let whole = m >= paths.len().min(MOST_PHOTOS);
        match summary {
            Ok(s) if seconds >= BUDGET.as_secs_f64() || whole => {
                return Ok(s.patches as f64 / seconds.max(1e-9));
            }
            Ok(_) => m = (m * 2).min(MOST_PHOTOS),
            // Photos none of which can be read measure nothing: the generated ones do.
            Err(_) if photos.is_some() => return photo_rate(config, None),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Multiply-adds a second of one k-means iteration through `kernel` over random vectors, on
/// more vectors each time until one iteration takes [`BUDGET`].
fn assignment_rate(kernel: kmeans::Kernel) -> anyhow::Result<f64> {
    let (k, dims, most) = (512, DIMS as usize, 16_384);
    // A fixed pattern, no generator needed: values spread over [0, 1).
    let data: Vec<f32> = (0..most * dims)
        .map(|i| ((i as u64).wrapping_mul(2_654_435_761) % 1000) as f32 / 1000.0)
        .collect();
    let params = Params {
        k,
        max_iter: 1,
        tol: 0.0,
        seed: 1,
        init: Init::Random,
        threads: 0,
        assignment: Assignment::Full(kernel),
    };
    let mut n = 1024;
    loop {
        let rows = [Rows::dense(&data[..n * dims], dims)];
        let started = Instant::now();
        kmeans::engine::fit::<kmeans::KMeansError>(&rows, &params, None, &mut |_| Ok(()))?;
        let seconds = started.elapsed().as_secs_f64();
        if seconds >= BUDGET.as_secs_f64() || n >= most {
            return Ok((n * k * dims) as f64 / seconds.max(1e-9));
        }
        n = (n * 2).min(most);
    }
}
