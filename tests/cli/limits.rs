//! Bounds named in their messages (the second hardening round, issue 37): thread counts, the
//! magnitude of values, a large photo's memory, and what `config check` refuses.

use std::path::Path;

use crate::util::*;

#[test]
fn thread_counts_past_the_bound_are_refused() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/quickstart.toml");
    let err = fails(&["--threads", "100000", "config", "check", config]);
    assert!(
        err.contains("--threads 100000: must be at most 1024 threads"),
        "{err}"
    );
}

/// `n` rows of `dims` values in 3 clusters at `scale` (cluster c near c * scale).
fn clusters_at(path: &Path, scale: f64, n: usize, dims: usize) {
    let mut text = String::new();
    for i in 0..n {
        let c = (i % 3) as f64;
        text.push_str(&format!("{i} 0 0"));
        for d in 0..dims {
            let jitter = ((i * 31 + d * 17) % 11) as f64 / 11.0 - 0.5;
            text.push_str(&format!(" {:e}", scale * (c + 0.01 * jitter)));
        }
        text.push('\n');
    }
    std::fs::write(path, text).expect("write");
}

#[test]
fn values_of_any_magnitude_give_a_correct_result_or_a_refusal_naming_the_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let assignments: [&[&str]; 5] = [
        &[],
        &["--prune"],
        &["--kernel", "int8"],
        &["--kernel", "int8", "--prune", "false"],
        &["--assign", "approx"],
    ];
    for (scale, name, line) in [(1e20, "big.txt", 2), (3e38, "huge.txt", 1)] {
        let data = d.join(name);
        clusters_at(&data, scale, 300, 8);
        let parts = d.join(format!("{name}.parts"));
        let err = fails(&[
            "partition",
            "--features",
            s(&data),
            "--parts",
            "2",
            "--out",
            s(&parts),
        ]);
        assert!(
            err.contains(&format!("{name}: line {line}: value 1")) && err.contains("rescale"),
            "{err}"
        );
        for extra in assignments {
            let mut args = vec!["kmeans", "--features", s(&data), "--k", "3", "--out"];
            let out = d.join("v.txt");
            args.push(s(&out));
            args.extend_from_slice(extra);
            let err = fails(&args);
            assert!(
                err.contains(&format!("{name}: line {line}: value 1")),
                "{extra:?}: {err}"
            );
            assert!(!err.contains("panicked"), "{extra:?}: {err}");
        }
    }
    // Within the bound: finite inertia and the three clusters found, on every assignment.
    let data = d.join("b17.txt");
    clusters_at(&data, 1e17, 300, 8);
    for extra in assignments {
        let out = d.join("v17.txt");
        let mut args = vec![
            "kmeans",
            "--features",
            s(&data),
            "--k",
            "3",
            "--seed",
            "1",
            "--out",
            s(&out),
        ];
        args.extend_from_slice(extra);
        let text = ok(&args);
        assert!(!text.contains("inf"), "{extra:?}: {text}");
        let mut firsts: Vec<f64> = std::fs::read_to_string(&out)
            .expect("vocabulary")
            .lines()
            .map(|l| {
                l.split_whitespace()
                    .next()
                    .expect("value")
                    .parse()
                    .expect("number")
            })
            .collect();
        firsts.sort_by(f64::total_cmp);
        for (c, got) in firsts.iter().enumerate() {
            let want = c as f64 * 1e17;
            assert!(
                (got - want).abs() < 1e15,
                "{extra:?}: centroid {c} at {got:e}"
            );
        }
    }
    // A vocabulary with one value past the bound: refused naming the word.
    let photos = photo_set(d);
    let voc = d.join("bad-voc.txt");
    let mut words: Vec<String> = (0..4)
        .map(|w| vec![format!("{}", w as f32 / 8.0); 512].join(" "))
        .collect();
    words[2] = words[2].replacen("0.25", "1e38", 1);
    std::fs::write(&voc, words.join("\n") + "\n").expect("write");
    let hist = d.join("h.bin");
    for extra in [&[][..], &["--assign", "approx"]] {
        let mut args = vec![
            "encode",
            "--vocabulary",
            s(&voc),
            "--input",
            s(&photos),
            "--out",
            s(&hist),
        ];
        args.extend_from_slice(extra);
        let err = fails(&args);
        assert!(
            err.contains("bad-voc.txt: line 3: value 1 (1e38) exceeds"),
            "{extra:?}: {err}"
        );
    }
}

/// A gray PNG of `width x height` noise, its pixels in stored (uncompressed) deflate blocks.
fn gray_png(path: &Path, width: u32, height: u32) {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32fast::hash(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let mut raw = Vec::with_capacity((width as usize + 1) * height as usize);
    let mut state = 0x2545_f491_u32;
    for _ in 0..height {
        let row = (0..width).map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 24) as u8
        });
        raw.extend(std::iter::once(0).chain(row)); // filter byte: none
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &raw {
        a = (a + u32::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    let mut z = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65535).collect();
    for (i, block) in blocks.iter().enumerate() {
        z.push(u8::from(i + 1 == blocks.len()));
        let len = block.len() as u16;
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(block);
    }
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(&mut png, b"IDAT", &z);
    chunk(&mut png, b"IEND", &[]);
    std::fs::write(path, png).expect("png");
}

/// Runs vocab to completion; its peak resident memory in bytes.
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which gives its resource usage too"
)]
fn peak_memory(args: &[&str]) -> u64 {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args(args)
        .arg("--quiet")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("vocab starts");
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: a child of this process, waited for once; status and usage are valid outputs.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "vocab {args:?} failed"
    );
    usage.ru_maxrss as u64 * 1024
}

#[test]
fn a_large_photo_is_encoded_within_its_stated_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let photos = d.join("big");
    std::fs::create_dir(&photos).expect("mkdir");
    // 4,000 x 3,000: 12 Mpix, 186,000 patches at stride 8 (380 MB of descriptors at once).
    gray_png(&photos.join("noise.png"), 4000, 3000);
    let feats = d.join("f.bin");
    ok(&[
        "datasets",
        "synth",
        "--n",
        "200",
        "--dims",
        "512",
        "--clusters",
        "4",
        "--out",
        s(&feats),
    ]);
    let voc = d.join("voc.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&feats),
        "--k",
        "16",
        "--out",
        s(&voc),
    ]);
    let hist = d.join("h.bin");
    let peak = peak_memory(&[
        "--threads",
        "1",
        "encode",
        "--vocabulary",
        s(&voc),
        "--input",
        s(&photos),
        "--max-pixels",
        "12",
        "--out",
        s(&hist),
    ]);
    // The stated figure: 12 bytes a pixel of the 12 Mpix limit, a strip, the patches' words.
    let bound = 12_000_000 * 12 + 8 * 1024 * 1024 + 186_000 * 24 + 64 * 1024 * 1024;
    assert!(peak < bound, "peak {peak} bytes, bound {bound}");
    assert_eq!(csv_rows(&d.join("h.bin.images.csv")).len(), 1);
}

#[test]
fn config_check_names_the_config_whatever_check_refuses_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("c.toml");
    for (text, want) in [
        (
            "[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n[classify]\nattributes = [\"urbinicity\"]\n",
            "has no column \"urbinicity\"",
        ),
        (
            "[dataset]\nsynthetic = { per_kind = 2 }\n[features]\nper_image = 5\n[kmeans]\nk = [128]\n",
            "larger than the vocabulary's sample",
        ),
    ] {
        std::fs::write(&config, text).expect("write");
        let err = fails(&["config", "check", s(&config)]);
        assert!(
            err.contains(&format!("invalid config {}", s(&config))) && err.contains(want),
            "{err}"
        );
    }
}
