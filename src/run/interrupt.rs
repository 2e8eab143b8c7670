//! Ctrl-C during `vocab run`: the run says where it stopped and how to go on, and leaves no
//! temporary folder. A step that resumes (k-means from its checkpoint, the photo stages from
//! their saved rounds) keeps what it saved as `.resume-<label>-<key>/`, which the next run takes
//! up again; any other step's temporary folder is removed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// The step in progress.
struct Current {
    stage: &'static str,
    label: String,
    /// Its temporary folder.
    tmp: PathBuf,
    /// Where what it saved is kept, for a step that resumes.
    keep: Option<PathBuf>,
}

static CURRENT: Mutex<Option<Current>> = Mutex::new(None);
static WATCHING: OnceLock<()> = OnceLock::new();
/// Set once Ctrl-C is being handled: an error the step meets from then on (its folder moved
/// away under it) is the interruption's, not the step's.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Whether Ctrl-C is being handled (the process is about to end with status 130).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The command that goes on from where an interrupted `vocab run` stopped: its own arguments,
/// quoted for a POSIX shell, without `--force` (finished steps are to be kept) and the hidden
/// fault flags.
pub fn resume_command(args: &[String]) -> String {
    let mut kept = Vec::new();
    let mut skip = 0;
    for arg in args {
        if skip > 0 {
            skip -= 1;
            continue;
        }
        match arg.as_str() {
            "--force" | "--exit-after-iteration" => skip = 1,
            a if a.starts_with("--force=") || a.starts_with("--exit-after-iteration=") => {}
            a => kept.push(quoted(a)),
        }
    }
    kept.join(" ")
}

/// `text` as one word of a POSIX shell.
fn quoted(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// From now on, Ctrl-C (SIGINT) ends the run as this module says; `command` is the command line
/// to run again, `work` the work directory.
pub fn watch(command: String, work: PathBuf) {
    WATCHING.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("ctrl-c".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                // Without a runtime Ctrl-C ends the process as it always does.
                if let Ok(runtime) = runtime
                    && runtime.block_on(tokio::signal::ctrl_c()).is_ok()
                {
                    stop(&command, &work);
                }
            });
        // Without the thread, likewise.
        drop(spawned);
    });
}

/// A step started in `tmp`; `keep` is where a resuming step's saved work goes on Ctrl-C.
pub fn started(stage: &'static str, label: &str, tmp: PathBuf, keep: Option<PathBuf>) {
    if let Ok(mut current) = CURRENT.lock() {
        *current = Some(Current {
            stage,
            label: label.to_string(),
            tmp,
            keep,
        });
    }
}

/// Finishes the step in progress: `rename` (its folder into place) runs while Ctrl-C waits, so
/// the folder is moved either here or by the interruption, never both.
pub fn finishing<T>(rename: impl FnOnce() -> T) -> T {
    let mut current = CURRENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let done = rename();
    *current = None;
    done
}

/// Tidies the step in progress, says how to go on, and ends the process (status 130, as a
/// shell reports a process ended by SIGINT).
fn stop(command: &str, work: &std::path::Path) -> ! {
    INTERRUPTED.store(true, Ordering::SeqCst);
    // Held to the end: a step cannot finish (and rename its folder) while this tidies it.
    let current = CURRENT.lock();
    let step = current.as_ref().ok().and_then(|c| c.as_ref());
    let mut said = String::from("\nvocab run: interrupted");
    if let Some(Current {
        stage,
        label,
        tmp,
        keep,
    }) = step
    {
        said.push_str(&format!(" during {stage} {label}"));
        let kept = match keep {
            Some(keep) if tmp.is_dir() => std::fs::rename(tmp, keep).ok().map(|()| keep),
            _ => None,
        };
        if kept.is_none() && tmp.is_dir() {
            let _ = std::fs::remove_dir_all(tmp);
        }
        if let Some(keep) = kept {
            said.push_str(&format!(
                "; what it saved is kept in {} and taken up again",
                keep.display()
            ));
        }
    }
    eprintln!(
        "{said}.\nFinished steps are kept in {}: run `{command}` again to go on from there.",
        work.display()
    );
    std::process::exit(130)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_to_go_on_is_quoted_and_redoes_nothing_finished() {
        let args: Vec<String> = [
            "vocab",
            "run",
            "my config.toml",
            "--force",
            "kmeans",
            "--work",
            "w'1",
            "--exit-after-iteration=3",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            resume_command(&args),
            "vocab run 'my config.toml' --work 'w'\\''1'"
        );
    }
}
