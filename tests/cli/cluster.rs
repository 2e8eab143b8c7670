//! Distributed k-means on loopback workers: failures, bit-identical results, secrets.

use std::path::Path;
use std::process::Command;

use crate::util::*;

#[test]
fn a_worker_killed_mid_broadcast_is_dropped_or_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (relink, ports) = cluster_file(dir.path(), "cluster.toml", 3, 3);
    let mut workers = Workers(Vec::new());
    for (i, &port) in ports.iter().enumerate() {
        // w1, in the middle of the chain, dies after receiving 1 MiB of the 8 MiB message.
        workers
            .0
            .push(spawn_worker(&relink, i, port, (i == 1).then_some(1 << 20)));
    }
    let status = ok(&["cluster", "status", "--cluster", s(&relink)]);
    assert!(status.contains("3 of 3 nodes alive"), "{status}");
    // Every link measured (64 KiB probes: w1's fault is 1 MiB away), the chain built from it.
    let out = ok(&[
        "cluster",
        "calibrate",
        "--cluster",
        s(&relink),
        "--probe",
        "64K",
    ]);
    assert!(
        out.contains("calibration: 4 members") && out.contains("chain: driver -> w"),
        "{out}"
    );
    let links: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("cluster.toml.links.json")).expect("links"),
    )
    .expect("json");
    assert_eq!(
        links["members"].as_array().map(Vec::len),
        Some(4),
        "{links}"
    );
    assert_eq!(
        links["bandwidth_bytes_per_second"][1]
            .as_array()
            .map(Vec::len),
        Some(4)
    );
    // k-means with --order auto on the same cluster reuses those links, and its vocabulary is
    // the single process's.
    let p = |name: &str| dir.path().join(name);
    let parts = synth_parts(dir.path(), 2000, 16, 4, 1, 4);
    let kmeans = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "kmeans",
            "--features",
            s(&parts),
            "--k",
            "8",
            "--iterations",
            "3",
            "--seed",
            "2",
            "--out",
            s(out),
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    let out = kmeans(
        &p("auto.bin"),
        &[
            "--cluster",
            s(&relink),
            "--order",
            "auto",
            "--broadcast",
            "mst",
        ],
    );
    assert!(
        out.contains("links measured before") && out.contains("broadcast tree (mst): driver > "),
        "{out}"
    );
    kmeans(&p("local.bin"), &[]);
    assert!(
        std::fs::read(p("auto.bin")).expect("auto")
            == std::fs::read(p("local.bin")).expect("local")
    );
    let out = ok(&[
        "bench",
        "broadcast",
        "--cluster",
        s(&relink),
        "--bytes",
        "8M",
        "--algorithm",
        "chain",
        "--repeat",
        "1",
    ]);
    assert!(
        out.contains("nodes=2 bytes=8388608 algorithm=chain") && out.contains("dropped=w1"),
        "{out}"
    );
    // Gathers (stage 3's pattern) up the measured tree of the team that is left, every piece
    // checked at the driver.
    let out = ok(&[
        "bench",
        "gather",
        "--cluster",
        s(&relink),
        "--bytes",
        "300K",
        "--order",
        "auto",
        "--repeat",
        "2",
    ]);
    assert_eq!(
        out.matches("nodes=2 bytes=307200 algorithm=gather").count(),
        2,
        "{out}"
    );
    let err = fails(&["cluster", "status", "--cluster", s(&relink)]);
    assert!(err.contains("1 nodes do not answer"), "{err}");

    // The same fault with no retries allowed: the call fails and names the node.
    let strict = dir.path().join("strict.toml");
    std::fs::write(
        &strict,
        std::fs::read_to_string(&relink)
            .expect("read")
            .replace("retries = 3", "retries = 0"),
    )
    .expect("write");
    workers
        .0
        .push(spawn_worker(&strict, 1, ports[1], Some(1 << 20)));
    let err = fails(&[
        "bench",
        "broadcast",
        "--cluster",
        s(&strict),
        "--bytes",
        "8M",
        "--algorithm",
        "chain",
        "--repeat",
        "1",
    ]);
    assert!(err.contains("broadcast failed at node w1"), "{err}");
}

#[test]
fn distributed_kmeans_equals_local_and_survives_a_killed_worker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = |name: &str| dir.path().join(name);
    let parts = synth_parts(dir.path(), 40000, 48, 30, 4, 9);
    let common = [
        "kmeans",
        "--features",
        s(&parts),
        "--k",
        "40",
        "--iterations",
        "8",
        "--tol",
        "0",
        "--seed",
        "6",
    ];
    let kmeans = |out: &str, extra: &[&str]| {
        let mut args = common.to_vec();
        args.push("--out");
        let out = p(out);
        let out = s(&out).to_string();
        args.push(&out);
        args.extend_from_slice(extra);
        let stdout = ok(&args);
        (std::fs::read(&out).expect("vocabulary"), stdout)
    };
    let (local, _) = kmeans("local.bin", &[]);
    let (two, stdout) = kmeans("two.bin", &["--local-nodes", "2"]);
    assert!(
        two == local,
        "2 workers differ from the local run:\n{stdout}"
    );
    assert!(
        stdout.contains("on 2 workers") && stdout.contains(" agg2 "),
        "{stdout}"
    );
    let (four, _) = kmeans(
        "four.bin",
        &["--local-nodes", "4", "--no-local-aggregation"],
    );
    assert!(four == local, "4 workers without local aggregation differ");
    let stages = csv_rows(&p("four.bin.stages.csv"));
    assert_eq!(stages.len(), 8);
    assert_eq!(stages[0][1], "4");

    // The full pass, and pruning with the int8 kernel (bounds at the workers; a worker that
    // runs an iteration again, or takes over a dead one's partitions, starts those from a full
    // pass).
    for (name, assignment) in [
        ("full", &[][..]),
        ("pruned-int8", &["--prune", "--kernel", "int8"][..]),
    ] {
        let local = if assignment.is_empty() {
            local.clone()
        } else {
            kmeans(&format!("local-{name}.bin"), assignment).0
        };
        // Four worker processes: w1 is killed once the run is under way, later w2 stalls, and w3
        // dies in the middle of iteration 6 (after its map tasks, before stage 2).
        let (cluster, ports) = cluster_file(dir.path(), &format!("cluster-{name}.toml"), 4, 3);
        let text = std::fs::read_to_string(&cluster).expect("read").replace(
            "io_timeout_ms = 5000",
            "io_timeout_ms = 3000\nconnect_timeout_ms = 500",
        );
        std::fs::write(&cluster, text).expect("write");
        let mut workers = Workers(
            ports
                .iter()
                .enumerate()
                .map(|(i, &port)| spawn_worker_with(&cluster, i, port, None, (i == 3).then_some(6)))
                .collect(),
        );
        let out = p(&format!("killed-{name}.bin"));
        let mut driver = Command::new(env!("CARGO_BIN_EXE_vocab"))
            .args(common)
            .args(["--quiet", "--cluster", s(&cluster), "--out", s(&out)])
            .args(assignment)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("driver starts");
        let stdout = driver.stdout.take().expect("stdout");
        let mut lines = Vec::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let line = line.expect("line");
            if line.starts_with("iter 2 ") {
                workers.0[1].kill().expect("kill w1");
            }
            if line.starts_with("iter 4 ") {
                // w2 stalls: alive to the kernel, silent to its peers.
                let stopped = Command::new("kill")
                    .args(["-STOP", &workers.0[2].id().to_string()])
                    .status()
                    .expect("kill -STOP");
                assert!(stopped.success());
            }
            lines.push(line);
        }
        let status = driver.wait().expect("driver ends");
        let all = lines.join("\n");
        assert!(status.success(), "driver failed:\n{all}");
        assert!(all.contains("dropped w1"), "{all}");
        assert!(all.contains("dropped w2"), "{all}");
        assert!(all.contains("dropped w3"), "{all}");
        assert!(
            std::fs::read(&out).expect("vocabulary") == local,
            "recovered {name} run differs:\n{all}"
        );
    }
}

#[cfg(not(feature = "mpi"))]
#[test]
fn the_mpi_engine_in_a_build_without_mpi_says_how_to_get_one() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = tempfile::tempdir().expect("tmp");
    let err = fails(&[
        "kmeans",
        "--engine",
        "mpi",
        "--features",
        s(tmp.path()),
        "--k",
        "2",
        "--out",
        s(&out.path().join("v.bin")),
    ]);
    assert!(
        err.contains("--features mpi") && err.contains("README"),
        "{err}"
    );
}

#[test]
fn a_secret_file_others_can_read_is_refused_naming_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let (cluster, _) = cluster_file(dir.path(), "c.toml", 1, 0);
    let secret = dir.path().join("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).expect("mode");
    let err = fails(&["cluster", "status", "--cluster", s(&cluster)]);
    assert!(
        err.contains("readable by other users")
            && err.contains("chmod 600")
            && err.contains(s(&secret)),
        "{err}"
    );
}

#[test]
fn sharded_photo_stages_write_the_one_machine_files_and_survive_a_killed_worker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = |name: &str| dir.path().join(name);
    let photos = photo_set_of(dir.path(), 6, 4);
    // Two photos every node skips: one that is not a JPEG, one too small for a patch.
    std::fs::write(photos.join("city/broken.jpg"), b"not a jpeg").expect("broken");
    image::RgbImage::from_pixel(30, 20, image::Rgb([40, 90, 140]))
        .save(photos.join("field/zz.jpg"))
        .expect("tiny jpeg");
    let labels = photos.join("labels.csv");
    let mut text = std::fs::read_to_string(&labels).expect("labels");
    text.push_str("city/broken.jpg,city,urban,flat\nfield/zz.jpg,field,rural,flat\n");
    std::fs::write(&labels, text).expect("labels");
    let config = |name: &str, nodes: usize| {
        let path = p(name);
        std::fs::write(
            &path,
            format!(
                "[dataset]\npath = {:?}\nlabels = {:?}\n[features]\nper_image = 9\n\
                 [partition]\nat = \"driver\"\n\
                 [kmeans]\nk = [6]\niterations = 3\ntol = 0\nnodes = {nodes}\n\
                 [encode]\nstride = 16\nkernel = \"int8\"\n\
                 [classify]\nattributes = [\"elevation\"]\ncv = 2\n",
                s(&photos),
                s(&labels)
            ),
        )
        .expect("config");
        path
    };
    // The files of the features and encode steps, by step.
    let files = |work: &Path| -> Vec<(String, Vec<u8>)> {
        let mut all = Vec::new();
        for step in steps(work) {
            if !(step.starts_with("features/") || step.starts_with("encode/")) {
                continue;
            }
            for name in [
                "sample.bin",
                "sample.bin.images.csv",
                "sample.bin.skipped.csv",
                "histograms.bin",
                "histograms.bin.images.csv",
                "histograms.bin.skipped.csv",
            ] {
                let path = work.join(&step).join(name);
                if path.is_file() {
                    all.push((
                        format!("{step}/{name}"),
                        std::fs::read(&path).expect("read"),
                    ));
                }
            }
        }
        all
    };
    let local = p("local");
    ok(&["run", s(&config("local.toml", 0)), "--work", s(&local)]);
    let want = files(&local);
    assert_eq!(
        want.len(),
        6,
        "{:?}",
        want.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let skipped = (want.iter())
        .find(|(name, _)| name.ends_with("histograms.bin.skipped.csv"))
        .map(|(_, bytes)| String::from_utf8_lossy(bytes).to_string())
        .expect("skipped photos of encode");
    assert!(
        skipped.contains("broken.jpg") && skipped.contains("zz.jpg"),
        "{skipped}"
    );

    // Three loopback workers: the same files, and per-node times in the summary.
    let three = p("three");
    let out = ok(&["run", s(&config("three.toml", 3)), "--work", s(&three)]);
    assert!(files(&three) == want, "3 loopback workers differ:\n{out}");
    assert!(
        out.contains("(3 nodes): w0 ") && out.contains("slowest node w"),
        "{out}"
    );

    // Three worker daemons, w1 dies in the second round of the features stage: its photos are
    // done by the others and every file is still the one machine's.
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
        s(&config("on-cluster.toml", 0)),
        "--work",
        s(&killed),
        "--cluster",
        s(&cluster),
    ]);
    assert!(out.contains("dropped w1"), "{out}");
    assert!(
        files(&killed) == want,
        "the run that lost w1 differs:\n{out}"
    );
    drop(_workers);

    // Without retries w1's death ends the run in the features stage; the rounds done before
    // are kept, and the next run (w1 back) resumes from them to the same files.
    let (strict, ports) = cluster_file(dir.path(), "strict.toml", 2, 0);
    let mut workers = Workers(vec![
        spawn_worker_args(&strict, 0, ports[0], &[]),
        spawn_worker_args(&strict, 1, ports[1], &["--exit-at-round", "3"]),
    ]);
    let interrupted = p("interrupted");
    let config = config("on-strict.toml", 0);
    let run = [
        "run",
        s(&config),
        "--work",
        s(&interrupted),
        "--cluster",
        s(&strict),
    ];
    let failed = vocab(&run);
    assert!(!failed.status.success(), "the run should stop");
    let tmp = (steps(&interrupted).into_iter())
        .find(|s| s.starts_with("features/.tmp-sample-"))
        .expect("the interrupted features step");
    let saved = std::fs::read_dir(interrupted.join(&tmp).join("sample.bin.rounds"))
        .expect("saved rounds")
        .filter(|e| {
            let name = e.as_ref().expect("entry").file_name();
            name.to_string_lossy().ends_with(".round")
        })
        .count();
    assert!(saved >= 2, "{saved} rounds saved");
    let _ = workers.0[1].wait();
    workers.0[1] = spawn_worker_args(&strict, 1, ports[1], &[]);
    let out = ok(&run);
    assert!(out.contains("resumed: "), "{out}");
    assert!(
        files(&interrupted) == want,
        "the resumed run differs:\n{out}"
    );
    let left: Vec<String> = (steps(&interrupted).into_iter())
        .filter(|s| s.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    for step in steps(&interrupted) {
        for name in ["sample.bin.rounds", "histograms.bin.rounds"] {
            assert!(
                !interrupted.join(&step).join(name).exists(),
                "{step}/{name} left"
            );
        }
    }
}
