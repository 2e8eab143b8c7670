//! Decodes photos to luminance with vocab's decoder (libjpeg-turbo's, for JPEG) and with the
//! `image` crate's own decoder, side by side, and writes vocab's luminance for a parity check.
//!
//! usage: jpeg_decode LIST OUT_DIR [REPEAT]
//!
//! LIST names one photo per line. Prints CSV (`decoder,photos,repeat,seconds,ms_per_photo`) and
//! writes `OUT_DIR/N.vocab.f32` and `OUT_DIR/N.image.f32` per photo: u32 height, u32 width, then the luminance as f32, all
//! little-endian (`eval/jpeg_decode/run.py` compares them with Pillow's and OpenCV's pixels).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use image::{ImageDecoder, ImageReader};
use vocab_pipeline::image_io::{Luminance, MAX_PIXELS, load_luminance};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, list, out_dir, rest @ ..] = args.as_slice() else {
        return Err("usage: jpeg_decode LIST OUT_DIR [REPEAT]".into());
    };
    let repeat: usize = rest.first().map_or(Ok(3), |r| r.parse())?;
    let photos: Vec<PathBuf> = std::fs::read_to_string(list)?
        .lines()
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect();
    // Warm the page cache so both decoders read from memory.
    for p in &photos {
        std::fs::read(p)?;
    }
    let (mut vocab, mut image) = (Vec::new(), Vec::new());
    // Interleaved rounds, so that neither decoder gets a warmer machine.
    let (mut t_vocab, mut t_image) = (0.0, 0.0);
    for _ in 0..repeat {
        let t = Instant::now();
        vocab = photos
            .iter()
            .map(|p| {
                load_luminance(p, None, MAX_PIXELS).map_err(|e| format!("{}: {e}", p.display()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        t_vocab += t.elapsed().as_secs_f64();
        let t = Instant::now();
        image = photos
            .iter()
            .map(|p| image_crate(p))
            .collect::<Result<Vec<_>, _>>()?;
        t_image += t.elapsed().as_secs_f64();
    }
    let timings = [
        ("vocab (libjpeg-turbo via mozjpeg; C)", t_vocab),
        ("image crate (zune-jpeg)", t_image),
    ];
    println!("decoder,photos,repeat,seconds,ms_per_photo");
    for (name, seconds) in timings {
        let per = seconds * 1e3 / (photos.len() * repeat) as f64;
        println!("{name},{},{repeat},{seconds:.3},{per:.3}", photos.len());
    }
    let written = vocab.iter().map(|l| (l, "vocab")).enumerate();
    for (i, (lum, decoder)) in written.chain(image.iter().map(|l| (l, "image")).enumerate()) {
        let path = format!("{out_dir}/{i}.{decoder}.f32");
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        f.write_all(&u32::try_from(lum.height)?.to_le_bytes())?;
        f.write_all(&u32::try_from(lum.width)?.to_le_bytes())?;
        for v in &lum.data {
            f.write_all(&v.to_le_bytes())?;
        }
    }
    Ok(())
}

/// The `image` crate's decode as vocab did it before: EXIF orientation applied.
fn image_crate(path: &std::path::Path) -> Result<Luminance, Box<dyn std::error::Error>> {
    let mut decoder = ImageReader::open(path)?
        .with_guessed_format()?
        .into_decoder()?;
    let orientation = decoder.orientation()?;
    let mut img = image::DynamicImage::from_decoder(decoder)?;
    img.apply_orientation(orientation);
    Ok(Luminance::from_image(&img))
}
