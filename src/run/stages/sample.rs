//! The sample's steps: the split and the random patches of the training photos (kept here, or
//! cut into partitions on the nodes), then the partitions.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use serde_json::json;

use crate::config::Config;
use crate::progress::Ui;
use crate::run::dataset::{self, Dataset};
use crate::run::protocol::{SplitRule, Trial};
use crate::run::step::{Stage, digest};
use crate::settings::{FeatureSettings, PartitionSettings};
use crate::sharded::On;
use vocab_pipeline::store::Format;

/// The vocabulary's sample: the split, then random patches of the training photos.
pub struct Features<'a> {
    /// The run's config.
    pub config: &'a Config,
    /// Photos and labels.
    pub dataset: &'a Dataset,
    /// The labels' text.
    pub labels: &'a str,
    /// The column the split is stratified by.
    pub split_by: &'a str,
    /// Where the photos are described.
    pub on: On<'a>,
    /// The folder (as every node sees it) under which nodes keep the partitions they make.
    pub nodes: &'a Path,
    /// Whether this run wants the partitions born on the nodes (`[partition] at = "nodes"` on
    /// a distributed engine).
    pub born: bool,
    /// Progress.
    pub ui: &'a Ui,
    /// The trial whose training photos the sample is cut from.
    pub trial: &'a Trial,
}

/// What the features step made.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Training photos of the split.
    pub train: u64,
    /// Held-out photos.
    pub test: u64,
    /// Training photos described (those that decoded).
    pub described: u64,
}

impl Features<'_> {
    /// The sample file's name in the step's folder.
    pub fn file(&self) -> &'static str {
        match self.config.features.format {
            Format::Text => "sample.txt",
            // The config allows text or bin only ([`crate::settings::FeaturesConfig::params`]).
            _ => "sample.bin",
        }
    }

    /// With partitions born on the nodes: their folder, as every node sees it (one per key).
    pub fn nodes_dir(&self) -> std::path::PathBuf {
        self.nodes.join(format!("parts-{}", self.key()))
    }

    /// What the finished step in `dir` holds: the sample here, or (`AtNodes`) the partitions
    /// cut on the nodes with the driver's copy of their manifest.
    pub fn made(&self, dir: &Path) -> Option<Made> {
        if dir.join(self.file()).is_file() {
            Some(Made::Here)
        } else if dir.join("parts").join("manifest.toml").is_file() {
            Some(Made::AtNodes)
        } else {
            None
        }
    }
}

/// Where a features step left the sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// The sample file in the step's folder.
    Here,
    /// Partitions in the nodes' folders; the step holds the driver's copy of their manifest.
    AtNodes,
}

/// Whether partitions born on the nodes lie whole in `nodes` as this machine sees it (loopback
/// workers, a shared filesystem): the manifest there is the driver's copy (`here`) and every
/// partition file has its header and length.
pub fn whole_here(nodes: &Path, here: &Path) -> bool {
    use vocab_pipeline::partition::{looks_whole, read_manifest};
    if nodes.to_string_lossy().contains('{') {
        return false;
    }
    let (Ok(there), Ok(copy)) = (read_manifest(nodes), read_manifest(here)) else {
        return false;
    };
    there.digest() == copy.digest()
        && (there.partitions.iter()).all(|entry| {
            looks_whole(
                &nodes.join(&entry.file),
                entry,
                there.dims,
                there.element_type(),
            )
        })
}

impl Stage for Features<'_> {
    type Output = Sample;

    fn stage(&self) -> &'static str {
        "features"
    }

    fn label(&self) -> String {
        format!("sample{}", self.trial.suffix())
    }

    fn key(&self) -> String {
        // Descriptors made elsewhere are keyed by their files (in the dataset's key), not by how
        // the path is spelt.
        let features = crate::options::FeaturesOptions {
            from: None,
            ..self.config.features.clone()
        };
        let mut parts = vec![
            json!(self.dataset.key),
            json!(features),
            json!(self.split_by),
            json!(self.trial.seed),
            json!(vocab_pipeline::image_io::DECODING),
        ];
        // The 50/50 split's keys stay what they were.
        match self.trial.rule {
            SplitRule::Half => {}
            SplitRule::PerClass(n) => parts.push(json!(["per_class", n])),
            SplitRule::All => parts.push(json!("all")),
        }
        // Where the sample goes (kept here, or cut into partitions on the nodes) is not in the
        // key: the partitions are the same bytes either way.
        digest(&json!(parts))
    }

    /// A sample cut on the nodes serves a run that wants it there, or one that can read the
    /// whole set here; a sample here serves every run (partitions are then split here).
    fn usable(&self, dir: &Path) -> bool {
        match self.made(dir) {
            Some(Made::Here) => true,
            Some(Made::AtNodes) => self.born || whole_here(&self.nodes_dir(), &dir.join("parts")),
            None => false,
        }
    }

    /// Sharded over nodes, the stage resumes from the rounds it saved.
    fn resumes(&self) -> bool {
        true
    }

    fn run(&self, tmp: &Path, out: &mut dyn Write) -> anyhow::Result<Sample> {
        let split = dataset::split(
            self.labels,
            &self.dataset.labels,
            self.split_by,
            self.trial.seed,
            self.trial.rule,
        )?;
        let (train, test) = dataset::write_split(&split, tmp)?;
        if self.trial.rule == SplitRule::All {
            writeln!(out, "  every one of the {train} photos trains")?;
        } else {
            writeln!(
                out,
                "  split by {:?} (seed {}): {train} training photos, {test} held out",
                self.split_by, self.trial.seed
            )?;
        }
        let settings = FeatureSettings::from_config(
            &self.config.features,
            &self.dataset.photos,
            &tmp.join("train.csv"),
            &tmp.join(self.file()),
        )?;
        // The dataset's descriptors made elsewhere, the ones its key holds.
        let settings = FeatureSettings {
            from: self.dataset.from.clone(),
            ..settings
        };
        let born = self.born.then(|| crate::sharded::Born {
            dir: self.nodes_dir(),
            parts: self.config.partition.parts,
            element: self.config.partition.element,
        });
        let (summary, placed) =
            crate::photo_cmd::features_into(&settings, born.as_ref(), self.ui, self.on, out)?;
        // The driver's copy of the partitions' manifest (the nodes hold theirs beside them),
        // and how each partition is made again from its photos if no node holds it any more.
        if let Some(placed) = placed {
            let here = tmp.join("parts");
            vocab_pipeline::output::create_dir_all(&here)
                .with_context(|| format!("cannot create {}", here.display()))?;
            vocab_pipeline::partition::write_manifest(&here, &placed.manifest)?;
            let recipes = here.join(vocab_cluster::jobs::born::RECIPES);
            let text = serde_json::to_vec(&placed.recipes)?;
            vocab_pipeline::atomic::write(&recipes, &text)
                .with_context(|| format!("cannot write {}", recipes.display()))?;
        }
        Ok(Sample {
            train,
            test,
            described: summary.images as u64,
        })
    }

    fn cached(&self, dir: &Path) -> anyhow::Result<Sample> {
        let split = std::fs::read_to_string(dir.join("split.csv"))
            .with_context(|| format!("cannot read {}", dir.join("split.csv").display()))?;
        let train = split.lines().filter(|l| l.ends_with(",train")).count() as u64;
        let test = split.lines().skip(1).count() as u64 - train;
        let images = vocab_pipeline::features::manifest_path(&dir.join(self.file()), "images.csv");
        let described = std::fs::read_to_string(&images)
            .with_context(|| format!("cannot read {}", images.display()))?
            .lines()
            .count()
            .saturating_sub(1) as u64;
        Ok(Sample {
            train,
            test,
            described,
        })
    }
}

/// The sample in partitions.
pub struct Partition<'a> {
    /// The run's config.
    pub config: &'a Config,
    /// What the step's label ends with (the trial's).
    pub suffix: &'a str,
    /// Key of the features step.
    pub features_key: &'a str,
    /// The sample file.
    pub sample: &'a Path,
    /// Partitions born on the nodes (by the features step): their folder as the nodes see it,
    /// and the folder here with the manifest's copy.
    pub placed: Option<(&'a Path, &'a Path)>,
}

impl Stage for Partition<'_> {
    type Output = ();

    fn stage(&self) -> &'static str {
        "partition"
    }

    fn label(&self) -> String {
        format!("parts{}", self.suffix)
    }

    fn key(&self) -> String {
        // Where partitions are made (`at`, `folder`) is not in the key: the same bytes either
        // way. Left at their defaults, keys stay what they were.
        let what = crate::config::PartitionConfig {
            at: crate::config::PartitionAt::Nodes,
            folder: None,
            ..self.config.partition.clone()
        };
        digest(&json!([self.features_key, what]))
    }

    /// Partitions split here must be here; partitions made on the nodes are elsewhere anyway.
    fn usable(&self, dir: &Path) -> bool {
        self.placed.is_some() || dir.join("parts").join("manifest.toml").is_file()
    }

    fn run(&self, tmp: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
        if let Some((dir, here)) = self.placed {
            // The features step made them; the manifest here is the driver's copy.
            let m = vocab_pipeline::partition::read_manifest(here)?;
            writeln!(
                out,
                "partition: {} records x {} dims ({}) in {} partitions made at the nodes in {}",
                m.count,
                m.dims,
                m.element,
                m.partitions.len(),
                dir.display()
            )?;
            return Ok(());
        }
        let p = &self.config.partition;
        let settings =
            PartitionSettings::new(self.sample, &tmp.join("parts"), Some(p.parts), p.element)?;
        crate::kmeans_cmd::partition(&settings, out)
    }

    fn cached(&self, _dir: &Path) -> anyhow::Result<()> {
        Ok(())
    }
}
