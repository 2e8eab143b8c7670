//! A confusion matrix drawn as a heatmap: a row per true class, a column per predicted class,
//! each cell shaded by its share of the row's photos and labelled with it in percent.

use std::path::Path;

use plotters::prelude::*;

use crate::figures::canvas::{HEIGHT, PALETTE, WIDTH, plot_err, register_font, save_png};

/// Pixels left of the cells for the rows' names, and above them for the title.
const LEFT: i32 = 190;
const TOP: i32 = 50;
/// Pixels below the cells for the columns' numbers and the axis name.
const BOTTOM: i32 = 50;

/// `text` cut to what the strip left of the cells holds at `size` px (a character is about
/// 0.6 of the size wide), an ellipsis ending what was cut.
fn fitted(text: &str, size: u32) -> String {
    let room = ((LEFT - 16) as f64 / (0.6 * f64::from(size))).max(2.0) as usize;
    if text.chars().count() <= room {
        return text.to_string();
    }
    let kept: String = text.chars().take(room - 1).collect();
    format!("{kept}…")
}

/// The colour of a share in 0..=1: white to the palette's blue.
fn shade(share: f64) -> RGBColor {
    let t = share.clamp(0.0, 1.0);
    let RGBColor(r, g, b) = PALETTE[0];
    let mix = |c: u8| (255.0 - (255.0 - f64::from(c)) * t).round() as u8;
    RGBColor(mix(r), mix(g), mix(b))
}

/// `rates[i][j]`: the share of class `i`'s photos predicted as class `j` (rows summing to 1 or
/// 0), drawn at `path` under `title`; the rows name the classes (`1 name`), the columns number
/// them alike.
pub fn heatmap(
    path: &Path,
    title: &str,
    classes: &[String],
    rates: &[Vec<f64>],
) -> anyhow::Result<()> {
    register_font();
    let n = classes.len().max(1) as i32;
    let cell = ((WIDTH as i32 - LEFT - 20) / n)
        .min((HEIGHT as i32 - TOP - BOTTOM) / n)
        .max(4);
    let mut buf = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let style = |size: u32| ("sans-serif", size).into_font().color(&BLACK);
        root.draw(&Text::new(title.to_string(), (16, 12), style(20)))
            .map_err(plot_err)?;
        let label = (cell * 3 / 5).clamp(9, 15) as u32;
        for (i, name) in classes.iter().enumerate() {
            let y = TOP + i as i32 * cell;
            let text = fitted(&format!("{} {name}", i + 1), label);
            root.draw(&Text::new(
                text,
                (8, y + (cell - label as i32) / 2),
                style(label),
            ))
            .map_err(plot_err)?;
            let x = LEFT + i as i32 * cell;
            let number = (i + 1).to_string();
            root.draw(&Text::new(
                number,
                (x + cell / 3, TOP + n * cell + 6),
                style(label),
            ))
            .map_err(plot_err)?;
        }
        let axis = "true class (rows) / predicted class (columns), % of the row's photos";
        root.draw(&Text::new(axis, (LEFT, TOP + n * cell + 26), style(14)))
            .map_err(plot_err)?;
        for (i, row) in rates.iter().enumerate() {
            for (j, &share) in row.iter().enumerate() {
                let (x, y) = (LEFT + j as i32 * cell, TOP + i as i32 * cell);
                let colour = shade(share);
                root.draw(&Rectangle::new(
                    [(x, y), (x + cell - 1, y + cell - 1)],
                    colour.filled(),
                ))
                .map_err(plot_err)?;
                let percent = (share * 100.0).round();
                if percent >= 1.0 && cell >= 18 {
                    let ink = if share > 0.55 { WHITE } else { BLACK };
                    let text = format!("{percent:.0}");
                    let font = ("sans-serif", label.min(13)).into_font().color(&ink);
                    // Roughly centred: a digit is about 8 px wide.
                    let left = x + cell / 2 - 4 * text.len() as i32;
                    root.draw(&Text::new(
                        text,
                        (left, y + (cell - label as i32) / 2),
                        font,
                    ))
                    .map_err(plot_err)?;
                }
            }
        }
        root.present().map_err(plot_err)?;
    }
    save_png(path, buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heatmap_shades_each_cell_by_its_share() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("confusion.png");
        let classes: Vec<String> = ["coast", "forest", "street"].map(String::from).to_vec();
        let rates = vec![
            vec![1.0, 0.0, 0.0],
            vec![0.25, 0.75, 0.0],
            vec![0.0, 0.0, 0.0],
        ];
        heatmap(&path, "kind", &classes, &rates).expect("heatmap");
        let img = image::open(&path).expect("png").to_rgb8();
        assert_eq!(img.dimensions(), (WIDTH, HEIGHT));
        let n = 3;
        let cell = ((WIDTH as i32 - LEFT - 20) / n).min((HEIGHT as i32 - TOP - BOTTOM) / n);
        // A cell's corner holds its shade: full blue, a quarter, white.
        let at = |i: i32, j: i32| {
            img.get_pixel((LEFT + j * cell + 1) as u32, (TOP + i * cell + 1) as u32)
                .0
        };
        assert_eq!(at(0, 0), [31, 119, 180]);
        assert_eq!(at(1, 0), {
            let RGBColor(r, g, b) = shade(0.25);
            [r, g, b]
        });
        assert_eq!(at(2, 2), [255, 255, 255]);
        assert!(at(1, 1)[0] < at(1, 0)[0], "75% darker than 25%");
        // Long names are cut to the strip.
        assert_eq!(fitted("1 coast", 15), "1 coast");
        let long = fitted(&format!("2 {}", "x".repeat(80)), 15);
        assert!(long.ends_with('…') && long.chars().count() == 19, "{long}");
    }
}
