//! The one way out (issue 49): every file a command writes, side files included, is checked
//! against all of its inputs, and nothing that is not a regular file is ever replaced.

use std::path::{Path, PathBuf};

use crate::util::*;

/// Every file below `dir` with its bytes, sorted by path.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all: Vec<(PathBuf, Vec<u8>)> = walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let bytes = std::fs::read(e.path()).expect("read");
            (e.into_path(), bytes)
        })
        .collect();
    all.sort();
    all
}

/// A FIFO at `path`.
fn fifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("path");
    // SAFETY: mkfifo on a NUL-terminated path of the test's own folder.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0, "mkfifo");
}

fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

/// Synthetic vectors at `path`.
fn synth(path: &Path, n: &str, dims: &str) {
    ok(&[
        "datasets",
        "synth",
        "--n",
        n,
        "--dims",
        dims,
        "--clusters",
        "4",
        "--out",
        s(path),
    ]);
}

#[test]
fn vocab_words_never_writes_over_its_vocabulary_photos_or_labels() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let photos = photo_set_of(d, 2, 3);
    sample_of(d, &photos);
    let vocabulary = d.join("v.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&d.join("f.bin")),
        "--k",
        "4",
        "--seed",
        "1",
        "--out",
        s(&vocabulary),
    ]);
    let before = snapshot(d);
    let words = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "words",
            "--vocabulary",
            s(&vocabulary),
            "--input",
            s(&photos),
            "--out",
            s(out),
            "--words",
            "2",
            "--patches",
            "2",
            "--per-image",
            "5",
        ];
        args.extend(extra);
        fails(&args)
    };
    // Its own vocabulary as the PNG.
    let err = words(&vocabulary, &[]);
    assert!(
        err.contains("is the input --vocabulary") && err.contains(s(&vocabulary)),
        "{err}"
    );
    // A photo of --input, or any new file among the photos (the next run would count it).
    let photo = photos.join("city/city_000.jpg");
    let err = words(&photo, &[]);
    assert!(err.contains("--input"), "{err}");
    let err = words(&photos.join("montage.png"), &[]);
    assert!(
        err.contains("lies inside the input folder --input"),
        "{err}"
    );
    // labels.csv through the CSV side file (`<out>.csv`), the labels given apart from photos.
    let labels = d.join("labels");
    std::fs::copy(photos.join("labels.csv"), labels.with_extension("csv")).expect("copy");
    let err = words(&labels, &["--labels", s(&labels.with_extension("csv"))]);
    assert!(
        err.contains("through its side file") && err.contains("labels.csv"),
        "{err}"
    );
    std::fs::remove_file(labels.with_extension("csv")).expect("rm");
    assert_eq!(snapshot(d), before, "nothing written");
}

#[test]
fn an_input_reached_through_a_side_file_is_refused_before_any_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let side = d.join("v.bin.iterations.csv");
    synth(&side, "200", "4");
    let before = snapshot(d);
    let err = fails(&[
        "kmeans",
        "--features",
        s(&side),
        "--k",
        "4",
        "--out",
        s(&d.join("v.bin")),
    ]);
    assert!(
        err.contains("--out") && err.contains("through its side file") && err.contains(s(&side)),
        "{err}"
    );
    assert_eq!(snapshot(d), before);
    // A hard link to the input is the input.
    let hard = d.join("h.bin");
    std::fs::hard_link(&side, &hard).expect("hard link");
    let err = fails(&["convert", "--input", s(&side), "--out", s(&hard)]);
    assert!(err.contains("is the input --input"), "{err}");
}

#[test]
fn fifos_and_device_nodes_given_as_outputs_are_refused_and_left_as_they_are() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let features = d.join("f.bin");
    synth(&features, "200", "4");
    let photos = photo_set_of(d, 2, 3);
    let pipe = d.join("pipe.bin");
    fifo(&pipe);
    // A device node of our own (root can make one; elsewhere the FIFO alone is tried).
    let device = d.join("null.bin");
    let made_device = {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::CString::new(device.as_os_str().as_bytes()).expect("path");
        // SAFETY: mknod of a character device (1, 3: null) at a path of the test's folder.
        unsafe { libc::mknod(name.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) == 0 }
    };
    let mut outs = vec![(pipe.clone(), "a FIFO")];
    if made_device {
        outs.push((device.clone(), "a device node"));
    }
    for (out, what) in &outs {
        for args in [
            vec!["convert", "--input", s(&features), "--out", s(out)],
            vec![
                "kmeans",
                "--features",
                s(&features),
                "--k",
                "4",
                "--out",
                s(out),
            ],
            vec![
                "features",
                "--input",
                s(&photos),
                "--per-image",
                "5",
                "--out",
                s(out),
            ],
        ] {
            let err = fails(&args);
            assert!(
                err.contains(what) && err.contains(s(out)),
                "{args:?}: {err}"
            );
        }
    }
    assert!(is_fifo(&pipe), "the FIFO is still a FIFO");
    if made_device {
        use std::os::unix::fs::FileTypeExt;
        let kind = std::fs::symlink_metadata(&device)
            .expect("device")
            .file_type();
        assert!(kind.is_char_device(), "the device node is still one");
    }
}

#[test]
fn a_work_folder_that_vocab_did_not_make_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let work = d.join("mine");
    std::fs::create_dir_all(work.join("report")).expect("mkdir");
    std::fs::write(work.join("report/report.md"), "my notes").expect("write");
    let before = snapshot(&work);
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/quickstart.toml");
    let err = fails(&["run", config, "--work", s(&work)]);
    assert!(
        err.contains("is not a vocab work directory") && err.contains(s(&work)),
        "{err}"
    );
    assert_eq!(snapshot(&work), before);
    assert!(!work.join(".lock").exists());
}

#[test]
fn step_folders_that_are_links_are_refused_never_followed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let photos = photo_set_of(d, 3, 5);
    let config = small_config(d, &photos);
    let work = d.join("work");
    ok(&["run", s(&config), "--work", s(&work)]);
    // A finished step moved out and linked back: a cached read would follow it out.
    let sample = step_dir(&work, "features");
    let elsewhere = d.join("elsewhere");
    std::fs::rename(&sample, &elsewhere).expect("move");
    std::os::unix::fs::symlink(&elsewhere, &sample).expect("symlink");
    let before = snapshot(&elsewhere);
    let err = fails(&["run", s(&config), "--work", s(&work)]);
    assert!(
        err.contains("is a link") && err.contains(s(&sample)),
        "{err}"
    );
    assert_eq!(snapshot(&elsewhere), before);
    // A temporary folder that is a link (a resumed step's, say) is refused the same way.
    std::fs::remove_file(&sample).expect("rm link");
    std::fs::rename(&elsewhere, &sample).expect("move back");
    let name = sample
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let tmp = work.join("features").join(format!(".tmp-{name}"));
    let target = d.join("target");
    std::fs::create_dir(&target).expect("mkdir");
    std::os::unix::fs::symlink(&target, &tmp).expect("symlink");
    let err = fails(&["run", s(&config), "--work", s(&work), "--force", "features"]);
    assert!(err.contains("is a link") && err.contains(".tmp-"), "{err}");
    assert!(std::fs::read_dir(&target).expect("target").next().is_none());
}

#[test]
fn the_nodes_partition_folder_and_the_rounds_journal_are_checked_like_any_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let photos = photo_set_of(d, 3, 5);
    let before = snapshot(&photos);
    // The nodes would write partitions into the photo folder (per node or not).
    for folder in ["{node}", "parts"] {
        let config = d.join("nodes.toml");
        std::fs::write(
            &config,
            format!(
                "[dataset]\npath = {:?}\n[features]\nper_image = 9\n[partition]\nparts = 2\n\
                 at = \"nodes\"\nfolder = {:?}\n[kmeans]\nk = [4]\niterations = 2\nnodes = 2\n\
                 [encode]\nstride = 16\n[classify]\nsplit_by = \"kind\"\ncv = 2\n",
                s(&photos),
                s(&photos.join(folder))
            ),
        )
        .expect("config");
        let work = d.join(format!("work-{}", folder.replace(['{', '}'], "")));
        let err = fails(&["run", s(&config), "--work", s(&work)]);
        assert!(
            err.contains("lies inside the input folder") || err.contains("is the input"),
            "{folder}: {err}"
        );
        assert_eq!(
            snapshot(&photos),
            before,
            "{folder}: nothing written among the photos"
        );
    }
    // A sharded stage's saved rounds are its own folder: a link there is refused, not followed.
    let out = d.join("f.bin");
    let elsewhere = d.join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    std::os::unix::fs::symlink(&elsewhere, d.join("f.bin.rounds")).expect("symlink");
    let err = fails(&[
        "features",
        "--input",
        s(&photos),
        "--per-image",
        "5",
        "--local-nodes",
        "2",
        "--out",
        s(&out),
    ]);
    assert!(err.contains("is a link"), "{err}");
    assert!(
        std::fs::read_dir(&elsewhere)
            .expect("elsewhere")
            .next()
            .is_none()
    );
}
