//! A dictionary's steps: k-means (or, for Fisher vectors, the mixture) over the partitions,
//! then every photo encoded over it.

use std::io::Write;
use std::path::Path;

use serde_json::json;
use vocab_pipeline::kmeans::{Assignment, Search, approx};

use crate::config::Config;
use crate::kmeans_cmd::Fitted;
use crate::options::EncodeOptions;
use crate::progress::Ui;
use crate::ranks::Mpi;
use crate::run::dataset::Dataset;
use crate::run::step::{Stage, digest};
use crate::settings::{Backend, EncodeSettings, KmeansSettings, MixtureSettings, TeamSettings};
use crate::sharded::On;
use vocab_pipeline::kmeans::Kernel;
use vocab_pipeline::mixture::MixtureFile;

/// One vocabulary.
pub struct Kmeans<'a> {
    /// The run's config.
    pub config: &'a Config,
    /// What the step's label ends with (the trial's).
    pub suffix: &'a str,
    /// Key of the partition step.
    pub partition_key: &'a str,
    /// The partition folder.
    pub parts: &'a Path,
    /// Vocabulary size.
    pub k: usize,
    /// Where it runs.
    pub engine: &'a Backend,
    /// Fault injection (`--exit-after-iteration`).
    pub exit_after_iteration: Option<u64>,
    /// The partitions lie at the nodes (`parts` as they see it): the folder here with their
    /// manifest.
    pub placed: Option<&'a Path>,
    /// Progress.
    pub ui: &'a Ui,
    /// The MPI job, under `--engine mpi`.
    pub mpi: Option<&'a Mpi<'a>>,
}

impl Stage for Kmeans<'_> {
    type Output = Fitted;

    fn stage(&self) -> &'static str {
        "kmeans"
    }

    fn label(&self) -> String {
        format!("k{}{}", self.k, self.suffix)
    }

    fn key(&self) -> String {
        let km = &self.config.kmeans;
        // Where k-means runs does not change its result (bit-identical), so it is not in the
        // key. Pruning and the int8 kernel can break near-ties differently, so they are, only
        // when on (old f32 keys stay valid). Pruning is keyed as it runs: an int8 config
        // without `prune` is pruned by default and shares `prune = true`'s key (an int8 config
        // of before that default gets a new key once).
        let assignment = km.assignment();
        let mut parts = vec![
            json!(self.partition_key),
            json!(self.k),
            json!(km.iterations),
            json!(km.tol),
            json!(km.seed),
            json!(km.init),
        ];
        if assignment.as_ref().is_ok_and(|a| a.pruned()) {
            parts.push(json!("prune"));
        }
        if km.kernel != Kernel::F32 {
            parts.push(json!(km.kernel));
        }
        if let Ok(Assignment::Approx { lists, probes, .. }) = assignment {
            // The lists' version since the first change of how lists are made (before, none).
            parts.push(json!(["approx", lists, probes, approx::LISTS_VERSION]));
        }
        digest(&json!(parts))
    }

    fn resumes(&self) -> bool {
        true
    }

    fn run(&self, tmp: &Path, out: &mut dyn Write) -> anyhow::Result<Fitted> {
        let km = &self.config.kmeans;
        let vocabulary = tmp.join("vocabulary.bin");
        let resume = vocab_pipeline::kmeans::files::checkpoint_dir(&vocabulary)
            .join("state.toml")
            .is_file();
        let parts = (self.parts, self.placed);
        let team = TeamSettings::of_config(km, self.engine, parts, &vocabulary, km.assignment()?);
        let settings = KmeansSettings {
            resume,
            exit_after_iteration: self.exit_after_iteration,
            ..KmeansSettings::new(self.k, km, team, vocab_pipeline::store::Format::Bin)
        }
        .checked()?;
        crate::kmeans_cmd::run(&settings, self.ui, self.mpi, out)
    }

    fn cached(&self, dir: &Path) -> anyhow::Result<Fitted> {
        Fitted::read(&dir.join("vocabulary.bin"))
    }
}

/// One mixture of Fisher vectors: the PCA and EM over the partitions, on the run's engine.
pub struct Mixture<'a> {
    /// The run's config.
    pub config: &'a Config,
    /// What the step's label ends with (the trial's).
    pub suffix: &'a str,
    /// Key of the partition step.
    pub partition_key: &'a str,
    /// The partition folder.
    pub parts: &'a Path,
    /// Gaussians.
    pub components: usize,
    /// Where it runs.
    pub engine: &'a Backend,
    /// The partitions lie at the nodes (`parts` as they see it): the folder here with their
    /// manifest.
    pub placed: Option<&'a Path>,
    /// Progress.
    pub ui: &'a Ui,
    /// The MPI job, under `--engine mpi`.
    pub mpi: Option<&'a Mpi<'a>>,
    /// Fault injection (`--exit-after-iteration`: here an EM step).
    pub exit_after_iteration: Option<u64>,
}

impl Stage for Mixture<'_> {
    type Output = (MixtureFile, String);

    fn stage(&self) -> &'static str {
        "mixture"
    }

    fn label(&self) -> String {
        format!("g{}{}", self.components, self.suffix)
    }

    fn key(&self) -> String {
        // Where it runs does not change its result (bit-identical), so it is not in the key.
        digest(&json!([
            self.partition_key,
            self.config.mixture.params(self.components)
        ]))
    }

    /// From the checkpoint its interrupted run left, after its last EM step.
    fn resumes(&self) -> bool {
        true
    }

    fn run(&self, tmp: &Path, out: &mut dyn Write) -> anyhow::Result<(MixtureFile, String)> {
        let parts = (self.parts, self.placed);
        let out_file = tmp.join("mixture.json");
        let team = TeamSettings::of_config(
            &self.config.kmeans,
            self.engine,
            parts,
            &out_file,
            Assignment::default(),
        );
        // An interrupted step's checkpoint (kept in its folder) is taken up.
        let resume = vocab_pipeline::mixture::checkpoint_path(&out_file).is_file();
        let settings = MixtureSettings {
            params: self.config.mixture.params(self.components),
            team,
            resume,
            exit_after_iteration: self.exit_after_iteration,
        };
        crate::mixture_cmd::run(&settings, self.ui, self.mpi, out)?;
        // As the file reads back (JSON need not give back the very floats written): the
        // encodings of a run that made it are those of a run that finds it cached.
        Ok(MixtureFile::read_digested(&settings.team.out)?)
    }

    fn cached(&self, dir: &Path) -> anyhow::Result<(MixtureFile, String)> {
        Ok(MixtureFile::read_digested(&dir.join("mixture.json"))?)
    }
}

/// Every photo encoded over one vocabulary (or mixture).
pub struct Encode<'a> {
    /// The run's config.
    pub config: &'a Config,
    /// What the step's label ends with (the trial's; `-test` for the test folder).
    pub suffix: &'a str,
    /// Photos and labels.
    pub dataset: &'a Dataset,
    /// Key of the vocabulary's (or mixture's) step.
    pub kmeans_key: &'a str,
    /// Vocabulary size, or Gaussians (the label).
    pub k: usize,
    /// The vocabulary (or mixture) file.
    pub vocabulary: &'a Path,
    /// Where the photos are encoded.
    pub on: On<'a>,
    /// Progress.
    pub ui: &'a Ui,
    /// Encode the training photos mirrored instead (`[classify] mirror`): the key of the step
    /// that split the photos, and its list of training photos.
    pub mirrored: Option<(&'a str, &'a Path)>,
    /// Fisher vectors: the mixture at `vocabulary` as its step read it, and its digest.
    pub mixture: Option<&'a (MixtureFile, String)>,
}

impl Stage for Encode<'_> {
    type Output = ();

    fn stage(&self) -> &'static str {
        "encode"
    }

    fn label(&self) -> String {
        let mirrored = if self.mirrored.is_some() {
            "-mirrored"
        } else {
            ""
        };
        format!(
            "{}{}{}{mirrored}",
            size_prefix(self.config),
            self.k,
            self.suffix
        )
    }

    fn key(&self) -> String {
        let mut key = vec![
            json!(self.kmeans_key),
            json!(self.dataset.key),
            json!(self.config.encode),
            json!(vocab_pipeline::image_io::DECODING),
        ];
        // An approximate search's probes as it runs (the settings leave the default out, and
        // it changed) and its lists' version; exact encodings' keys stay what they were.
        let encode = &self.config.encode;
        if encode.assign == Search::Approx {
            key.push(json!(["approx", encode.probes, approx::LISTS_VERSION]));
        }
        // Keys of the photos as they are stay what they were.
        if let Some((split_key, _)) = self.mirrored {
            key.push(json!(["mirrored", split_key]));
        }
        digest(&json!(key))
    }

    /// Sharded over nodes, the stage resumes from the rounds it saved.
    fn resumes(&self) -> bool {
        true
    }

    fn run(&self, tmp: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
        let (labels, options) = match self.mirrored {
            Some((_, training)) => (
                training,
                EncodeOptions {
                    mirror: true,
                    ..self.config.encode.clone()
                },
            ),
            None => (self.dataset.labels.as_path(), self.config.encode.clone()),
        };
        let settings = EncodeSettings::new(
            self.vocabulary,
            &self.dataset.photos,
            Some(labels),
            &tmp.join("histograms.bin"),
            (&options, self.mixture),
        )?;
        let settings = EncodeSettings {
            from: self.dataset.from.clone(),
            ..settings
        };
        crate::encode_cmd::encode(&settings, self.ui, self.on, out).map(|_| ())
    }

    fn cached(&self, _dir: &Path) -> anyhow::Result<()> {
        Ok(())
    }
}

/// What a dictionary's size is called in step labels: `k` words, or `g` Gaussians (Fisher
/// vectors).
pub fn size_prefix(config: &Config) -> &'static str {
    if config.fisher() { "g" } else { "k" }
}
