//! Partitions born on the members: the cut gives the single machine's partitions, a kept job run
//! again takes back the rounds its members saved, a cut unlike what members kept is refused.

use crate::jobs::error::JobError;
use std::path::PathBuf;

use vocab_pipeline::features;
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::kmeans::Kernel;
use vocab_pipeline::store::Format;

use super::super::job::PhotoStage;
use super::super::root::*;
use super::{feature_params, files, folder, on_team, photos};
use crate::engine::EngineError;

#[test]
fn partitions_born_on_the_nodes_are_the_single_machine_partitions() {
    use vocab_pipeline::kmeans::{self, Assignment, Init, KMeansError, Params, State};
    use vocab_pipeline::partition::{MANIFEST, PartitionSet, split};
    use vocab_pipeline::store::Element;

    use crate::jobs::kmeans::tests::assert_same_run;
    use crate::jobs::kmeans::{Options, Root};

    let tmp = tempfile::tempdir().expect("tmp");
    let root = photos(tmp.path());
    let collection = Collection::open(&root, None).expect("collection");
    let none = |_| {};
    let params = feature_params();
    // One machine: the feature file, split into 5 partitions, and k-means over them.
    let local = tmp.path().join("local.bin");
    vocab_pipeline::describe::extract(&collection, &params, &local, Format::Bin, &none)
        .expect("features");
    let want = files(&local);
    let parts = tmp.path().join("parts");
    let manifest = split(&local, 5, &parts, Element::F32).expect("split");
    let set = PartitionSet::open(&parts).expect("open");
    let kparams = Params {
        k: 4,
        max_iter: 4,
        tol: 0.0,
        seed: 3,
        init: Init::Random,
        threads: 2,
        assignment: Assignment::Full(Kernel::F32),
    };
    let start = State {
        iteration: 0,
        centroids: kmeans::initial_centroids(&set.vectors(), 4, &Init::Random, 3).expect("init"),
        history: Vec::new(),
        converged: false,
    };
    let alone = kmeans::engine::fit::<KMeansError>(
        &set.vectors(),
        &kparams,
        Some(start.clone()),
        &mut |_| Ok(()),
    )
    .expect("local");
    let payload = |bytes: &[u8]| bytes.len() - vocab_pipeline::store::HEADER_LEN;
    for (size, root_works) in [(2, false), (3, false), (3, true), (4, false), (2, true)] {
        let what = format!("{size} ranks, root works: {root_works}");
        let base = tmp.path().join(format!("born-{size}-{root_works}"));
        let dir = base.join("{rank}").display().to_string();
        let out = base.join("kept.bin");
        let hosts: Vec<String> = (0..size).map(|r| format!("node{r}")).collect();
        let (born, state) = on_team(size, |first, members| {
            {
                let mut job = PhotoRoot::start_keeping(
                    Box::new(first),
                    members,
                    &collection,
                    &PhotoStage::Features(params, None),
                    root_works,
                    Some(&dir),
                )?;
                let sized = job.kept_rounds(&mut |_| {})?;
                let kept_sizes = sized.clone();
                std::fs::create_dir_all(&base).expect("mkdir");
                features::manifests_from(
                    &collection,
                    &out,
                    &mut features::Given(Some(sized)),
                    &none,
                )
                .expect("manifests");
                let born = job.cut(&dir, 5, Element::F32, "kept")?;
                let options = Options {
                    dir: dir.clone(),
                    plan: crate::collective::BroadcastPlan {
                        algorithm: crate::collective::Algorithm::Chain,
                        chunk: 256,
                        chains: 1,
                    },
                    stage1: true,
                    assignment: kparams.assignment,
                    racks: std::collections::BTreeMap::new(),
                    root_maps: root_works,
                    auto: None,
                    known: None,
                    // Dealt as the cut placed them, or found where they are.
                    deal: if size % 2 == 0 {
                        crate::jobs::kmeans::Deal::ByRank(born.by_rank(size))
                    } else {
                        crate::jobs::kmeans::Deal::Found
                    },
                    remake: None,
                };
                let engine_options = options.clone();
                let mut engine =
                    Root::start(Box::new(first), members, options, born.manifest.clone(), 9)?;
                // The first centroids from rows the members send: the single machine's.
                let (n, dims) = engine.shape();
                let seeded = kmeans::initial_centroids_by::<EngineError>(
                    n as usize,
                    dims,
                    4,
                    &Init::Random,
                    3,
                    &mut |indices| engine.rows(indices),
                )?;
                assert_eq!(seeded, start.centroids, "{what}: first centroids");
                let state = vocab_pipeline::kmeans::engine::fit_with::<_, EngineError>(
                    &mut engine,
                    &kparams,
                    start.clone(),
                    &mut |_, _| Ok(()),
                )?;
                if size == 3 {
                    // A partition gone from its member is on no member: named, not skipped.
                    let owner = born.owners[1].to_string();
                    let gone = base
                        .join(owner)
                        .join(vocab_pipeline::partition::part_file(1));
                    std::fs::remove_file(&gone).expect("remove");
                    let options = Options {
                        deal: crate::jobs::kmeans::Deal::Found,
                        ..engine_options.clone()
                    };
                    let err =
                        Root::start(Box::new(first), members, options, born.manifest.clone(), 10)
                            .map(|_| ())
                            .expect_err("a partition on no member");
                    assert!(
                        err.to_string().contains("no member holds part-0001.bin"),
                        "{err}"
                    );
                    // With its recipe, a member makes it again from the photos: split's
                    // file, and the same run.
                    let recipes = crate::jobs::born::Recipes::of(
                        &collection,
                        (params, None),
                        &kept_sizes,
                        &born.manifest,
                    );
                    let options = Options {
                        deal: crate::jobs::kmeans::Deal::Found,
                        remake: Some(std::sync::Arc::new(recipes)),
                        ..engine_options.clone()
                    };
                    let mut again =
                        Root::start(Box::new(first), members, options, born.manifest.clone(), 11)?;
                    let remade = again.remade().to_vec();
                    assert_eq!(remade.len(), 1, "{remade:?}");
                    assert_eq!(remade[0].0, 1, "{remade:?}");
                    let at = base
                        .join(
                            hosts
                                .iter()
                                .position(|h| *h == remade[0].1)
                                .expect("host")
                                .to_string(),
                        )
                        .join(vocab_pipeline::partition::part_file(1));
                    assert!(
                        std::fs::read(&at).expect("made again")
                            == std::fs::read(parts.join(vocab_pipeline::partition::part_file(1)))
                                .expect("split's"),
                        "{what}"
                    );
                    let rerun = vocab_pipeline::kmeans::engine::fit_with::<_, EngineError>(
                        &mut again,
                        &kparams,
                        start.clone(),
                        &mut |_, _| Ok(()),
                    )?;
                    assert_same_run(&rerun, &alone, kparams.assignment, &what);
                    // Back where the cut put it, for the checks of the folders below.
                    std::fs::remove_file(&at).expect("remove");
                    std::fs::copy(parts.join(vocab_pipeline::partition::part_file(1)), &gone)
                        .expect("restore");
                }
                Ok::<_, EngineError>((born, state))
            }
        })
        .expect(&what);
        // The manifests of the features stage are the single machine's.
        for (i, suffix) in ["images.csv", "skipped.csv"].iter().enumerate() {
            let got = std::fs::read(features::manifest_path(&out, suffix)).expect("manifest");
            assert_eq!(got, want[i + 1], "{what}: {suffix}");
        }
        assert!(!out.exists(), "{what}: no feature file at the root");
        // The partitions are split's, each at its owner only, with the manifest beside.
        assert_eq!(born.manifest.digest(), manifest.digest(), "{what}");
        assert_eq!(born.manifest.partitions, manifest.partitions, "{what}");
        assert_eq!(
            born.manifest.source_checksum, manifest.source_checksum,
            "{what}"
        );
        let alike = folder(&parts);
        for rank in 0..size {
            let held = folder(&base.join(rank.to_string()));
            let mine: Vec<String> = (born.owners.iter().enumerate())
                .filter(|&(_, &o)| o == rank)
                .map(|(p, _)| vocab_pipeline::partition::part_file(p))
                .collect();
            let names: Vec<&String> = held.keys().filter(|n| *n != MANIFEST).collect();
            assert_eq!(
                names,
                mine.iter().collect::<Vec<_>>(),
                "{what}: rank {rank}"
            );
            for name in &mine {
                assert_eq!(held[name], alike[name], "{what}: {name}");
            }
            let m = vocab_pipeline::partition::read_manifest(&base.join(rank.to_string()))
                .expect("member manifest");
            assert_eq!(m.digest(), manifest.digest(), "{what}: rank {rank}");
        }
        if !root_works {
            assert!(!born.owners.contains(&0), "{what}: the root holds nothing");
        }
        // Only boundary records travelled: less than the sample (and, with three shards
        // or more here, some).
        assert!(
            born.bytes < payload(&want[0]) as u64,
            "{what}: {} bytes",
            born.bytes
        );
        assert_eq!(
            born.bytes > 0,
            size >= 3 || root_works,
            "{what}: {:?}",
            born.owners
        );
        // k-means on the partitions where they lie is the single-machine run.
        assert_same_run(&state, &alone, kparams.assignment, &what);
    }
}

#[test]
fn a_kept_job_run_again_takes_back_the_rounds_its_members_saved() {
    use vocab_pipeline::partition::split;
    use vocab_pipeline::store::Element;

    let tmp = tempfile::tempdir().expect("tmp");
    let root = photos(tmp.path());
    let collection = Collection::open(&root, None).expect("collection");
    let none = |_| {};
    let local = tmp.path().join("local.bin");
    vocab_pipeline::describe::extract(&collection, &feature_params(), &local, Format::Bin, &none)
        .expect("features");
    let want = split(&local, 3, &tmp.path().join("parts"), Element::F32).expect("split");
    let dir = tmp.path().join("{rank}").display().to_string();
    // The job on a team of 3; cut or interrupted before the cut.
    let run = |cut: bool| {
        on_team(3, |first, members| {
            let mut job = PhotoRoot::start_keeping(
                Box::new(first),
                members,
                &collection,
                &PhotoStage::Features(feature_params(), None),
                false,
                Some(&dir),
            )?;
            job.kept_rounds(&mut |_| {})?;
            cut.then(|| job.cut(&dir, 3, Element::F32, "kept"))
                .transpose()
        })
        .expect("team")
    };
    let kept = |rank: usize| -> Vec<PathBuf> {
        std::fs::read_dir(tmp.path().join(rank.to_string()))
            .map(|d| d.map(|e| e.expect("entry").path()).collect())
            .unwrap_or_default()
    };
    assert!(run(false).is_none());
    for rank in [1, 2] {
        let saved = kept(rank);
        assert!(
            saved.len() == 1 && saved[0].to_string_lossy().contains(".kept-"),
            "{saved:?}"
        );
    }
    // A photo damaged since: described again it would be skipped; taken back, it is what
    // it was, and the partitions are split's.
    let damaged = (collection.photos().iter())
        .map(|p| collection.path_of(p))
        .find(|p| p.extension().is_some_and(|e| e == "png") && !p.ends_with("tiny.png"))
        .expect("a photo");
    std::fs::write(&damaged, b"damaged").expect("damage");
    let born = run(true).expect("cut");
    assert_eq!(born.manifest.digest(), want.digest());
    // The saved rounds go once the partitions are cut.
    for rank in [1, 2] {
        assert!(
            kept(rank)
                .iter()
                .all(|p| !p.to_string_lossy().contains(".kept-")),
            "{:?}",
            kept(rank)
        );
    }
}

#[test]
fn a_cut_unlike_what_the_members_kept_is_refused_naming_the_member() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = photos(tmp.path());
    let collection = Collection::open(&root, None).expect("collection");
    let dir = tmp.path().join("{rank}").display().to_string();
    // Members answer the refused cut and go on serving until told to exit.
    let refused = on_team(3, |first, members| {
        let mut job = PhotoRoot::start_keeping(
            Box::new(first),
            members,
            &collection,
            &PhotoStage::Features(feature_params(), None),
            false,
            None,
        )?;
        // Before the rounds there is nothing to cut.
        let early = job.cut(&dir, 2, vocab_pipeline::store::Element::F32, "kept");
        assert!(
            matches!(
                early.as_ref().map_err(|e| e.job()),
                Err(Some(JobError::NotLoaded(0)))
            ),
            "{early:?}"
        );
        job.kept_rounds(&mut |_| {})?;
        if let Some(kept) = job.kept.as_mut() {
            kept.records[2] += 1;
        }
        let refused = job
            .cut(&dir, 2, vocab_pipeline::store::Element::F32, "kept")
            .expect_err("records unlike the kept ones");
        Ok(refused)
    })
    .expect("team");
    let text = refused.to_string() + &vocab_pipeline::chain(&refused);
    assert!(
        matches!(&refused, EngineError::Refused { rank: 2, host, .. } if host == "node2"),
        "{refused:?}"
    );
    assert!(text.contains("the root counted"), "{text}");
    // Nothing was written anywhere.
    assert!(folder(&tmp.path().join("1")).is_empty());
    assert!(folder(&tmp.path().join("2")).is_empty());
}
