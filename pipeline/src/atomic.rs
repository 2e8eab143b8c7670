//! Files that appear whole or not at all: written beside their destination, synced, renamed.
//!
//! Every destination is checked by [`crate::output::check`] first (not an input, not a device
//! node, FIFO or socket), when the temporary file is made and again just before the rename.

use std::io;
use std::path::Path;

use tempfile::NamedTempFile;

/// Name prefix of the temporary files [`temp_beside`] makes (left behind only by a killed
/// process).
pub const TEMP_PREFIX: &str = ".vocab-partial-";

/// A temporary file in the destination's folder, to be `persist`ed onto `dest` when complete.
///
/// Dropping it unpersisted removes it. It is created with ordinary permissions (0644 before the
/// umask) rather than tempfile's private 0600, since it becomes a user-visible output.
pub fn temp_beside(dest: &Path) -> io::Result<NamedTempFile> {
    crate::output::check(dest)?;
    let dir = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut builder = tempfile::Builder::new();
    builder.prefix(TEMP_PREFIX);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o644));
    }
    // tempfile's error names the random temporary path; callers name the destination.
    builder
        .tempfile_in(dir)
        .map_err(|e| io::Error::new(e.kind(), strip_temp_path(e)))
}

/// The error's own message, without tempfile's ` at path "..."` suffix.
fn strip_temp_path(e: io::Error) -> String {
    let text = e.to_string();
    match text.find(" at path \"") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Writes `bytes` to `dest` atomically.
pub fn write(dest: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = temp_beside(dest)?;
    io::Write::write_all(&mut tmp, bytes)?;
    persist(tmp, dest)
}

/// Syncs a finished temporary file and renames it onto `dest`.
pub fn persist(tmp: NamedTempFile, dest: &Path) -> io::Result<()> {
    tmp.as_file().sync_all()?;
    crate::output::check(dest)?;
    tmp.persist(dest).map(|_| ()).map_err(|e| e.error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn persisted_file_is_complete_and_readable_by_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dest = dir.path().join("out.txt");
        let mut tmp = temp_beside(&dest).expect("temp");
        tmp.write_all(b"hello").expect("write");
        persist(tmp, &dest).expect("persist");
        assert_eq!(std::fs::read(&dest).expect("read"), b"hello");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&dest).expect("meta").permissions().mode();
            assert_eq!(mode & 0o044, 0o044, "group/other can read: {mode:o}");
        }
    }
}
