//! The one way out: every file and folder the program writes is checked here against the
//! command's inputs before a byte is written.
//!
//! A command names its inputs once ([`protect`]: every path flag of the command line that is not
//! an output, the paths a config names); the writers ([`crate::atomic`], [`create_dir_all`],
//! [`append`]) call [`check`] on every destination, so a writer added later gets the guarantee
//! without knowing which command runs it. A destination is refused when it
//!
//! - is an input, by any name (a link or a hard link to one),
//! - lies inside an input folder, or holds an input (a folder written whole),
//! - exists as something other than a regular file or folder (a device node, FIFO or socket:
//!   renaming a finished file over `/dev/null` would replace the device).
//!
//! [`claim`] checks an output up front, before the work, and its side files with it: the files a
//! command writes beside an output are named `<out>.<suffix>` by [`side`] (`v.bin.iterations.csv`,
//! `v.bin.ckpt/`, `words.png.csv`), one of [`SIDE_FILES`], so an input named so would be replaced
//! through one.
//!
//! The inputs are process-wide: the binary registers them as it starts, and the libraries'
//! writers consult them. Nothing is registered in a library's own tests, so they write freely.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

/// An input of the running command.
#[derive(Debug, Clone)]
struct Input {
    /// How the user named it: `--features a.bin`, `[dataset] photos = photos/`.
    name: String,
    /// Absolute, through its links.
    at: PathBuf,
    /// Device and inode, when it exists.
    id: Option<(u64, u64)>,
    /// Whether it is a folder (what lies inside it is an input too).
    folder: bool,
}

static INPUTS: RwLock<Vec<Input>> = RwLock::new(Vec::new());

/// Why an output is refused. Each names the output (`out`, as given) and, where there is one,
/// the input (`input`, as the user named it): `--out v.bin: is the input --features v.bin, which
/// it would overwrite`.
#[allow(missing_docs)] // the fields are the same in every variant, and named above
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The output is an input (by any name).
    IsInput { out: PathBuf, input: String },
    /// The output lies inside an input folder.
    InsideInput { out: PathBuf, input: String },
    /// The output is a folder that holds an input.
    HoldsInput { out: PathBuf, input: String },
    /// A side file of the output (`side`, `<out>.<suffix>`) would replace an input.
    SideFile {
        out: PathBuf,
        side: PathBuf,
        input: String,
    },
    /// The output exists as something a write must never replace (`what` it is).
    NotRegular { out: PathBuf, what: &'static str },
    /// A folder the program keeps its own work in is a link (it would be followed elsewhere).
    Link { out: PathBuf },
}

impl Refused {
    /// The output refused.
    pub fn out(&self) -> &Path {
        match self {
            Self::IsInput { out, .. }
            | Self::InsideInput { out, .. }
            | Self::HoldsInput { out, .. }
            | Self::SideFile { out, .. }
            | Self::NotRegular { out, .. }
            | Self::Link { out } => out,
        }
    }

    /// What is wrong, without the output's name (for an error that names it already).
    pub fn rule(&self) -> String {
        match self {
            Self::IsInput { input, .. } => {
                format!("is the input {input}, which it would overwrite")
            }
            Self::InsideInput { input, .. } => format!("lies inside the input folder {input}"),
            Self::HoldsInput { input, .. } => {
                format!("holds the input {input}, which it would replace")
            }
            Self::SideFile { side, input, .. } => format!(
                "would replace the input {input} through its side file {}; name another output",
                side.display()
            ),
            Self::NotRegular { what, .. } => {
                format!("is {what}; vocab writes regular files and never replaces {what}")
            }
            Self::Link { .. } => "is a link; vocab never follows its own folders out of where \
                                  they belong: remove the link"
                .into(),
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.out().display(), self.rule())
    }
}

impl std::error::Error for Refused {}

impl From<Refused> for io::Error {
    /// The rule alone: every writer's error names the path it was writing.
    fn from(e: Refused) -> Self {
        io::Error::new(io::ErrorKind::InvalidInput, e.rule())
    }
}

/// Registers `path` as an input of the running command, named `name` in refusals
/// (`--features a.bin`). A path that does not exist is kept by name: nothing may be written
/// there either (a folder a later step fills is not an input).
pub fn protect(name: impl Into<String>, path: &Path) {
    if path.as_os_str().is_empty() {
        return;
    }
    let input = Input {
        name: name.into(),
        at: resolved(path),
        id: file_id(path),
        folder: path.is_dir(),
    };
    let mut inputs = INPUTS
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    inputs.push(input);
}

/// Whether the file `dest` may be written: not an input, not inside an input folder, not a
/// device node, FIFO or socket.
pub fn check(dest: &Path) -> Result<(), Refused> {
    check_as(dest, false)
}

/// Whether the folder `dest` may be written whole (replaced by a new one): as [`check`], and it
/// holds no input.
pub fn check_folder(dest: &Path) -> Result<(), Refused> {
    check_as(dest, true)
}

fn check_as(dest: &Path, whole_folder: bool) -> Result<(), Refused> {
    if let Ok(meta) = std::fs::metadata(dest)
        && let Some(what) = not_regular(&meta.file_type())
    {
        return Err(Refused::NotRegular {
            out: dest.to_path_buf(),
            what,
        });
    }
    let inputs = INPUTS
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if inputs.is_empty() {
        return Ok(());
    }
    let (at, id) = (resolved(dest), file_id(dest));
    let out = dest.to_path_buf();
    for input in inputs.iter() {
        let input_name = input.name.clone();
        // The same file by another name: its device and inode, if the input is still the file
        // it was (an inode freed by a removed input may be another file's now).
        let same_id = id.is_some() && id == input.id && file_id(&input.at) == input.id;
        if at == input.at || same_id {
            return Err(Refused::IsInput {
                out,
                input: input_name,
            });
        }
        if input.folder && at.starts_with(&input.at) {
            return Err(Refused::InsideInput {
                out,
                input: input_name,
            });
        }
        if whole_folder && input.at.starts_with(&at) {
            return Err(Refused::HoldsInput {
                out,
                input: input_name,
            });
        }
    }
    Ok(())
}

/// The suffixes of every file or folder written beside an output (`<out>.<suffix>`, made by
/// [`side`]): [`claim`] checks each of them against the inputs.
pub const SIDE_FILES: &[&str] = &[
    "images.csv",
    "skipped.csv",
    "encoding.json",
    "meta.toml",
    "iterations.csv",
    "stages.csv",
    "steps.csv",
    "metrics.csv",
    "metrics.md",
    "predictions.csv",
    "confusion.csv",
    "ckpt",
    "workers",
    "rounds",
    "links.json",
    "csv",
];

/// The side file `<out>.<suffix>` of an output; `suffix` is one of [`SIDE_FILES`] (checked in
/// debug builds, so a side file added without its entry fails every test that writes it).
pub fn side(out: &Path, suffix: &str) -> PathBuf {
    debug_assert!(
        SIDE_FILES.contains(&suffix),
        "side file .{suffix} is not in output::SIDE_FILES"
    );
    let mut name = out.as_os_str().to_owned();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

/// An output checked before the work: [`check`] for it and each of its [`SIDE_FILES`], and no
/// input inside a side folder.
pub fn claim(out: &Path) -> Result<(), Refused> {
    check(out)?;
    for suffix in SIDE_FILES {
        let path = side(out, suffix);
        let refused = |input: String| Refused::SideFile {
            out: out.to_path_buf(),
            side: path.clone(),
            input,
        };
        match check(&path) {
            Ok(()) => {}
            Err(
                Refused::IsInput { input, .. }
                | Refused::InsideInput { input, .. }
                | Refused::HoldsInput { input, .. },
            ) => return Err(refused(input)),
            // A FIFO where a side file goes is refused when the side file is written.
            Err(_) => {}
        }
    }
    Ok(())
}

/// What a file type is when it is not a regular file or a folder.
fn not_regular(kind: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_file() || kind.is_dir() {
        None
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device node")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// A folder of the program's own (a step's temporary or resumed folder, a checkpoint folder)
/// that must not be a link: `Ok` when it is absent or a real folder.
pub fn not_a_link(dir: &Path) -> Result<(), Refused> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => Err(Refused::Link {
            out: dir.to_path_buf(),
        }),
        _ => Ok(()),
    }
}

/// Creates `dir` and its parents once [`check`] allows it (an existing folder too: one that is
/// an input, or lies inside one, is never filled).
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    check(dir)?;
    std::fs::create_dir_all(dir)
}

/// Opens `path` to append to (a log, a benchmark's CSV), created if absent, once [`check`]
/// allows it. A link at `path` is not followed.
pub fn append(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    check(path)?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// `path` made absolute, through its links where it (or its folder) exists; a path that does not
/// exist has its `.` and `..` taken lexically first (`missing/../v.bin` is `v.bin`).
pub fn resolved(path: &Path) -> PathBuf {
    if let Ok(at) = std::fs::canonicalize(path) {
        return at;
    }
    let path = &lexical(path);
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let parent = parent.map_or_else(|| std::fs::canonicalize("."), resolved_ok);
    match (parent, path.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

/// `path` absolute, its `.` and `..` components taken away by name.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for part in absolute.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A folder resolved through its links even when it does not exist yet (its nearest existing
/// ancestor's links followed).
fn resolved_ok(dir: &Path) -> io::Result<PathBuf> {
    Ok(resolved(dir))
}

/// The device and inode of an existing file (the same file under two names).
pub fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The registry is process-wide: each test protects paths of its own temporary folder only,
    // so tests running at once never see each other's inputs refuse their writes.

    #[test]
    fn outputs_over_inputs_by_any_name_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let input = dir.path().join("a.bin");
        std::fs::write(&input, b"x").expect("write");
        let photos = dir.path().join("photos");
        std::fs::create_dir(&photos).expect("mkdir");
        protect("--features a.bin", &input);
        protect("--input photos", &photos);

        let err = check(&input).expect_err("the input itself");
        assert!(matches!(err, Refused::IsInput { .. }), "{err}");
        assert!(err.to_string().contains("--features a.bin"), "{err}");

        let link = dir.path().join("link.bin");
        std::os::unix::fs::symlink(&input, &link).expect("symlink");
        assert!(matches!(check(&link), Err(Refused::IsInput { .. })));
        let hard = dir.path().join("hard.bin");
        std::fs::hard_link(&input, &hard).expect("hard link");
        assert!(matches!(check(&hard), Err(Refused::IsInput { .. })));

        let inside = photos.join("montage.png");
        assert!(matches!(check(&inside), Err(Refused::InsideInput { .. })));
        let deeper = photos.join("new").join("x.png");
        assert!(matches!(check(&deeper), Err(Refused::InsideInput { .. })));
        // A folder written whole over the input's folder; files may go beside the inputs.
        assert!(matches!(
            check_folder(dir.path()),
            Err(Refused::HoldsInput { .. })
        ));
        create_dir_all(dir.path()).expect("an existing folder is left as it is");
        assert!(
            create_dir_all(&photos.join("new")).is_err(),
            "inside the photos"
        );

        let beside = dir.path().join("out.bin");
        check(&beside).expect("a new file beside the inputs");
        // Through a folder that does not exist and back: the input all the same.
        let around = dir.path().join("missing").join("..").join("a.bin");
        std::fs::remove_file(&input).expect("rm");
        assert!(
            matches!(check(&around), Err(Refused::IsInput { .. })),
            "by name"
        );
        std::fs::write(&input, b"x").expect("write");
        // A side file of the output is an input: refused up front; names that only begin
        // alike are not side files.
        claim(&dir.path().join("a")).expect("a.bin is not a side file of a");
        let side = dir.path().join("v.bin.iterations.csv");
        std::fs::write(&side, b"x").expect("write");
        protect("--features v.bin.iterations.csv", &side);
        let err = claim(&dir.path().join("v.bin")).expect_err("side file");
        assert!(matches!(err, Refused::SideFile { .. }), "{err}");
        assert!(err.to_string().contains("v.bin.iterations.csv"), "{err}");
    }

    #[test]
    fn fifos_and_devices_are_never_replaced() {
        let err = check(Path::new("/dev/null")).expect_err("a device");
        assert!(
            matches!(
                err,
                Refused::NotRegular {
                    what: "a device node",
                    ..
                }
            ),
            "{err}"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("pipe");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("cstr");
        // SAFETY: mkfifo on a NUL-terminated path this test owns.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
        let err = check(&fifo).expect_err("a FIFO");
        assert!(
            matches!(err, Refused::NotRegular { what: "a FIFO", .. }),
            "{err}"
        );
        assert!(append(&fifo).is_err(), "appending to a FIFO is refused too");
    }

    #[test]
    fn links_to_own_folders_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        not_a_link(&real).expect("a folder");
        not_a_link(&dir.path().join("absent")).expect("absent");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        assert!(matches!(not_a_link(&link), Err(Refused::Link { .. })));
    }
}
