//! The work folder: only a new, empty or vocab's own folder is written into, and one run at a
//! time holds its lock.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};

/// The work directory of a config when `--work` does not name one: `work/<config name>`.
pub fn default_work(config: &Path) -> std::path::PathBuf {
    let stem = (config.file_stem()).map_or("run".into(), |s| s.to_string_lossy().into_owned());
    Path::new("work").join(stem)
}

/// A work directory is new, empty, or one that `vocab run` made (it holds the lock file
/// `.lock`): anything else is refused before a byte is written into it, so a run never
/// overwrites a folder of the user's (`report/report.md` of another tool, say). The lock file
/// must be a regular file, never a link followed elsewhere.
pub fn check_work_folder(work: &Path) -> anyhow::Result<()> {
    vocab_pipeline::output::not_a_link(&work.join(".lock"))?;
    let Ok(mut entries) = std::fs::read_dir(work) else {
        return Ok(()); // absent: made new (a file there is refused when it is made)
    };
    let Some(first) = entries.next() else {
        return Ok(());
    };
    if work.join(".lock").is_file() {
        return Ok(());
    }
    let first = first.map_or_else(
        |_| "?".into(),
        |e| e.file_name().to_string_lossy().into_owned(),
    );
    bail!(
        "the work directory {} holds {first} and is not a vocab work directory (it has no \
         .lock); name a new or empty folder, or the work directory of an earlier run (--work)",
        work.display()
    )
}

/// An exclusive lock on a work directory for one `vocab run` (`WORK/.lock`, `flock`): a second
/// run on the same directory is refused, naming the holder. The kernel releases the lock when
/// the holder exits, however it exits.
pub struct WorkLock {
    _file: std::fs::File,
}

impl WorkLock {
    /// Takes the lock or says who holds it.
    pub fn acquire(work: &Path) -> anyhow::Result<Self> {
        let path = work.join(".lock");
        use std::os::unix::fs::OpenOptionsExt;
        vocab_pipeline::output::check(&path)?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        #[cfg(unix)]
        {
            use std::io::{Read as _, Seek as _};
            use std::os::unix::io::AsRawFd;
            // SAFETY: flock on a descriptor this function owns; no memory is shared.
            let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if locked != 0 {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                bail!(
                    "work directory {} is in use by another vocab run ({}); wait for it to end \
                     or pass another --work",
                    work.display(),
                    holder.trim()
                );
            }
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            let since = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            file.set_len(0)
                .and_then(|()| file.rewind())
                .and_then(|()| {
                    write!(
                        file,
                        "pid {} on {} since unix time {since}",
                        std::process::id(),
                        host.trim()
                    )
                })
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(Self { _file: file })
    }
}
