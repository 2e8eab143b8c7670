//! What a new user's mistakes get: a message that says what failed, with no temporary paths.

use std::path::{Path, PathBuf};

use crate::util::*;

/// `dir/bad`: four "photos" that are text, labelled with two kinds.
fn unreadable_photos(dir: &Path) -> PathBuf {
    let bad = dir.join("bad");
    std::fs::create_dir_all(&bad).expect("dir");
    for name in ["a", "b", "c", "d"] {
        std::fs::write(bad.join(format!("{name}.jpg")), b"hello").expect("photo");
    }
    std::fs::write(
        bad.join("labels.csv"),
        "path,kind\na.jpg,x\nb.jpg,y\nc.jpg,x\nd.jpg,y\n",
    )
    .expect("labels");
    bad
}

#[test]
fn no_photo_read_is_an_error_naming_the_first_reasons() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = unreadable_photos(dir.path());
    let out = dir.path().join("f.bin");
    let err = fails(&["features", "--input", s(&bad), "--out", s(&out)]);
    assert!(err.contains("none of the 4 photos of"), "{err}");
    assert!(
        err.contains("a.jpg: cannot decode") && err.contains("; ..."),
        "{err}"
    );
    assert!(
        !out.exists(),
        "nothing written for a stage that read nothing"
    );
    // The same in a run, in this process and on loopback workers (whose partitions are born
    // on the nodes): the cause, not a partition count, and no temporary cluster file.
    for nodes in ["0", "2"] {
        let config = dir.path().join(format!("c{nodes}.toml"));
        let text = format!(
            "[dataset]\npath = {:?}\n\n[kmeans]\nk = [2]\nnodes = {nodes}\n",
            s(&bad)
        );
        std::fs::write(&config, text).expect("config");
        let work = dir.path().join(format!("w{nodes}"));
        let err = fails(&["run", s(&config), "--work", s(&work)]);
        assert!(
            err.contains("none of the 2 photos of"),
            "nodes = {nodes}: {err}"
        );
        assert!(
            !err.contains("cluster.toml") && !err.contains("partitions"),
            "{err}"
        );
        // (This test's own folder is a temporary one too: any other is vocab's.)
        let others = err.replace(s(dir.path()), "DIR");
        let tmp = std::env::temp_dir().join(".tmp");
        assert!(!others.contains(s(&tmp)), "a temporary path: {err}");
    }
}

#[test]
fn an_empty_folder_is_named_before_its_labels() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).expect("dir");
    let err = fails(&[
        "features",
        "--input",
        s(&empty),
        "--out",
        s(&dir.path().join("f")),
    ]);
    assert!(err.contains("no photos in"), "{err}");
    let config = dir.path().join("c.toml");
    let text = format!("[dataset]\npath = {:?}\n\n[kmeans]\nk = [2]\n", s(&empty));
    std::fs::write(&config, text).expect("config");
    let err = fails(&["run", s(&config), "--work", s(&dir.path().join("w"))]);
    assert!(
        err.contains("no photos in") && !err.contains("labels"),
        "{err}"
    );
}

#[test]
fn a_csv_vocabulary_says_how_numpy_reads_its_header() {
    let dir = tempfile::tempdir().expect("tempdir");
    let synth = dir.path().join("s.bin");
    ok(&[
        "datasets",
        "synth",
        "--n",
        "200",
        "--dims",
        "8",
        "--clusters",
        "4",
        "--out",
        s(&synth),
    ]);
    let csv = dir.path().join("v.csv");
    let said = ok(&[
        "kmeans",
        "--features",
        s(&synth),
        "--k",
        "4",
        "--out",
        s(&csv),
    ]);
    assert!(
        said.contains("numpy.loadtxt(f, delimiter=\",\", skiprows=1)"),
        "{said}"
    );
    let bin = dir.path().join("v.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&synth),
        "--k",
        "4",
        "--out",
        s(&bin),
    ]);
    let again = dir.path().join("w.csv");
    let said = ok(&[
        "convert",
        "--vocabulary",
        "--input",
        s(&bin),
        "--out",
        s(&again),
    ]);
    assert!(said.contains("skiprows=1"), "{said}");
    // What the hint says holds: one header line, then rows of numbers only.
    let text = std::fs::read_to_string(&again).expect("csv");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("v1,v2,v3,v4,v5,v6,v7,v8"));
    let rows: Vec<Vec<f32>> = lines
        .map(|l| l.split(',').map(|v| v.parse().expect("a number")).collect())
        .collect();
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r.len() == 8));
}
