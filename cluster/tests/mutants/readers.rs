//! The readers under test: every reader of vocab's inputs (photos, feature and vector files,
//! partitions, vocabularies, histograms, mixtures, encoding records, models, cluster files,
//! frames) with a valid seed, the header fields and checksums its mutants reach, its memory
//! bound, and how it reads a mutant: a result that holds, or an error that names the file.

use std::path::Path;

use vocab_cluster::net::frame::Frame;
use vocab_pipeline::store::{Element, FeatureReader, FeatureWriter, Format, Record};

use super::{Field, Fixup, Reader};

/// A refusal's message, which must name the file it refuses.
fn named(path: &Path, message: String) -> Result<(), String> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    match name {
        Some(name) if message.contains(&name) => Err(message),
        _ => Err(format!(
            "{message} (UNCLEAR: does not name {})",
            path.display()
        )),
    }
}

/// An error that does not name its file becomes a failure of the harness's rules.
fn clear(result: Result<(), String>) -> Result<(), String> {
    match result {
        Err(m) if m.contains("UNCLEAR") => panic!("unclear error: {m}"),
        other => other,
    }
}

/// Every value read must be finite and within the magnitude bound of its vector.
fn holds(values: &[f32]) -> Result<(), String> {
    match vocab_pipeline::store::out_of_bounds(values) {
        Some(m) => panic!("a value that does not hold was returned: {m}"),
        None => Ok(()),
    }
}

fn feature_file(format: Format, n: u32, dims: usize) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("f");
    let mut w = FeatureWriter::create(&path, format, dims).expect("create");
    for i in 0..n {
        let v: Vec<f32> = (0..dims)
            .map(|d| ((i as usize * 7 + d * 3) % 17) as f32 / 16.0)
            .collect();
        w.write(i, (i % 3) as u16, (i % 5) as u16, &v)
            .expect("write");
    }
    w.finish().expect("finish");
    std::fs::read(&path).expect("read")
}

/// A valid encoding record (a 4-word vocabulary, 2-level pyramid, with its digest).
const ENCODING: &str = r#"{"vocabulary":"/nonexistent/voc.bin","k":4,"stride":8,"norm":"l1","pyramid":2,"max_side":null,"vocabulary_sha256":"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"}"#;

/// A valid mixture file: 3 Gaussians over 4 principal components of 200 vectors of 6 values.
fn mixture_file() -> Vec<u8> {
    use vocab_pipeline::kmeans::Shard;
    use vocab_pipeline::mixture::{Local, MixtureError, MixtureFile, Params, fit_with};
    let x: Vec<f32> = (0..200 * 6)
        .map(|i| ((i * 7) % 13) as f32 / 13.0 + ((i / 6) % 3) as f32)
        .collect();
    let rows = [vocab_pipeline::partition::Rows::dense(&x, 6)];
    let mut engine = Local::new(Shard::numbered(&rows)).expect("engine");
    let params = Params {
        components: 3,
        pca_dims: 4,
        max_iter: 10,
        tol: 1e-6,
        seed: 1,
        reg: 1e-6,
    };
    let fitted = fit_with::<_, MixtureError>(&mut engine, &params, &mut |_| Ok(())).expect("fit");
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("m.json");
    MixtureFile::new(&params, (200, 6, 0), &fitted)
        .write(&path)
        .expect("write");
    std::fs::read(&path).expect("read")
}

/// The header's integer fields of vocab's binary feature format.
fn feature_fields() -> Vec<Field> {
    vec![(8, 2), (10, 1), (12, 4), (16, 8), (16, 4), (20, 4), (24, 4)]
}

fn read_features(path: &Path) -> Result<(), String> {
    let chain = |e: vocab_pipeline::store::StoreError| vocab_pipeline::chain(&e);
    let mut reader = match FeatureReader::open(path) {
        Ok(reader) => reader,
        Err(e) => return named(path, chain(e)),
    };
    let mut record = Record::default();
    let mut dims = None;
    loop {
        match reader.next_into(&mut record) {
            Ok(false) => return Ok(()),
            Ok(true) => {
                holds(&record.values)?;
                if *dims.get_or_insert(record.values.len()) != record.values.len() {
                    panic!("records of different lengths returned");
                }
            }
            Err(e) => return named(path, chain(e)),
        }
    }
}

fn photo(format: image::ImageFormat) -> Vec<u8> {
    let img = image::RgbImage::from_fn(64, 48, |x, y| {
        image::Rgb([(x * 4) as u8, (y * 5) as u8, ((x * y) % 251) as u8])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut out, format)
        .expect("encode");
    out.into_inner()
}

/// Pixels a mutated photo may declare in the harness; its memory bound follows from it.
pub const PHOTO_PIXELS: u64 = 4_000_000;

fn read_photo(path: &Path) -> Result<(), String> {
    match vocab_pipeline::image_io::load_luminance(path, None, PHOTO_PIXELS) {
        Ok(lum) => {
            assert_eq!(lum.data.len(), lum.width * lum.height, "luminance size");
            assert!(
                lum.data.iter().all(|v| v.is_finite()),
                "luminance not finite"
            );
            Ok(())
        }
        Err(skip) => Err(skip.to_string()),
    }
}

/// Every reader, with its seed and bounds.
pub fn readers() -> Vec<Reader> {
    let mb = 1 << 20;
    let photo_memory =
        (PHOTO_PIXELS * vocab_pipeline::image_io::BYTES_PER_PIXEL) as usize + 32 * mb;
    let mut all = Vec::new();
    for (name, file, format) in [
        ("photo-jpeg", "p.jpg", image::ImageFormat::Jpeg),
        ("photo-png", "p.png", image::ImageFormat::Png),
        ("photo-webp", "p.webp", image::ImageFormat::WebP),
        ("photo-tiff", "p.tiff", image::ImageFormat::Tiff),
        ("photo-bmp", "p.bmp", image::ImageFormat::Bmp),
    ] {
        let fields = match format {
            // Width and height in IHDR (big endian; extremes hit them all the same).
            image::ImageFormat::Png => vec![(16, 4), (20, 4), (24, 1), (25, 1)],
            image::ImageFormat::Bmp => vec![(2, 4), (10, 4), (14, 4), (18, 4), (22, 4), (28, 2)],
            image::ImageFormat::Tiff => vec![(4, 4), (8, 2)],
            _ => Vec::new(),
        };
        all.push(Reader {
            name,
            file,
            seed: photo(format),
            fields,
            fixup: if format == image::ImageFormat::Png {
                Fixup::Png
            } else {
                Fixup::None
            },
            memory: photo_memory,
            read: Box::new(|p| clear(read_photo(p))),
            beside: Vec::new(),
        });
    }
    all.push(Reader {
        name: "features-bin",
        file: "f.bin",
        seed: feature_file(Format::Bin, 40, 8),
        fields: feature_fields(),
        fixup: Fixup::FeatureFile,
        memory: 16 * mb,
        read: Box::new(|p| clear(read_features(p))),
        beside: Vec::new(),
    });
    // Other tools' vector formats, read by the same reader (issue 49: every reader added since).
    for (name, file, format) in [
        ("features-npy", "f.npy", Format::Npy),
        ("features-fvecs", "f.fvecs", Format::Fvecs),
        ("features-csv", "f.csv", Format::Csv),
    ] {
        all.push(Reader {
            name,
            file,
            seed: feature_file(format, 40, 8),
            fields: if format == Format::Npy {
                vec![(6, 2), (8, 2)]
            } else {
                vec![(0, 4)]
            },
            fixup: Fixup::None,
            memory: 16 * mb,
            read: Box::new(|p| clear(read_features(p))),
            beside: Vec::new(),
        });
    }
    all.push(Reader {
        name: "mixture",
        file: "m.json",
        seed: mixture_file(),
        fields: Vec::new(),
        fixup: Fixup::None,
        memory: 16 * mb,
        read: Box::new(|p| {
            clear(match vocab_pipeline::mixture::MixtureFile::read(p) {
                // An accepted mixture encodes a vector into finite values or says why.
                Ok(_) => Ok(()),
                Err(e) => named(p, vocab_pipeline::chain(&e)),
            })
        }),
        beside: Vec::new(),
    });
    all.push(Reader {
        name: "encoding-record",
        file: "h.bin.encoding.json",
        seed: ENCODING.as_bytes().to_vec(),
        fields: Vec::new(),
        fixup: Fixup::None,
        memory: 16 * mb,
        read: Box::new(|p| {
            let limit = vocab_pipeline::input::MAX_ENCODING_BYTES;
            let text = match vocab_pipeline::input::read_text(p, limit) {
                Ok(text) => text,
                Err(e) => return clear(named(p, format!("{}: {e}", p.display()))),
            };
            match serde_json::from_str::<vocab_pipeline::encode::Encoding>(&text) {
                Ok(_) => Ok(()),
                // What the command says: the record's path, then serde's message.
                Err(e) => clear(named(p, format!("invalid {}: {e}", p.display()))),
            }
        }),
        beside: Vec::new(),
    });
    all.push(Reader {
        name: "features-text",
        file: "f.txt",
        seed: feature_file(Format::Text, 40, 8),
        fields: Vec::new(),
        fixup: Fixup::None,
        memory: 16 * mb,
        read: Box::new(|p| clear(read_features(p))),
        beside: Vec::new(),
    });
    // A partition set: its second partition mutated (a partition's file, checked against the
    // manifest the set keeps).
    let (parts, manifest) = {
        let dir = tempfile::tempdir().expect("tmp");
        let input = dir.path().join("f.bin");
        std::fs::write(&input, feature_file(Format::Bin, 60, 8)).expect("write");
        let out = dir.path().join("parts");
        vocab_pipeline::partition::split(&input, 3, &out, Element::F32).expect("split");
        let read = |n: &str| std::fs::read(out.join(n)).expect("read");
        (
            [
                read("part-0000.bin"),
                read("part-0001.bin"),
                read("part-0002.bin"),
            ],
            // The source as a fixed name, so that the seed (and every mutant) is the same each
            // run.
            String::from_utf8(read("manifest.toml"))
                .expect("utf-8")
                .lines()
                .map(|l| {
                    if l.starts_with("source =") {
                        "source = \"f.bin\""
                    } else {
                        l
                    }
                })
                .map(|l| format!("{l}\n"))
                .collect::<String>()
                .into_bytes(),
        )
    };
    let read_set = |p: &Path| -> Result<(), String> {
        let dir = p.parent().expect("folder");
        match vocab_pipeline::partition::PartitionSet::open(dir) {
            Ok(set) => {
                let mut buf = Vec::new();
                for rows in set.vectors() {
                    for r in 0..rows.rows() {
                        holds(rows.row(r, &mut buf))?;
                    }
                }
                Ok(())
            }
            Err(e) => named(p, vocab_pipeline::chain(&e)),
        }
    };
    all.push(Reader {
        name: "partition",
        file: "part-0001.bin",
        seed: parts[1].clone(),
        fields: feature_fields(),
        fixup: Fixup::FeatureFile,
        memory: 16 * mb,
        read: Box::new(move |p| clear(read_set(p))),
        beside: vec![
            ("part-0000.bin", parts[0].clone()),
            ("part-0002.bin", parts[2].clone()),
            ("manifest.toml", manifest.clone()),
        ],
    });
    all.push(Reader {
        name: "partition-manifest",
        file: "manifest.toml",
        seed: manifest,
        fields: Vec::new(),
        fixup: Fixup::None,
        memory: 16 * mb,
        read: Box::new(move |p| {
            let dir = p.parent().expect("folder");
            match vocab_pipeline::partition::PartitionSet::open(dir) {
                Ok(_) => Ok(()),
                // A manifest that names another file is refused naming that file.
                Err(e) => Err(vocab_pipeline::chain(&e)),
            }
        }),
        beside: vec![
            ("part-0000.bin", parts[0].clone()),
            ("part-0001.bin", parts[1].clone()),
            ("part-0002.bin", parts[2].clone()),
        ],
    });
    let read_vocabulary = |p: &Path| match vocab_pipeline::kmeans::files::read_vocabulary(p) {
        Ok(c) => {
            for j in 0..c.k() {
                holds(c.row(j))?;
            }
            Ok(())
        }
        Err(e) => named(p, vocab_pipeline::chain(&e)),
    };
    all.push(Reader {
        name: "vocabulary-bin",
        file: "v.bin",
        seed: feature_file(Format::Bin, 16, 8),
        fields: feature_fields(),
        fixup: Fixup::FeatureFile,
        memory: 16 * mb,
        read: Box::new(move |p| clear(read_vocabulary(p))),
        beside: Vec::new(),
    });
    let vocabulary_text: Vec<u8> = (0..16)
        .map(|j| {
            let row: Vec<String> = (0..8)
                .map(|d| format!("{}", (j * 3 + d) as f32 / 32.0))
                .collect();
            row.join(" ") + "\n"
        })
        .collect::<String>()
        .into_bytes();
    all.push(Reader {
        name: "vocabulary-text",
        file: "v.txt",
        seed: vocabulary_text,
        fields: Vec::new(),
        fixup: Fixup::None,
        memory: 16 * mb,
        read: Box::new(move |p| clear(read_vocabulary(p))),
        beside: Vec::new(),
    });
    let read_table = |p: &Path| match vocab_pipeline::classify::read_histograms(p) {
        Ok(table) => {
            for row in &table.rows {
                holds(row)?;
            }
            assert_eq!(table.rows.len(), table.paths.len(), "rows and paths");
            Ok(())
        }
        Err(e) => Err(vocab_pipeline::chain(&e)),
    };
    let images: Vec<u8> = (0..10)
        .map(|i| format!("{i},photos/p{i}.jpg,64,48\n"))
        .fold("picture_id,path,width,height\n".to_string(), |a, l| a + &l)
        .into_bytes();
    all.push(Reader {
        name: "histograms-bin",
        file: "h.bin",
        seed: feature_file(Format::Bin, 10, 16),
        fields: feature_fields(),
        fixup: Fixup::FeatureFile,
        memory: 16 * mb,
        read: Box::new(move |p| read_table(p)),
        beside: vec![("h.bin.images.csv", images.clone())],
    });
    all.push(Reader {
        name: "histograms-manifest",
        file: "h.bin.images.csv",
        seed: images,
        fields: Vec::new(),
        fixup: Fixup::None,
        memory: 16 * mb,
        read: Box::new(move |p| {
            let bin = p.with_file_name("h.bin");
            read_table(&bin)
        }),
        beside: vec![("h.bin", feature_file(Format::Bin, 10, 16))],
    });
    let csv_histograms: Vec<u8> = (0..10)
        .map(|i| {
            let values: Vec<String> = (0..6)
                .map(|d| format!("{}", (i + d) as f32 / 60.0))
                .collect();
            format!("{i},photos/p{i}.jpg,{}\n", values.join(","))
        })
        .fold("picture_id,path,h0,h1,h2,h3,h4,h5\n".to_string(), |a, l| {
            a + &l
        })
        .into_bytes();
    all.push(Reader {
        name: "histograms-csv",
        file: "h.csv",
        seed: csv_histograms,
        fields: Vec::new(),
        fixup: Fixup::None,
        memory: 16 * mb,
        read: Box::new(move |p| read_table(p)),
        beside: Vec::new(),
    });
    all.push(Reader {
        name: "model",
        file: "m.json",
        seed: MODEL.as_bytes().to_vec(),
        fields: Vec::new(),
        fixup: Fixup::None,
        memory: 16 * mb,
        read: Box::new(|p| {
            clear(match vocab_pipeline::classify::ModelFile::load(p) {
                Ok(model) => {
                    // A model accepted predicts on a histogram of its length without a panic.
                    let len = model.classifier.models[0].w.len();
                    let width = model.kernel_map.map_or(1, |m| m.mapped_len(1));
                    let h = vec![0.5f32; len / width.max(1)];
                    if model.check_len(h.len(), p).is_ok() {
                        let class = model.predict(&h);
                        assert!(class < model.classifier.classes.len(), "class index");
                    }
                    Ok(())
                }
                Err(e) => named(p, vocab_pipeline::chain(&e)),
            })
        }),
        beside: Vec::new(),
    });
    all.push(Reader {
        name: "cluster-file",
        file: "cluster.toml",
        seed: CLUSTER.as_bytes().to_vec(),
        fields: Vec::new(),
        fixup: Fixup::None,
        memory: 16 * mb,
        read: Box::new(|p| {
            let text = String::from_utf8_lossy(&std::fs::read(p).expect("read")).into_owned();
            match vocab_cluster::net::config::Cluster::parse(&text, p) {
                Ok(_) => Ok(()),
                Err(e) => clear(named(p, vocab_pipeline::chain(&e))),
            }
        }),
        beside: Vec::new(),
    });
    all.push(Reader {
        name: "frame",
        file: "frame.bin",
        seed: frames(),
        fields: vec![(2, 1), (3, 1), (4, 4), (8, 4)],
        fixup: Fixup::None,
        memory: 16 * mb,
        read: Box::new(|p| {
            let mut bytes = std::fs::read(p).expect("read");
            // Every frame in the buffer, as a connection would parse them.
            loop {
                match Frame::parse(&bytes, 1 << 20) {
                    Ok(Some((_, used))) if used > 0 && used <= bytes.len() => {
                        bytes.drain(..used);
                    }
                    Ok(Some((_, used))) => panic!("a frame of {used} bytes from {}", bytes.len()),
                    Ok(None) => return Ok(()),
                    Err(e) => return Err(e.to_string()),
                }
            }
        }),
        beside: Vec::new(),
    });
    all
}

/// One of each frame kind, back to back.
fn frames() -> Vec<u8> {
    let mut out = bytes::BytesMut::new();
    for frame in [
        Frame::Hello {
            name: "w0".into(),
            nonce: [3; 32],
        },
        Frame::Challenge { nonce: [4; 32] },
        Frame::Response { proof: [5; 32] },
        Frame::Welcome { proof: [6; 32] },
        Frame::Ping { seq: 7 },
        Frame::Pong { seq: 7 },
        Frame::Error {
            message: "no".into(),
        },
        Frame::Control(bytes::Bytes::from_static(br#"{"Join":{}}"#)),
        Frame::Data {
            tag: 9,
            data: bytes::Bytes::from_static(b"0123456789"),
        },
    ] {
        frame.encode(&mut out);
    }
    out.to_vec()
}

/// A cluster file of three nodes on two racks.
const CLUSTER: &str = "[settings]\nsecret_file = \"secret\"\nretries = 2\nchunk_size = 65536\nio_timeout_ms = 5000\n\n[[nodes]]\nname = \"w0\"\naddress = \"127.0.0.1:7000\"\nrack = \"r0\"\n\n[[nodes]]\nname = \"w1\"\naddress = \"127.0.0.1:7001\"\nrack = \"r1\"\n\n[[nodes]]\nname = \"w2\"\naddress = \"127.0.0.1:7002\"\nrack = \"r0\"\n";

/// A model of three classes over a 4-word, 2-level encoding (20 values) and a kernel map.
const MODEL: &str = r#"{"version":1,"attribute":"kind","split":{"kind":"random","seed":7,"holdout":0.5},"encoding":{"vocabulary":"/nonexistent/voc.bin","k":4,"stride":8,"norm":"l1","pyramid":2,"max_side":null},"cv_accuracy":0.75,"kernel_map":{"kernel":"chi2","order":1,"period":2.0},"classifier":{"classes":["city","field","mountain"],"models":[{"w":[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0,1.1,1.2,1.3,1.4,1.5,1.6,1.7,1.8,1.9,2.0,2.1,2.2,2.3,2.4,2.5,2.6,2.7,2.8,2.9,3.0,3.1,3.2,3.3,3.4,3.5,3.6,3.7,3.8,3.9,4.0,4.1,4.2,4.3,4.4,4.5,4.6,4.7,4.8,4.9,5.0,5.1,5.2,5.3,5.4,5.5,5.6,5.7,5.8,5.9,6.0],"bias":0.5},{"w":[-0.1,-0.2,-0.3,-0.4,-0.5,-0.6,-0.7,-0.8,-0.9,-1.0,-1.1,-1.2,-1.3,-1.4,-1.5,-1.6,-1.7,-1.8,-1.9,-2.0,-2.1,-2.2,-2.3,-2.4,-2.5,-2.6,-2.7,-2.8,-2.9,-3.0,-3.1,-3.2,-3.3,-3.4,-3.5,-3.6,-3.7,-3.8,-3.9,-4.0,-4.1,-4.2,-4.3,-4.4,-4.5,-4.6,-4.7,-4.8,-4.9,-5.0,-5.1,-5.2,-5.3,-5.4,-5.5,-5.6,-5.7,-5.8,-5.9,-6.0],"bias":-0.5},{"w":[1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0],"bias":0.0}],"c":1.0}}"#;
