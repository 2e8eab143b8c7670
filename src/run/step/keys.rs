//! Step keys and fingerprints: short hashes of settings, files and folders.

use std::path::Path;

use anyhow::{Context, ensure};
use serde_json::json;
use sha2::{Digest, Sha256};

/// The first 6 bytes of the SHA-256 of `bytes`, in hex: a step key or a fingerprint.
pub fn short_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A key of a JSON value.
pub fn digest(value: &serde_json::Value) -> String {
    short_hash(value.to_string().as_bytes())
}

/// Names, sizes and modification times of every file under `dir`, hashed; links followed, as
/// the readers of photo and descriptor folders follow them (a linked file that changes changes
/// the fingerprint).
pub fn folder_fingerprint(dir: &Path) -> anyhow::Result<String> {
    let mut entries = Vec::new();
    for entry in walkdir::WalkDir::new(dir)
        .follow_links(true)
        .sort_by_file_name()
    {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        if entry.file_type().is_file() {
            let meta = entry
                .metadata()
                .with_context(|| format!("cannot stat {}", entry.path().display()))?;
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            let rel = entry.path().strip_prefix(dir).unwrap_or(entry.path());
            entries.push(json!([
                rel.to_string_lossy(),
                meta.len(),
                mtime.to_string()
            ]));
        }
    }
    ensure!(!entries.is_empty(), "{} holds no files", dir.display());
    Ok(digest(&json!(entries)))
}

/// The bytes of a file, hashed.
pub fn file_fingerprint(path: &Path) -> anyhow::Result<String> {
    let bytes = vocab_pipeline::input::read(path, vocab_pipeline::input::MAX_LABELS_BYTES)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(short_hash(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_s_fingerprint_follows_its_links() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (outside, dir) = (tmp.path().join("a.csv"), tmp.path().join("d"));
        std::fs::write(&outside, "1,2,3\n").expect("write");
        std::fs::create_dir(&dir).expect("mkdir");
        std::os::unix::fs::symlink(&outside, dir.join("a.csv")).expect("link");
        // A folder of links holds files, and a linked file that changes changes it.
        let before = folder_fingerprint(&dir).expect("a linked file");
        std::fs::write(&outside, "1,2,3\n4,5,6\n").expect("write");
        assert_ne!(folder_fingerprint(&dir).expect("fingerprint"), before);
    }
}
