//! The 15-Scene photos (Lazebnik, Schmid and Ponce, CVPR 2006, after Oliva and Torralba and Fei-Fei
//! and Perona) as a vocab dataset folder: the unpacked class folders copied under the project's
//! class names, with the project's `labels.csv` (`path,class,urbanicity,elevation`; an empty cell
//! means the photo takes no part in that attribute).
//!
//! Both spellings in circulation are read: the published one (`MITcoast`, `CALsuburb`,
//! `PARoffice`, `bedroom`, ...) and the plain one (`Coast`, `Suburb`, `Office`, `Bedroom`, ...).

use std::path::{Path, PathBuf};

use thiserror::Error;

/// One scene class: its name here, its attributes and its count in the published set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    /// The project's name (the folder and `class` value written).
    pub name: &'static str,
    /// `urban`, `rural` or empty (no part in urbanicity).
    pub urbanicity: &'static str,
    /// `flat`, `hilly` or empty (no part in elevation).
    pub elevation: &'static str,
    /// Photos of the class in the published set (4,485 in all).
    pub published: usize,
}

const fn class(
    name: &'static str,
    urbanicity: &'static str,
    elevation: &'static str,
    published: usize,
) -> Class {
    Class {
        name,
        urbanicity,
        elevation,
        published,
    }
}

/// The 15 classes, in order of name.
pub const CLASSES: [Class; 15] = [
    class("Bedroom", "", "", 216),
    class("Coast", "rural", "flat", 360),
    class("Forest", "rural", "", 328),
    class("Highway", "urban", "", 260),
    class("Industrial", "urban", "", 311),
    class("InsideCity", "urban", "", 308),
    class("Kitchen", "", "", 210),
    class("LivingRoom", "", "", 289),
    class("Mountain", "rural", "hilly", 374),
    class("Office", "", "", 215),
    class("OpenCountry", "rural", "flat", 410),
    class("Store", "", "", 315),
    class("Street", "urban", "", 292),
    class("Suburb", "urban", "", 241),
    class("TallBuilding", "urban", "", 356),
];

/// The class a folder of the unpacked set holds: its name in either spelling, any case.
pub fn class_of(folder: &str) -> Option<&'static Class> {
    let lower = folder.to_ascii_lowercase();
    let plain = ["mit", "cal", "par"]
        .iter()
        .find_map(|p| lower.strip_prefix(p))
        .unwrap_or(&lower);
    CLASSES
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(plain) || c.name.eq_ignore_ascii_case(&lower))
}

/// Why the unpacked folders cannot be made a dataset.
#[derive(Debug, Error)]
pub enum Scene15Error {
    /// A file or folder could not be read or written.
    #[error("{}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// Folders that are no class of the set.
    #[error(
        "{}: {} not a 15-Scene class (expected folders like MITcoast or Coast: {})",
        from.display(),
        if unknown.len() == 1 { format!("{:?} is", unknown[0]) } else { format!("{unknown:?} are") },
        CLASSES.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
    )]
    Unknown {
        /// The folder given.
        from: PathBuf,
        /// The folders that are no class.
        unknown: Vec<String>,
    },
    /// Classes without a folder, or with a folder of no photo.
    #[error(
        "{}: no photos of {}; the set has 15 classes, a folder each",
        from.display(),
        missing.join(", ")
    )]
    Missing {
        /// The folder given.
        from: PathBuf,
        /// The classes without photos.
        missing: Vec<&'static str>,
    },
    /// An entry that is not a plain file or folder inside the folder given: a link out of it, a
    /// class folder that links to another class's folder, a name that is not UTF-8.
    #[error("{}: {why}", path.display())]
    Refused {
        /// The entry.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// Two folders of one class.
    #[error("{}: {:?} and {:?} are both {}", from.display(), first, second, class)]
    Twice {
        /// The folder given.
        from: PathBuf,
        /// The class.
        class: &'static str,
        /// One folder.
        first: String,
        /// The other.
        second: String,
    },
}

/// What [`prepare`] made.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// Photos per class, in [`CLASSES`] order.
    pub counts: Vec<usize>,
    /// Classes whose count differs from the published set's: `Coast: 100 photos, 360 published`.
    pub differences: Vec<String>,
    /// The labels file written.
    pub labels: PathBuf,
}

/// Copies the class folders of `from` (the unpacked set) into the new folder `out` under the
/// project's class names, with `out/labels.csv`. Nothing appears at `out` unless every class is
/// there and every photo copied (built beside, then renamed).
pub fn prepare(from: &Path, out: &Path) -> Result<Prepared, Scene15Error> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Scene15Error::Io { path, source }
    };
    let root = std::fs::canonicalize(from).map_err(io(from))?;
    let mut folders: Vec<(String, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(from).map_err(io(from))? {
        let path = entry.map_err(io(from))?.path();
        let name = utf8_name(&path)?;
        if let Some(at) = inside(&root, &path)?.filter(|at| at.is_dir()) {
            folders.push((name, at));
        }
    }
    let mut by_class: Vec<Option<(String, PathBuf)>> = vec![None; CLASSES.len()];
    let mut unknown = Vec::new();
    for (name, path) in folders {
        let Some(class) = class_of(&name) else {
            unknown.push(name);
            continue;
        };
        let at = CLASSES.iter().position(|c| c == class).unwrap_or(0);
        if let Some((first, _)) = &by_class[at] {
            return Err(Scene15Error::Twice {
                from: from.to_path_buf(),
                class: class.name,
                first: first.clone(),
                second: name,
            });
        }
        if let Some((other, _)) = by_class.iter().flatten().find(|(_, p)| *p == path) {
            // The same photos under two classes: every label of one would be wrong.
            return Err(Scene15Error::Refused {
                path: from.join(&name),
                why: format!("is the folder {other} under another name (a link)"),
            });
        }
        by_class[at] = Some((name, path));
    }
    if !unknown.is_empty() {
        return Err(Scene15Error::Unknown {
            from: from.to_path_buf(),
            unknown,
        });
    }
    // Each class's photos, sorted by name.
    let mut photos: Vec<Vec<PathBuf>> = Vec::new();
    let mut missing = Vec::new();
    for (class, folder) in CLASSES.iter().zip(&by_class) {
        let mut files: Vec<PathBuf> = Vec::new();
        if let Some((_, path)) = folder {
            for entry in std::fs::read_dir(path).map_err(io(path))? {
                let path = entry.map_err(io(path))?.path();
                if !crate::image_io::is_photo(&path) {
                    continue;
                }
                utf8_name(&path)?;
                if inside(&root, &path)?.is_some_and(|at| at.is_file()) {
                    files.push(path);
                }
            }
        }
        files.sort();
        if files.is_empty() {
            missing.push(class.name);
        }
        photos.push(files);
    }
    if !missing.is_empty() {
        return Err(Scene15Error::Missing {
            from: from.to_path_buf(),
            missing,
        });
    }
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new()
        .prefix(".scene15-")
        .tempdir_in(parent)
        .map_err(io(parent))?;
    let mut labels = csv::Writer::from_writer(Vec::new());
    let csv_err = |e: csv::Error| Scene15Error::Io {
        path: out.join("labels.csv"),
        source: e.into(),
    };
    labels
        .write_record(["path", "class", "urbanicity", "elevation"])
        .map_err(csv_err)?;
    for (class, files) in CLASSES.iter().zip(&photos) {
        let dir = tmp.path().join(class.name);
        std::fs::create_dir(&dir).map_err(io(&dir))?;
        for file in files {
            let name = file.file_name().unwrap_or_default();
            std::fs::copy(file, dir.join(name)).map_err(io(file))?;
            let path = format!("{}/{}", class.name, name.to_string_lossy());
            labels
                .write_record([path.as_str(), class.name, class.urbanicity, class.elevation])
                .map_err(csv_err)?;
        }
    }
    let labels = labels.into_inner().map_err(|e| Scene15Error::Io {
        path: out.join("labels.csv"),
        source: e.into_error(),
    })?;
    let labels_path = tmp.path().join("labels.csv");
    std::fs::write(&labels_path, labels).map_err(io(&labels_path))?;
    crate::output::check_folder(out).map_err(|e| io(out)(e.into()))?;
    let kept = tmp.keep();
    if let Err(source) = std::fs::rename(&kept, out) {
        let _ = std::fs::remove_dir_all(&kept);
        return Err(Scene15Error::Io {
            path: out.to_path_buf(),
            source,
        });
    }
    let counts: Vec<usize> = photos.iter().map(Vec::len).collect();
    let differences = CLASSES
        .iter()
        .zip(&counts)
        .filter(|(c, n)| c.published != **n)
        .map(|(c, n)| format!("{}: {n} photos, {} published", c.name, c.published))
        .collect();
    Ok(Prepared {
        counts,
        differences,
        labels: out.join("labels.csv"),
    })
}

/// An entry's name as UTF-8: a labels file names photos as text, so a name that is not would
/// label no file.
fn utf8_name(path: &Path) -> Result<String, Scene15Error> {
    let name = path.file_name().unwrap_or_default();
    name.to_str()
        .map(str::to_string)
        .ok_or_else(|| Scene15Error::Refused {
            path: path.to_path_buf(),
            why: "is not named in UTF-8; rename it (the labels file names photos as text)".into(),
        })
}

/// Where `entry` (in `root` or one of its class folders) leads, through its links: inside
/// `root`, or refused; `None` for what is neither a file nor a folder (a FIFO, a dangling
/// link), which is no photo.
fn inside(root: &Path, entry: &Path) -> Result<Option<PathBuf>, Scene15Error> {
    let Ok(at) = std::fs::canonicalize(entry) else {
        return Ok(None);
    };
    if !at.starts_with(root) {
        return Err(Scene15Error::Refused {
            path: entry.to_path_buf(),
            why: format!(
                "leads out of the folder given, to {}; only what lies inside it is copied \
                 (copy the photos in, or remove the link)",
                at.display()
            ),
        });
    }
    Ok((at.is_file() || at.is_dir()).then_some(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_name_the_classes_and_the_published_set_has_4485() {
        assert_eq!(class_of("MITcoast").map(|c| c.name), Some("Coast"));
        assert_eq!(class_of("CALsuburb").map(|c| c.name), Some("Suburb"));
        assert_eq!(class_of("PARoffice").map(|c| c.name), Some("Office"));
        assert_eq!(class_of("livingroom").map(|c| c.name), Some("LivingRoom"));
        assert_eq!(class_of("InsideCity").map(|c| c.name), Some("InsideCity"));
        assert_eq!(
            class_of("MITinsidecity").map(|c| c.name),
            Some("InsideCity")
        );
        assert!(class_of("Garden").is_none());
        assert_eq!(CLASSES.iter().map(|c| c.published).sum::<usize>(), 4485);
    }
}
