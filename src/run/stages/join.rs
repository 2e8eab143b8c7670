//! A joined encoding's step (`[[join]]`): the encodings of every part over its dictionary of one
//! size, joined in one vector a photo (`vocab join`), for the photos, their mirror images or a
//! test folder's photos.

use std::io::Write;
use std::path::Path;

use serde_json::json;

use crate::config::Config;
use crate::run::step::{Stage, digest};
use crate::settings::JoinSettings;

use super::words::size_prefix;

/// The parts' encodings of one size joined.
pub struct Join<'a> {
    /// The run's config.
    pub config: &'a Config,
    /// What the step's label ends with (the trial's, `-test`).
    pub suffix: &'a str,
    /// The dictionaries' size.
    pub k: usize,
    /// Each part's encode step key and histograms, in the vector's order.
    pub parts: Vec<(&'a str, &'a Path)>,
    /// Of the training photos mirrored.
    pub mirrored: bool,
}

impl Stage for Join<'_> {
    type Output = ();

    fn stage(&self) -> &'static str {
        "encode"
    }

    fn label(&self) -> String {
        let mirrored = if self.mirrored { "-mirrored" } else { "" };
        format!(
            "{}{}{}-joined{mirrored}",
            size_prefix(self.config),
            self.k,
            self.suffix
        )
    }

    fn key(&self) -> String {
        let keys: Vec<&str> = self.parts.iter().map(|(key, _)| *key).collect();
        digest(&json!(["join", keys]))
    }

    fn run(&self, tmp: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
        let settings = JoinSettings {
            parts: self.parts.iter().map(|(_, p)| p.to_path_buf()).collect(),
            out: tmp.join("histograms.bin"),
        };
        crate::join_cmd::join(&settings, out)
    }

    fn cached(&self, _dir: &Path) -> anyhow::Result<()> {
        Ok(())
    }
}
