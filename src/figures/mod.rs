//! Figures for run reports: plotters draws into an RGB buffer, which is written as PNG (atomically)
//! beside a CSV of the same numbers. Text uses an embedded DejaVu Sans, so figures look the
//! same on every machine and need no system fonts.

mod canvas;
mod confusion;
mod spread;

pub use self::canvas::write_png;
pub use self::confusion::heatmap;
pub use self::spread::{Bar, bars_with_errors};

use std::path::Path;

use anyhow::anyhow;
use plotters::prelude::*;

use crate::figures::canvas::{
    HEIGHT, PALETTE, WIDTH, at_centre, error_bar, plot_err, register_font, save_png,
};

/// Width of the strip left of a montage that names its rows.
const LABELS_WIDTH: u32 = 130;

/// `montage` (rows of tiles `pitch` pixels apart, the first `top` pixels down) with a white
/// strip on its left naming each row in `labels`' lines (a line break between them).
pub fn labelled_rows(
    montage: &image::GrayImage,
    labels: &[String],
    (top, pitch): (u32, u32),
) -> anyhow::Result<image::GrayImage> {
    register_font();
    let (width, height) = (montage.width() + LABELS_WIDTH, montage.height());
    let mut buf = vec![255u8; width as usize * height as usize * 3];
    {
        let area = BitMapBackend::with_buffer(&mut buf, (width, height)).into_drawing_area();
        let style = ("sans-serif", 13).into_font().color(&BLACK);
        for (r, label) in labels.iter().enumerate() {
            let y = i64::from(top) + r as i64 * i64::from(pitch) + 4;
            for (i, line) in label.lines().enumerate() {
                let at = (6, (y + 16 * i as i64).min(i64::from(i32::MAX)) as i32);
                area.draw(&Text::new(line.to_string(), at, style.clone()))
                    .map_err(plot_err)?;
            }
        }
        area.present().map_err(plot_err)?;
    }
    let rgb = image::RgbImage::from_raw(width, height, buf)
        .ok_or_else(|| anyhow!("figure buffer has the wrong size"))?;
    let mut gray = image::DynamicImage::ImageRgb8(rgb).to_luma8();
    for (x, y, p) in montage.enumerate_pixels() {
        gray.put_pixel(x + LABELS_WIDTH, y, *p);
    }
    Ok(gray)
}

/// Width of the strip right of a chart that holds its legend (never over the data).
const LEGEND_WIDTH: u32 = 190;

/// How a legend entry is drawn.
#[derive(Debug, Clone, Copy)]
enum Key {
    /// A line of this width with a marker.
    Line(u32),
    /// A filled box.
    Bar,
}

/// The legend, in its own strip: an entry per series, top down.
fn legend(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    entries: &[(String, RGBColor, Key)],
) -> anyhow::Result<()> {
    let style = ("sans-serif", 15).into_font().color(&BLACK);
    for (i, (name, colour, key)) in entries.iter().enumerate() {
        let y = 60 + 26 * i as i32;
        match *key {
            Key::Line(width) => {
                area.draw(&PathElement::new(
                    vec![(8, y), (36, y)],
                    colour.stroke_width(width),
                ))
                .map_err(plot_err)?;
                area.draw(&Circle::new((22, y), 4, colour.filled()))
                    .map_err(plot_err)?;
            }
            Key::Bar => {
                area.draw(&Rectangle::new([(12, y - 6), (30, y + 6)], colour.filled()))
                    .map_err(plot_err)?;
            }
        }
        area.draw(&Text::new(name.clone(), (44, y - 8), style.clone()))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
    /// Each point's error (its `y` plus or minus this, drawn as a bar with caps), or none.
    pub errors: Vec<f64>,
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
        let (plot, key) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot)
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
        // Earlier series wider, drawn first: a line that another covers point for point still
        // shows at both its edges, and its markers are larger.
        let widths: Vec<u32> = (0..series.len())
            .map(|i| 2 + 3 * (series.len() - 1 - i) as u32)
            .collect();
        let mut entries = Vec::new();
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
                    colour.stroke_width(widths[i]),
                ))
                .map_err(plot_err)?;
            let radius = 3 + widths[i];
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|&p| Circle::new(p, radius, colour.filled())),
                )
                .map_err(plot_err)?;
            // Error bars, capped, a little to the side of a series drawn before.
            for (&(x, y), &e) in points.iter().zip(&s.errors) {
                let bar = error_bar(
                    x + 0.04 * i as f64,
                    (y - e, y + e),
                    (0.06, y_range),
                    colour.stroke_width(2),
                );
                chart.draw_series(bar).map_err(plot_err)?;
            }
            entries.push((s.name.clone(), colour, Key::Line(widths[i])));
        }
        legend(&key, &entries)?;
        root.present().map_err(plot_err)?;
    }
    save_png(path, buf)
}

/// Grouped bars on a log axis: per category one bar per group, side by side, so that values
/// of different orders (a broadcast of milliseconds beside a map of seconds) are all visible.
/// The axis spans whole decades around the data, at most four below the largest value: values
/// smaller than that (a stage-1 merge of nanoseconds) and of zero or less are left out, which
/// the axis label says; the CSV beside the figure has them all.
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
    let hi = positive().fold(f64::NEG_INFINITY, f64::max);
    let floor = hi / 1e4;
    let lo = positive()
        .filter(|&v| v >= floor)
        .fold(f64::INFINITY, f64::min);

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
    let hidden = positive().any(|v| v < lo);
    let n = categories.len().max(1);
    let width = 0.8 / groups.len().max(1) as f64;
    let mut buf = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let (plot, key) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
        let y_label = if hidden {
            format!("{y_label}; under {} not shown", short(lo))
        } else {
            y_label.to_string()
        };
        let mut chart = ChartBuilder::on(&plot)
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
            .x_label_formatter(&|x| at_centre(*x, categories))
            .y_label_formatter(&|y| short(*y))
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(plot_err)?;
        let mut entries = Vec::new();
        for (g, (name, values)) in groups.iter().enumerate() {
            let colour = PALETTE[g % PALETTE.len()];
            chart
                .draw_series(
                    values
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| **v >= lo && v.is_finite())
                        .map(|(c, &v)| {
                            let x0 = c as f64 + 0.1 + g as f64 * width;
                            Rectangle::new([(x0, lo), (x0 + width * 0.9, v)], colour.filled())
                        }),
                )
                .map_err(plot_err)?;
            entries.push((name.clone(), colour, Key::Bar));
        }
        legend(&key, &entries)?;
        root.present().map_err(plot_err)?;
    }
    save_png(path, buf)
}

/// A value of seconds for an axis: `1e-3` as `0.001`, `100`, `1e-6` as `1e-6`.
fn short(v: f64) -> String {
    if (1e-3..1e4).contains(&v.abs()) {
        let text = format!("{v:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.0e}")
    }
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
                errors: vec![0.02, 0.01, 0.01],
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
                // A stage-1 merge of nanoseconds: left out, not stretching the axis to 1e-8.
                ("stage 1".into(), vec![1e-8, 2e-8]),
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
            // The legend sits in its own strip, right of the plot.
            let legend = (WIDTH - LEGEND_WIDTH..WIDTH)
                .flat_map(|x| (0..HEIGHT).map(move |y| (x, y)))
                .filter(|&(x, y)| img.get_pixel(x, y).0 != [255, 255, 255])
                .count();
            assert!(legend > 200, "{}: legend {legend}", p.display());
        }
        assert_eq!(short(0.001), "0.001");
        assert_eq!(short(100.0), "100");
        assert_eq!(short(1e-6), "1e-6");
    }
}
