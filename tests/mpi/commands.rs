//! `vocab features`, `encode` (VLAD and Fisher vectors) and `mixture` on MPI ranks: the files of
//! one process, byte for byte.

use std::path::Path;

use crate::util::*;

/// Runs `args` (a command writing `--out OUT`) once in one process to `one` and once on 3 MPI
/// ranks to `three`, and checks that the file and its `suffixes` beside it are the same bytes.
fn one_process_equals_three_ranks(
    args: &dyn Fn(&Path) -> Vec<String>,
    (one, three): (&Path, &Path),
    suffixes: &[&str],
) {
    let local: Vec<String> = args(one);
    vocab(&local.iter().map(String::as_str).collect::<Vec<_>>());
    let mut ranked = args(three);
    ranked.extend(["--engine".to_string(), "mpi".to_string()]);
    let stdout = mpi_ok(3, &ranked.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(stdout.contains("on MPI ranks (3 nodes)"), "{stdout}");
    for suffix in suffixes {
        let read = |p: &Path| std::fs::read(format!("{}{suffix}", p.display())).expect("read");
        assert!(read(one) == read(three), "{suffix} differs under MPI");
    }
}

#[test]
fn vocab_features_under_mpi_writes_the_single_process_file() {
    let tmp = tempfile::tempdir().expect("tmp");
    let photos = tmp.path().join("photos");
    vocab(&["datasets", "photos", "--out", s(&photos), "--per-kind", "3"]);
    std::fs::write(photos.join("broken.jpg"), b"not a jpeg").expect("broken");
    let (one, three) = (tmp.path().join("one.bin"), tmp.path().join("three.bin"));
    let args = |out: &Path| -> Vec<String> {
        [
            "features",
            "--input",
            s(&photos),
            "--out",
            s(out),
            "--per-image",
            "7",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let files = (one.as_path(), three.as_path());
    one_process_equals_three_ranks(&args, files, &["", ".images.csv", ".skipped.csv"]);
}

#[test]
fn vlad_encode_under_mpi_writes_the_single_process_vectors() {
    let tmp = tempfile::tempdir().expect("tmp");
    let photos = tmp.path().join("photos");
    vocab(&["datasets", "photos", "--out", s(&photos), "--per-kind", "3"]);
    let (features, words) = (tmp.path().join("f.bin"), tmp.path().join("v.bin"));
    vocab(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&features),
        "--per-image",
        "20",
    ]);
    vocab(&[
        "kmeans",
        "--features",
        s(&features),
        "--k",
        "4",
        "--out",
        s(&words),
    ]);
    let (one, three) = (tmp.path().join("one.bin"), tmp.path().join("three.bin"));
    let args = |out: &Path| -> Vec<String> {
        [
            "encode",
            "--vocabulary",
            s(&words),
            "--input",
            s(&photos),
            "--method",
            "vlad",
            "--soft",
            "2",
            "--pyramid",
            "2",
            "--stride",
            "16",
            "--out",
            s(out),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let files = (one.as_path(), three.as_path());
    one_process_equals_three_ranks(&args, files, &["", ".images.csv", ".encoding.json"]);
}

#[test]
fn a_mixture_under_mpi_is_the_single_process_mixture() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (parts, _) = setup(tmp.path(), &KMEANS);
    let args = |out: &Path| -> Vec<String> {
        [
            "mixture",
            "--features",
            s(&parts),
            "--components",
            "5",
            "--pca-dims",
            "6",
            "--iterations",
            "5",
            "--tol",
            "0",
            "--out",
            s(out),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let (one, three) = (tmp.path().join("one.json"), tmp.path().join("three.json"));
    vocab(&args(&one).iter().map(String::as_str).collect::<Vec<_>>());
    let mut ranked = args(&three);
    ranked.extend(["--engine".to_string(), "mpi".to_string()]);
    let stdout = mpi_ok(3, &ranked.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(stdout.contains("on 3 MPI ranks"), "{stdout}");
    let read = |p: &Path| std::fs::read(p).expect("read");
    assert!(read(&one) == read(&three), "the ranks' mixture differs");
}

#[test]
fn fisher_encode_under_mpi_writes_the_single_process_vectors() {
    let tmp = tempfile::tempdir().expect("tmp");
    let photos = tmp.path().join("photos");
    vocab(&["datasets", "photos", "--out", s(&photos), "--per-kind", "3"]);
    let (features, mixture) = (tmp.path().join("f.bin"), tmp.path().join("g.json"));
    vocab(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&features),
        "--per-image",
        "20",
    ]);
    vocab(&[
        "mixture",
        "--features",
        s(&features),
        "--components",
        "3",
        "--pca-dims",
        "6",
        "--out",
        s(&mixture),
    ]);
    let (one, three) = (tmp.path().join("one.bin"), tmp.path().join("three.bin"));
    let args = |out: &Path| -> Vec<String> {
        [
            "encode",
            "--vocabulary",
            s(&mixture),
            "--input",
            s(&photos),
            "--method",
            "fisher",
            "--pyramid",
            "2",
            "--out",
            s(out),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let files = (one.as_path(), three.as_path());
    one_process_equals_three_ranks(&args, files, &["", ".images.csv", ".encoding.json"]);
}

/// `dir/desc`: for every photo of `photos`, a CSV of 30 keypoints inside it, each with 6 values
/// that differ from photo to photo (descriptors made elsewhere).
pub fn descriptors(dir: &Path, photos: &Path) -> std::path::PathBuf {
    let desc = dir.join("desc");
    let labels = std::fs::read_to_string(photos.join("labels.csv")).expect("labels");
    for (i, line) in labels.lines().skip(1).enumerate() {
        let path = line.split(',').next().expect("path");
        let (w, h) = image::image_dimensions(photos.join(path)).expect("size");
        let mut text = String::from("x,y,size,a,b,c,d,e,f\n");
        for r in 0..30u32 {
            let values: Vec<String> = (0..6u32)
                .map(|j| format!("{}", (r * 13 + j * 7 + i as u32 * 5) % 17))
                .collect();
            text += &format!("{},{},16,{}\n", r * 7 % w, r * 11 % h, values.join(","));
        }
        let file = desc.join(path).with_extension("csv");
        std::fs::create_dir_all(file.parent().expect("folder")).expect("folder");
        std::fs::write(file, text).expect("csv");
    }
    desc
}

#[test]
fn descriptors_made_elsewhere_under_mpi_give_the_single_process_files() {
    let tmp = tempfile::tempdir().expect("tmp");
    let photos = tmp.path().join("photos");
    vocab(&["datasets", "photos", "--out", s(&photos), "--per-kind", "3"]);
    let desc = descriptors(tmp.path(), &photos);
    let owned = |args: &[&str]| -> Vec<String> { args.iter().map(|a| a.to_string()).collect() };
    let from = ["--input", s(&photos), "--from", s(&desc)];
    // The vocabulary's sample.
    let (one, three) = (tmp.path().join("one.bin"), tmp.path().join("three.bin"));
    let args = |out: &Path| {
        owned(
            &[
                &["features"][..],
                &from,
                &["--per-image", "8"],
                &["--out", s(out)],
            ]
            .concat(),
        )
    };
    let files = (one.as_path(), three.as_path());
    one_process_equals_three_ranks(&args, files, &["", ".images.csv", ".skipped.csv"]);
    // Bag of words over a vocabulary of it.
    let words = tmp.path().join("v.bin");
    vocab(&[
        "kmeans",
        "--features",
        s(&one),
        "--k",
        "3",
        "--out",
        s(&words),
    ]);
    let (one, three) = (tmp.path().join("h1.bin"), tmp.path().join("h3.bin"));
    let args = |out: &Path| {
        owned(
            &[
                &["encode", "--vocabulary", s(&words)][..],
                &from,
                &["--out", s(out)],
            ]
            .concat(),
        )
    };
    let files = (one.as_path(), three.as_path());
    one_process_equals_three_ranks(&args, files, &["", ".images.csv", ".encoding.json"]);
    // Fisher vectors over a mixture of it.
    let mixture = tmp.path().join("g.json");
    vocab(
        &[
            "mixture",
            "--features",
            s(&tmp.path().join("one.bin")),
            "--components",
            "2",
        ]
        .iter()
        .copied()
        .chain(["--pca-dims", "4", "--out", s(&mixture)])
        .collect::<Vec<_>>(),
    );
    let (one, three) = (tmp.path().join("f1.bin"), tmp.path().join("f3.bin"));
    let fisher = [
        "--vocabulary",
        s(&mixture),
        "--method",
        "fisher",
        "--pyramid",
        "2",
    ];
    let args = |out: &Path| owned(&[&["encode"][..], &from, &fisher, &["--out", s(out)]].concat());
    let files = (one.as_path(), three.as_path());
    one_process_equals_three_ranks(&args, files, &["", ".images.csv", ".encoding.json"]);
}
