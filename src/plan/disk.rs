//! The plan's disk: what each stage's steps leave in the work directory, a trial's and the
//! run's, and what `vocab clean --encodings` frees once the run is done.

use super::cost::{RECORD_HEAD, dims};
use crate::config::Config;
use crate::memory::human;

/// Bytes a model file takes a weight (JSON: measured about 19 on the quickstart's models).
const MODEL_BYTES_PER_WEIGHT: u64 = 20;
/// Bytes of a generated photo and its share of the labels (the quickstart's 40: 2.77 MB).
const SYNTHETIC_PHOTO_BYTES: u64 = 70_000;
/// Bytes a mixture file and its checkpoint take a value (JSON: a float, and an integer of its
/// bits).
const MIXTURE_BYTES_PER_VALUE: u64 = 45;

/// What one trial's steps leave, stage by stage.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Disk {
    /// (stage, bytes), in the order the stages run.
    pub(super) stages: Vec<(&'static str, u64)>,
    /// The generated photos, shared by the trials.
    pub(super) dataset: u64,
}

impl Disk {
    /// A trial of `config` over `photos` photos (with a test folder's), `training` of them
    /// training, `n` vectors sampled, with `classes` per attribute learned.
    pub(super) fn of(
        config: &Config,
        (photos, training, n): (u64, u64, u64),
        classes: &[usize],
        born: bool,
    ) -> anyhow::Result<Self> {
        let value = config.partition.element.size() as u64;
        let dims = dims(config);
        // Partitions made on the nodes are all there is of the sample.
        let sample = if born {
            0
        } else {
            n * (RECORD_HEAD + dims * 4)
        };
        let partitions = n * (RECORD_HEAD + dims * value);
        let encoding = config.encode_params()?;
        let (mut dictionary, mut encode, mut models) = (0u64, 0u64, 0u64);
        let mirrored = if config.classify.mirror { training } else { 0 };
        for &k in config.sizes() {
            let k = k as u64;
            dictionary += if config.fisher() {
                let pca = config.mixture.pca_dims as u64;
                (dims * pca + 2 * k * pca + k) * MIXTURE_BYTES_PER_VALUE
            } else {
                // The vocabulary and its checkpoint.
                2 * k * (RECORD_HEAD + dims * 4)
            };
            let values = encoding.len(k as usize) as u64;
            encode += (photos + mirrored) * (RECORD_HEAD + 4 * values);
            let mapped = match config.classify.kernel_map.kernel() {
                Some(_) => values * (2 * config.classify.map_order as u64 + 1),
                None => values,
            };
            for &c in classes {
                let per = if c > 2 { c as u64 } else { 1 };
                models += per * mapped * MODEL_BYTES_PER_WEIGHT;
            }
        }
        let learned = if config.fisher() { "mixture" } else { "kmeans" };
        let dataset = match config.dataset.synthetic {
            Some(_) => photos * SYNTHETIC_PHOTO_BYTES,
            None => 0,
        };
        Ok(Self {
            dataset,
            stages: vec![
                ("features", sample),
                ("partition", partitions),
                (learned, dictionary),
                ("encode", encode),
                ("svm", models),
            ],
        })
    }

    /// A trial's bytes.
    pub(super) fn total(&self) -> u64 {
        self.stages.iter().map(|(_, b)| b).sum()
    }

    /// What `vocab clean --encodings` frees of a finished trial.
    pub(super) fn encodings(&self) -> u64 {
        (self.stages.iter())
            .filter(|(stage, _)| *stage == "encode")
            .map(|(_, b)| b)
            .sum()
    }
}

/// The plan's disk lines for `trials` trials.
pub(super) fn print_disk(disk: &Disk, trials: usize) {
    let stages: Vec<String> = (disk.stages.iter())
        .filter(|(_, bytes)| *bytes > 0)
        .map(|(stage, bytes)| format!("{stage} {}", human(*bytes as f64)))
        .collect();
    let trials = trials.max(1) as u64;
    let all = disk.total() * trials + disk.dataset;
    println!(
        "  disk        {} a trial, {} in all{}: {}",
        human(disk.total() as f64),
        human(all as f64),
        if disk.dataset > 0 {
            format!(
                " (the generated photos' {} included)",
                human(disk.dataset as f64)
            )
        } else {
            String::new()
        },
        stages.join(", ")
    );
    println!(
        "    in the work directory; once the run is done, `vocab clean CONFIG --encodings` frees \
         the encodings' {} (and any stale steps)",
        human((disk.encodings() * trials) as f64)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The development run's work directory held 5.0 GB, 3.5 GB of it encodings (issue 52):
    /// the plan's figures for its config come within a tenth of both.
    #[test]
    fn the_development_runs_disk_is_what_it_left() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/scene15-dev.toml");
        let config = crate::config::load(&path).expect("config");
        let classes = [15, 2, 2];
        let n = 750 * config.features.per_image as u64;
        let disk = Disk::of(&config, (1500, 750, n), &classes, true).expect("disk");
        let (all, encodings) = (disk.total() as f64 * 5.0, disk.encodings() as f64 * 5.0);
        assert!((all / 5.0e9 - 1.0).abs() < 0.1, "{all}");
        assert!((encodings / 3.5e9 - 1.0).abs() < 0.1, "{encodings}");
    }
}
