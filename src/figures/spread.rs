//! Bars with error bars: one value per category (an attribute's accuracy at a run's one
//! dictionary size), its spread over the trials capped above and below, the value written in
//! the bar.

use std::path::Path;

use plotters::prelude::*;

use crate::figures::canvas::{
    HEIGHT, PALETTE, WIDTH, at_centre, error_bar, plot_err, register_font, save_png,
};

/// A bar: its category, value and error (the value plus or minus it; 0 for none).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// The category under it.
    pub name: String,
    /// Its height.
    pub value: f64,
    /// Its error.
    pub error: f64,
}

/// `bars` side by side on `y_range`, each with its error capped and its value (in percent)
/// written in it, at `path` under `title`.
pub fn bars_with_errors(
    path: &Path,
    (title, y_label): (&str, &str),
    y_range: (f64, f64),
    bars: &[Bar],
) -> anyhow::Result<()> {
    register_font();
    let n = bars.len().max(1);
    let names: Vec<String> = bars.iter().map(|b| b.name.clone()).collect();
    let mut buf = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(46)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..n as f64, y_range.0..y_range.1)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc(y_label)
            .x_labels(n * 2 + 1)
            .x_label_formatter(&|x| at_centre(*x, &names))
            .y_label_formatter(&|y| format!("{y:.2}"))
            .light_line_style(WHITE)
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(plot_err)?;
        for (i, bar) in bars.iter().enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            let (x0, x1) = (i as f64 + 0.25, i as f64 + 0.75);
            let top = bar.value.clamp(y_range.0, y_range.1);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, y_range.0), (x1, top)],
                    colour.filled(),
                )))
                .map_err(plot_err)?;
            if bar.error > 0.0 {
                let (lo, hi) = (bar.value - bar.error, bar.value + bar.error);
                let ink = BLACK.stroke_width(2);
                let bar = error_bar(i as f64 + 0.5, (lo, hi), (0.08, y_range), ink);
                chart.draw_series(bar).map_err(plot_err)?;
            }
            let text = if bar.error > 0.0 {
                format!("{:.1} ± {:.1}%", 100.0 * bar.value, 100.0 * bar.error)
            } else {
                format!("{:.1}%", 100.0 * bar.value)
            };
            // Inside the bar, near its foot (the top may be the axis' end), in white.
            let foot = y_range.0 + (y_range.1 - y_range.0) * 0.08;
            chart
                .draw_series(std::iter::once(Text::new(
                    text,
                    (x0 + 0.03, foot),
                    ("sans-serif", 15).into_font().color(&WHITE),
                )))
                .map_err(plot_err)?;
        }
        root.present().map_err(plot_err)?;
    }
    save_png(path, buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_stand_on_the_axis_with_their_errors() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("bars.png");
        let bars = [
            Bar {
                name: "kind".into(),
                value: 0.85,
                error: 0.02,
            },
            Bar {
                name: "urbanicity".into(),
                value: 0.99,
                error: 0.0,
            },
        ];
        bars_with_errors(&path, ("accuracy", "accuracy"), (0.8, 1.0), &bars).expect("bars");
        let img = image::open(&path).expect("png").to_rgb8();
        // Each bar's colour fills a good part of the figure.
        for colour in [PALETTE[0], PALETTE[1]] {
            let RGBColor(r, g, b) = colour;
            let filled = img.pixels().filter(|p| p.0 == [r, g, b]).count();
            assert!(filled > 5_000, "{filled} pixels of {colour:?}");
        }
    }
}
