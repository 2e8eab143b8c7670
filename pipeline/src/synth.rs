//! A deterministic generator of small synthetic photo sets, for tests and the quickstart.
//!
//! Four scene kinds cross the two attributes of the paper, so that both are learnable from
//! gradient statistics alone:
//!
//! | kind | urbanicity | elevation | look |
//! |---|---|---|---|
//! | `city` | urban | flat | building blocks with window grids on a flat street |
//! | `hilltown` | urban | hilly | small houses on a steep, wavy hillside |
//! | `mountain` | rural | hilly | jagged ridges with snow caps |
//! | `field` | rural | flat | low horizon, textured crops, a few round trees |
//!
//! Every photo depends only on `(seed, kind, index)`; sizes vary between 160 and 320 pixels per
//! side, JPEG and PNG alternate, and each has mild sensor noise. The set is written with a labels
//! CSV (`path,kind,urbanicity,elevation`).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use image::{ImageFormat, Rgb, RgbImage};
use imageproc::drawing::{draw_filled_circle_mut, draw_filled_rect_mut, draw_polygon_mut};
use imageproc::point::Point;
use imageproc::rect::Rect;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

use crate::atomic;

/// Errors of the generator.
#[derive(Debug, Error)]
pub enum SynthError {
    /// A file could not be written.
    #[error("cannot write {path}")]
    Io {
        /// File at fault.
        path: PathBuf,
        /// Underlying error.
        source: io::Error,
    },
    /// An image could not be encoded.
    #[error("cannot encode {path}")]
    Encode {
        /// File at fault.
        path: PathBuf,
        /// Underlying error.
        source: image::ImageError,
    },
}

/// A scene kind with its attribute labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SceneKind {
    /// Folder and class name.
    pub name: &'static str,
    /// `urban` or `rural`.
    pub urbanicity: &'static str,
    /// `hilly` or `flat`.
    pub elevation: &'static str,
}

/// The kinds generated, in order.
pub const KINDS: [SceneKind; 4] = [
    SceneKind {
        name: "city",
        urbanicity: "urban",
        elevation: "flat",
    },
    SceneKind {
        name: "hilltown",
        urbanicity: "urban",
        elevation: "hilly",
    },
    SceneKind {
        name: "mountain",
        urbanicity: "rural",
        elevation: "hilly",
    },
    SceneKind {
        name: "field",
        urbanicity: "rural",
        elevation: "flat",
    },
];

/// What was generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthSummary {
    /// Photos written.
    pub photos: usize,
    /// The labels CSV.
    pub labels: PathBuf,
}

/// Photos per kind a synthetic set holds at most (the labels are built in memory first).
pub const MAX_PER_KIND: usize = 100_000;

/// Writes `per_kind` photos of each kind below `out` (created if needed) and `out/labels.csv`.
pub fn generate_photos(out: &Path, per_kind: usize, seed: u64) -> Result<SynthSummary, SynthError> {
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SynthError::Io { path, source }
    };
    for (kind_idx, kind) in KINDS.iter().enumerate() {
        let dir = out.join(kind.name);
        crate::output::create_dir_all(&dir).map_err(io_err(&dir))?;
        for idx in 0..per_kind {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream((kind_idx * 1_000_003 + idx) as u64);
            let img = render(kind.name, &mut rng);
            let (ext, format) = if idx % 2 == 0 {
                ("jpg", ImageFormat::Jpeg)
            } else {
                ("png", ImageFormat::Png)
            };
            let rel = format!("{}/{}_{idx:03}.{ext}", kind.name, kind.name);
            let path = out.join(&rel);
            let tmp = atomic::temp_beside(&path).map_err(io_err(&path))?;
            let mut writer = BufWriter::new(tmp);
            img.write_to(&mut writer, format)
                .map_err(|source| SynthError::Encode {
                    path: path.clone(),
                    source,
                })?;
            let tmp = writer.into_inner().map_err(|e| SynthError::Io {
                path: path.clone(),
                source: e.into_error(),
            })?;
            atomic::persist(tmp, &path).map_err(io_err(&path))?;
        }
    }
    let labels = out.join("labels.csv");
    let text = labels_csv(per_kind);
    let mut tmp = atomic::temp_beside(&labels).map_err(io_err(&labels))?;
    tmp.write_all(text.as_bytes()).map_err(io_err(&labels))?;
    atomic::persist(tmp, &labels).map_err(io_err(&labels))?;
    Ok(SynthSummary {
        photos: KINDS.len() * per_kind,
        labels,
    })
}

/// The labels CSV of the synthetic set of `per_kind` photos per kind (what
/// [`generate_photos`] writes beside the photos), known without drawing them.
pub fn labels_csv(per_kind: usize) -> String {
    use std::fmt::Write as _;
    let mut text = String::from("path,kind,urbanicity,elevation\n");
    for kind in KINDS {
        for idx in 0..per_kind {
            let ext = if idx % 2 == 0 { "jpg" } else { "png" };
            let _ = writeln!(
                text,
                "{}/{}_{idx:03}.{ext},{},{},{}",
                kind.name, kind.name, kind.name, kind.urbanicity, kind.elevation
            );
        }
    }
    text
}

fn jitter(rng: &mut ChaCha8Rng, base: [u8; 3], amount: i32) -> Rgb<u8> {
    Rgb(base.map(|c| (i32::from(c) + rng.random_range(-amount..=amount)).clamp(0, 255) as u8))
}

fn sky(img: &mut RgbImage, horizon: u32, rng: &mut ChaCha8Rng) {
    let top: [u8; 3] = [
        rng.random_range(60..110),
        rng.random_range(110..160),
        rng.random_range(190..240),
    ];
    for y in 0..horizon.min(img.height()) {
        let t = y as f32 / horizon.max(1) as f32;
        let color = top.map(|c| (f32::from(c) + (235.0 - f32::from(c)) * t * 0.8) as u8);
        for x in 0..img.width() {
            img.put_pixel(x, y, Rgb(color));
        }
    }
}

fn ground(img: &mut RgbImage, from: u32, color: Rgb<u8>) {
    let (w, h) = img.dimensions();
    if from < h {
        draw_filled_rect_mut(img, Rect::at(0, from as i32).of_size(w, h - from), color);
    }
}

fn building(img: &mut RgbImage, x: i32, base: i32, w: u32, h: u32, rng: &mut ChaCha8Rng) {
    let tone = rng.random_range(70..170);
    let wall = jitter(rng, [tone, tone, tone + 10], 12);
    draw_filled_rect_mut(img, Rect::at(x, base - h as i32).of_size(w, h), wall);
    let window = jitter(rng, [225, 220, 150], 20);
    let (step_x, step_y) = (rng.random_range(6..10), rng.random_range(7..12));
    let mut wy = base - h as i32 + 4;
    while wy + 5 < base - 2 {
        let mut wx = x + 3;
        while wx + 4 < x + w as i32 - 2 {
            draw_filled_rect_mut(img, Rect::at(wx, wy).of_size(3, 4), window);
            wx += step_x;
        }
        wy += step_y;
    }
}

/// A ridge line across the image: `amplitude`-high waves (or spikes) around `level`.
fn ridge(
    w: u32,
    level: f32,
    amplitude: f32,
    jagged: bool,
    rng: &mut ChaCha8Rng,
) -> Vec<Point<i32>> {
    let n = if jagged { rng.random_range(5..10) } else { 40 };
    let phase: f32 = rng.random_range(0.0..std::f32::consts::TAU);
    let freq: f32 = rng.random_range(1.0..2.5);
    (0..=n)
        .map(|i| {
            let x = (i as f32 / n as f32 * w as f32) as i32;
            let y = if jagged {
                level + amplitude * rng.random_range(-1.0f32..1.0)
            } else {
                level
                    + amplitude * (phase + freq * std::f32::consts::TAU * i as f32 / n as f32).sin()
            };
            Point::new(x, y as i32)
        })
        .collect()
}

/// Fills the region below a ridge line.
fn fill_below(img: &mut RgbImage, line: &[Point<i32>], color: Rgb<u8>) {
    let (w, h) = (img.width() as i32, img.height() as i32);
    let mut poly = line.to_vec();
    poly.push(Point::new(w, h));
    poly.push(Point::new(0, h));
    poly.dedup();
    if poly.first() == poly.last() {
        poly.pop();
    }
    draw_polygon_mut(img, &poly, color);
}

fn render(kind: &str, rng: &mut ChaCha8Rng) -> RgbImage {
    let (w, h) = (
        rng.random_range(200..=320u32),
        rng.random_range(160..=240u32),
    );
    let mut img = RgbImage::new(w, h);
    let hf = h as f32;
    match kind {
        "city" => {
            let street = (hf * rng.random_range(0.78..0.86)) as u32;
            sky(&mut img, street, rng);
            let mut x = -(rng.random_range(0..10));
            while x < w as i32 {
                let bw = rng.random_range(24..60);
                let bh = rng.random_range((hf * 0.3) as u32..(hf * 0.7) as u32);
                building(&mut img, x, street as i32, bw, bh, rng);
                x += bw as i32 + rng.random_range(0..6);
            }
            ground(&mut img, street, jitter(rng, [60, 60, 64], 8));
            let mut lx = 4;
            while lx < w as i32 {
                draw_filled_rect_mut(
                    &mut img,
                    Rect::at(lx, (street + (h - street) / 2) as i32).of_size(12, 2),
                    Rgb([230, 230, 230]),
                );
                lx += 24;
            }
        }
        "hilltown" => {
            sky(&mut img, h, rng);
            let line = ridge(w, hf * 0.45, hf * 0.25, false, rng);
            fill_below(&mut img, &line, jitter(rng, [90, 120, 60], 15));
            for pair in line.windows(2).step_by(3) {
                let x = pair[0].x;
                let bw = rng.random_range(10..20);
                let bh = rng.random_range(10..26);
                building(&mut img, x, pair[0].y.max(pair[1].y) + 4, bw, bh, rng);
                // Red roof.
                let roof = [
                    Point::new(x - 2, pair[0].y.max(pair[1].y) + 4 - bh as i32),
                    Point::new(x + bw as i32 + 2, pair[0].y.max(pair[1].y) + 4 - bh as i32),
                    Point::new(x + bw as i32 / 2, pair[0].y.max(pair[1].y) - bh as i32 - 4),
                ];
                draw_polygon_mut(&mut img, &roof, jitter(rng, [160, 60, 40], 20));
            }
        }
        "mountain" => {
            sky(&mut img, h, rng);
            for layer in 0..3 {
                let level = hf * (0.25 + 0.15 * layer as f32);
                let line = ridge(w, level, hf * 0.18, true, rng);
                let tone = 150 - 35 * layer as u8;
                fill_below(
                    &mut img,
                    &line,
                    jitter(rng, [tone - 20, tone - 10, tone + 10], 10),
                );
                if layer == 0 {
                    // Snow caps: the peaks of the far range.
                    for p in &line {
                        if (p.y as f32) < level {
                            draw_filled_circle_mut(
                                &mut img,
                                (p.x, p.y + 4),
                                5,
                                Rgb([245, 245, 250]),
                            );
                        }
                    }
                }
            }
        }
        _ => {
            let horizon = (hf * rng.random_range(0.35..0.5)) as u32;
            sky(&mut img, horizon, rng);
            let crop = jitter(rng, [120, 160, 60], 25);
            ground(&mut img, horizon, crop);
            // Texture: short dark strokes across the field.
            for _ in 0..(w * h / 40) {
                let x = rng.random_range(0..w);
                let y = rng.random_range(horizon..h);
                let shade = jitter(rng, [90, 120, 40], 20);
                draw_filled_rect_mut(
                    &mut img,
                    Rect::at(x as i32, y as i32).of_size(rng.random_range(1..4), 1),
                    shade,
                );
            }
            for _ in 0..rng.random_range(1..4) {
                let x = rng.random_range(0..w) as i32;
                let r = rng.random_range(5..12);
                draw_filled_circle_mut(
                    &mut img,
                    (x, horizon as i32 - r / 2),
                    r,
                    jitter(rng, [40, 80, 30], 10),
                );
            }
        }
    }
    // Sensor noise.
    for p in img.pixels_mut() {
        let n: i32 = rng.random_range(-6..=6);
        p.0 = p.0.map(|c| (i32::from(c) + n).clamp(0, 255) as u8);
    }
    img
}

/// Writes `n` Gaussian-blob feature vectors of `dims` values around `clusters` centres.
///
/// Centres are uniform in `[0, 0.3]^dims` (the range of most HOG values) and points scatter around
/// them with standard deviation 0.03; vector `i` belongs to blob `i % clusters`, and its
/// `picture_id` is `i`. Every value depends only on `(seed, n, dims, clusters)`.
pub fn generate_features(
    out: &Path,
    format: crate::store::Format,
    n: u64,
    dims: usize,
    clusters: usize,
    seed: u64,
) -> Result<u64, crate::store::StoreError> {
    use rand_distr::{Distribution, Normal};
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let centres: Vec<f32> = (0..clusters.max(1) * dims)
        .map(|_| rng.random_range(0.0..0.3))
        .collect();
    let noise = Normal::new(0.0f32, 0.03).expect("valid standard deviation");
    let mut writer = crate::store::FeatureWriter::create(out, format, dims)?;
    let mut values = vec![0f32; dims];
    for i in 0..n {
        let centre = &centres[(i as usize % clusters.max(1)) * dims..][..dims];
        for (v, &c) in values.iter_mut().zip(centre) {
            *v = c + noise.sample(&mut rng);
        }
        writer.write((i % (u64::from(u32::MAX) + 1)) as u32, 0, 0, &values)?;
    }
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_labelled() {
        let (a, b) = (
            tempfile::tempdir().expect("a"),
            tempfile::tempdir().expect("b"),
        );
        let summary = generate_photos(a.path(), 2, 42).expect("generate a");
        generate_photos(b.path(), 2, 42).expect("generate b");
        assert_eq!(summary.photos, 8);
        let labels = std::fs::read_to_string(&summary.labels).expect("labels");
        assert_eq!(labels.lines().count(), 9);
        assert!(labels.contains("city/city_000.jpg,city,urban,flat"));
        assert!(labels.contains("mountain/mountain_001.png,mountain,rural,hilly"));
        for kind in KINDS {
            for name in [
                format!("{0}/{0}_000.jpg", kind.name),
                format!("{0}/{0}_001.png", kind.name),
            ] {
                let (x, y) = (
                    std::fs::read(a.path().join(&name)),
                    std::fs::read(b.path().join(&name)),
                );
                assert_eq!(
                    x.expect("a file"),
                    y.expect("b file"),
                    "{name} differs between runs"
                );
            }
        }
    }
}
