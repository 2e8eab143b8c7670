//! Photo collections: finding photos in a folder, decoding them, and turning them into luminance.
//!
//! A collection is a folder searched recursively for files whose extension the `image` crate
//! decodes (JPEG, PNG, WebP, TIFF, BMP), optionally restricted to the paths listed in the first
//! column of a labels CSV. Photos are ordered by their relative path (with `/` separators, compared
//! byte-wise) and a photo's *picture id* is its index in that order, so ids are stable for a given
//! folder (and labels file) whatever the decoding outcome of other photos.
//!
//! JPEG photos are decoded by libjpeg-turbo's decoder, so their pixels are exactly those that
//! scikit-image, OpenCV, Pillow and MATLAB read (checked against Pillow's and OpenCV's on every
//! scene15 photo by `eval/jpeg_decode`, and by the parity fixtures); other formats, and CMYK JPEGs,
//! by the `image` crate. Decoding applies the EXIF orientation, accepts 8- and 16-bit gray, gray+alpha, RGB and RGBA (and
//! the float variants), ignores alpha, and returns luminance `0.2125 R + 0.7154 G + 0.0721 B` on a
//! 0..255 scale. A photo that cannot be used is a [`Skip`] value with a reason, not an error: a run
//! over a real collection goes on and reports it.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use image::{DynamicImage, ImageDecoder, ImageReader};
use thiserror::Error;

/// Extensions (lower case) of the files a collection includes.
pub const PHOTO_EXTENSIONS: &[&str] = &["jpg", "jpeg", "png", "webp", "tif", "tiff", "bmp"];

/// Luminance weights applied to R, G and B (ITU-R BT.709, as scikit-image `rgb2gray`).
pub const LUMA_WEIGHTS: [f32; 3] = [0.2125, 0.7154, 0.0721];

/// Refuses a `root` that is not a folder: missing, or a file.
fn folder_of_photos(root: &Path) -> Result<(), CollectionError> {
    match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(CollectionError::NotAFolder(root.to_path_buf())),
        Err(_) => Err(CollectionError::MissingFolder(root.to_path_buf())),
    }
}

/// Errors that stop a collection from being opened at all.
#[derive(Debug, Error)]
pub enum CollectionError {
    /// The input folder does not exist.
    #[error("input folder {0} does not exist")]
    MissingFolder(PathBuf),
    /// The input is not a folder (a file: photos are read from a folder of them).
    #[error("input {0} is a file, not a folder of photos")]
    NotAFolder(PathBuf),
    /// The labels file could not be read.
    #[error("cannot read labels file {path}")]
    Labels {
        /// Labels file.
        path: PathBuf,
        /// Underlying error.
        source: csv::Error,
    },
    /// A labels row is malformed.
    #[error("labels file {path}, line {line}: {message}")]
    LabelsRow {
        /// Labels file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// The folder holds no photo (nor anything that looks like one).
    #[error("no photos in {0} (JPEG, PNG, WebP, TIFF or BMP files, in it or its subfolders)")]
    NoPhotos(PathBuf),
    /// The labels file lists no photo.
    #[error("labels file {0} lists no photos")]
    NoneListed(PathBuf),
    /// More photos than picture ids (u32) can number.
    #[error("input folder {0} holds more than 4,294,967,295 photos")]
    TooMany(PathBuf),
}

/// One photo of a collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Photo {
    /// Index in sorted path order.
    pub picture_id: u32,
    /// Path relative to the collection root, `/`-separated (bytes of a name that is not UTF-8
    /// written as `\xNN`).
    pub rel_path: String,
    /// Why the folder walk could not use this entry (a link loop, a dangling link, an
    /// unreadable folder, a name that is not UTF-8): it is listed as skipped, never dropped.
    pub unusable: Option<String>,
}

/// A folder of photos in a stable order.
#[derive(Debug, Clone)]
pub struct Collection {
    root: PathBuf,
    photos: Vec<Photo>,
}

impl Collection {
    /// Finds the photos below `root`; with `labels`, only the paths listed in its first column.
    ///
    /// A path listed in the labels file but absent from the folder stays in the collection and is
    /// reported as skipped when it is decoded, so that nothing listed is silently dropped.
    pub fn open(root: &Path, labels: Option<&Path>) -> Result<Self, CollectionError> {
        folder_of_photos(root)?;
        let mut paths = match labels {
            Some(labels) => read_label_paths(labels)?
                .into_iter()
                .map(|p| (p, None))
                .collect(),
            None => walk_photos(root),
        };
        if paths.is_empty() {
            return Err(match labels {
                Some(labels) => CollectionError::NoneListed(labels.to_path_buf()),
                None => CollectionError::NoPhotos(root.to_path_buf()),
            });
        }
        paths.sort_unstable();
        paths.dedup_by(|a, b| a.0 == b.0);
        Self::listed(root, paths)
    }

    /// Refuses a `root` that is missing, a file, or holds no photo, before anything else
    /// (a labels file) is looked for.
    pub fn check_folder(root: &Path) -> Result<(), CollectionError> {
        folder_of_photos(root)?;
        if walk_photos(root).is_empty() {
            return Err(CollectionError::NoPhotos(root.to_path_buf()));
        }
        Ok(())
    }

    /// The collection of `root` whose photos are `listed` (relative path, why unusable), in
    /// picture-id order: another node's collection, as [`Collection::listing`] gave it.
    pub fn listed(
        root: &Path,
        listed: Vec<(String, Option<String>)>,
    ) -> Result<Self, CollectionError> {
        Self::listed_from(root, 0, listed)
    }

    /// A run of a collection: the photos `listed` with picture ids from `first` on (what a node
    /// needs to describe some photos of a larger collection again).
    pub fn listed_from(
        root: &Path,
        first: u32,
        listed: Vec<(String, Option<String>)>,
    ) -> Result<Self, CollectionError> {
        folder_of_photos(root)?;
        if listed.len() as u64 + u64::from(first) > u64::from(u32::MAX) {
            return Err(CollectionError::TooMany(root.to_path_buf()));
        }
        let photos = listed
            .into_iter()
            .enumerate()
            .map(|(idx, (rel_path, unusable))| Photo {
                picture_id: first + idx as u32,
                rel_path,
                unusable,
            })
            .collect();
        Ok(Self {
            root: root.to_path_buf(),
            photos,
        })
    }

    /// The photos as [`Collection::listed`] takes them.
    pub fn listing(&self) -> Vec<(String, Option<String>)> {
        (self.photos.iter())
            .map(|p| (p.rel_path.clone(), p.unusable.clone()))
            .collect()
    }

    /// The collection root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The photos in picture-id order.
    pub fn photos(&self) -> &[Photo] {
        &self.photos
    }

    /// Absolute (root-joined) path of a photo.
    pub fn path_of(&self, photo: &Photo) -> PathBuf {
        self.root.join(&photo.rel_path)
    }
}

pub(crate) fn is_photo(path: &Path) -> bool {
    path.extension()
        .and_then(|ext| ext.to_str())
        .is_some_and(|ext| PHOTO_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()))
}

/// Every photo below `root` (links followed), with the entries the walk could not use: each
/// error of the walk (a link loop, a dangling link, an unreadable folder) and each photo whose
/// name is not UTF-8 is kept with its reason, so that the stage lists it as skipped.
fn walk_photos(root: &Path) -> Vec<(String, Option<String>)> {
    let mut paths = Vec::new();
    for entry in walkdir::WalkDir::new(root).follow_links(true) {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                let path = e.path().unwrap_or(root);
                let reason = if let Some(ancestor) = e.loop_ancestor() {
                    format!(
                        "symbolic link loop (back to {})",
                        rel_name(ancestor.strip_prefix(root).unwrap_or(ancestor)).0
                    )
                } else if path.is_symlink() && !path.exists() {
                    "dangling symbolic link".to_string()
                } else if path.is_dir() {
                    format!(
                        "unreadable folder: {}",
                        e.io_error()
                            .map_or_else(|| e.to_string(), ToString::to_string)
                    )
                } else {
                    format!(
                        "unreadable: {}",
                        e.io_error()
                            .map_or_else(|| e.to_string(), ToString::to_string)
                    )
                };
                let rel = path.strip_prefix(root).unwrap_or(path);
                paths.push((rel_name(rel).0, Some(reason)));
                continue;
            }
        };
        if !entry.file_type().is_file() || !is_photo(entry.path()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let (name, utf8) = rel_name(rel);
        let unusable = (!utf8).then(|| "file name is not UTF-8".to_string());
        paths.push((name, unusable));
    }
    paths
}

/// A relative path as `/`-separated text, and whether it was valid UTF-8 (other bytes are
/// written as `\xNN`, so distinct names stay distinct).
fn rel_name(rel: &Path) -> (String, bool) {
    let mut utf8 = true;
    let parts: Vec<String> = rel
        .components()
        .map(|c| {
            let os = c.as_os_str();
            match os.to_str() {
                Some(text) => text.to_string(),
                None => {
                    utf8 = false;
                    escape_bytes(os)
                }
            }
        })
        .collect();
    (parts.join("/"), utf8)
}

#[cfg(unix)]
fn escape_bytes(os: &std::ffi::OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in os.as_bytes().utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(not(unix))]
fn escape_bytes(os: &std::ffi::OsStr) -> String {
    os.to_string_lossy().into_owned()
}

fn read_label_paths(labels: &Path) -> Result<Vec<String>, CollectionError> {
    let csv_err = |source| CollectionError::Labels {
        path: labels.to_path_buf(),
        source,
    };
    let mut reader =
        crate::input::csv(csv::ReaderBuilder::new().flexible(true), labels).map_err(csv_err)?;
    let mut paths = Vec::new();
    for record in reader.records() {
        let record = record.map_err(csv_err)?;
        let line = record.position().map_or(0, |p| p.line());
        let path = record.get(0).unwrap_or("").trim();
        if path.is_empty() {
            return Err(CollectionError::LabelsRow {
                path: labels.to_path_buf(),
                line,
                message: "empty path in the first column".into(),
            });
        }
        if Path::new(path).is_absolute() || path.split('/').any(|part| part == "..") {
            return Err(CollectionError::LabelsRow {
                path: labels.to_path_buf(),
                line,
                message: format!("path {path:?} must be relative to the input folder"),
            });
        }
        paths.push(path.to_string());
    }
    Ok(paths)
}

/// A grayscale image with `f32` luminance on a 0..255 scale, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Luminance {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// `width * height` values, row-major.
    pub data: Vec<f32>,
}

impl Luminance {
    /// Converts a decoded image (any pixel format) to luminance; alpha is ignored.
    pub fn from_image(img: &DynamicImage) -> Self {
        let (width, height) = (img.width() as usize, img.height() as usize);
        let data = match img {
            DynamicImage::ImageLuma8(buf) => buf.as_raw().iter().map(|&v| f32::from(v)).collect(),
            DynamicImage::ImageLumaA8(buf) => buf
                .as_raw()
                .chunks_exact(2)
                .map(|p| f32::from(p[0]))
                .collect(),
            DynamicImage::ImageLuma16(buf) => {
                buf.as_raw().iter().map(|&v| f32::from(v) / 257.0).collect()
            }
            DynamicImage::ImageLumaA16(buf) => buf
                .as_raw()
                .chunks_exact(2)
                .map(|p| f32::from(p[0]) / 257.0)
                .collect(),
            DynamicImage::ImageRgb8(buf) => luma_rgb(buf.as_raw(), 3, f32::from),
            DynamicImage::ImageRgba8(buf) => luma_rgb(buf.as_raw(), 4, f32::from),
            DynamicImage::ImageRgb16(buf) => luma_rgb(buf.as_raw(), 3, |v| f32::from(v) / 257.0),
            DynamicImage::ImageRgba16(buf) => luma_rgb(buf.as_raw(), 4, |v| f32::from(v) / 257.0),
            DynamicImage::ImageRgb32F(buf) => luma_rgb(buf.as_raw(), 3, |v| v * 255.0),
            DynamicImage::ImageRgba32F(buf) => luma_rgb(buf.as_raw(), 4, |v| v * 255.0),
            // Future pixel formats: go through 8-bit RGB rather than fail.
            other => luma_rgb(other.to_rgb8().as_raw(), 3, f32::from),
        };
        Self {
            width,
            height,
            data,
        }
    }

    /// Mirrors the image left to right, in place (each row reversed).
    pub fn mirror(&mut self) {
        if self.width > 0 {
            self.data
                .chunks_exact_mut(self.width)
                .for_each(<[f32]>::reverse);
        }
    }

    /// Downscales by area averaging so that the longer side is at most `max_side` pixels.
    ///
    /// Each output pixel is the mean of the input area it covers, with fractional weights at its
    /// edges (what OpenCV calls `INTER_AREA`). Images already small enough are returned unchanged.
    pub fn fit_within(self, max_side: usize) -> Self {
        let longest = self.width.max(self.height);
        if max_side == 0 || longest <= max_side {
            return self;
        }
        self.scaled_within(max_side)
    }

    /// [`Luminance::fit_within`] of a borrowed image: a new, smaller one (or a copy when it fits
    /// already), without copying the original first.
    pub fn scaled_within(&self, max_side: usize) -> Self {
        let longest = self.width.max(self.height);
        if max_side == 0 || longest <= max_side {
            return self.clone();
        }
        let scale = max_side as f64 / longest as f64;
        let new_w = ((self.width as f64 * scale).round() as usize).clamp(1, max_side);
        let new_h = ((self.height as f64 * scale).round() as usize).clamp(1, max_side);
        let taps = (
            area_weights(self.width, new_w),
            area_weights(self.height, new_h),
        );
        self.resampled((new_w, new_h), &taps)
    }

    /// The image resized by `factor` (each side rounded, at least 1 pixel): enlarged by linear
    /// interpolation between the nearest pixels (pixel centres aligned, edges repeated: what
    /// OpenCV calls `INTER_LINEAR`), shrunk by area averaging ([`Luminance::fit_within`]'s).
    /// A factor of 1 gives a copy.
    pub fn zoomed(&self, factor: f64) -> Self {
        let side = |n: usize| ((n as f64 * factor).round() as usize).max(1);
        let (new_w, new_h) = (side(self.width), side(self.height));
        if factor < 1.0 {
            return self.scaled_within(new_w.max(new_h));
        }
        if (new_w, new_h) == (self.width, self.height) || self.data.is_empty() {
            return self.clone();
        }
        let taps = (
            linear_weights(self.width, new_w),
            linear_weights(self.height, new_h),
        );
        self.resampled((new_w, new_h), &taps)
    }

    /// The image at `new_w x new_h`, each output value the weighted sum of the input values its
    /// taps name: rows first (the width changes), then columns.
    fn resampled(&self, (new_w, new_h): (usize, usize), taps: &(Taps, Taps)) -> Self {
        let (horizontal, vertical) = taps;
        let mut tmp = vec![0f32; new_w * self.height];
        for (src, dst) in self
            .data
            .chunks_exact(self.width)
            .zip(tmp.chunks_exact_mut(new_w))
        {
            for (out, taps) in dst.iter_mut().zip(horizontal) {
                *out = taps.iter().map(|&(i, w)| src[i] * w).sum();
            }
        }
        let mut data = vec![0f32; new_w * new_h];
        for (dst, taps) in data.chunks_exact_mut(new_w).zip(vertical) {
            for &(i, w) in taps {
                for (out, &v) in dst.iter_mut().zip(&tmp[i * new_w..(i + 1) * new_w]) {
                    *out += v * w;
                }
            }
        }
        Self {
            width: new_w,
            height: new_h,
            data,
        }
    }
}

fn luma_rgb<T: Copy>(raw: &[T], channels: usize, to_f32: impl Fn(T) -> f32) -> Vec<f32> {
    let [wr, wg, wb] = LUMA_WEIGHTS;
    raw.chunks_exact(channels)
        .map(|p| wr * to_f32(p[0]) + wg * to_f32(p[1]) + wb * to_f32(p[2]))
        .collect()
}

/// Each output index's input indices and weights, along one side.
type Taps = Vec<Vec<(usize, f32)>>;

/// Linear interpolation from `src` to `dst >= src` values: output `j` sits at input
/// `(j + 0.5) src / dst - 0.5`, clamped to the first and last values, between its two neighbours.
fn linear_weights(src: usize, dst: usize) -> Taps {
    let ratio = src as f64 / dst as f64;
    let last = src.saturating_sub(1);
    (0..dst)
        .map(|j| {
            let at = ((j as f64 + 0.5) * ratio - 0.5).clamp(0.0, last as f64);
            let i = at.floor() as usize;
            let frac = (at - i as f64) as f32;
            if frac > 0.0 && i < last {
                vec![(i, 1.0 - frac), (i + 1, frac)]
            } else {
                vec![(i, 1.0)]
            }
        })
        .collect()
}

/// For each of `dst` output samples, the input samples it covers and their weights (summing to 1).
fn area_weights(src: usize, dst: usize) -> Taps {
    let ratio = src as f64 / dst as f64;
    (0..dst)
        .map(|j| {
            let (lo, hi) = (j as f64 * ratio, ((j + 1) as f64 * ratio).min(src as f64));
            let mut taps = Vec::new();
            let mut i = lo.floor() as usize;
            while (i as f64) < hi && i < src {
                let overlap = (hi.min(i as f64 + 1.0) - lo.max(i as f64)).max(0.0);
                if overlap > 0.0 {
                    taps.push((i, (overlap / ratio) as f32));
                }
                i += 1;
            }
            taps
        })
        .collect()
}

/// Most pixels a photo may declare (100 Mpix: a 12,000 x 8,000 frame; at most
/// [`BYTES_PER_PIXEL`] a pixel, 1.2 GB, while it is decoded and described).
pub const MAX_PIXELS: u64 = 100_000_000;

/// A photo's working memory per pixel, at most: while it is decoded, its pixels as decoded (up
/// to 8 bytes: 16-bit RGBA) and its luminance (4 bytes); then the luminance and the HOG grid of
/// a dense description (about 7 bytes). Measured on 100-Mpix photos in `eval/photo_memory/`
/// (8-bit RGB: 7.1 bytes a pixel, a dense encode the same) and bounded in
/// `tests/cli/limits.rs`.
pub const BYTES_PER_PIXEL: u64 = 12;

/// Bytes a photo's file may hold beyond its pixels (metadata: EXIF, ICC profiles, thumbnails).
pub const FILE_SLACK: u64 = 64 << 20;

/// The largest file a photo of `pixels` pixels may be: every pixel uncompressed at 16-bit RGBA
/// (8 bytes) and [`FILE_SLACK`]. A larger file is skipped before it is read.
pub fn max_file_bytes(pixels: u64) -> u64 {
    pixels.saturating_mul(8).saturating_add(FILE_SLACK)
}

/// Why a photo was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// The file could not be opened or read.
    Unreadable(String),
    /// The folder walk could not use the entry (see [`Photo::unusable`]).
    Unusable(String),
    /// The file is empty.
    Empty,
    /// The decoder rejected the file (corrupt, truncated or unsupported).
    Corrupt(String),
    /// The image is smaller than one patch.
    TooSmall {
        /// Width after orientation and downscale.
        width: usize,
        /// Height after orientation and downscale.
        height: usize,
        /// Side of the patch it had to hold.
        patch: usize,
    },
    /// The header declares more pixels than a photo may have ([`MAX_PIXELS`]); refused before
    /// any pixel is decoded, so a small file cannot make the run allocate gigabytes.
    TooManyPixels {
        /// Declared width.
        width: u32,
        /// Declared height.
        height: u32,
        /// The limit it exceeds.
        limit: u64,
        /// The patch side that enlarges the photo ([`crate::features::FeatureParams::patch`]):
        /// then `limit` bounds the photo as enlarged, and the header is held to less.
        patch: Option<usize>,
    },
    /// The file is larger than any photo of its declared size (or of the pixel limit) can be.
    TooLargeFile {
        /// The file's length.
        bytes: u64,
        /// The most it may hold ([`max_file_bytes`]).
        limit: u64,
    },
    /// A pixel position would not fit the feature format's 16-bit row/column fields.
    TooLarge {
        /// Width after orientation and downscale.
        width: usize,
        /// Height after orientation and downscale.
        height: usize,
    },
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreadable(msg) => write!(f, "unreadable: {msg}"),
            Self::Unusable(msg) => write!(f, "{msg}"),
            Self::Empty => write!(f, "empty file"),
            Self::Corrupt(msg) => write!(f, "cannot decode: {msg}"),
            Self::TooSmall {
                width,
                height,
                patch,
            } => {
                write!(
                    f,
                    "too small: {width}x{height} cannot hold a {patch}x{patch} patch"
                )
            }
            Self::TooManyPixels {
                width,
                height,
                limit,
                patch: None,
            } => write!(
                f,
                "too many pixels: the header declares {width}x{height} ({:.0} Mpix), the limit is \
                 {} Mpix (--max-pixels)",
                f64::from(*width) * f64::from(*height) / 1e6,
                *limit as f64 / 1e6
            ),
            Self::TooManyPixels {
                width,
                height,
                limit,
                patch: Some(patch),
            } => {
                let zoom = crate::hog::PATCH_SIDE as f64 / *patch as f64;
                write!(
                    f,
                    "too many pixels: the header declares {width}x{height}, {:.2} Mpix once \
                     enlarged {zoom:.3}x for {patch}-px patches (--patch), past the limit of {} \
                     Mpix (--max-pixels)",
                    f64::from(*width) * f64::from(*height) * zoom * zoom / 1e6,
                    *limit as f64 / 1e6
                )
            }
            Self::TooLargeFile { bytes, limit } => write!(
                f,
                "file too large: {bytes} bytes, more than the {limit} a photo of its size may \
                 hold; not read"
            ),
            Self::TooLarge { width, height } => write!(
                f,
                "too large: {width}x{height} exceeds 65,536 pixels per side (use --max-side)"
            ),
        }
    }
}

/// The size of the photo at `path` as decoding gives it, EXIF orientation applied, read from its
/// header alone (no pixel decoded): the frame descriptors made elsewhere place keypoints in.
pub fn oriented_size(path: &Path) -> Result<(usize, usize), Skip> {
    let reader = image::ImageReader::open(path)
        .and_then(|r| r.with_guessed_format())
        .map_err(|e| Skip::Unreadable(e.to_string()))?;
    let mut decoder = reader.into_decoder().map_err(image_reason)?;
    let (width, height) = decoder.dimensions();
    use image::metadata::Orientation as O;
    let turned = matches!(
        decoder.orientation().unwrap_or(O::NoTransforms),
        O::Rotate90 | O::Rotate270 | O::Rotate90FlipH | O::Rotate270FlipH
    );
    let (width, height) = (width as usize, height as usize);
    Ok(if turned {
        (height, width)
    } else {
        (width, height)
    })
}

/// Decodes a photo to luminance, applying EXIF orientation and the optional downscale; a photo
/// whose header declares more than `max_pixels` pixels is skipped before decoding.
pub fn load_luminance(
    path: &Path,
    max_side: Option<usize>,
    max_pixels: u64,
) -> Result<Luminance, Skip> {
    // A decoder bug must not take the whole run down: treat a panic as an undecodable file.
    let decoded = std::panic::catch_unwind(|| decode_oriented(path, max_pixels))
        .map_err(|_| Skip::Corrupt("decoder panicked".into()))??;
    let lum = Luminance::from_image(&decoded);
    Ok(match max_side {
        Some(side) => lum.fit_within(side),
        None => lum,
    })
}

fn decode_oriented(path: &Path, max_pixels: u64) -> Result<DynamicImage, Skip> {
    let bytes = read_photo(path, max_pixels)?;
    let mut reader = ImageReader::new(io::Cursor::new(bytes.as_slice()))
        .with_guessed_format()
        .map_err(|e| Skip::Unreadable(io_reason(&e)))?;
    reader.limits(decoder_limits(max_pixels));
    if reader.format() == Some(image::ImageFormat::Tiff) {
        check_tiff(&bytes, max_pixels)?;
    }
    if reader.format() == Some(image::ImageFormat::Jpeg) {
        if jpeg_is_truncated(&bytes) {
            // Decoders fill a missing tail with gray instead of failing; such pixels are made up,
            // so the photo is skipped.
            return Err(Skip::Corrupt(
                "truncated file (JPEG without end-of-image marker)".into(),
            ));
        }
        if let Some(img) = decode_jpeg(&bytes, max_pixels)? {
            return Ok(img);
        }
    }
    let mut decoder = reader.into_decoder().map_err(image_reason)?;
    let (width, height) = decoder.dimensions();
    check_pixels(u64::from(width), u64::from(height), max_pixels)?;
    // A broken EXIF block is not a reason to lose the photo: fall back to no rotation.
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut img = DynamicImage::from_decoder(decoder).map_err(image_reason)?;
    img.apply_orientation(orientation);
    Ok(img)
}

/// The bytes of a photo's file, read only when they can be a photo within the pixel limit: a
/// regular file (not a FIFO or a device), no longer than [`max_file_bytes`] of the limit, and,
/// but for JPEG (whose header libjpeg reads, with its own messages, before it decodes), with a
/// header declaring a size within the limit that accounts for its length. Photos are read whole:
/// they are small next to their decoded pixels, and JPEG's truncation check needs the bytes.
fn read_photo(path: &Path, max_pixels: u64) -> Result<Vec<u8>, Skip> {
    use std::io::{Read, Seek};
    let unreadable = |e: io::Error| Skip::Unreadable(io_reason(&e));
    let file = crate::input::open(path).map_err(unreadable)?;
    let len = file.metadata().map_err(unreadable)?.len();
    if len == 0 {
        return Err(Skip::Empty);
    }
    let too_large = |limit| Skip::TooLargeFile { bytes: len, limit };
    if len > max_file_bytes(max_pixels) {
        return Err(too_large(max_file_bytes(max_pixels)));
    }
    // The header alone: its declared size, before the rest of the file is read.
    let mut input = io::BufReader::with_capacity(64 << 10, file);
    let mut reader = ImageReader::new(&mut input)
        .with_guessed_format()
        .map_err(unreadable)?;
    reader.limits(decoder_limits(max_pixels));
    // JPEG's header libjpeg reads; TIFF's is checked from the bytes before any decoder reads it.
    let later = [image::ImageFormat::Jpeg, image::ImageFormat::Tiff];
    if !reader.format().is_some_and(|f| later.contains(&f)) {
        let (width, height) = reader.into_dimensions().map_err(image_reason)?;
        let pixels = u64::from(width) * u64::from(height);
        check_pixels(u64::from(width), u64::from(height), max_pixels)?;
        if len > max_file_bytes(pixels) {
            return Err(too_large(max_file_bytes(pixels)));
        }
    }
    let mut file = input.into_inner();
    file.rewind().map_err(unreadable)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(len).read_to_end(&mut bytes).map_err(unreadable)?;
    Ok(bytes)
}

/// Refuses a TIFF whose first directory declares a value larger than the file, or one whose
/// values the `tiff` crate would hold in more than the decoder's allocation limit (it reads a
/// directory's values as it opens the file, about 32 bytes a value, before any limit applies: a
/// tag of eight million values cost 266 MB). Classic TIFF and BigTIFF.
fn check_tiff(bytes: &[u8], max_pixels: u64) -> Result<(), Skip> {
    /// Bytes the `tiff` crate holds for one value read from a directory.
    const VALUE_BYTES: u64 = 32;
    let corrupt = |m: String| Err(Skip::Corrupt(m));
    let big = match bytes.get(..2) {
        Some(b"II") => false,
        Some(b"MM") => true,
        _ => return corrupt("not a TIFF byte order".into()),
    };
    let uint = |at: usize, width: usize| -> Option<u64> {
        let b = bytes.get(at..at.checked_add(width)?)?;
        Some(b.iter().enumerate().fold(0u64, |v, (i, &x)| {
            let shift = 8 * if big { width - 1 - i } else { i };
            v | (u64::from(x) << shift)
        }))
    };
    // Classic: 16-bit entry counts, 12-byte entries of 32-bit counts; BigTIFF: 64-bit counts,
    // 20-byte entries.
    let (offset, count_width, entry_len, entries_width) = match uint(2, 2) {
        Some(42) => (uint(4, 4), 4, 12, 2),
        Some(43) => (uint(8, 8), 8, 20, 8),
        _ => return Ok(()), // not TIFF after all: the decoder decides
    };
    let Some(ifd) = offset.and_then(|o| usize::try_from(o).ok()) else {
        return corrupt("truncated TIFF header".into());
    };
    let Some(entries) = uint(ifd, entries_width) else {
        return corrupt("the first TIFF directory lies outside the file".into());
    };
    let first = ifd + entries_width;
    if entries.saturating_mul(entry_len as u64) > bytes.len() as u64 {
        return corrupt(format!(
            "the first TIFF directory declares {entries} entries, more than the file holds"
        ));
    }
    let limit = max_pixels.saturating_mul(8).saturating_add(16 << 20);
    for e in 0..entries as usize {
        let at = first + entry_len * e;
        let (Some(tag), Some(kind), Some(count)) =
            (uint(at, 2), uint(at + 2, 2), uint(at + 4, count_width))
        else {
            return corrupt("the first TIFF directory is cut short".into());
        };
        let size: u64 = match kind {
            1 | 2 | 6 | 7 => 1,
            3 | 8 => 2,
            4 | 9 | 11 | 13 => 4,
            5 | 10 | 12 | 16..=18 => 8,
            _ => 1, // an unknown type: the decoder skips or refuses it
        };
        let declared = count.saturating_mul(size);
        if declared > bytes.len() as u64 || count.saturating_mul(VALUE_BYTES) > limit {
            return corrupt(format!(
                "TIFF tag {tag} declares {count} values ({declared} bytes), more than the file's \
                 {} bytes or the decoder's memory allow",
                bytes.len()
            ));
        }
    }
    Ok(())
}

/// What the `image` crate's decoders may allocate for a photo of at most `max_pixels` pixels:
/// its pixels at 8 bytes each (16-bit RGBA) and 16 MiB of tables, whatever a header's fields
/// claim (a TIFF tag declaring eight million values, say).
fn decoder_limits(max_pixels: u64) -> image::Limits {
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(max_pixels.saturating_mul(8).saturating_add(16 << 20));
    limits
}

fn check_pixels(width: u64, height: u64, limit: u64) -> Result<(), Skip> {
    if width.saturating_mul(height) > limit {
        return Err(Skip::TooManyPixels {
            width: u32::try_from(width).unwrap_or(u32::MAX),
            height: u32::try_from(height).unwrap_or(u32::MAX),
            limit,
            patch: None,
        });
    }
    Ok(())
}

/// Names the decoders whose pixels a photo becomes; results cached under a key that includes it
/// are not reused once decoding changes (JPEG moved from the `image` crate's decoder to
/// libjpeg-turbo's).
pub const DECODING: &str =
    "jpeg: libjpeg-turbo (mozjpeg 4, islow, fancy upsampling); other: image 0.25";

/// A JPEG with more scans than this is refused before decoding: each progressive scan passes over
/// the whole coefficient buffer, so a small file of thousands of tiny scans would take minutes.
/// Real progressive photos have about ten.
pub const MAX_JPEG_SCANS: usize = 1000;

/// Decodes a JPEG with libjpeg-turbo's decoder, so that its pixels equal those scikit-image,
/// OpenCV, Pillow and MATLAB read (the `image` crate's own decoder differs by up to 3 levels,
/// enough to move HOG values by 0.15). The decoder is the one of mozjpeg, a fork of libjpeg-turbo
/// that leaves decompression unchanged, built from source without assembly so that the build
/// needs only a C compiler; `eval/jpeg_decode` checks its pixels against Pillow's and OpenCV's and
/// times it against the `image` crate's decoder.
///
/// Returns `Ok(None)` for four-channel (CMYK, YCCK) files, which libjpeg does not convert to
/// RGB; those go through the `image` crate's decoder.
fn decode_jpeg(bytes: &[u8], max_pixels: u64) -> Result<Option<DynamicImage>, Skip> {
    let scans = count_markers(bytes, 0xDA);
    if scans > MAX_JPEG_SCANS {
        return Err(Skip::Corrupt(format!(
            "{scans} JPEG scans, more than the {MAX_JPEG_SCANS} a photo may have"
        )));
    }
    // libjpeg reports fatal errors by unwinding (without the panic hook) with its message.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        libjpeg_decode(bytes, max_pixels)
    }))
    .unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .map(|m| m.trim_start_matches("libjpeg fatal error: ").to_string())
            .unwrap_or_else(|| "the JPEG decoder failed".into());
        Err(Skip::Corrupt(message))
    })
}

fn libjpeg_decode(bytes: &[u8], max_pixels: u64) -> Result<Option<DynamicImage>, Skip> {
    use image::metadata::Orientation;
    use mozjpeg::{ColorSpace, Marker};

    let exif = [Marker::APP(1)];
    let jpeg = mozjpeg::Decompress::with_markers(&exif)
        .from_mem(bytes)
        .map_err(|e| Skip::Corrupt(e.to_string()))?;
    let (width, height) = jpeg.size();
    check_pixels(width as u64, height as u64, max_pixels)?;
    // The first EXIF block names the orientation; a broken one means none, as for other formats.
    let orientation = jpeg
        .markers()
        .find_map(|m| m.data.strip_prefix(b"Exif\0\0"))
        .and_then(Orientation::from_exif_chunk)
        .unwrap_or(Orientation::NoTransforms);
    let corrupt = |e: io::Error| Skip::Corrupt(e.to_string());
    let (width, height) = (
        u32::try_from(width).map_err(|_| Skip::TooLarge { width, height })?,
        u32::try_from(height).map_err(|_| Skip::TooLarge { width, height })?,
    );
    let mut img = match jpeg.color_space() {
        ColorSpace::JCS_CMYK | ColorSpace::JCS_YCCK => return Ok(None),
        ColorSpace::JCS_GRAYSCALE => {
            let mut started = jpeg.grayscale().map_err(corrupt)?;
            let pixels: Vec<u8> = started.read_scanlines().map_err(corrupt)?;
            started.finish().map_err(corrupt)?;
            image::GrayImage::from_raw(width, height, pixels).map(DynamicImage::ImageLuma8)
        }
        _ => {
            let mut started = jpeg.rgb().map_err(corrupt)?;
            let pixels: Vec<u8> = started.read_scanlines().map_err(corrupt)?;
            started.finish().map_err(corrupt)?;
            image::RgbImage::from_raw(width, height, pixels).map(DynamicImage::ImageRgb8)
        }
    }
    .ok_or_else(|| Skip::Corrupt("the JPEG decoder returned fewer rows than declared".into()))?;
    img.apply_orientation(orientation);
    Ok(Some(img))
}

/// How many times the marker `FF code` occurs in a JPEG stream (an upper bound on how many of
/// its segments have that code: entropy-coded data never holds `FF` followed by a marker code
/// other than a restart, but embedded thumbnails may add a few).
fn count_markers(bytes: &[u8], code: u8) -> usize {
    bytes.windows(2).filter(|w| w == &[0xFF, code]).count()
}

/// Whether a JPEG stream lacks the end-of-image marker (`FF D9`) after its first scan.
///
/// Entropy-coded data never contains `FF D9` (a data `FF` is followed by `00` or a restart
/// marker), and an embedded EXIF thumbnail's marker comes before the main image's first
/// start-of-scan (`FF DA`), so a missing marker after that point means the file was cut short.
fn jpeg_is_truncated(bytes: &[u8]) -> bool {
    let Some(sos) = bytes.windows(2).position(|w| w == [0xFF, 0xDA]) else {
        return true;
    };
    !bytes[sos..].windows(2).any(|w| w == [0xFF, 0xD9])
}

fn io_reason(e: &io::Error) -> String {
    e.to_string()
}

fn image_reason(e: image::ImageError) -> Skip {
    match e {
        image::ImageError::IoError(io) if io.kind() == io::ErrorKind::UnexpectedEof => {
            Skip::Corrupt("truncated file".into())
        }
        image::ImageError::IoError(io) => Skip::Unreadable(io.to_string()),
        other => Skip::Corrupt(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_for_the_photo_folder_is_named_a_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("rand.npy");
        std::fs::write(&file, b"x").expect("file");
        let err = Collection::open(&file, None).expect_err("a file");
        assert!(matches!(err, CollectionError::NotAFolder(_)), "{err}");
        assert!(
            err.to_string()
                .ends_with("rand.npy is a file, not a folder of photos"),
            "{err}"
        );
        let err = Collection::open(&dir.path().join("nope"), None).expect_err("missing");
        assert!(matches!(err, CollectionError::MissingFolder(_)), "{err}");
    }

    #[test]
    fn a_folder_without_photos_is_named_before_its_labels() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("notes.txt"), b"x").expect("file");
        let err = Collection::check_folder(dir.path()).expect_err("no photos");
        assert!(matches!(err, CollectionError::NoPhotos(_)), "{err}");
        assert!(err.to_string().starts_with("no photos in "), "{err}");
        let err = Collection::open(dir.path(), None).expect_err("no photos");
        assert!(matches!(err, CollectionError::NoPhotos(_)), "{err}");
        let labels = dir.path().join("labels.csv");
        std::fs::write(&labels, "path,kind\n").expect("labels");
        let err = Collection::open(dir.path(), Some(&labels)).expect_err("none listed");
        assert!(matches!(err, CollectionError::NoneListed(_)), "{err}");
        std::fs::write(dir.path().join("a.jpg"), b"not a jpeg").expect("photo");
        assert!(Collection::check_folder(dir.path()).is_ok());
        assert_eq!(
            Collection::open(dir.path(), None)
                .map(|c| c.photos().len())
                .ok(),
            Some(1)
        );
    }

    #[test]
    fn jpeg_truncation_is_seen_after_the_first_scan_only() {
        // SOI, APP1 holding a thumbnail's EOI, SOS, data, [EOI]
        let head = [
            0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x04, 0xFF, 0xD9, 0xFF, 0xDA, 0x12, 0xFF, 0x00,
        ];
        assert!(jpeg_is_truncated(&head));
        let mut whole = head.to_vec();
        whole.extend_from_slice(&[0xFF, 0xD9]);
        assert!(!jpeg_is_truncated(&whole));
        assert!(jpeg_is_truncated(&[0xFF, 0xD8]));
    }

    /// A PNG whose header declares `width` x `height` 8-bit gray pixels, followed by a few
    /// bytes of image data (a decompression bomb's shape: tiny file, huge canvas).
    fn png_declaring(width: u32, height: u32) -> Vec<u8> {
        fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
            out.extend_from_slice(&(data.len() as u32).to_be_bytes());
            let mut crc = crc32fast::Hasher::new();
            crc.update(kind);
            crc.update(data);
            out.extend_from_slice(kind);
            out.extend_from_slice(data);
            out.extend_from_slice(&crc.finalize().to_be_bytes());
        }
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&width.to_be_bytes());
        ihdr.extend_from_slice(&height.to_be_bytes());
        ihdr.extend_from_slice(&[8, 0, 0, 0, 0]); // 8-bit gray, deflate, no interlace
        chunk(&mut png, b"IHDR", &ihdr);
        chunk(
            &mut png,
            b"IDAT",
            &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01],
        );
        chunk(&mut png, b"IEND", &[]);
        png
    }

    #[test]
    fn a_header_declaring_too_many_pixels_is_skipped_before_decoding() {
        let dir = tempfile::tempdir().expect("tmp");
        let bomb = dir.path().join("bomb.png");
        std::fs::write(&bomb, png_declaring(60_000, 60_000)).expect("write");
        let skip = load_luminance(&bomb, Some(1000), MAX_PIXELS).expect_err("skipped");
        assert_eq!(
            skip,
            Skip::TooManyPixels {
                width: 60_000,
                height: 60_000,
                limit: MAX_PIXELS,
                patch: None,
            }
        );
        assert!(skip.to_string().contains("3600 Mpix"), "{skip}");
        // At the limit the header passes and decoding decides (here: too little data).
        let edge = dir.path().join("edge.png");
        std::fs::write(&edge, png_declaring(10_000, 10_000)).expect("write");
        let skip = load_luminance(&edge, None, MAX_PIXELS).expect_err("corrupt");
        assert!(matches!(skip, Skip::Corrupt(_)), "{skip}");
        // A lower limit is the caller's to set.
        let skip = load_luminance(&edge, None, 50_000_000).expect_err("over the limit");
        assert!(skip.to_string().contains("the limit is 50 Mpix"), "{skip}");
    }

    #[test]
    fn a_tiff_tag_declaring_more_than_the_file_holds_is_refused_before_decoding() {
        // Little-endian header, then a directory of one entry: Compression (259), SHORT, with
        // eight million values (the tiff crate would read them all as it opens the file).
        let mut tiff = b"II*\0\x08\0\0\0".to_vec();
        tiff.extend_from_slice(&1u16.to_le_bytes());
        tiff.extend_from_slice(&259u16.to_le_bytes());
        tiff.extend_from_slice(&3u16.to_le_bytes());
        tiff.extend_from_slice(&8_323_073u32.to_le_bytes());
        tiff.extend_from_slice(&[0; 8]);
        let err = check_tiff(&tiff, MAX_PIXELS).expect_err("refused");
        assert!(
            err.to_string()
                .contains("TIFF tag 259 declares 8323073 values"),
            "{err}"
        );
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("t.tiff");
        std::fs::write(&path, &tiff).expect("write");
        let skip = load_luminance(&path, None, MAX_PIXELS).expect_err("skipped");
        assert!(
            skip.to_string().contains("declares 8323073 values"),
            "{skip}"
        );
        // BigTIFF: 64-bit counts and offsets, 20-byte entries.
        let mut big = b"II+\0\x08\0\0\0".to_vec();
        big.extend_from_slice(&16u64.to_le_bytes());
        big.extend_from_slice(&1u64.to_le_bytes());
        big.extend_from_slice(&259u16.to_le_bytes());
        big.extend_from_slice(&3u16.to_le_bytes());
        big.extend_from_slice(&(1u64 << 40).to_le_bytes());
        big.extend_from_slice(&[0; 8]);
        let err = check_tiff(&big, MAX_PIXELS).expect_err("refused");
        assert!(
            err.to_string()
                .contains("TIFF tag 259 declares 1099511627776"),
            "{err}"
        );
        // Within the file but past the decoder's memory: a million-byte tag at a 1-pixel limit
        // (16 MiB of tables allowed; 32 MB of values).
        let mut wide = b"II*\0\x08\0\0\0".to_vec();
        wide.extend_from_slice(&1u16.to_le_bytes());
        wide.extend_from_slice(&270u16.to_le_bytes());
        wide.extend_from_slice(&2u16.to_le_bytes());
        wide.extend_from_slice(&1_000_000u32.to_le_bytes());
        wide.extend_from_slice(&[0; 4]);
        wide.resize(1_100_000, 0);
        assert!(check_tiff(&wide, 1).is_err());
        assert!(check_tiff(&wide, MAX_PIXELS).is_ok());
    }

    #[test]
    fn files_larger_than_a_photo_can_be_are_skipped_unread() {
        let dir = tempfile::tempdir().expect("tmp");
        // 3 GB of nothing (sparse): more than any photo of the pixel limit, never read.
        let huge = dir.path().join("huge.png");
        std::fs::File::create(&huge)
            .and_then(|f| f.set_len(3 << 30))
            .expect("sparse");
        let skip = load_luminance(&huge, None, MAX_PIXELS).expect_err("too large");
        let limit = max_file_bytes(MAX_PIXELS);
        assert_eq!(
            skip,
            Skip::TooLargeFile {
                bytes: 3 << 30,
                limit
            }
        );
        assert!(skip.to_string().contains("not read"), "{skip}");
        // A 100x100 header followed by 100 MB: more than such a photo can hold.
        let padded = dir.path().join("padded.png");
        std::fs::write(&padded, png_declaring(100, 100)).expect("write");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&padded)
            .and_then(|f| f.set_len(100 << 20))
            .expect("pad");
        let skip = load_luminance(&padded, None, MAX_PIXELS).expect_err("too large");
        assert_eq!(
            skip,
            Skip::TooLargeFile {
                bytes: 100 << 20,
                limit: max_file_bytes(100 * 100)
            }
        );
        // A FIFO named like a photo: skipped at once, not waited on.
        let fifo = dir.path().join("pipe.jpg");
        let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("c path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let skip = load_luminance(&fifo, None, MAX_PIXELS).expect_err("fifo");
        assert!(skip.to_string().contains("is a FIFO"), "{skip}");
    }

    /// A baseline gray JPEG of `width` x `height` (encoded by the `image` crate).
    fn gray_jpeg(width: u32, height: u32) -> Vec<u8> {
        let pixels: Vec<u8> = (0..width * height).map(|i| (i * 7 % 256) as u8).collect();
        let mut out = Vec::new();
        image::codecs::jpeg::JpegEncoder::new(&mut out)
            .encode(&pixels, width, height, image::ExtendedColorType::L8)
            .expect("encode");
        out
    }

    /// Where the start-of-frame segment's precision byte is.
    fn sof_at(jpeg: &[u8]) -> usize {
        jpeg.windows(2)
            .position(|w| w == [0xFF, 0xC0])
            .expect("SOF0")
            + 4
    }

    /// Why a photo file of these bytes is skipped.
    fn skip_of(name: &str, bytes: &[u8]) -> Skip {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("write");
        load_luminance(&path, None, MAX_PIXELS).expect_err("skipped")
    }

    #[test]
    fn a_jpeg_declaring_too_many_pixels_is_skipped_before_decoding() {
        let mut jpeg = gray_jpeg(16, 16);
        let sof = sof_at(&jpeg);
        jpeg[sof + 1..sof + 5].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]); // 60,000 x 60,000
        assert_eq!(
            skip_of("bomb.jpg", &jpeg),
            Skip::TooManyPixels {
                width: 60_000,
                height: 60_000,
                limit: MAX_PIXELS,
                patch: None,
            }
        );
    }

    #[test]
    fn libjpeg_errors_are_skips_with_its_message() {
        let mut jpeg = gray_jpeg(16, 16);
        let sof = sof_at(&jpeg);
        jpeg[sof] = 12; // 12-bit samples: not an 8-bit decoder's
        assert_eq!(
            skip_of("twelve.jpg", &jpeg).to_string(),
            "cannot decode: Unsupported JPEG data precision 12"
        );
    }

    #[test]
    fn a_jpeg_of_too_many_scans_is_refused_before_decoding() {
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x02];
        for _ in 0..=MAX_JPEG_SCANS {
            jpeg.extend_from_slice(&[0xFF, 0xDA, 0x00, 0x02]);
        }
        jpeg.extend_from_slice(&[0xFF, 0xD9]);
        assert_eq!(
            skip_of("scans.jpg", &jpeg).to_string(),
            "cannot decode: 1001 JPEG scans, more than the 1000 a photo may have"
        );
    }

    #[test]
    fn cmyk_jpegs_go_through_the_image_crate() {
        // libjpeg keeps CMYK as CMYK; the fallback decoder turns it into RGB. Paper white
        // (no ink) must come out white.
        let mut c = mozjpeg::Compress::new(mozjpeg::ColorSpace::JCS_CMYK);
        c.set_size(16, 16);
        c.set_quality(95.0);
        let mut started = c.start_compress(Vec::new()).expect("start");
        // Adobe CMYK JPEGs store inverted ink: 255 means none.
        started
            .write_scanlines(&[255u8; 16 * 16 * 4])
            .expect("write");
        let jpeg = started.finish().expect("finish");
        assert!(decode_jpeg(&jpeg, MAX_PIXELS).expect("header").is_none());
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("cmyk.jpg");
        std::fs::write(&path, jpeg).expect("write");
        let lum = load_luminance(&path, None, MAX_PIXELS).expect("decodes");
        assert_eq!((lum.width, lum.height), (16, 16));
        assert!(lum.data.iter().all(|&v| v > 250.0), "{:?}", &lum.data[..4]);
    }

    #[test]
    fn luminance_weights_on_rgb8() {
        let img = image::RgbImage::from_raw(2, 1, vec![255, 0, 0, 10, 20, 30]).expect("buffer");
        let lum = Luminance::from_image(&DynamicImage::ImageRgb8(img));
        assert_eq!(lum.width, 2);
        assert!((lum.data[0] - 0.2125 * 255.0).abs() < 1e-4);
        assert!((lum.data[1] - (0.2125 * 10.0 + 0.7154 * 20.0 + 0.0721 * 30.0)).abs() < 1e-4);
    }

    #[test]
    fn sixteen_bit_gray_maps_to_0_255() {
        let img = image::ImageBuffer::<image::Luma<u16>, _>::from_raw(2, 1, vec![65535u16, 257])
            .expect("buffer");
        let lum = Luminance::from_image(&DynamicImage::ImageLuma16(img));
        assert_eq!(lum.data, vec![255.0, 1.0]);
    }

    #[test]
    fn area_downscale_averages_blocks() {
        // 4x2 -> 2x1: each output pixel is the mean of a 2x2 block.
        let lum = Luminance {
            width: 4,
            height: 2,
            data: vec![0., 2., 4., 6., 2., 4., 6., 8.],
        };
        let small = lum.fit_within(2);
        assert_eq!((small.width, small.height), (2, 1));
        assert!((small.data[0] - 2.0).abs() < 1e-6 && (small.data[1] - 6.0).abs() < 1e-6);
    }

    #[test]
    fn area_downscale_keeps_the_mean_for_fractional_ratios() {
        let data: Vec<f32> = (0..7 * 5).map(|i| (i % 13) as f32).collect();
        let mean = data.iter().sum::<f32>() / data.len() as f32;
        let small = Luminance {
            width: 7,
            height: 5,
            data,
        }
        .fit_within(3);
        assert_eq!((small.width, small.height), (3, 2));
        let small_mean = small.data.iter().sum::<f32>() / small.data.len() as f32;
        assert!((small_mean - mean).abs() < 1e-4, "{small_mean} vs {mean}");
    }

    #[test]
    fn weights_cover_each_output_with_unit_mass() {
        for (src, dst) in [(10, 3), (640, 500), (7, 7), (1000, 1)] {
            for taps in area_weights(src, dst) {
                let mass: f32 = taps.iter().map(|&(_, w)| w).sum();
                assert!((mass - 1.0).abs() < 1e-5, "{src}->{dst}: {mass}");
            }
        }
        for (src, dst) in [(3, 10), (256, 427), (1, 5), (7, 7)] {
            for taps in linear_weights(src, dst) {
                let mass: f32 = taps.iter().map(|&(_, w)| w).sum();
                assert!((mass - 1.0).abs() < 1e-6, "{src}->{dst}: {mass}");
                assert!(taps.iter().all(|&(i, _)| i < src), "{src}->{dst}: {taps:?}");
            }
        }
    }

    #[test]
    fn zooming_in_interpolates_between_pixel_centres_as_opencv_does() {
        // cv2.resize([[0, 10], [20, 30]], (4, 4), interpolation=cv2.INTER_LINEAR): each row
        // 0, 2.5, 7.5, 10 (edges repeated), and the rows likewise.
        let lum = Luminance {
            width: 2,
            height: 2,
            data: vec![0.0, 10.0, 20.0, 30.0],
        };
        let big = lum.zoomed(2.0);
        assert_eq!((big.width, big.height), (4, 4));
        let want = [
            [0.0, 2.5, 7.5, 10.0],
            [5.0, 7.5, 12.5, 15.0],
            [15.0, 17.5, 22.5, 25.0],
            [20.0, 22.5, 27.5, 30.0],
        ];
        for (got, want) in big.data.iter().zip(want.iter().flatten()) {
            assert!((got - want).abs() < 1e-5, "{:?}", big.data);
        }
        // A flat photo stays flat at any factor; 1 is a copy; below 1 is the area downscale.
        let flat = Luminance {
            width: 5,
            height: 3,
            data: vec![7.0; 15],
        };
        let zoomed = flat.zoomed(40.0 / 24.0);
        assert_eq!((zoomed.width, zoomed.height), (8, 5));
        assert!(zoomed.data.iter().all(|&v| (v - 7.0).abs() < 1e-5));
        assert_eq!(flat.zoomed(1.0), flat);
        let ramp = Luminance {
            width: 8,
            height: 4,
            data: (0..32).map(|v| v as f32).collect(),
        };
        assert_eq!(ramp.zoomed(0.5), ramp.scaled_within(4));
        // At the configs' factor, 5/3, against cv2.resize of the same float32 image to 5 x 3.
        let odd = Luminance {
            width: 3,
            height: 2,
            data: vec![0.0, 30.0, 90.0, 60.0, 0.0, 30.0],
        };
        let big = odd.zoomed(5.0 / 3.0);
        assert_eq!((big.width, big.height), (5, 3));
        let cv2 = [
            0.0, 12.0, 30.0, 66.0, 90.0, 30.0, 24.0, 15.0, 42.0, 60.0, 60.0, 36.0, 0.0, 18.0, 30.0,
        ];
        for (got, want) in big.data.iter().zip(cv2) {
            assert!((got - want).abs() < 1e-4, "{:?}", big.data);
        }
    }
}
