//! Figures for run reports: plotters draws into an RGB buffer, which is written as PNG (atomically)
//! beside a CSV of the same numbers. Text uses an embedded DejaVu Sans, so figures look the
//! same on every machine and need no system fonts.

use std::path::Path;
use std::sync::Once;

use anyhow::{Context, anyhow};
use plotters::prelude::*;
use plotters::style::FontStyle;

const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const WIDTH: u32 = 900;
const HEIGHT: u32 = 540;
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(127, 127, 127),
];

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is a valid TTF embedded at build time; registration can only fail on a bad file.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e}")
}

/// Encodes the RGB buffer as PNG at `path` (temp file + rename).
fn save_png(path: &Path, buf: Vec<u8>) -> anyhow::Result<()> {
    let img = image::RgbImage::from_raw(WIDTH, HEIGHT, buf)
        .ok_or_else(|| anyhow!("figure buffer has the wrong size"))?;
    let mut bytes = std::io::Cursor::new(Vec::new());
    img.write_to(&mut bytes, image::ImageFormat::Png)
        .context("cannot encode PNG")?;
    vocab_pipeline::atomic::write(path, bytes.get_ref())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart over vocabulary sizes: x is drawn at `log2(x)`, labelled with powers of two.
pub fn line_chart_log2(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    y_range: (f64, f64),
    series: &[Series],
) -> anyhow::Result<()> {
    register_font();
    let logs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0.max(1.0).log2()))
        .collect();
    let lo = logs.iter().copied().fold(f64::INFINITY, f64::min).floor();
    let hi = logs
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max)
        .ceil()
        .max(lo + 1.0);
    let mut buf = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(46)
            .y_label_area_size(64)
            .build_cartesian_2d(lo - 0.3..hi + 0.3, y_range.0..y_range.1)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_labels((hi - lo) as usize + 1)
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 1e-6 {
                    format!("{}", 2f64.powf(x.round()) as u64)
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| format!("{y:.2}"))
            .light_line_style(WHITE)
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(plot_err)?;
        for (i, s) in series.iter().enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            let points: Vec<(f64, f64)> = s
                .points
                .iter()
                .map(|&(x, y)| (x.max(1.0).log2(), y))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    colour.stroke_width(2),
                ))
                .map_err(plot_err)?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))
                .map_err(plot_err)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 15))
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    save_png(path, buf)
}

/// Grouped bars on a log axis: per category one bar per group, side by side, so that values
/// of different orders (a broadcast of milliseconds beside a map of seconds) are all visible.
/// Values of zero or less are left out.
pub fn grouped_bars_log(
    path: &Path,
    title: &str,
    y_label: &str,
    categories: &[String],
    groups: &[(String, Vec<f64>)],
) -> anyhow::Result<()> {
    register_font();
    let positive = || {
        groups
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .filter(|v| *v > 0.0 && v.is_finite())
    };
    let lo = positive().fold(f64::INFINITY, f64::min);
    let hi = positive().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() {
        // Whole decades around the data.
        (
            10f64.powf(lo.log10().floor()),
            10f64
                .powf(hi.log10().ceil())
                .max(10f64.powf(lo.log10().floor() + 1.0)),
        )
    } else {
        (1e-3, 1.0)
    };
    let n = categories.len().max(1);
    let width = 0.8 / groups.len().max(1) as f64;
    let mut buf = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(46)
            .y_label_area_size(72)
            .build_cartesian_2d(0f64..n as f64, (lo..hi).log_scale())
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc(y_label)
            .x_labels(n * 2 + 1)
            .x_label_formatter(&|x| {
                // Labels at the categories' centres only.
                let centre = x - 0.5;
                if (centre - centre.round()).abs() < 1e-6 && centre >= 0.0 {
                    categories
                        .get(centre.round() as usize)
                        .cloned()
                        .unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| format!("{y:.0e}"))
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(plot_err)?;
        for (g, (name, values)) in groups.iter().enumerate() {
            let colour = PALETTE[g % PALETTE.len()];
            chart
                .draw_series(
                    values
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| **v > 0.0)
                        .map(|(c, &v)| {
                            let x0 = c as f64 + 0.1 + g as f64 * width;
                            Rectangle::new([(x0, lo), (x0 + width * 0.9, v)], colour.filled())
                        }),
                )
                .map_err(plot_err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], colour.filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 15))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    save_png(path, buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_png_files_with_ink_on_them() {
        let dir = tempfile::tempdir().expect("tmp");
        let line = dir.path().join("line.png");
        line_chart_log2(
            &line,
            "accuracy",
            "k",
            "accuracy",
            (0.0, 1.0),
            &[Series {
                name: "urbanicity".into(),
                points: vec![(16.0, 0.8), (64.0, 0.9), (256.0, 0.95)],
            }],
        )
        .expect("line chart");
        let bars = dir.path().join("bars.png");
        grouped_bars_log(
            &bars,
            "stages",
            "seconds",
            &["k16".into(), "k64".into()],
            &[
                ("map".into(), vec![1.0, 2.0]),
                ("broadcast".into(), vec![0.002, 0.0]),
            ],
        )
        .expect("bars");
        for p in [line, bars] {
            let img = image::open(&p).expect("png").to_rgb8();
            assert_eq!(img.dimensions(), (WIDTH, HEIGHT));
            let coloured = img.pixels().filter(|px| px.0 != [255, 255, 255]).count();
            assert!(
                coloured > 5_000,
                "{}: only {coloured} non-white pixels",
                p.display()
            );
        }
    }
}
