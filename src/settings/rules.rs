//! A broken rule of a setting ([`Invalid`]), and the rules every stage shares: an output
//! folder that exists, the format of a file by its name.

use std::path::Path;

use vocab_pipeline::params::Broken;
use vocab_pipeline::store::Format;

/// A setting that breaks a rule: its config key (the flag is the key with dashes), the value
/// given and the rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key} = {value}: {rule}")]
pub struct Invalid {
    /// The config key, e.g. `per_image`.
    pub key: &'static str,
    /// The value given, as the user wrote it.
    pub value: String,
    /// What the setting must be.
    pub rule: String,
}

impl Invalid {
    pub(super) fn new(
        key: &'static str,
        value: impl std::fmt::Display,
        rule: impl Into<String>,
    ) -> Self {
        Self {
            key,
            value: value.to_string(),
            rule: rule.into(),
        }
    }

    /// The command line's `--per-image 0: must be at least 1`.
    pub fn flag(&self) -> String {
        format!(
            "--{} {}: {}",
            self.key.replace('_', "-"),
            self.value,
            self.rule
        )
    }
}

impl<E: Broken> From<E> for Invalid {
    fn from(e: E) -> Self {
        Self {
            key: e.key(),
            value: e.value(),
            rule: e.rule(),
        }
    }
}

/// Lets `?` turn an [`Invalid`] into a command-line error.
pub trait OrFlag<T> {
    /// The error as a flag's error.
    fn or_flag(self) -> anyhow::Result<T>;
}

impl<T> OrFlag<T> for Result<T, Invalid> {
    fn or_flag(self) -> anyhow::Result<T> {
        self.map_err(|e| anyhow::anyhow!(e.flag()))
    }
}

pub(super) fn at_least(
    key: &'static str,
    value: usize,
    min: usize,
    what: &str,
) -> Result<(), Invalid> {
    if value < min {
        return Err(Invalid::new(
            key,
            value,
            format!("must be at least {min}{what}"),
        ));
    }
    Ok(())
}

/// An output file's folder must exist (outputs are written beside their destination, then
/// renamed; a mistyped folder is named up front rather than after the work is done).
pub fn output(key: &'static str, path: &Path) -> Result<(), Invalid> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    match parent {
        Some(dir) if !dir.is_dir() => Err(Invalid::new(
            key,
            path.display(),
            format!("the folder {} does not exist", dir.display()),
        )),
        _ => Ok(()),
    }
}

/// Text for `.txt`/`.text` files, binary otherwise.
pub fn format_for(path: &Path) -> Format {
    match path.extension().and_then(|e| e.to_str()) {
        Some(ext) if ext.eq_ignore_ascii_case("txt") || ext.eq_ignore_ascii_case("text") => {
            Format::Text
        }
        _ => Format::Bin,
    }
}
