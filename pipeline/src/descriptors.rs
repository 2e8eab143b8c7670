//! Local descriptors made elsewhere (SIFT, a CNN's, any): per photo a file of rows `x, y, size,
//! v1, ..., vD` (the keypoint's centre in pixels, its size, its descriptor), in numpy's `.npy`
//! (2-D, float32 or float64) or CSV (an optional header line), found at the photo's relative path
//! with its extension replaced (`street/a.jpg` -> `DIR/street/a.npy` or `DIR/street/a.csv`).
//! The vocabulary's sample, the encodings and the models take them where they take HOG patches:
//! a photo's sample is `per_image` of its rows drawn from the run's seed, its encoding pools all
//! of them, placed in the pyramid by their centres (the photo's size read from its header).
//!
//! vocab's own dense SIFT ([`crate::features::Descriptor::Sift`]) takes the same path: its
//! keypoints come from the photo as the features params load it instead of a file
//! ([`Origin::Sift`]), so a sample, an encoding, mirror images and nodes treat both alike.
//!
//! Every file is read through the one feature reader ([`crate::store::FeatureReader`]) and
//! bounded: at most [`MAX_DIMS`] values a descriptor, [`MAX_ROWS`] rows a photo, finite values,
//! keypoints inside the photo. A photo without a file, or whose file breaks a bound or holds
//! descriptors of another dimension than the first photo's, is skipped with the reason (and a
//! stage none of whose photos could be read fails, naming the first reasons).

use std::ops::Range;
use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand::seq::index;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use thiserror::Error;

use crate::features::{
    Described, Describers, FeatureParams, FeatureSummary, FeaturesError, Outcome, Progress,
    SIFT_WINDOWS, Source, run_stage,
};
use crate::image_io::{Collection, Photo, Skip};
use crate::sift::{DenseSift, SIFT_DIMS};
use crate::store::{FeatureReader, FeatureWriter, Format, Record};

/// Most values a descriptor may have.
pub const MAX_DIMS: usize = 4096;
/// Most rows (keypoints) one photo's file may hold.
pub const MAX_ROWS: usize = 1 << 20;
/// Values before a descriptor's in a row: x, y, size.
pub const HEAD: usize = 3;
/// Most descriptor values one photo's file may hold (256 MB as f32), whatever its shape.
pub const MAX_VALUES: usize = 1 << 26;

/// What stops descriptors made elsewhere from being used at all.
#[derive(Debug, Error)]
pub enum DescriptorError {
    /// The folder does not exist.
    #[error("descriptor folder {0} does not exist")]
    MissingFolder(PathBuf),
    /// Two photos would read one descriptor file.
    #[error("photos {a} and {b} would read the same descriptor file: rename one")]
    Shared {
        /// One photo.
        a: String,
        /// The other.
        b: String,
    },
    /// The dense SIFT's settings.
    #[error(transparent)]
    Sift(#[from] crate::sift::SiftError),
    /// No photo has a readable file.
    #[error(
        "no photo of {photos} has a descriptor file in {dir} (for a.jpg: a.npy or a.csv){first}"
    )]
    NoneReadable {
        /// The photo folder.
        photos: PathBuf,
        /// The descriptor folder.
        dir: PathBuf,
        /// The first photo's reason, `: ...`.
        first: String,
    },
}

/// Where a collection's descriptors are: the folder that mirrors the photo folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Foreign {
    /// The descriptor folder.
    pub dir: PathBuf,
}

/// One photo's keypoints and descriptors.
#[derive(Debug, Clone, PartialEq)]
pub struct Keypoints {
    /// Values per descriptor.
    pub dims: usize,
    /// Each keypoint's centre `(x, y)` and size, in pixels.
    pub places: Vec<(f32, f32, f32)>,
    /// `dims` values per keypoint, in the order of `places`.
    pub values: Vec<f32>,
}

impl Foreign {
    /// The descriptors in `dir`, which must be a folder.
    pub fn new(dir: &Path) -> Result<Self, DescriptorError> {
        if !dir.is_dir() {
            return Err(DescriptorError::MissingFolder(dir.to_path_buf()));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    /// The file of the photo at `rel_path`: `.npy`, else `.csv`; a reason when neither is there
    /// (naming the file under the folder: the same however the folder's path is spelt, here or
    /// on nodes).
    pub fn file_of(&self, rel_path: &str) -> Result<PathBuf, String> {
        let base = self.dir.join(rel_path);
        let found: Vec<PathBuf> = ["npy", "csv"]
            .iter()
            .map(|ext| base.with_extension(ext))
            .filter(|p| p.is_file())
            .collect();
        let npy = Path::new(rel_path).with_extension("npy");
        match found.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(format!("no descriptor file ({} or .csv)", npy.display())),
            _ => Err(format!(
                "two descriptor files ({} and .csv): keep one",
                npy.display()
            )),
        }
    }

    /// The dimension of the collection's descriptors: the first photo's that has a readable
    /// file, with that file.
    pub fn dims_of(&self, collection: &Collection) -> Result<(usize, PathBuf), DescriptorError> {
        // Two photos may not share a file (a.jpg and a.png both name a.npy).
        let mut names = std::collections::HashMap::new();
        for photo in collection.photos() {
            let base = Path::new(&photo.rel_path).with_extension("");
            if let Some(other) = names.insert(base, &photo.rel_path) {
                return Err(DescriptorError::Shared {
                    a: other.clone(),
                    b: photo.rel_path.clone(),
                });
            }
        }
        let mut first = None;
        for photo in collection.photos() {
            let read = self.file_of(&photo.rel_path).and_then(|path| {
                let keypoints = read(&path, None)?;
                Ok((keypoints.dims, path))
            });
            match read {
                Ok(found) => return Ok(found),
                Err(reason) if first.is_none() => {
                    first = Some(format!(": {}: {reason}", photo.rel_path));
                }
                Err(_) => {}
            }
        }
        Err(DescriptorError::NoneReadable {
            photos: collection.root().to_path_buf(),
            dir: self.dir.clone(),
            first: first.unwrap_or_default(),
        })
    }
}

/// Reads one photo's file: rows of [`HEAD`] values then the descriptor's, `dims` of them when
/// given. Bounds broken are the reason, as the skipped manifest says it.
pub fn read(path: &Path, dims: Option<usize>) -> Result<Keypoints, String> {
    let mut reader = FeatureReader::open(path).map_err(|e| crate::chain(&e))?;
    let mut record = Record::default();
    let mut keypoints = Keypoints {
        dims: 0,
        places: Vec::new(),
        values: Vec::new(),
    };
    while reader
        .next_into(&mut record)
        .map_err(|e| crate::chain(&e))?
    {
        let row = &record.values;
        let d = row.len().saturating_sub(HEAD);
        if keypoints.places.is_empty() {
            if row.len() <= HEAD || d > MAX_DIMS {
                return Err(format!(
                    "rows of {} values: x, y, size, then 1 to {MAX_DIMS} descriptor values",
                    row.len()
                ));
            }
            keypoints.dims = d;
        }
        if let Some(want) = dims.filter(|&w| w != d) {
            return Err(format!("descriptors of {d} values, the run's have {want}"));
        }
        if keypoints.places.len() >= MAX_ROWS || keypoints.values.len() + d > MAX_VALUES {
            return Err(format!(
                "more than {MAX_ROWS} keypoints or {MAX_VALUES} descriptor values"
            ));
        }
        if !row.iter().all(|v| v.is_finite()) {
            return Err(format!(
                "row {}: a value not finite",
                keypoints.places.len() + 1
            ));
        }
        let (x, y, size) = (row[0], row[1], row[2]);
        if x < 0.0 || y < 0.0 || size <= 0.0 {
            return Err(format!(
                "row {}: a keypoint at ({x}, {y}) of size {size} (x, y >= 0, size > 0)",
                keypoints.places.len() + 1
            ));
        }
        keypoints.places.push((x, y, size));
        keypoints.values.extend_from_slice(&row[HEAD..]);
    }
    if keypoints.places.is_empty() {
        return Err("no keypoints".into());
    }
    Ok(keypoints)
}

/// Where a stage's keypoints come from: files made elsewhere, or vocab's dense SIFT of each
/// photo.
#[derive(Debug, Clone, Copy)]
pub enum Origin<'a> {
    /// The files in the folder, descriptors of that many values.
    Files(&'a Foreign, usize),
    /// Dense SIFT of the photo as the features params load it ([`FeatureParams::load`]: mirror
    /// images, `max_side`, the pixel limit), laid out by [`FeatureParams::sift`].
    Sift(&'a FeatureParams, &'a DenseSift),
}

impl Origin<'_> {
    /// Values of a descriptor.
    pub fn dims(&self) -> usize {
        match self {
            Self::Files(_, dims) => *dims,
            Self::Sift(..) => SIFT_DIMS,
        }
    }

    /// The photo's size and keypoints, or why it is skipped.
    fn keypoints(&self, collection: &Collection, photo: &Photo) -> Result<Placed, String> {
        match *self {
            Self::Files(foreign, dims) => from_file(collection, photo, (foreign, dims)),
            Self::Sift(params, sift) => {
                let lum = params
                    .load(&collection.path_of(photo))
                    .map_err(|skip| skip.to_string())?;
                let (width, height) = (lum.width, lum.height);
                if width > usize::from(u16::MAX) || height > usize::from(u16::MAX) {
                    return Err(Skip::TooLarge { width, height }.to_string());
                }
                let (keys, values) = sift.describe(&lum);
                if keys.is_empty() {
                    let smallest = SIFT_WINDOWS.iter().copied().fold(f32::INFINITY, f32::min);
                    return Err(format!(
                        "{width}x{height} px holds no {smallest}-px SIFT window"
                    ));
                }
                let places = (keys.iter())
                    .map(|k| (k.x as f32, k.y as f32, k.window))
                    .collect();
                let keypoints = Keypoints {
                    dims: SIFT_DIMS,
                    places,
                    values,
                };
                Ok(((width, height), keypoints))
            }
        }
    }
}

/// A photo's size and its keypoints.
type Placed = ((usize, usize), Keypoints);

/// The photo's size (from its header) and its keypoints read from its file in `foreign` (of
/// `dims` values), each inside the photo.
fn from_file(
    collection: &Collection,
    photo: &Photo,
    (foreign, dims): (&Foreign, usize),
) -> Result<Placed, String> {
    let at = collection.path_of(photo);
    let (width, height) = crate::image_io::oriented_size(&at).map_err(|e| {
        let reason = format!("cannot read the photo's size: {e}");
        named(reason, &at, &photo.rel_path)
    })?;
    let path = foreign.file_of(&photo.rel_path)?;
    let file = (path.strip_prefix(&foreign.dir).unwrap_or(&path))
        .display()
        .to_string();
    let keypoints = read(&path, Some(dims)).map_err(|r| named(r, &path, &file))?;
    // Places are kept as u16 records; outside the photo they belong to no cell.
    let outside =
        (keypoints.places.iter()).position(|&(x, y, _)| x >= width as f32 || y >= height as f32);
    if let Some(i) = outside {
        let (x, y, _) = keypoints.places[i];
        return Err(format!(
            "{file}: keypoint {} at ({x}, {y}) lies outside the {width} x {height} photo",
            i + 1
        ));
    }
    if width > usize::from(u16::MAX) || height > usize::from(u16::MAX) {
        return Err(format!("a side over {} px", u16::MAX));
    }
    Ok(((width, height), keypoints))
}

/// What a stage makes of one photo's keypoints (the photo `width x height`, with the thread's
/// buffers): a result and the number of keypoints it used.
pub(crate) type Compute<'a, T> =
    dyn Fn(&mut Describers, &Photo, (usize, usize), &Keypoints) -> (T, usize) + Sync + 'a;

/// The photos `range` of `collection` with their keypoints from `origin` in parallel, each
/// turned into a result by `compute`, in picture-id order.
pub(crate) fn compute_range<T: Send>(
    collection: &Collection,
    origin: Origin<'_>,
    range: Range<usize>,
    compute: &Compute<'_, T>,
) -> Vec<Outcome<T>> {
    let photos = collection.photos().get(range).unwrap_or_default();
    photos
        .par_iter()
        .map_init(Describers::default, |describers, photo: &Photo| {
            let done = (|| {
                if let Some(reason) = &photo.unusable {
                    return Err(reason.clone());
                }
                let ((width, height), keypoints) = origin.keypoints(collection, photo)?;
                let (value, used) = compute(describers, photo, (width, height), &keypoints);
                Ok(Outcome::Done {
                    width,
                    height,
                    patches: used,
                    value,
                })
            })();
            done.unwrap_or_else(Outcome::Skipped)
        })
        .collect()
}

/// [`compute_range`] of dense SIFT's keypoints as `params` lay them out ([`Origin::Sift`]);
/// every photo skipped with the reason when they lay out no grid (the params' own rules refuse
/// that first: a grid step of at least 1).
pub(crate) fn sift_range<T: Send>(
    collection: &Collection,
    params: &FeatureParams,
    range: Range<usize>,
    compute: &Compute<'_, T>,
) -> Vec<Outcome<T>> {
    match params.sift() {
        Ok(sift) => compute_range(collection, Origin::Sift(params, &sift), range, compute),
        Err(e) => (collection.photos().get(range).unwrap_or_default().iter())
            .map(|_| Outcome::Skipped(e.to_string()))
            .collect(),
    }
}

/// `reason` naming the file at `path` as `name` (its path under the folder the stage was
/// given): a skipped manifest reads the same however that folder was spelt, here or on nodes.
fn named(reason: String, path: &Path, name: &str) -> String {
    reason.replace(&path.display().to_string(), name)
}

/// The photos' results read here, a few batches of threads at a time.
pub(crate) struct Here<'c, 'f, T> {
    collection: &'c Collection,
    origin: Origin<'c>,
    compute: &'c Compute<'f, T>,
    batch: usize,
}

impl<'c, 'f, T> Here<'c, 'f, T> {
    /// `collection`'s photos with their keypoints from `origin`, made into results by
    /// `compute`.
    pub fn new(
        collection: &'c Collection,
        origin: Origin<'c>,
        compute: &'c Compute<'f, T>,
    ) -> Self {
        Self {
            collection,
            origin,
            compute,
            batch: (rayon::current_num_threads() * 4).max(8),
        }
    }
}

impl<T: Send> Source<T> for Here<'_, '_, T> {
    fn next(&mut self, from: usize) -> Result<Option<Vec<Outcome<T>>>, FeaturesError> {
        let n = self.collection.photos().len();
        if from >= n {
            return Ok(None);
        }
        let range = from..n.min(from.saturating_add(self.batch));
        let done = compute_range(self.collection, self.origin, range, self.compute);
        Ok(Some(done))
    }
}

/// `per_image` of `keypoints`' indices, drawn for the photo `picture_id` from `seed` (all of
/// them, in order, when there are no more), ascending.
pub fn sample_rows(keypoints: usize, per_image: usize, seed: u64, picture_id: u32) -> Vec<usize> {
    if keypoints <= per_image {
        return (0..keypoints).collect();
    }
    let photo_seed = seed ^ u64::from(picture_id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut rng = ChaCha8Rng::seed_from_u64(photo_seed);
    let mut rows = index::sample(&mut rng, keypoints, per_image).into_vec();
    rows.sort_unstable();
    rows
}

/// One photo's part of the vocabulary's sample: `per_image` of its rows drawn from `seed`, each
/// record at its keypoint's centre (row y, column x, rounded down).
pub(crate) fn sampled(
    photo: &Photo,
    (width, height): (usize, usize),
    k: &Keypoints,
    (per_image, seed): (usize, u64),
) -> (Described, usize) {
    let dims = k.dims;
    let rows = sample_rows(k.places.len(), per_image, seed, photo.picture_id);
    let mut described = Described {
        width,
        height,
        positions: Vec::with_capacity(rows.len()),
        values: Vec::with_capacity(rows.len() * dims),
    };
    for &i in &rows {
        let (x, y, _) = k.places[i];
        described.positions.push((y as usize, x as usize));
        described
            .values
            .extend_from_slice(&k.values[i * dims..(i + 1) * dims]);
    }
    (described, rows.len())
}

/// The vocabulary's sample of the photos `range` with keypoints from `origin`: what one node
/// does of a sharded sample ([`crate::features::extract_from`] writes the results, as
/// [`sample`] does here).
pub fn sample_range(
    collection: &Collection,
    origin: Origin<'_>,
    draw: (usize, u64),
    range: Range<usize>,
) -> Vec<Outcome<Described>> {
    let compute = |_: &mut Describers, photo: &Photo, size: (usize, usize), k: &Keypoints| {
        sampled(photo, size, k, draw)
    };
    compute_range(collection, origin, range, &compute)
}

/// The vocabulary's sample from descriptors made elsewhere: `per_image` rows of each photo's
/// file (drawn from `seed`) into a feature file at `out` of their dimension, each record at its
/// keypoint's centre (row y, column x, rounded down); the manifests as the features stage
/// writes them. Returns the summary and the dimension.
pub fn sample(
    collection: &Collection,
    foreign: &Foreign,
    draw: (usize, u64),
    (out, format): (&Path, Format),
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(FeatureSummary, usize), FeaturesError> {
    let (dims, _) = foreign.dims_of(collection).map_err(boxed)?;
    let writer = FeatureWriter::create(out, format, dims)?;
    let compute = |_: &mut Describers, photo: &Photo, size: (usize, usize), k: &Keypoints| {
        sampled(photo, size, k, draw)
    };
    let mut source = Here::new(collection, Origin::Files(foreign, dims), &compute);
    let summary = run_stage(collection, out, writer, &mut source, progress)?;
    Ok((summary, dims))
}

/// An error of the descriptors as the photo stages carry it.
pub fn boxed(e: DescriptorError) -> FeaturesError {
    FeaturesError::Source(Box::new(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_csv(path: &Path, rows: &[&[f32]]) {
        let text: String = rows
            .iter()
            .map(|r| {
                let cells: Vec<String> = r.iter().map(f32::to_string).collect();
                format!("{}\n", cells.join(","))
            })
            .collect();
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, format!("x,y,size,a,b\n{text}")).expect("csv");
    }

    #[test]
    fn a_photos_file_is_found_read_and_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let foreign = Foreign::new(dir.path()).expect("folder");
        write_csv(
            &dir.path().join("street/a.csv"),
            &[&[1.0, 2.0, 16.0, 0.5, 0.25], &[3.0, 4.0, 16.0, 1.0, 0.0]],
        );
        let path = foreign.file_of("street/a.jpg").expect("found");
        let k = read(&path, None).expect("read");
        assert_eq!(k.dims, 2);
        assert_eq!(k.places, [(1.0, 2.0, 16.0), (3.0, 4.0, 16.0)]);
        assert_eq!(k.values, [0.5, 0.25, 1.0, 0.0]);
        assert!(
            read(&path, Some(3))
                .expect_err("dims")
                .contains("the run's have 3")
        );
        assert!(
            foreign
                .file_of("street/b.jpg")
                .expect_err("none")
                .contains("no descriptor file")
        );
        write_csv(
            &dir.path().join("bad.csv"),
            &[&[-1.0, 2.0, 16.0, 0.5, 0.25]],
        );
        assert!(
            read(&dir.path().join("bad.csv"), None)
                .expect_err("x < 0")
                .contains("x, y >= 0")
        );
        write_csv(&dir.path().join("short.csv"), &[&[1.0, 2.0, 16.0]]);
        assert!(read(&dir.path().join("short.csv"), None).is_err());
        assert!(Foreign::new(&dir.path().join("nope")).is_err());
    }

    #[test]
    fn a_photo_too_small_for_a_sift_window_is_skipped_saying_so() {
        use crate::describe::extract;
        use crate::features::Descriptor;
        use crate::patch::Sampling;
        let dir = tempfile::tempdir().expect("tempdir");
        let photos = dir.path().join("photos");
        std::fs::create_dir_all(&photos).expect("folder");
        image::GrayImage::from_fn(23, 40, |x, y| image::Luma([(x * 7 + y * 3) as u8]))
            .save(photos.join("thin.png"))
            .expect("png");
        let collection = Collection::open(&photos, None).expect("collection");
        let params = FeatureParams {
            sampling: Sampling::Random {
                per_image: 5,
                seed: 1,
            },
            max_side: None,
            max_pixels: crate::image_io::MAX_PIXELS,
            mirror: false,
            patch: None,
            descriptor: Descriptor::Sift,
        };
        let out = dir.path().join("s.bin");
        let format = crate::store::Format::Bin;
        let err = extract(&collection, &params, &out, format, &|_| {}).expect_err("too small");
        assert!(
            err.to_string()
                .contains("thin.png: 23x40 px holds no 24-px SIFT window"),
            "{err}"
        );
        assert!(!out.exists());
    }

    #[test]
    fn a_sample_is_seeded_per_photo_and_all_rows_when_few() {
        assert_eq!(sample_rows(3, 5, 1, 0), [0, 1, 2]);
        let a = sample_rows(100, 10, 1, 7);
        assert_eq!(a.len(), 10);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(a, sample_rows(100, 10, 1, 7));
        assert_ne!(a, sample_rows(100, 10, 2, 7));
        assert_ne!(a, sample_rows(100, 10, 1, 8));
    }
}
