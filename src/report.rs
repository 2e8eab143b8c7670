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

/// Stacked bars: one bar per category, one segment per stack.
pub fn stacked_bars(
    path: &Path,
    title: &str,
    y_label: &str,
    categories: &[String],
    stacks: &[(String, Vec<f64>)],
) -> anyhow::Result<()> {
    register_font();
    let totals: Vec<f64> = (0..categories.len())
        .map(|c| {
            stacks
                .iter()
                .map(|(_, v)| v.get(c).copied().unwrap_or(0.0))
                .sum()
        })
        .collect();
    let top = totals.iter().copied().fold(0.0, f64::max).max(1e-9) * 1.15;
    let mut buf = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let n = categories.len().max(1) as u32;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(46)
            .y_label_area_size(64)
            .build_cartesian_2d((0..n - 1).into_segmented(), 0f64..top)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc(y_label)
            .x_labels(n as usize)
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => {
                    categories.get(*i as usize).cloned().unwrap_or_default()
                }
                _ => String::new(),
            })
            .y_label_formatter(&|y| format!("{y:.3}"))
            .light_line_style(WHITE)
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(plot_err)?;
        let mut base = vec![0.0; n as usize];
        for (s, (name, values)) in stacks.iter().enumerate() {
            let colour = PALETTE[s % PALETTE.len()];
            let bottoms = base.clone();
            for (c, v) in values.iter().enumerate() {
                base[c] += v;
            }
            let tops = base.clone();
            chart
                .draw_series(
                    Histogram::vertical(&chart)
                        .style(colour.filled())
                        .margin(40)
                        .baseline_func(move |x| match x {
                            SegmentValue::Exact(i) | SegmentValue::CenterOf(i) => {
                                bottoms.get(*i as usize).copied().unwrap_or(0.0)
                            }
                            SegmentValue::Last => 0.0,
                        })
                        .data((0..n).map(|i| (i, tops[i as usize]))),
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
        stacked_bars(
            &bars,
            "stages",
            "seconds",
            &["k16".into(), "k64".into()],
            &[
                ("map".into(), vec![1.0, 2.0]),
                ("broadcast".into(), vec![0.5, 0.5]),
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
