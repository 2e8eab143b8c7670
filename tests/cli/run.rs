//! `vocab run`: the chain of cached steps, end to end on the quickstart (what a changed setting
//! runs again, `config check` and `show`, `--plan`), under the k-means keys of its settings, and
//! with Fisher vectors. Resuming is `resume`'s, the up-front checks `up_front`'s.

use std::path::Path;

use crate::util::*;

#[test]
fn quickstart_runs_end_to_end_caches_and_reruns_only_what_changed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/quickstart.toml");
    let work = dir.path().join("work");
    let out = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(out.contains("report in"), "{out}");
    assert!(
        out.contains("on 2 workers"),
        "k-means runs on loopback workers:\n{out}"
    );
    let report = work.join("report");
    for f in [
        "report.md",
        "accuracy.csv",
        "accuracy.png",
        "kmeans.csv",
        "kmeans.png",
        "steps.csv",
        "words-k128.png",
        "words-k128.png.csv",
    ] {
        assert!(report.join(f).is_file(), "{f} missing");
    }
    // The largest vocabulary drawn as patches of its training photos, in the report.
    let md = std::fs::read_to_string(report.join("report.md")).expect("report");
    assert!(
        md.contains("## Visual words (K = 128)") && md.contains("![visual words](words-k128.png)"),
        "{md}"
    );
    assert!(
        md.contains("% at K = ")
            && md.contains("| K | attribute")
            && md.contains("## Vocabularies"),
        "{md}"
    );
    let split = csv_rows(
        &steps(&work)
            .iter()
            .find(|s| s.starts_with("features/"))
            .map(|s| work.join(s).join("split.csv"))
            .expect("split"),
    );
    for tile in csv_rows(&report.join("words-k128.png.csv")) {
        assert!(
            split.iter().any(|r| r[0] == tile[5] && r[1] == "train"),
            "{tile:?}"
        );
    }
    let accuracy = csv_rows(&report.join("accuracy.csv"));
    // 3 vocabulary sizes x 2 attributes, every accuracy a fraction.
    assert_eq!(accuracy.len(), 6);
    for row in &accuracy {
        let a: f64 = row[2].parse().expect("accuracy");
        assert!((0.0..=1.0).contains(&a), "{row:?}");
    }
    let first = steps(&work);
    assert_eq!(first.iter().filter(|s| s.starts_with("svm/")).count(), 6);
    assert!(first.iter().all(|s| !s.contains(".tmp-")), "{first:?}");
    // The loopback workers write to their own logs, named in the output, not to the driver's.
    let k8 = first
        .iter()
        .find(|s| s.starts_with("kmeans/k8-"))
        .expect("k8 step");
    let log = work.join(k8).join("vocabulary.bin.workers/w0.log");
    let log_text = std::fs::read_to_string(&log).expect("worker log");
    assert!(log_text.contains("listening"), "{log_text}");
    assert!(out.contains("vocabulary.bin.workers"), "{out}");
    let printed = vocab(&["run", s(&config), "--work", s(&work), "--force", "kmeans"]);
    assert!(
        !String::from_utf8_lossy(&printed.stderr).contains("listening"),
        "{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    // What a step prints names where its files end up.
    assert!(!out.contains(".tmp-"), "{out}");
    assert!(out.contains("/kmeans/k8-"), "{out}");
    let seconds = |csv: Vec<Vec<String>>| -> Vec<(String, String)> {
        csv.into_iter()
            .filter(|r| r[0] != "report")
            .map(|r| (r[1].clone(), r[3].clone()))
            .collect()
    };
    let took = seconds(csv_rows(&report.join("steps.csv")));

    // Nothing changed: every step is cached, and the accuracies are the same.
    let again = ok(&["run", s(&config), "--work", s(&work)]);
    let ran = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.ends_with(" ran"))
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(ran(&again), ["report"], "{again}");
    assert_eq!(csv_rows(&report.join("accuracy.csv")), accuracy);
    // Cached steps keep the seconds they took when they ran.
    assert_eq!(seconds(csv_rows(&report.join("steps.csv"))), took);
    assert!(again.contains(": cached, made in "), "{again}");

    // A changed encoding re-runs encode and svm only.
    let changed = dir.path().join("changed.toml");
    std::fs::write(
        &changed,
        std::fs::read_to_string(&config)
            .expect("read")
            .replace("stride = 8", "stride = 16"),
    )
    .expect("write");
    let out = ok(&["run", s(&changed), "--work", s(&work)]);
    let stages = ran(&out);
    assert!(
        stages
            .iter()
            .all(|s| ["encode", "svm", "report"].contains(&s.as_str()))
            && stages.contains(&"encode".to_string()),
        "{out}"
    );

    // Config errors name the key and the line, and check/show work.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[dataset]\nsynthetic = { per_kind = 1 }\n\n[features]\nper_imag = 5\n",
    )
    .expect("write");
    let err = fails(&["run", s(&bad), "--work", s(&work)]);
    assert!(
        err.contains("bad.toml") && err.contains("per_imag") && err.contains("line 5"),
        "{err}"
    );
    assert!(fails(&["config", "check", s(&bad)]).contains("per_imag"));
    // Absurd patch counts are refused where settings are checked, before anything allocates.
    let text = std::fs::read_to_string(&config).expect("config");
    assert!(text.contains("per_image = 20"), "{text}");
    std::fs::write(
        &bad,
        text.replace("per_image = 20", "per_image = 9223372036854775807"),
    )
    .expect("write");
    let err = fails(&["config", "check", s(&bad)]);
    assert!(
        err.contains("per_image") && err.contains("at most"),
        "{err}"
    );
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let err = fails(&[
        "features",
        "--input",
        s(dir.path()),
        "--out",
        s(&elsewhere.path().join("f.bin")),
        "--per-image",
        "100000000",
    ]);
    assert!(err.contains("--per-image 100000000"), "{err}");
    assert!(ok(&["config", "check", s(&config)]).contains(": ok"));
    let shown = ok(&["config", "show", s(&config)]);
    assert!(
        shown.contains("local_aggregation = true") && shown.contains("[encode]"),
        "{shown}"
    );
    // The defaults the labels decide are filled in too, and the shown config is a config.
    assert!(
        shown.contains("split_by = \"kind\"") && shown.contains("\"urbanicity\""),
        "{shown}"
    );
    let again = dir.path().join("shown.toml");
    std::fs::write(&again, &shown).expect("write");
    assert!(ok(&["config", "check", s(&again)]).contains(": ok"));
    let plan = ok(&["run", s(&config), "--plan"]);
    assert!(
        plan.contains("\n    128 ") && plan.contains("2 nodes") && plan.contains("memory"),
        "{plan}"
    );
    assert!(
        plan.contains("memory per node at k = 128: vectors ") && plan.contains(", sums "),
        "{plan}"
    );
    // The photo stages' memory: photos at once, each within the stated figure.
    assert!(
        plan.contains("photos at once a node, at most 1.20 GB each (100 Mpix limit"),
        "{plan}"
    );
    // Seconds of the map from the rates measured in eval/paper_scale, beside the link-bound
    // seconds of the collectives.
    assert!(
        plan.contains(" map s comm s ")
            && plan.contains("f32 52, int8 108, approximate 34\n   (int8 search 103) G"),
        "{plan}"
    );
    // The photo stages run on the nodes too: what they bring to the driver. The sample stays
    // there as partitions (the default); gathered at the driver, it is counted.
    assert!(
        plan.contains("kept there as partitions; at most ")
            && !plan.contains("the sample comes to the driver")
            && plan.contains("histograms come to the driver: ")
            && plan.contains(" at k = 128"),
        "{plan}"
    );
    let gathered = dir.path().join("gathered.toml");
    let text = std::fs::read_to_string(&config).expect("read");
    std::fs::write(
        &gathered,
        text.replace("parts = 8", "parts = 8\nat = \"driver\""),
    )
    .expect("write");
    let plan = ok(&["run", s(&gathered), "--plan"]);
    assert!(
        plan.contains("the sample comes to the driver: ")
            && !plan.contains("kept there as partitions"),
        "{plan}"
    );
    // A place that is neither is named.
    std::fs::write(
        &gathered,
        text.replace("parts = 8", "parts = 8\nat = \"elsewhere\""),
    )
    .expect("write");
    let err = fails(&["run", s(&gathered), "--plan"]);
    assert!(err.contains("elsewhere") && err.contains("nodes"), "{err}");
}

#[test]
fn pruned_int8_and_approximate_configs_run_under_their_own_kmeans_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = |name: &str, setting: &str| {
        let path = dir.path().join(format!("c-{name}.toml"));
        std::fs::write(
            &path,
            format!(
                "[dataset]\nsynthetic = {{ per_kind = 4, seed = 3 }}\n[features]\nper_image = 20\n\
                 [kmeans]\nk = [12]\niterations = 6\ntol = 0\nnodes = 0\n{setting}\n\
                 [classify]\nattributes = [\"elevation\"]\ncv = 2\n"
            ),
        )
        .expect("config");
        path
    };
    let work = dir.path().join("w");
    ok(&[
        "run",
        s(&config("pruned", "prune = true")),
        "--work",
        s(&work),
    ]);
    ok(&[
        "run",
        s(&config("full", "prune = false")),
        "--work",
        s(&work),
    ]);
    ok(&[
        "run",
        s(&config("int8", "kernel = \"int8\"\nprune = false")),
        "--work",
        s(&work),
    ]);
    ok(&[
        "run",
        s(&config("pruned-int8", "prune = true\nkernel = \"int8\"")),
        "--work",
        s(&work),
    ]);
    // Pruning is the int8 kernel's default: the same run, the same key.
    ok(&[
        "run",
        s(&config("int8-default", "kernel = \"int8\"")),
        "--work",
        s(&work),
    ]);
    // The approximate search's probes are part of its key (loopback workers: the same run).
    for probes in [1, 2] {
        let setting = format!("assign = \"approx\"\nprobes = {probes}\nnodes = 2");
        let path = config(&format!("approx-{probes}"), &setting);
        let text = std::fs::read_to_string(&path).expect("config");
        std::fs::write(&path, text.replacen("nodes = 0\n", "", 1)).expect("config");
        let summary = ok(&["run", s(&path), "--work", s(&work)]);
        assert!(
            summary.contains("approximate assignment found"),
            "{summary}"
        );
    }
    let kmeans: Vec<String> = steps(&work)
        .into_iter()
        .filter(|s| s.starts_with("kmeans/k12-"))
        .collect();
    assert_eq!(
        kmeans.len(),
        6,
        "pruned, full, int8, pruned-int8 and approximate runs share a key, or int8 by default \
         does not run pruned-int8's: {kmeans:?}"
    );
    // Labels kept by the bounds (last column): some in the pruned runs, none in the others.
    let mut kept: Vec<u64> = kmeans
        .iter()
        .map(|step| {
            let csv =
                std::fs::read_to_string(work.join(step).join("vocabulary.bin.iterations.csv"))
                    .expect("iterations");
            // Up to 6 iterations (fewer if the assignments stop changing).
            let lines = csv.lines().count();
            assert!((4..=7).contains(&lines), "{step}: {csv}");
            csv.lines()
                .skip(1)
                .filter_map(|l| l.rsplit(',').next()?.parse::<u64>().ok())
                .sum()
        })
        .collect();
    kept.sort_unstable();
    assert!(
        kept[..4].iter().all(|&k| k == 0) && kept[4] > 0 && kept[5] > 0,
        "kept per run: {kept:?}"
    );
}

#[test]
fn a_fisher_run_learns_its_mixture_on_the_workers_and_scores_fisher_vectors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("fisher.toml");
    std::fs::write(
        &config,
        "[dataset]\nsynthetic = { per_kind = 4 }\n[features]\nper_image = 40\n\
         [kmeans]\nk = [4]\nnodes = 2\n[encode]\nmethod = \"fisher\"\nstride = 16\npyramid = 2\n\
         [mixture]\ncomponents = [3]\npca_dims = 6\niterations = 20\n\
         [classify]\nattributes = [\"urbanicity\"]\n",
    )
    .expect("config");
    let work = dir.path().join("work");
    let plan = ok(&["run", s(&config), "--plan"]);
    assert!(
        plan.contains("mixture") && plan.contains("Fisher vectors"),
        "{plan}"
    );
    let out = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(out.contains("report in"), "{out}");
    let done = steps(&work);
    assert!(
        done.iter().any(|s| s.starts_with("mixture/g3-")),
        "{done:?}"
    );
    assert!(!done.iter().any(|s| s.starts_with("kmeans/")), "{done:?}");
    let accuracy = csv_rows(&work.join("report").join("accuracy.csv"));
    assert_eq!(accuracy.len(), 1);
    // The report names the mixture's size, and has no vocabularies to show.
    let md = std::fs::read_to_string(work.join("report").join("report.md")).expect("report");
    assert!(
        md.contains("% at G = 3 ") && md.contains("| G | attribute"),
        "{md}"
    );
    assert!(
        !md.contains("## Vocabularies") && !md.contains("k-means per iteration"),
        "{md}"
    );
    // Its EM steps instead: a row per mixture, every step; no empty k-means tables.
    let report = work.join("report");
    assert!(
        md.contains("## Mixtures") && md.contains("| G | vectors | EM steps"),
        "{md}"
    );
    let mixtures = csv_rows(&report.join("mixture.csv"));
    let em: usize = mixtures[0][2].parse().expect("EM steps");
    assert!(
        mixtures.len() == 1 && mixtures[0][0] == "3" && em >= 1,
        "{mixtures:?}"
    );
    let em_steps = csv_rows(&report.join("mixture-steps.csv"));
    assert_eq!(
        em_steps.len(),
        em + 1,
        "the PCA, then each EM step: {em_steps:?}"
    );
    assert!(!report.join("kmeans.csv").exists() && !report.join("kmeans-iterations.csv").exists());
    // Rates to 4 decimals.
    let places = |v: &str| v.split_once('.').map_or(0, |(_, d)| d.len());
    let rates = [&accuracy[0][2], &accuracy[0][3], &accuracy[0][5]];
    assert!(rates.iter().all(|v| places(v) == 4), "{accuracy:?}");
    // The same run on one process: the same mixture, byte for byte.
    let single = dir.path().join("single.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&single, text.replace("nodes = 2", "nodes = 0")).expect("single");
    let single_work = dir.path().join("single-work");
    ok(&["run", s(&single), "--work", s(&single_work)]);
    let mixture = |work: &Path| {
        let step = steps(work)
            .into_iter()
            .find(|s| s.starts_with("mixture/"))
            .expect("mixture step");
        std::fs::read(work.join(step).join("mixture.json")).expect("mixture")
    };
    assert!(
        mixture(&work) == mixture(&single_work),
        "the workers' mixture differs"
    );
    // Cached on a second run.
    let again = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(!again.contains("EM steps"), "{again}");
    // Encoded again over the cached mixture (read back from its file): the histograms the first
    // run made over the mixture it had just learned, byte for byte.
    let histograms = |work: &Path| {
        let step = steps(work)
            .into_iter()
            .find(|s| s.starts_with("encode/g3-") && !s.contains("mirrored"))
            .expect("encode step");
        std::fs::read(work.join(step).join("histograms.bin")).expect("histograms")
    };
    let first = histograms(&work);
    ok(&["run", s(&config), "--work", s(&work), "--force", "encode"]);
    assert!(
        histograms(&work) == first,
        "encoded over the cached mixture, the histograms differ"
    );
    // Mirror images: the training photos are encoded mirrored too and train beside them; the
    // photos' histograms come from the cache.
    let mirrored = dir.path().join("mirrored.toml");
    std::fs::write(&mirrored, format!("{text}mirror = true\n")).expect("mirrored");
    let plan = ok(&["run", s(&mirrored), "--plan"]);
    assert!(
        plan.contains("training photos mirrored left to right")
            && plan.contains("and their mirror images"),
        "{plan}"
    );
    let before = steps(&work);
    let out = ok(&["run", s(&mirrored), "--work", s(&work)]);
    assert!(
        out.contains("8 photos mirrored") && out.contains("(and their 8 mirror images)"),
        "{out}"
    );
    let new: Vec<String> = (steps(&work).into_iter())
        .filter(|s| !before.contains(s))
        .collect();
    assert_eq!(new.len(), 2, "{new:?}");
    let md = std::fs::read_to_string(work.join("report").join("report.md")).expect("report");
    assert!(md.contains("and their mirror images"), "{md}");
    // Again: every step from the cache.
    let cached = steps(&work);
    let again = ok(&["run", s(&mirrored), "--work", s(&work)]);
    assert!(!again.contains("photos mirrored"), "{again}");
    assert_eq!(steps(&work), cached);
    assert!(
        new.iter().any(|s| s.starts_with("encode/g3-mirrored-"))
            && new.iter().any(|s| s.starts_with("svm/")),
        "{new:?}"
    );
}
