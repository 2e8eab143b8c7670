//! Where the sample and its partitions are made (`[partition] at`), and what a work folder's
//! cached steps serve: the same results wherever the stages ran.

use std::path::{Path, PathBuf};

use crate::util::*;

/// A config of the photo set `photos` whose k-means runs on `nodes` loopback workers (0: one
/// process); `folder` is where the nodes keep their partitions ("": the default, one folder
/// they share).
fn config(dir: &Path, name: &str, photos: &Path, nodes: usize, folder: &str) -> PathBuf {
    let path = dir.join(name);
    let folder = if folder.is_empty() {
        String::new()
    } else {
        format!("folder = {folder:?}\n")
    };
    std::fs::write(
        &path,
        format!(
            "[dataset]\npath = {:?}\nlabels = {:?}\n[features]\nper_image = 9\n\
             [partition]\nparts = 5\nat = \"nodes\"\n{folder}\
             [kmeans]\nk = [6, 12]\niterations = 3\ntol = 0\nnodes = {nodes}\n\
             [encode]\nstride = 16\n\
             [classify]\nattributes = [\"elevation\"]\ncv = 2\n",
            s(photos),
            s(&photos.join("labels.csv"))
        ),
    )
    .expect("config");
    path
}

/// The stages a run's summary says ran (not cached).
fn ran(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.ends_with(" ran"))
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

/// Keys say what a step computes, never where it ran: three loopback workers take every step
/// a one-machine run made (the sample here is split here and read by the workers from it);
/// one machine takes every step the workers made, when their partitions lie whole in its work
/// folder; where they do not (a folder per node), it describes the photos again and takes
/// the rest.
#[test]
fn cached_steps_serve_whichever_engine_runs_next() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set_of(dir.path(), 6, 5);
    let local = config(dir.path(), "local.toml", &photos, 0, "");
    let three = config(dir.path(), "three.toml", &photos, 3, "");
    let accuracy =
        |work: &Path| std::fs::read_to_string(work.join("report/accuracy.csv")).expect("accuracy");

    let w = dir.path().join("w");
    ok(&["run", s(&local), "--work", s(&w)]);
    let made = steps(&w);
    let out = ok(&["run", s(&three), "--work", s(&w)]);
    assert_eq!(ran(&out), ["report"], "{out}");
    assert!(out.contains("the sample is here"), "{out}");
    assert_eq!(steps(&w), made);

    let v = dir.path().join("v");
    let first = ok(&["run", s(&three), "--work", s(&v)]);
    assert!(first.contains("kept at the nodes"), "{first}");
    let out = ok(&["run", s(&local), "--work", s(&v)]);
    assert_eq!(ran(&out), ["report"], "{out}");
    assert_eq!(accuracy(&v), accuracy(&w));

    // A folder per node is not this machine's to read whole: the sample is made again here,
    // k-means, encode and svm come from the cache.
    let u = dir.path().join("u");
    let apart = config(dir.path(), "apart.toml", &photos, 3, "nodes/{node}");
    let local_apart = config(dir.path(), "local-apart.toml", &photos, 0, "nodes/{node}");
    ok(&["run", s(&apart), "--work", s(&u)]);
    let out = ok(&["run", s(&local_apart), "--work", s(&u)]);
    assert_eq!(ran(&out), ["features", "partition", "report"], "{out}");
    assert!(out.contains("made again here"), "{out}");
    assert_eq!(accuracy(&u), accuracy(&w));
}

#[test]
fn partitions_born_on_the_nodes_give_the_one_machine_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = |name: &str| dir.path().join(name);
    let photos = photo_set_of(dir.path(), 6, 5);
    // A photo every node skips.
    std::fs::write(photos.join("city/broken.jpg"), b"not a jpeg").expect("broken");
    let labels = photos.join("labels.csv");
    let mut text = std::fs::read_to_string(&labels).expect("labels");
    text.push_str("city/broken.jpg,city,urban,flat\n");
    std::fs::write(&labels, text).expect("labels");
    // `folder`: where nodes keep partitions ("" for the default, one folder they share).
    let config =
        |name: &str, nodes: usize, folder: &str| config(dir.path(), name, &photos, nodes, folder);
    // What the run made: vocabularies, histograms, the features manifests and the scores.
    let made = |work: &Path| -> Vec<(String, Vec<u8>)> {
        let mut all = Vec::new();
        for step in steps(work) {
            for name in [
                "sample.bin.images.csv",
                "sample.bin.skipped.csv",
                "vocabulary.bin",
                "histograms.bin",
                "model.json.metrics.csv",
                "model.json.predictions.csv",
            ] {
                let path = work.join(&step).join(name);
                if path.is_file() {
                    // By stage and label: the work folders are compared without their keys.
                    let stage = step.split('/').next().unwrap_or_default();
                    let label = step.rsplit('/').next().unwrap_or_default();
                    let label = label.rsplit_once('-').map_or(label, |(l, _)| l);
                    all.push((
                        format!("{stage}/{label}/{name}"),
                        std::fs::read(&path).expect("read"),
                    ));
                }
            }
        }
        all.sort();
        all
    };
    let local = p("local");
    ok(&["run", s(&config("local.toml", 0, "")), "--work", s(&local)]);
    let want = made(&local);
    assert_eq!(
        want.len(),
        2 + 2 + 2 + 4,
        "{:?}",
        want.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    // One machine has no nodes: `at = "nodes"` makes the partitions here as usual.
    assert!(
        steps(&local)
            .iter()
            .any(|s| s.starts_with("partition/parts-"))
    );
    assert!(!local.join("nodes").exists());

    // Three loopback workers: the sample stays at the nodes, the results are the one machine's.
    let three = p("three");
    let out = ok(&["run", s(&config("three.toml", 3, "")), "--work", s(&three)]);
    assert!(
        made(&three) == want,
        "partitions born on 3 nodes differ:\n{out}"
    );
    assert!(
        out.contains("kept at the nodes as 5 partitions")
            && out.contains("5 partitions at the nodes, k = 6"),
        "{out}"
    );
    let features = (steps(&three).into_iter())
        .find(|s| s.starts_with("features/sample-"))
        .expect("features step");
    assert!(
        !three.join(&features).join("sample.bin").exists(),
        "no sample at the driver"
    );
    let nodes: Vec<_> = std::fs::read_dir(three.join("nodes"))
        .expect("nodes folder")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let mut held: Vec<String> = std::fs::read_dir(&nodes[0])
        .expect("partitions")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    held.sort();
    assert_eq!(held.len(), 6, "{held:?}");
    // They are the partitions one machine splits from its sample.
    let parts = (steps(&local).into_iter())
        .find(|s| s.starts_with("partition/parts-"))
        .map(|s| local.join(s).join("parts"))
        .expect("local partitions");
    for name in held.iter().filter(|n| n.starts_with("part-")) {
        assert!(
            std::fs::read(nodes[0].join(name)).expect("born")
                == std::fs::read(parts.join(name)).expect("split"),
            "{name}"
        );
    }
    // A second run takes every step from the cache.
    let again = ok(&["run", s(&config("three.toml", 3, "")), "--work", s(&three)]);
    assert!(!again.contains("kept at the nodes"), "{again}");

    // Worker daemons, w1 dies in the second round of the kept features: the job is done again
    // by the others, the results are still the one machine's.
    let (cluster, _workers) = workers_with_a_fault(
        dir.path(),
        "cluster.toml",
        3,
        3,
        1,
        &["--exit-at-round", "2"],
    );
    let killed = p("killed");
    let out = ok(&[
        "run",
        s(&config("on-cluster.toml", 0, "nodes/{node}")),
        "--work",
        s(&killed),
        "--cluster",
        s(&cluster),
    ]);
    assert!(out.contains("dropped w1"), "{out}");
    assert!(
        made(&killed) == want,
        "the run that lost w1 differs:\n{out}"
    );
    // Each node kept its partitions in a folder of its own; together they are all 5, once or
    // more (a redone job may leave a lost node's copies: the same bytes).
    let mut all = std::collections::BTreeSet::new();
    for node in ["w0", "w2"] {
        let folder = killed.join("nodes").join(node);
        let sets: Vec<_> = std::fs::read_dir(&folder)
            .expect("node folder")
            .map(|e| e.expect("entry").path())
            .collect();
        assert_eq!(sets.len(), 1, "{sets:?}");
        for e in std::fs::read_dir(&sets[0]).expect("partitions") {
            let name = e.expect("entry").file_name().to_string_lossy().into_owned();
            // The rounds saved until the cut (the first team's too) are gone.
            assert!(!name.starts_with(".kept-"), "{node}: {name} left");
            if name.starts_with("part-") {
                all.insert(name);
            }
        }
    }
    assert_eq!(all.len(), 5, "{all:?}");
    drop(_workers);

    // A worker lost in k-means takes its partitions with it: the next team makes them again
    // from their photos, and the results are still the one machine's.
    let lost = p("lost");
    let config = config("on-strict.toml", 0, "nodes/{node}");
    let out = run_losing_w1_in_kmeans(dir.path(), &config, &lost);
    assert!(
        made(&lost) == want,
        "the run that lost w1 in k-means differs:\n{out}"
    );
}
