//! A broken rule of a setting ([`Invalid`]), and the rules every stage shares: an output
//! folder that exists, the format of a file by its name.

use std::path::Path;

use vocab_pipeline::output::{file_id, resolved};
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

/// Threads a process runs its parallel stages on (`--threads`), at most: far past any core count,
/// short of what makes starting the pool itself the work.
pub const MAX_THREADS: usize = 1024;

/// Loopback workers a run starts on this machine (`--local-nodes`, `[kmeans] nodes`), at most:
/// twice the paper's 125 members, each a process of its own.
pub const MAX_LOCAL_NODES: usize = 256;

/// `value` must lie in `min..=max`; `what` names the unit after the number (" worker").
pub(super) fn within(
    key: &'static str,
    value: usize,
    (min, max): (usize, usize),
    what: &str,
) -> Result<(), Invalid> {
    at_least(key, value, min, what)?;
    if value > max {
        return Err(Invalid::new(
            key,
            value,
            format!("must be at most {max}{what}s"),
        ));
    }
    Ok(())
}

/// `--threads`: 1 to [`MAX_THREADS`].
pub fn threads(value: usize) -> Result<usize, Invalid> {
    within("threads", value, (1, MAX_THREADS), " thread")?;
    Ok(value)
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

/// What an output is: one file, or a folder the command fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A file (written beside, then renamed over the old one).
    File,
    /// A folder the command fills (replacing what an earlier run of it left there).
    Folder,
}

/// An output never destroys an input: it is refused when it is one of the command's inputs
/// (the same file by any name), lies inside an input folder, holds an input (a folder output),
/// or already exists as the other kind. Both are named: `--out b.bin: is the input --features
/// b.bin`. `inputs` are `(key, path)`; the key is the flag without dashes.
pub fn apart(
    out_key: &'static str,
    out: &Path,
    kind: Kind,
    inputs: &[(&'static str, &Path)],
) -> Result<(), Invalid> {
    if out.as_os_str().is_empty() {
        return Ok(()); // a config's rules checked before its paths are known
    }
    let refuse = |rule: String| Err(Invalid::new(out_key, out.display(), rule));
    match (kind, std::fs::metadata(out)) {
        (Kind::File, Ok(m)) if m.is_dir() => {
            return refuse("is an existing folder; name a file to write".into());
        }
        (Kind::Folder, Ok(m)) if !m.is_dir() => {
            return refuse("is an existing file; name a folder to write".into());
        }
        _ => {}
    }
    let (out_at, out_id) = (resolved(out), file_id(out));
    for &(key, input) in inputs {
        let flag = format!("--{} {}", key.replace('_', "-"), input.display());
        let at = resolved(input);
        if at == out_at || (out_id.is_some() && out_id == file_id(input)) {
            return refuse(format!("is the input {flag}, which it would overwrite"));
        }
        if input.is_dir() && out_at.starts_with(&at) {
            return refuse(format!("lies inside the input folder {flag}"));
        }
        if kind == Kind::Folder && at.starts_with(&out_at) {
            return refuse(format!("holds the input {flag}, which it would replace"));
        }
    }
    Ok(())
}

/// A folder a command makes whole (a data set): apart from its inputs, and new or empty, never
/// over another set or anything else.
pub fn new_folder(
    key: &'static str,
    out: &Path,
    inputs: &[(&'static str, &Path)],
) -> Result<(), Invalid> {
    apart(key, out, Kind::Folder, inputs)?;
    if let Some(first) = std::fs::read_dir(out)
        .ok()
        .and_then(|mut entries| entries.next())
    {
        let name = first.map_or_else(|_| "?".into(), |e| e.file_name());
        return Err(Invalid::new(
            key,
            out.display(),
            format!(
                "already holds files ({} among them); name a new or empty folder",
                name.to_string_lossy()
            ),
        ));
    }
    Ok(())
}

/// Whether `a` and `b` name the same file (by path, or by device and inode when both exist).
pub fn same_file(a: &Path, b: &Path) -> bool {
    resolved(a) == resolved(b) || file_id(a).is_some_and(|id| Some(id) == file_id(b))
}

/// Whether `path` is `folder` or lies inside it (both resolved through their links).
pub fn inside(path: &Path, folder: &Path) -> bool {
    resolved(path).starts_with(resolved(folder))
}

/// The format an output's extension asks for ([`Format::for_path`]): text for `.txt`/`.text`,
/// `.npy`, `.fvecs`, `.bvecs`, `.csv`, vocab's binary format otherwise.
pub fn format_for(path: &Path) -> Format {
    Format::for_path(path)
}

/// The format of an output of real-valued vectors (HOG features, centroids, histograms):
/// `format`, or the one its extension asks for; `.bvecs`, which holds bytes, refused before any
/// work is done.
pub fn vectors_out(
    key: &'static str,
    path: &Path,
    format: Option<Format>,
) -> Result<Format, Invalid> {
    let format = format.unwrap_or_else(|| format_for(path));
    if format == Format::Bvecs {
        return Err(Invalid::new(
            key,
            path.display(),
            "cannot be .bvecs: it holds whole numbers 0 to 255, and these vectors are real \
             numbers; write .fvecs or .npy",
        ));
    }
    Ok(format)
}
