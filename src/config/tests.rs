//! Tests of config loading: defaults, unknown keys and bad values named with their line.

use super::*;
use vocab_pipeline::kmeans::Kernel;

fn load_text(text: &str) -> anyhow::Result<Config> {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("c.toml");
    std::fs::write(&path, text).expect("write");
    load(&path)
}

#[test]
fn the_patch_side_is_the_samples_and_the_encodings_alike() {
    let base = "[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n";
    let c = load_text(&format!("{base}[features]\npatch = 24\n")).expect("patch");
    assert_eq!(c.features.params().expect("features").patch, Some(24));
    assert_eq!(c.encode_params().expect("encode").features.patch, Some(24));
    // Shown and read back: the same config.
    let shown = toml::to_string(&c).expect("show");
    assert_eq!(load_text(&shown).expect("shown").encode.patch, Some(24));
    let err = load_text(&format!("{base}[encode]\npatch = 24\n"))
        .expect_err("encode alone")
        .to_string();
    assert!(
        err.contains("[encode] patch, line 6") && err.contains("set patch in [features] alone"),
        "{err}"
    );
    let err = load_text(&format!("{base}[features]\npatch = 8\n"))
        .expect_err("too small")
        .to_string();
    assert!(
        err.contains("[features] patch, line 6: must be 16 to 160"),
        "{err}"
    );
}

#[test]
fn the_descriptor_is_the_samples_and_the_encodings_alike() {
    let base = "[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n";
    let c = load_text(&format!("{base}[features]\ndescriptor = \"sift\"\n")).expect("sift");
    let sift = vocab_pipeline::features::Descriptor::Sift;
    assert_eq!(c.features.params().expect("features").descriptor, sift);
    let encode = c.encode_params().expect("encode");
    assert_eq!((encode.features.descriptor, encode.dims), (sift, 128));
    let shown = toml::to_string(&c).expect("show");
    assert_eq!(load_text(&shown).expect("shown").encode.descriptor, sift);
    let err = load_text(&format!("{base}[encode]\ndescriptor = \"sift\"\n"))
        .expect_err("encode alone")
        .to_string();
    assert!(
        err.contains("[encode] descriptor, line 6")
            && err.contains("set descriptor in [features] alone"),
        "{err}"
    );
    let err = load_text(&format!(
        "{base}[features]\ndescriptor = \"sift\"\npatch = 24\n"
    ))
    .expect_err("a patch side")
    .to_string();
    assert!(
        err.contains("[features] patch") && err.contains("dense SIFT"),
        "{err}"
    );
    // A mixture's principal components within SIFT's 128 values, the run's own or a part's.
    let fisher = "[encode]\nmethod = \"fisher\"\n[mixture]\ncomponents = [4]\npca_dims = 200\n";
    let sift = "[features]\ndescriptor = \"sift\"\n";
    let err = load_text(&format!("{base}{sift}{fisher}"))
        .expect_err("own")
        .to_string();
    assert!(err.contains("pca_dims"), "{err}");
    let joined = "[[join]]\ndescriptor = \"sift\"\n";
    load_text(&format!("{base}{fisher}")).expect("HOG's 512 hold 200");
    let err = load_text(&format!("{base}{fisher}{joined}")).expect_err("part");
    let err = format!("{err:#}");
    assert!(
        err.contains("pca_dims") && err.contains("the [[join]] part of sift"),
        "{err}"
    );
}

#[test]
fn defaults_fill_in_and_rules_name_key_and_line() {
    let c = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n").expect("minimal");
    assert_eq!(
        (c.kmeans.nodes, c.partition.parts, c.classify.cv),
        (2, 8, 5)
    );
    let err = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4, 0]\n")
        .expect_err("k = 0")
        .to_string();
    assert!(err.contains("[kmeans] k, line 4"), "{err}");
    let err = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\nkay = 3\n")
        .expect_err("unknown key");
    assert!(format!("{err:#}").contains("kay"), "{err:#}");
    let err = load_text("[dataset]\nsynthetic = {}\n[encode]\npyramid = 9\n[kmeans]\nk = [2]\n")
        .expect_err("pyramid")
        .to_string();
    assert!(err.contains("[encode] pyramid, line 4"), "{err}");
    let c = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\nprune = true\n")
        .expect("prune on loopback workers");
    assert!(c.kmeans.prune == Some(true) && c.kmeans.nodes == 2);
    let c = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\nprune = true\nnodes = 0\n")
        .expect("prune on one process");
    assert_eq!(c.kmeans.prune, Some(true));
    let c = load_text(
        "[dataset]\nsynthetic = {}\n[kmeans]\nkernel = \"int8\"\nk = [4]\nprune = true\nnodes = 0\n",
    )
    .expect("int8 with prune");
    assert_eq!(
        c.kmeans.assignment().expect("valid"),
        vocab_pipeline::kmeans::Assignment::Pruned(vocab_pipeline::kmeans::Kernel::Int8)
    );
    let c = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\nkernel = \"int8\"\n")
        .expect("int8 on loopback workers");
    assert_eq!((c.kmeans.kernel, c.kmeans.nodes), (Kernel::Int8, 2));
    // Unset, pruning is the kernel's default: on with int8, off with f32.
    let of = |text: &str| {
        load_text(&format!(
            "[dataset]\nsynthetic = {{}}\n[kmeans]\nk = [4]\n{text}"
        ))
        .expect("exact")
        .kmeans
        .assignment()
        .expect("valid")
    };
    use vocab_pipeline::kmeans::Assignment;
    assert_eq!(of("kernel = \"int8\"\n"), Assignment::Pruned(Kernel::Int8));
    assert_eq!(
        of("kernel = \"int8\"\nprune = false\n"),
        Assignment::Full(Kernel::Int8)
    );
    assert_eq!(of(""), Assignment::Full(Kernel::F32));
    assert_eq!(of("prune = true\n"), Assignment::Pruned(Kernel::F32));
    let c = load_text(
        "[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\nassign = \"approx\"\nprobes = 3\n",
    )
    .expect("approximate");
    assert_eq!(
        c.kmeans.assignment().expect("valid"),
        vocab_pipeline::kmeans::Assignment::Approx {
            lists: 0,
            probes: 3,
            kernel: Kernel::F32,
        }
    );
    for (text, want) in [
        (
            "assign = \"approx\"\nprune = true\n",
            "[kmeans] prune, line 6: bounds the exact search",
        ),
        (
            "lists = 3\n",
            "[kmeans] lists, line 5: sets up the approximate search",
        ),
        (
            "assign = \"approx\"\nprobes = 0\n",
            "[kmeans] probes, line 6: must be at least 1",
        ),
        ("init = \"kmeans++\"\nk = [100000]\n", "quadratic in k"),
    ] {
        let text = format!("[dataset]\nsynthetic = {{}}\n[kmeans]\nk = [4]\n{text}");
        let text = text.replacen("k = [4]\n", "", usize::from(text.contains("k = [100000]")));
        let err = format!("{:#}", load_text(&text).expect_err(want));
        assert!(err.contains(want), "{text}: {err}");
    }
}

#[test]
fn sizes_past_their_bounds_are_refused_with_the_bound() {
    for (text, want) in [
        (
            "[dataset]\nsynthetic = { per_kind = 1000000000 }\n[kmeans]\nk = [4]\n",
            "[dataset] per_kind: must be at most 100000 photos",
        ),
        (
            "[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\nnodes = 100000\n",
            "[kmeans] nodes, line 5: must be at most 256 workers",
        ),
        (
            "[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n[plan]\nmap_tasks_per_node = 5000\n",
            "[plan] map_tasks_per_node, line 6: must be at most 1024",
        ),
    ] {
        let err = format!("{:#}", load_text(text).expect_err(want));
        assert!(err.contains(want), "{text}: {err}");
    }
}

#[test]
fn every_committed_config_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    let mut loaded = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("configs/") {
        let path = entry.expect("entry").path();
        // Cluster files sit beside the configs; they are not run configs.
        if path.extension().is_some_and(|e| e == "toml") && !s(&path).ends_with("-cluster.toml") {
            let config = load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            loaded.push((path.file_name().expect("name").to_owned(), config));
        }
    }
    assert!(loaded.len() >= 4, "{}", loaded.len());
    // The field's protocol for 15 scenes.
    let (_, scene15) = (loaded.iter())
        .find(|(name, _)| name == "scene15.toml")
        .expect("scene15.toml");
    let c = &scene15.classify;
    assert_eq!((c.train_per_class, c.trials), (Some(100), 10));
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
fn vlad_is_an_encode_method_and_refuses_a_kernel_map() {
    let c =
        load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n[encode]\nmethod = \"vlad\"\n")
            .expect("vlad");
    assert_eq!(c.encode.method, vocab_pipeline::encode::Pooling::Vlad);
    let err = load_text(
        "[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n[encode]\nmethod = \"vlad\"\n\
         [classify]\nkernel_map = \"chi2\"\n",
    )
    .expect_err("kernel map")
    .to_string();
    assert!(
        err.contains("[classify] kernel_map") && err.contains("drop the kernel map"),
        "{err}"
    );
    // A VLAD too long for its largest vocabulary is refused when the config is read, before
    // any k-means.
    let err = load_text(
        "[dataset]\nsynthetic = {}\n[kmeans]\nk = [4, 2048]\n[encode]\nmethod = \"vlad\"\n\
         pyramid = 2\n",
    )
    .expect_err("too long")
    .to_string();
    assert!(
        err.contains("[encode] method") && err.contains("2048 words"),
        "{err}"
    );
}

#[test]
fn fisher_runs_learn_mixtures_named_in_their_own_section() {
    let text = "[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n[encode]\nmethod = \"fisher\"\n\
                [mixture]\ncomponents = [8, 16]\npca_dims = 12\n";
    let c = load_text(text).expect("fisher");
    assert!(c.fisher());
    assert_eq!(c.sizes(), [8, 16]);
    let params = c.encode_params().expect("params");
    assert_eq!(params.method.projected(), Some(12));
    assert_eq!(c.mixture.params(8).pca_dims, 12);
    // Shown with the run's mixture section, and with its defaults in a run that leaves it out.
    let shown = toml::to_string(&c).expect("show");
    assert!(
        shown.contains("[mixture]\ncomponents = [8, 16]\npca_dims = 12"),
        "{shown}"
    );
    let plain = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n").expect("plain");
    let shown = toml::to_string(&plain).expect("show");
    assert!(
        shown.contains("[mixture]\ncomponents = [64]\npca_dims = 64"),
        "{shown}"
    );
    for (bad, want) in [
        ("components = []\n", "[mixture] components"),
        (
            "components = [0]\n",
            "[mixture] components, line 8: must be 1 to 4096",
        ),
        ("reg = 0.0\n", "[mixture] reg, line 8: must be above 0"),
    ] {
        let text = format!(
            "[dataset]\nsynthetic = {{}}\n[kmeans]\nk = [4]\n[encode]\nmethod = \"fisher\"\n\
             [mixture]\n{bad}"
        );
        let err = load_text(&text).expect_err(bad).to_string();
        assert!(err.contains(want), "{bad}: {err}");
    }
    let err = load_text(
        "[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n[encode]\nmethod = \"fisher\"\n\
         [classify]\nkernel_map = \"chi2\"\n",
    )
    .expect_err("kernel map")
    .to_string();
    assert!(err.contains("method = \"fisher\""), "{err}");
}

#[test]
fn a_single_value_where_a_list_is_wanted_gets_the_list_written_out() {
    let err =
        load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = 64  # words\n").expect_err("k = 64");
    let shown = format!("{err:#}");
    assert!(
        shown.contains("(k takes a list: write `k = [64]`)") && shown.contains("line 4"),
        "{shown}"
    );
    let err =
        load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n[mixture]\ncomponents = 3\n")
            .expect_err("components = 3");
    assert!(
        format!("{err:#}").contains("write `components = [3]`"),
        "{err:#}"
    );
    // Other errors get no hint.
    let err = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\niterations = \"x\"\n")
        .expect_err("iterations");
    assert!(!format!("{err:#}").contains("takes a list"), "{err:#}");
}
