//! Joined encodings: several encodings of the same photos (HOG's and dense SIFT's Fisher vectors,
//! say) in one vector a photo, each part's vector times `1 / sqrt(parts)`
//! ([`Encoding::part_weight`]: parts of unit length, as Fisher vectors and VLAD are, make a
//! vector of unit length), written as an encode writes its histograms (the file, its manifests,
//! nothing at `out` unless the whole join succeeds) with the record [`Encoding::joined`] makes.
//!
//! The parts must list the same photos (each part's `.images.csv` and `.skipped.csv`, by
//! picture id and path): a photo every part encoded is joined, with the first part's size; a
//! photo any part skipped is skipped, with that part's reason. Each part is read a photo at a
//! time through the one histogram reader ([`HistogramReader`]), so memory holds a batch of
//! joined vectors, whatever the photos' count.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::classify::{ClassifyError, HistogramReader};
use crate::encode::{EncodeParamsError, Encoding, encode_from};
use crate::features::{FeatureSummary, FeaturesError, Outcome, Progress, Source, manifest_path};
use crate::image_io::{Collection, CollectionError};

/// Most values a joined vector may hold: 2^28 (1 GiB of `f32` a photo).
pub const MAX_JOINED_VALUES: usize = 1 << 28;

/// What stops a join.
#[derive(Debug, Error)]
pub enum JoinError {
    /// The parts' records do not join (their count, mirror images, descriptors made elsewhere).
    #[error("cannot join {parts}: {source}")]
    Record {
        /// The parts' files.
        parts: String,
        /// The rule broken.
        source: EncodeParamsError,
    },
    /// A part's manifest cannot be read or does not describe its photos.
    #[error("{path}: {message}")]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Two parts are of other photos.
    #[error("{a} and {b} are encodings of other photos ({why}): join encodings of one photo list")]
    OtherPhotos {
        /// The first part's file.
        a: PathBuf,
        /// The other part's file.
        b: PathBuf,
        /// The first difference.
        why: String,
    },
    /// A part's vectors are not as long as its record says.
    #[error("{path}: vectors of {values} values, its record's encoding makes {record}")]
    Length {
        /// The part's file.
        path: PathBuf,
        /// Values of its first vector.
        values: usize,
        /// Values its record says.
        record: usize,
    },
    /// The joined vector would be longer than a photo's row may be.
    #[error("cannot join {0}: the joined vector would pass {MAX_JOINED_VALUES} values")]
    TooLong(String),
    /// A part's histograms cannot be read.
    #[error(transparent)]
    Histograms(#[from] ClassifyError),
    /// The photo list cannot be made.
    #[error(transparent)]
    Collection(#[from] CollectionError),
    /// Writing the joined file failed.
    #[error(transparent)]
    Write(#[from] FeaturesError),
}

/// One part's photos as its manifests list them: by picture id, the path and the size it was
/// encoded at, or the reason it was skipped.
#[derive(Debug, Default)]
struct Listed {
    photos: HashMap<u32, (String, Encoded)>,
}

/// A photo's size as a part encoded it, or why the part skipped it.
type Encoded = Result<(usize, usize), String>;

impl Listed {
    /// The manifests beside `histograms`.
    fn read(histograms: &Path) -> Result<Self, JoinError> {
        let mut listed = Self::default();
        for (suffix, encoded) in [("images.csv", true), ("skipped.csv", false)] {
            let path = manifest_path(histograms, suffix);
            let fail = |message: String| JoinError::Manifest {
                path: path.clone(),
                message,
            };
            let mut reader = crate::input::csv(&csv::ReaderBuilder::new(), &path)
                .map_err(|e| fail(e.to_string()))?;
            for row in reader.records() {
                let row = row.map_err(|e| fail(e.to_string()))?;
                let line = row.position().map_or(0, |p| p.line());
                let field = |i: usize| row.get(i).unwrap_or("");
                let id: u32 = (field(0).parse())
                    .map_err(|_| fail(format!("line {line}: bad picture_id {:?}", field(0))))?;
                let done = if encoded {
                    let side = |i: usize| field(i).parse::<usize>();
                    match (side(2), side(3)) {
                        (Ok(w), Ok(h)) => Ok((w, h)),
                        _ => return Err(fail(format!("line {line}: bad width or height"))),
                    }
                } else {
                    Err(field(2).to_string())
                };
                if listed
                    .photos
                    .insert(id, (field(1).to_string(), done))
                    .is_some()
                {
                    return Err(fail(format!("line {line}: picture {id} listed twice")));
                }
            }
        }
        Ok(listed)
    }
}

/// Joins the encodings at `parts` (each with its record, read from beside it) into `out`,
/// returning the summary and the joined record (the caller writes it beside `out`).
pub fn join(
    parts: &[(&Path, Encoding)],
    out: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(FeatureSummary, Encoding), JoinError> {
    let names = || {
        let files: Vec<String> = parts.iter().map(|(p, _)| p.display().to_string()).collect();
        files.join(", ")
    };
    let record =
        Encoding::joined(parts.iter().map(|(_, e)| e.clone()).collect()).map_err(|source| {
            JoinError::Record {
                parts: names(),
                source,
            }
        })?;
    let listed: Vec<Listed> = (parts.iter())
        .map(|(p, _)| Listed::read(p))
        .collect::<Result<_, _>>()?;
    // Every part lists the same photos, picture ids 0 to n - 1, by the same paths.
    let first = &listed[0].photos;
    for (i, other) in listed.iter().enumerate().skip(1) {
        let differs = |why: String| JoinError::OtherPhotos {
            a: parts[0].0.to_path_buf(),
            b: parts[i].0.to_path_buf(),
            why,
        };
        if other.photos.len() != first.len() {
            return Err(differs(format!(
                "{} photos against {}",
                first.len(),
                other.photos.len()
            )));
        }
        for (id, (path, _)) in first {
            match other.photos.get(id) {
                Some((p, _)) if p == path => {}
                Some((p, _)) => return Err(differs(format!("picture {id} is {path}, then {p}"))),
                None => return Err(differs(format!("picture {id} ({path}) in one only"))),
            }
        }
    }
    let n = first.len();
    let mut photos = Vec::with_capacity(n);
    for id in 0..n {
        let id32 = u32::try_from(id).unwrap_or(u32::MAX);
        let (path, _) = first.get(&id32).ok_or_else(|| JoinError::Manifest {
            path: manifest_path(parts[0].0, "images.csv"),
            message: format!("lists {n} photos, none of picture id {id}"),
        })?;
        photos.push((path.clone(), None));
    }
    // The photo list, for the writer: the first part's folder stands for the photos' (a
    // join reads no photo).
    let root = parts[0].0.parent().filter(|p| !p.as_os_str().is_empty());
    let collection = Collection::listed(root.unwrap_or(Path::new(".")), photos)?;
    // Each part's vectors are as long as its record says (checked on its first row before a
    // byte is written), and the joined vector within what a photo's row may hold.
    let lens: Vec<usize> = parts.iter().map(|(_, e)| e.len()).collect();
    let mut readers = Vec::with_capacity(parts.len());
    for ((path, _), &len) in parts.iter().zip(&lens) {
        let mut reader = HistogramReader::open(path)?;
        let first = reader.next_row()?;
        if let Some((_, _, row)) = &first
            && row.len() != len
        {
            return Err(JoinError::Length {
                path: path.to_path_buf(),
                values: row.len(),
                record: len,
            });
        }
        readers.push((reader, first));
    }
    let total = (lens.iter())
        .try_fold(0usize, |sum, &len| sum.checked_add(len))
        .filter(|&total| total <= MAX_JOINED_VALUES)
        .ok_or_else(|| JoinError::TooLong(names()))?;
    let mut source = Joining {
        parts: parts.iter().map(|(p, _)| p.to_path_buf()).collect(),
        lens,
        weight: record.part_weight(),
        listed,
        readers,
        batch: 64,
    };
    let summary = encode_from(&collection, total, out, &mut source, progress)?;
    Ok((summary, record))
}

/// A photo's row of a part: its picture id, path and vector.
type Row = (u32, String, Vec<f32>);

/// The joined vectors, a batch of photos at a time, read from the parts in lockstep.
struct Joining {
    parts: Vec<PathBuf>,
    /// Values of each part's vectors.
    lens: Vec<usize>,
    weight: f32,
    listed: Vec<Listed>,
    /// Each part's reader, and its row read ahead (the first, read to check its length).
    readers: Vec<(HistogramReader, Option<Row>)>,
    batch: usize,
}

impl Joining {
    /// The outcome of the photo `id`: its parts' vectors joined, or the first reason a part
    /// skipped it. Every part that encoded it gives its next row, which must be that photo's.
    fn photo(&mut self, id: u32) -> Result<Outcome<Vec<f32>>, JoinError> {
        // (Within MAX_JOINED_VALUES: checked before the join began.)
        let mut value = Vec::with_capacity(self.lens.iter().sum());
        let mut skipped = None;
        let mut size = (0, 0);
        for (i, listed) in self.listed.iter().enumerate() {
            let part = &self.parts[i];
            match listed.photos.get(&id).map(|(_, done)| done) {
                Some(Ok(sides)) => {
                    let (reader, ahead) = &mut self.readers[i];
                    let row = match ahead.take() {
                        Some(row) => Some(row),
                        None => reader.next_row()?,
                    };
                    let (got, _, values) = row.ok_or_else(|| JoinError::Manifest {
                        path: manifest_path(part, "images.csv"),
                        message: format!("lists picture {id}, {} ends before it", part.display()),
                    })?;
                    if got != id || values.len() != self.lens[i] {
                        return Err(JoinError::Manifest {
                            path: manifest_path(part, "images.csv"),
                            message: format!(
                                "lists picture {id} next, {} holds picture {got} of {} values \
                                 (its record says {})",
                                part.display(),
                                values.len(),
                                self.lens[i]
                            ),
                        });
                    }
                    if i == 0 {
                        size = *sides;
                    }
                    value.extend(values.iter().map(|v| v * self.weight));
                }
                Some(Err(reason)) => {
                    skipped.get_or_insert_with(|| {
                        let name = part.file_name().unwrap_or_default().to_string_lossy();
                        if i == 0 {
                            reason.clone()
                        } else {
                            format!("{name}: {reason}")
                        }
                    });
                }
                // Checked when the parts were listed: every part lists every photo.
                None => skipped = Some("not listed".into()),
            }
        }
        Ok(match skipped {
            Some(reason) => Outcome::Skipped(reason),
            None => Outcome::Done {
                width: size.0,
                height: size.1,
                patches: 0,
                value,
            },
        })
    }
}

impl Source<Vec<f32>> for Joining {
    fn next(&mut self, from: usize) -> Result<Option<Vec<Outcome<Vec<f32>>>>, FeaturesError> {
        let n = self.listed[0].photos.len();
        if from >= n {
            return Ok(None);
        }
        let batch = (from..n.min(from.saturating_add(self.batch)))
            .map(|id| self.photo(id as u32))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| FeaturesError::Source(Box::new(e)))?;
        Ok(Some(batch))
    }
}
