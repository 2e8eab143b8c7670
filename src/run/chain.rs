//! The steps of one trial: the sample and its partitions, then per dictionary size the
//! vocabulary (or mixture), the encodings and an SVM per attribute.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::dataset::Dataset;
use super::protocol::Trial;
use super::report::{Mixture, Outcome, Vocabulary};
use super::stages;
use super::step::{Runner, Stage};
use crate::config::{self, Config};
use crate::progress::Ui;
use crate::settings::Backend;

/// What every step of one run shares.
pub(super) struct Chain<'a> {
    /// The run's config.
    pub(super) config: &'a Config,
    /// The photos and their labels.
    pub(super) dataset: &'a Dataset,
    /// The labels' text.
    pub(super) labels: &'a str,
    /// The attribute the split is stratified by.
    pub(super) split_by: &'a str,
    /// Where the distributed stages run.
    pub(super) engine: &'a Backend,
    /// Where the photo stages run.
    pub(super) on: crate::sharded::On<'a>,
    /// The MPI job, under `--engine mpi`.
    pub(super) mpi: Option<&'a crate::ranks::Mpi<'a>>,
    /// Progress.
    pub(super) ui: &'a Ui,
    /// Fault injection (`--exit-after-iteration`).
    pub(super) exit_after_iteration: Option<u64>,
    /// The test folder, when the run scores one.
    pub(super) test: Option<&'a Dataset>,
    /// The configs of the parts joined after the run's own (`[[join]]`; none: one part).
    pub(super) joined: &'a [Config],
}

/// What the sample's steps made: the keys later steps depend on, the split, the partitions.
pub(super) struct Sampled {
    /// Key of the features step.
    pub(super) features_key: String,
    /// What the sample holds.
    pub(super) sample: stages::Sample,
    /// The trial's split (`path,split`).
    pub(super) split_csv: PathBuf,
    /// Key of the partition step.
    pub(super) partition_key: String,
    /// The partition folder (as the members see it when they lie at the nodes).
    pub(super) parts: PathBuf,
    /// Partitions made on the nodes: their folder as they see it, and the manifest's copy here.
    pub(super) placed: Option<(PathBuf, PathBuf)>,
}

impl Chain<'_> {
    /// The same chain for the part of `config` (a `[[join]]` part's).
    pub(super) fn of<'b>(&'b self, config: &'b Config) -> Chain<'b> {
        Chain {
            config,
            dataset: self.dataset,
            labels: self.labels,
            split_by: self.split_by,
            engine: self.engine,
            on: self.on,
            mpi: self.mpi,
            ui: self.ui,
            exit_after_iteration: self.exit_after_iteration,
            test: self.test,
            joined: &[],
        }
    }

    /// Every part's sample ([`Chain::sample`]): the run's own, then each `[[join]]` part's.
    pub(super) fn samples(
        &self,
        runner: &mut Runner,
        work: &Path,
        trial: &Trial,
    ) -> anyhow::Result<Vec<Sampled>> {
        let mut all = vec![self.sample(runner, work, trial)?];
        for config in self.joined {
            all.push(self.of(config).sample(runner, work, trial)?);
        }
        Ok(all)
    }

    /// The features and partition steps in `work`.
    pub(super) fn sample(
        &self,
        runner: &mut Runner,
        work: &Path,
        trial: &Trial,
    ) -> anyhow::Result<Sampled> {
        // `[partition] at = "nodes"` on a distributed engine: the nodes keep their patches as
        // partitions under this folder (as every node sees it; the driver keeps the manifest there).
        let wants_born =
            self.config.partition.at == config::PartitionAt::Nodes && self.engine.distributed();
        let nodes = match &self.config.partition.folder {
            Some(f) if f.is_absolute() => f.clone(),
            Some(f) => work.join(f),
            None => work.join("nodes"),
        };
        // The nodes write there, in processes that know nothing of this run's inputs: the folder
        // (up to a per-node `{node}` part) is checked here, as any output of the run.
        if wants_born {
            let text = nodes.to_string_lossy();
            let fixed = text
                .find('{')
                .map_or(nodes.clone(), |at| Path::new(&text[..at]).to_path_buf());
            vocab_pipeline::output::check(&fixed).with_context(|| {
                format!(
                    "[partition] folder {}: where the nodes write",
                    nodes.display()
                )
            })?;
        }
        // A folder named per node (`{node}`) is made by each node.
        if wants_born && !nodes.to_string_lossy().contains('{') {
            vocab_pipeline::output::create_dir_all(&nodes)
                .with_context(|| format!("cannot create {}", nodes.display()))?;
        }
        let nodes = std::path::absolute(&nodes)
            .with_context(|| format!("cannot resolve {}", nodes.display()))?;
        let features = stages::Features {
            config: self.config,
            dataset: self.dataset,
            labels: self.labels,
            split_by: self.split_by,
            on: self.on,
            nodes: &nodes,
            born: wants_born,
            ui: self.ui,
            trial,
        };
        let features_key = features.key();
        let (features_dir, sample) = runner.run(&features)?;
        let sample_file = features_dir.join(features.file());
        let split_csv = features_dir.join("split.csv");

        // Where the step left the sample decides where the partitions are, whatever this run
        // wanted: a cached sample here is split here and read by the nodes from this folder.
        let made = features.made(&features_dir);
        if wants_born && made == Some(stages::Made::Here) {
            println!(
                "  the sample is here ({}): partitions are split here, and the nodes read them from \
                 this folder",
                features_dir.display()
            );
        }
        // Born on the nodes: their folder as they see it, and the manifest's copy here.
        let placed = (made == Some(stages::Made::AtNodes))
            .then(|| (features.nodes_dir(), features_dir.join("parts")));
        let suffix = trial.suffix();
        let partition = stages::Partition {
            config: self.config,
            suffix: &suffix,
            features_key: &features_key,
            sample: &sample_file,
            placed: placed.as_ref().map(|(n, h)| (n.as_path(), h.as_path())),
        };
        let partition_key = partition.key();
        let (parts_dir, ()) = runner.run(&partition)?;
        let parts =
            (placed.as_ref()).map_or_else(|| parts_dir.join("parts"), |(nodes, _)| nodes.clone());
        Ok(Sampled {
            features_key,
            sample,
            split_csv,
            partition_key,
            parts,
            placed,
        })
    }

    /// A vocabulary per `k` (one per part, `samples` in the parts' order), each encoding every
    /// photo (the parts' encodings joined) and training a model per attribute of
    /// `attributes`; returns the scores and the run's own part's vocabularies and mixtures.
    pub(super) fn vocabularies(
        &self,
        runner: &mut Runner,
        samples: &[Sampled],
        attributes: &[String],
        trial: &Trial,
    ) -> anyhow::Result<(Vec<Outcome>, Vec<Vocabulary>, Vec<Mixture>)> {
        let mut outcomes = Vec::new();
        let mut vocabularies = Vec::new();
        let mut mixtures = Vec::new();
        let suffix = trial.suffix();
        let sampled = samples.first().context("no sample")?;
        for &k in self.config.sizes() {
            let dictionary = self.dictionary(runner, sampled, &suffix, k)?;
            vocabularies.extend(dictionary.vocabulary);
            if let Some((file, _)) = &dictionary.made.mixture {
                let steps =
                    vocab_pipeline::features::manifest_path(&dictionary.made.path, "steps.csv");
                mixtures.push(Mixture::of(k, file, &steps));
            }
            let mut made = vec![dictionary.made];
            for (config, sampled) in self.joined.iter().zip(&samples[1..]) {
                made.push(
                    self.of(config)
                        .dictionary(runner, sampled, &suffix, k)?
                        .made,
                );
            }
            let parts = (samples, made.as_slice());
            // The encodings are made only when a model needs them: a finished run whose
            // encodings were dropped (`vocab clean --encodings`) keeps its models.
            let encoded = self.all_encodings(runner, parts, (&suffix, k), Locate)?;
            let tables = stages::Tables::default();
            let mut svms = Vec::new();
            for attribute in attributes {
                let svm = stages::Svm {
                    config: self.config,
                    dataset: self.dataset,
                    encode_key: &encoded.key,
                    features_key: &sampled.features_key,
                    k,
                    attribute,
                    histograms: &encoded.histograms,
                    mirrored: (encoded.mirrored.as_ref())
                        .map(|(key, path)| (key.as_str(), path.as_path())),
                    split: &sampled.split_csv,
                    suffix: &suffix,
                    seed: trial.seed,
                    ui: self.ui,
                    tables: &tables,
                    test: self.test.zip(encoded.tested.as_ref()).map(
                        |(dataset, (key, histograms))| stages::Test {
                            dataset,
                            encode_key: key,
                            histograms,
                        },
                    ),
                };
                svms.push(svm);
            }
            // (The same steps: their folders are those the models were given.)
            let make = if svms.iter().all(|svm| runner.done(svm)) {
                Cached
            } else {
                Make
            };
            let made = self.all_encodings(runner, parts, (&suffix, k), make)?;
            debug_assert_eq!(made.histograms, encoded.histograms);
            for (svm, attribute) in svms.iter().zip(attributes) {
                let (_, scores) = runner.run(svm)?;
                outcomes.push(Outcome {
                    k,
                    attribute: attribute.clone(),
                    scores,
                });
            }
        }
        Ok((outcomes, vocabularies, mixtures))
    }

    /// The dictionary of size `k`: the mixture of Fisher vectors, or the vocabulary (and what
    /// the report says of it).
    fn dictionary(
        &self,
        runner: &mut Runner,
        sampled: &Sampled,
        suffix: &str,
        k: usize,
    ) -> anyhow::Result<Dictionary> {
        // One process reads partitions made on the nodes in place (their folder is whole here,
        // or the features step would have been made again).
        let placed = (sampled.placed.as_ref())
            .filter(|_| self.engine.distributed())
            .map(|(_, here)| here.as_path());
        if self.config.fisher() {
            let mixture = stages::Mixture {
                config: self.config,
                suffix,
                partition_key: &sampled.partition_key,
                parts: &sampled.parts,
                components: k,
                engine: self.engine,
                placed,
                ui: self.ui,
                mpi: self.mpi,
                exit_after_iteration: self.exit_after_iteration,
            };
            let (dir, file) = runner.run(&mixture)?;
            let made = Made {
                key: mixture.key(),
                path: dir.join("mixture.json"),
                mixture: Some(file),
            };
            return Ok(Dictionary {
                made,
                vocabulary: None,
            });
        }
        let kmeans = stages::Kmeans {
            config: self.config,
            suffix,
            partition_key: &sampled.partition_key,
            parts: &sampled.parts,
            k,
            engine: self.engine,
            exit_after_iteration: self.exit_after_iteration,
            placed,
            ui: self.ui,
            mpi: self.mpi,
        };
        let (kmeans_dir, fitted) = runner.run(&kmeans)?;
        let vocabulary = kmeans_dir.join("vocabulary.bin");
        let said = Vocabulary {
            k,
            path: vocabulary.clone(),
            meta: fitted.meta,
            per_iteration: fitted.per_iteration,
        };
        let made = Made {
            key: kmeans.key(),
            path: vocabulary,
            mixture: None,
        };
        Ok(Dictionary {
            made,
            vocabulary: Some(said),
        })
    }
}

/// A dictionary learned: what encodes over it, and what the report says of a vocabulary.
struct Dictionary {
    made: Made,
    vocabulary: Option<Vocabulary>,
}

/// A dictionary's step key and file, and for Fisher vectors the mixture as its step read it,
/// with its digest.
pub(super) struct Made {
    pub(super) key: String,
    pub(super) path: PathBuf,
    pub(super) mixture: Option<(vocab_pipeline::mixture::MixtureFile, String)>,
}

/// What [`Chain::encodings`] does with the encode steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encodings {
    /// Only where they are and their keys.
    Locate,
    /// Read those that are finished (listed among the run's steps); make none.
    Cached,
    /// Run them (made, or read when finished).
    Make,
}
use Encodings::{Cached, Locate, Make};
