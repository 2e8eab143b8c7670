//! Tests of the photo job on in-memory teams: sharded stages write the single machine's files,
//! members refuse bad jobs, pieces are checked, saved rounds come back; the cut of partitions
//! born on the members in `born`.

mod born;

use std::ops::Range;
use std::path::{Path, PathBuf};

use vocab_pipeline::encode::{EncodeParams, Encoder, Method, Norm, Soft, Words};
use vocab_pipeline::features::FeatureSummary;
use vocab_pipeline::features::{self, Described, FeatureParams, FeaturesError, Outcome, Source};
use vocab_pipeline::hog::{DIMS, PATCH_SIDE};
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::kmeans::Centroids;
use vocab_pipeline::kmeans::Kernel;
use vocab_pipeline::patch::{MAX_PER_IMAGE, Sampling};
use vocab_pipeline::store::Format;

use super::job::*;
use super::root::*;
use super::source::*;
use super::wire::*;
use crate::engine::{EngineError, Members, NoHooks, exit, hello};
use crate::jobs::serve;
use crate::net::transport::memory::MemoryTransport;

/// Synthetic photos plus two that are skipped (not an image; too small for a patch).
pub(super) fn photos(dir: &Path) -> PathBuf {
    let root = dir.join("photos");
    vocab_pipeline::synth::generate_photos(&root, 2, 5).expect("photos");
    std::fs::write(root.join("broken.jpg"), b"not a jpeg").expect("write");
    image::GrayImage::from_pixel(20, 30, image::Luma([90u8]))
        .save(root.join("tiny.png"))
        .expect("tiny");
    root
}

pub(super) fn feature_params() -> FeatureParams {
    FeatureParams {
        sampling: Sampling::Random {
            per_image: 7,
            seed: 11,
        },
        max_side: Some(160),
        max_pixels: vocab_pipeline::image_io::MAX_PIXELS,
        mirror: false,
        patch: None,
        descriptor: vocab_pipeline::features::Descriptor::Hog,
    }
}

pub(super) fn encode_params() -> EncodeParams {
    EncodeParams {
        features: FeatureParams {
            sampling: Sampling::Dense { stride: 16 },
            max_side: Some(160),
            max_pixels: vocab_pipeline::image_io::MAX_PIXELS,
            mirror: false,
            patch: None,
            descriptor: vocab_pipeline::features::Descriptor::Hog,
        },
        norm: Norm::Hellinger,
        levels: 2,
        strips: 0,
        method: Method::Soft(Soft {
            words: 3,
            sharpness: 10.0,
        }),
        kernel: Kernel::Int8,
        scales: vec![40, 64],
        approx: None,
        dims: vocab_pipeline::hog::DIMS,
        foreign: false,
    }
}

/// Runs a photo stage on an in-memory team of `size` (rank 0 drives, and does photos when
/// `root_works`), writing through `write` with the team's rounds as the source.
pub(super) fn sharded<T: Value>(
    size: usize,
    root_works: bool,
    collection: &Collection,
    stage: &PhotoStage,
    vocabulary: Option<&Words>,
    write: &mut dyn FnMut(&mut dyn Source<T>) -> Result<FeatureSummary, FeaturesError>,
) -> Result<(FeatureSummary, Vec<MemberTime>), EngineError> {
    let hosts: Vec<String> = (0..size).map(|r| format!("node{r}")).collect();
    let team = MemoryTransport::team_on(&hosts);
    std::thread::scope(|s| {
        let (root, members) = team.split_first().expect("a root");
        for m in members {
            s.spawn(move || serve(m, &NoHooks));
        }
        let driven = (|| {
            let members = hello(root)?;
            let mut job = PhotoRoot::start(
                Box::new(root),
                &members,
                collection,
                stage,
                vocabulary,
                root_works,
            )?;
            let per_round = shard_photos(collection.photos().len(), job.workers()) * job.workers();
            let mut source = Rounds::new(
                |range, next| job.round::<T>(range, next),
                per_round,
                collection.photos().len(),
            );
            let summary = write(&mut source).map_err(|e| EngineError::Malformed {
                rank: 0,
                reason: vocab_pipeline::chain(&e),
            })?;
            Ok((summary, job.times()))
        })();
        let _ = exit(root);
        driven
    })
}

pub(super) fn files(out: &Path) -> Vec<Vec<u8>> {
    [
        out.to_path_buf(),
        features::manifest_path(out, "images.csv"),
        features::manifest_path(out, "skipped.csv"),
    ]
    .iter()
    .map(|p| std::fs::read(p).expect("read"))
    .collect()
}

/// Runs `drive` at the root of an in-memory team of `size` (members `node0`..) while the
/// others serve; members must serve to the end (told to exit afterwards).
pub(super) fn on_team<R>(
    size: usize,
    drive: impl FnOnce(&MemoryTransport, &Members) -> Result<R, EngineError>,
) -> Result<R, EngineError> {
    let hosts: Vec<String> = (0..size).map(|r| format!("node{r}")).collect();
    let team = MemoryTransport::team_on(&hosts);
    std::thread::scope(|s| {
        let (first, members) = team.split_first().expect("a root");
        let served: Vec<_> = (members.iter())
            .map(|m| s.spawn(move || serve(m, &NoHooks)))
            .collect();
        let driven = hello(first).and_then(|members| drive(first, &members));
        let _ = exit(first);
        for m in served {
            m.join().expect("member").expect("served to the end");
        }
        driven
    })
}

/// The files of a partition folder, by name.
pub(super) fn folder(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| {
                    let p = e.expect("entry").path();
                    let name = p.file_name().expect("name").to_string_lossy().into_owned();
                    (name, std::fs::read(&p).expect("read"))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn sharded_features_and_encode_write_the_single_machine_bytes() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = photos(tmp.path());
    let collection = Collection::open(&root, None).expect("collection");
    let n = collection.photos().len();
    let none = |_| {};
    // One machine.
    let local = tmp.path().join("local.bin");
    let params = feature_params();
    let summary =
        vocab_pipeline::describe::extract(&collection, &params, &local, Format::Bin, &none)
            .expect("features");
    assert_eq!(summary.skipped, 2, "the broken and the tiny photo");
    let want = files(&local);
    let vocabulary = {
        // Twelve of the sample's patches as words.
        let bytes = &want[0][vocab_pipeline::store::HEADER_LEN..];
        let record = 8 + 4 * DIMS;
        let values: Vec<f32> = (0..12)
            .flat_map(|i| {
                bytes[i * 5 * record + 8..(i * 5 + 1) * record]
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            })
            .collect();
        Words::Vocabulary(Centroids::new(values, DIMS))
    };
    let encoded = tmp.path().join("local.csv");
    let ep = encode_params();
    vocab_pipeline::encode::encode(&collection, &vocabulary, &ep, &encoded, &none).expect("encode");
    let want_encoded = files(&encoded);
    let encoder = Encoder::new(vocabulary.clone(), ep.clone(), &encoded).expect("encoder");
    for (size, root_works) in [(2, false), (1, true), (2, true), (3, true), (4, false)] {
        let out = tmp.path().join(format!("f-{size}-{root_works}.bin"));
        let (s, times) = sharded::<Described>(
            size,
            root_works,
            &collection,
            &PhotoStage::Features(params, None),
            None,
            &mut |source| {
                features::extract_from(&collection, (&out, Format::Bin, 512), source, &none)
            },
        )
        .expect("sharded features");
        assert_eq!(s, summary, "{size} members");
        assert_eq!(
            files(&out),
            want,
            "{size} members, root works: {root_works}"
        );
        assert_eq!(times.iter().map(|t| t.photos).sum::<u64>(), n as u64);
        assert!(
            times.iter().all(|t| t.photos > 0),
            "every member did photos"
        );
        let out = tmp.path().join(format!("e-{size}-{root_works}.csv"));
        sharded::<Vec<f32>>(
            size,
            root_works,
            &collection,
            &PhotoStage::Encode(ep.clone(), None),
            Some(&vocabulary),
            &mut |source| {
                vocab_pipeline::encode::encode_from(&collection, encoder.len(), &out, source, &none)
            },
        )
        .expect("sharded encode");
        assert!(files(&out) == want_encoded, "{size} members encode");
    }
    // The approximate word search: every member indexes the vocabulary it was sent alike.
    let ap = EncodeParams {
        method: Method::Hard,
        kernel: Kernel::F32,
        approx: Some(vocab_pipeline::kmeans::approx::Search {
            lists: 3,
            probes: 1,
        }),
        ..encode_params()
    };
    let local = tmp.path().join("approx.csv");
    vocab_pipeline::encode::encode(&collection, &vocabulary, &ap, &local, &none)
        .expect("approximate encode");
    let out = tmp.path().join("approx-3.csv");
    sharded::<Vec<f32>>(
        3,
        true,
        &collection,
        &PhotoStage::Encode(ap.clone(), None),
        Some(&vocabulary),
        &mut |source| {
            vocab_pipeline::encode::encode_from(&collection, encoder.len(), &out, source, &none)
        },
    )
    .expect("sharded approximate encode");
    assert!(
        files(&out) == files(&local),
        "approximate encode on 3 members"
    );
    // It did search approximately: the exact hard assignment gives other histograms.
    let exact = tmp.path().join("exact.csv");
    let ep = EncodeParams { approx: None, ..ap };
    vocab_pipeline::encode::encode(&collection, &vocabulary, &ep, &exact, &none)
        .expect("exact encode");
    assert!(files(&local) != files(&exact));
}

#[test]
fn members_without_the_photos_or_with_bad_settings_refuse_the_job() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = photos(tmp.path());
    let collection = Collection::open(&root, None).expect("collection");
    // A member that sees another folder: the root's photos are not there.
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    let job = Spec {
        root: elsewhere.display().to_string(),
        photos: collection.listing(),
        present: present(&collection),
        stage: PhotoStage::Features(feature_params(), None),
        k: 0,
        keep: false,
        keep_dir: None,
    };
    let err = open_work(job, Vec::new(), (0, "node0"), "digest").expect_err("absent photos");
    assert!(err.contains("must hold the same photos"), "{err}");
    for (stage, k, what) in [
        (
            PhotoStage::Features(
                FeatureParams {
                    sampling: Sampling::Dense { stride: 0 },
                    ..feature_params()
                },
                None,
            ),
            0,
            "stride = 0",
        ),
        (
            PhotoStage::Features(
                FeatureParams {
                    sampling: Sampling::Random {
                        per_image: MAX_PER_IMAGE + 1,
                        seed: 0,
                    },
                    ..feature_params()
                },
                None,
            ),
            0,
            "patches per photo",
        ),
        (
            PhotoStage::Encode(encode_params(), None),
            2,
            "soft = 3: more words than the vocabulary's 2",
        ),
        (
            PhotoStage::Encode(
                EncodeParams {
                    levels: 40,
                    ..encode_params()
                },
                None,
            ),
            12,
            "pyramid",
        ),
    ] {
        let job = Spec {
            root: root.display().to_string(),
            photos: collection.listing(),
            present: Vec::new(),
            stage,
            k,
            keep: false,
            keep_dir: None,
        };
        let err =
            open_work(job, vec![0; 4 * DIMS * k as usize], (0, "node0"), "digest").expect_err(what);
        assert!(err.contains(what), "{err}");
    }
    let job = Spec {
        root: root.display().to_string(),
        photos: vec![("../outside.jpg".into(), None)],
        present: Vec::new(),
        stage: PhotoStage::Features(feature_params(), None),
        k: 0,
        keep: false,
        keep_dir: None,
    };
    assert!(
        open_work(job, Vec::new(), (0, "node0"), "digest")
            .expect_err("..")
            .contains("leaves")
    );
    let job = Spec {
        root: root.display().to_string(),
        photos: collection.listing(),
        present: Vec::new(),
        stage: PhotoStage::Encode(encode_params(), None),
        k: 12,
        keep: true,
        keep_dir: None,
    };
    let err = open_work(job, vec![0; 4 * DIMS * 12], (0, "node0"), "digest").expect_err("keep");
    assert!(err.contains("only the features stage keeps"), "{err}");
    // On a team, a refusal names the member (the root, which does no photos, sends a
    // listing it did not check).
    let hosts = vec!["root".to_string(), "far".to_string()];
    let team = MemoryTransport::team_on(&hosts);
    let outside = Collection::listed(&root, vec![("../x.jpg".into(), None)]).expect("listed");
    std::thread::scope(|s| {
        let (root, members) = team.split_first().expect("a root");
        s.spawn(move || serve(&members[0], &NoHooks));
        let members = hello(root).expect("hello");
        let stage = PhotoStage::Features(feature_params(), None);
        let refused = PhotoRoot::start(Box::new(root), &members, &outside, &stage, None, false)
            .expect_err("refused");
        let text = refused.to_string();
        assert!(
            text.contains("rank 1 on far") && text.contains("leaves"),
            "{text}"
        );
        exit(root).expect("exit");
    });
}

#[test]
fn hostile_pieces_are_errors() {
    let expect = Expect {
        photos: 2,
        histogram: 3,
        dims: DIMS,
        side: PATCH_SIDE,
    };
    let good: Vec<Outcome<Vec<f32>>> = vec![
        Outcome::Done {
            width: 100,
            height: 80,
            patches: 12,
            value: vec![0.5, 0.25, 0.25],
        },
        Outcome::Skipped("cannot decode".into()),
    ];
    let mut piece = 1.5f64.to_le_bytes().to_vec();
    put_outcomes(&mut piece, &good);
    let (seconds, back) = take_piece::<Vec<f32>>(&piece, &expect).expect("good");
    assert_eq!((seconds, &back), (1.5, &good));
    // Every truncation fails, as do trailing bytes, other counts, a NaN and a bad tag.
    for cut in 0..piece.len() {
        assert!(
            take_piece::<Vec<f32>>(&piece[..cut], &expect).is_err(),
            "cut {cut}"
        );
    }
    let mut long = piece.clone();
    long.push(0);
    assert!(
        take_piece::<Vec<f32>>(&long, &expect)
            .expect_err("an error")
            .contains("after")
    );
    let three = Expect {
        photos: 3,
        ..expect
    };
    assert!(
        take_piece::<Vec<f32>>(&piece, &three)
            .expect_err("an error")
            .contains("results")
    );
    let wider = Expect {
        histogram: 4,
        ..expect
    };
    assert!(
        take_piece::<Vec<f32>>(&piece, &wider)
            .expect_err("an error")
            .contains("histogram")
    );
    let mut nan = piece.clone();
    nan[8 + 4 + 1 + 12 + 4..8 + 4 + 1 + 12 + 8].copy_from_slice(&f32::NAN.to_le_bytes());
    assert!(
        take_piece::<Vec<f32>>(&nan, &expect)
            .expect_err("an error")
            .contains("finite")
    );
    let mut tag = piece.clone();
    tag[12] = 7;
    assert!(
        take_piece::<Vec<f32>>(&tag, &expect)
            .expect_err("an error")
            .contains("tag")
    );
    // Patches must lie inside their photo, and as many as announced.
    let d = Described {
        width: 50,
        height: 45,
        positions: vec![(0, 10)],
        values: vec![0.1; DIMS],
    };
    let one = Expect {
        photos: 1,
        histogram: 0,
        dims: DIMS,
        side: PATCH_SIDE,
    };
    for (patches, d, what) in [
        (1, d.clone(), None),
        (2, d.clone(), Some("positions")),
        (
            1,
            Described {
                positions: vec![(6, 0)],
                ..d.clone()
            },
            Some("patch at"),
        ),
    ] {
        let mut piece = 0f64.to_le_bytes().to_vec();
        put_outcomes(
            &mut piece,
            &[Outcome::Done {
                width: 50,
                height: 45,
                patches,
                value: d,
            }],
        );
        match (take_piece::<Described>(&piece, &one), what) {
            (Ok(_), None) => {}
            (Err(e), Some(w)) => assert!(e.contains(w), "{e}"),
            (r, w) => panic!("{w:?}: {r:?}"),
        }
    }
}

/// What a round of histograms of `n` values holds.
fn histograms(n: usize) -> Expect {
    Expect {
        photos: 0,
        histogram: n,
        dims: DIMS,
        side: PATCH_SIDE,
    }
}

#[test]
fn saved_rounds_come_back_whole_or_are_done_again() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("j.rounds");
    let journal = Journal::open(&dir, "job-a", histograms(2)).expect("journal");
    let round: Vec<Outcome<Vec<f32>>> = vec![
        Outcome::Skipped("cannot decode".into()),
        Outcome::Done {
            width: 60,
            height: 50,
            patches: 4,
            value: vec![0.75, 0.25],
        },
    ];
    journal.save(6, &round).expect("save");
    assert_eq!(journal.load::<Vec<f32>>(6, 10), Some(round.clone()));
    // Reopened for the same job the round is there; for another job it is gone.
    let same = Journal::open(&dir, "job-a", histograms(2)).expect("journal");
    assert_eq!(same.load::<Vec<f32>>(6, 10), Some(round.clone()));
    let other = Journal::open(&dir, "job-b", histograms(2)).expect("journal");
    assert_eq!(other.load::<Vec<f32>>(6, 10), None);
    journal.save(6, &round).expect("save");
    // Nothing saved there; a round past the collection's end; a damaged file.
    assert_eq!(journal.load::<Vec<f32>>(0, 10), None);
    assert_eq!(journal.load::<Vec<f32>>(6, 7), None);
    let path = journal.path(6);
    let mut bytes = std::fs::read(&path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).expect("write");
    assert_eq!(journal.load::<Vec<f32>>(6, 10), None);
    // A source through the journal saves what it computes and serves it the next time.
    let mut computed = 0;
    let rounds = Rounds::new(
        |range: Range<usize>, _| {
            computed += range.len();
            Ok::<_, std::io::Error>(range.map(|_| Outcome::Skipped("x".into())).collect())
        },
        3,
        5,
    );
    let mut source = Journaled::new(rounds, &journal, 5);
    let first: Vec<Outcome<Vec<f32>>> = source.next(0).expect("next").expect("a round");
    assert_eq!((first.len(), source.resumed), (3, 0));
    let _ = source;
    assert_eq!(computed, 3);
    let mut again = Journaled::new(
        Rounds::new(
            |_: Range<usize>, _| -> Result<Vec<Outcome<Vec<f32>>>, std::io::Error> {
                panic!("served from the journal")
            },
            3,
            5,
        ),
        &journal,
        5,
    );
    assert_eq!(again.next(0).expect("next"), Some(first));
    assert_eq!(again.resumed, 3);
    journal.remove().expect("remove");
}
