//! A trial's encodings: every part's over its dictionary of one size (`[[join]]`: the run's own
//! and each joined descriptor's), their joined steps, the training photos mirrored and a test
//! folder's photos, located, read when finished, or made.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::chain::Encodings::{self, Cached, Locate, Make};
use super::chain::{Chain, Made, Sampled};
use super::stages;
use super::step::{Runner, Stage};

impl Chain<'_> {
    /// Every part's encodings over its dictionary (`samples` and `made` in the parts' order)
    /// and, with several parts, their joined steps: the encodings the models take.
    pub(super) fn all_encodings(
        &self,
        runner: &mut Runner,
        (samples, made): (&[Sampled], &[Made]),
        (suffix, k): (&str, usize),
        make: Encodings,
    ) -> anyhow::Result<Encoded> {
        let configs = std::iter::once(self.config).chain(self.joined);
        let mut parts = Vec::new();
        for ((config, sampled), made) in configs.zip(samples).zip(made) {
            parts.push(
                self.of(config)
                    .encodings(runner, sampled, made, (suffix, k), make)?,
            );
        }
        if parts.len() == 1 {
            return parts.pop().context("no part");
        }
        let mut step = |join: &stages::Join<'_>| -> anyhow::Result<(String, PathBuf)> {
            let dir = match make {
                Make => runner.run(join)?.0,
                Cached if runner.done(join) => runner.run(join)?.0,
                Cached | Locate => runner.folder(join),
            };
            Ok((join.key(), dir.join("histograms.bin")))
        };
        let config = self.config;
        let join = |suffix, parts, mirrored| joined(config, (suffix, k), parts, mirrored);
        let own = parts
            .iter()
            .map(|p| (p.key.as_str(), p.histograms.as_path()));
        let (key, histograms) = step(&join(suffix, own.collect(), false))?;
        let mirrored: Option<Vec<(&str, &Path)>> = (parts.iter())
            .map(|p| p.mirrored.as_ref().map(|(k, h)| (k.as_str(), h.as_path())))
            .collect();
        let mirrored = match mirrored {
            Some(parts) => Some(step(&join(suffix, parts, true))?),
            None => None,
        };
        let tested: Option<Vec<(&str, &Path)>> = (parts.iter())
            .map(|p| p.tested.as_ref().map(|(k, h)| (k.as_str(), h.as_path())))
            .collect();
        let tested = match tested {
            Some(parts) => Some(step(&join("-test", parts, false))?),
            None => None,
        };
        Ok(Encoded {
            key,
            histograms,
            mirrored,
            tested,
        })
    }

    /// Every photo encoded over the dictionary `made` (at size `k`), the training photos
    /// mirrored when they train too, and the test folder's photos, as `make` says.
    fn encodings(
        &self,
        runner: &mut Runner,
        sampled: &Sampled,
        made: &Made,
        (suffix, k): (&str, usize),
        make: Encodings,
    ) -> anyhow::Result<Encoded> {
        let mut step = |encode: &stages::Encode<'_>| -> anyhow::Result<PathBuf> {
            match make {
                Make => Ok(runner.run(encode)?.0),
                Cached if runner.done(encode) => Ok(runner.run(encode)?.0),
                Cached | Locate => Ok(runner.folder(encode)),
            }
        };
        let encode = stages::Encode {
            config: self.config,
            suffix,
            dataset: self.dataset,
            kmeans_key: &made.key,
            k,
            vocabulary: &made.path,
            on: self.on,
            ui: self.ui,
            mirrored: None,
            mixture: made.mixture.as_ref(),
        };
        let key = encode.key();
        let histograms = step(&encode)?.join("histograms.bin");
        // The training photos mirrored, to train beside them.
        let training = sampled.split_csv.with_file_name("train.csv");
        let mirrored = if self.config.classify.mirror {
            let encode = stages::Encode {
                mirrored: Some((&sampled.features_key, &training)),
                ..encode
            };
            Some((encode.key(), step(&encode)?.join("histograms.bin")))
        } else {
            None
        };
        // The test folder's photos over the same vocabulary.
        let tested = match self.test {
            Some(test) => {
                let encode = stages::Encode {
                    suffix: "-test",
                    dataset: test,
                    ..encode
                };
                Some((encode.key(), step(&encode)?.join("histograms.bin")))
            }
            None => None,
        };
        Ok(Encoded {
            key,
            histograms,
            mirrored,
            tested,
        })
    }
}

/// The step joining `parts` (each an encode step's key and histograms) of size `k`.
fn joined<'b>(
    config: &'b crate::config::Config,
    (suffix, k): (&'b str, usize),
    parts: Vec<(&'b str, &'b Path)>,
    mirrored: bool,
) -> stages::Join<'b> {
    stages::Join {
        config,
        suffix,
        k,
        parts,
        mirrored,
    }
}

/// The encodings over one dictionary: each a step's key and its histograms.
pub(super) struct Encoded {
    pub(super) key: String,
    pub(super) histograms: PathBuf,
    /// The training photos mirrored (`[classify] mirror`).
    pub(super) mirrored: Option<(String, PathBuf)>,
    /// The test folder's photos.
    pub(super) tested: Option<(String, PathBuf)>,
}
