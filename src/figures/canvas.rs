//! What every figure draws with: the canvas' size, the palette, the embedded font, PNG output,
//! and the marks charts share (a category's label, an error bar).

use std::path::Path;
use std::sync::Once;

use anyhow::{Context, anyhow};
use plotters::prelude::*;
use plotters::style::FontStyle;

const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
pub(crate) const WIDTH: u32 = 900;
pub(crate) const HEIGHT: u32 = 540;
pub(crate) const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(127, 127, 127),
];

pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is a valid TTF embedded at build time; registration can only fail on a bad file.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

pub(crate) fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e}")
}

/// Encodes the RGB buffer as PNG at `path` (temp file + rename).
pub(crate) fn save_png(path: &Path, buf: Vec<u8>) -> anyhow::Result<()> {
    let img = image::RgbImage::from_raw(WIDTH, HEIGHT, buf)
        .ok_or_else(|| anyhow!("figure buffer has the wrong size"))?;
    write_png(path, img)
}

/// `img` as PNG at `path` (temp file + rename).
pub fn write_png<I: Into<image::DynamicImage>>(path: &Path, img: I) -> anyhow::Result<()> {
    let mut bytes = std::io::Cursor::new(Vec::new());
    img.into()
        .write_to(&mut bytes, image::ImageFormat::Png)
        .context("cannot encode PNG")?;
    vocab_pipeline::atomic::write(path, bytes.get_ref())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The label of the category whose centre is at `x` (categories are 1 wide, from 0): its name
/// in `names`, or nothing between centres.
pub(crate) fn at_centre(x: f64, names: &[String]) -> String {
    let centre = x - 0.5;
    if (centre - centre.round()).abs() < 1e-6 && centre >= 0.0 {
        names
            .get(centre.round() as usize)
            .cloned()
            .unwrap_or_default()
    } else {
        String::new()
    }
}

/// An error bar at `x` from `lo` to `hi`, capped `cap` to either side, within the axis'
/// `range` (plotters does not clip): an end past the axis stops at it, uncapped.
pub(crate) fn error_bar(
    x: f64,
    (lo, hi): (f64, f64),
    (cap, range): (f64, (f64, f64)),
    style: ShapeStyle,
) -> Vec<PathElement<(f64, f64)>> {
    let (a, b) = (lo.max(range.0), hi.min(range.1));
    let mut marks = vec![PathElement::new(vec![(x, a), (x, b)], style)];
    for (end, kept) in [(a, lo >= range.0), (b, hi <= range.1)] {
        if kept {
            marks.push(PathElement::new(
                vec![(x - cap, end), (x + cap, end)],
                style,
            ));
        }
    }
    marks
}
