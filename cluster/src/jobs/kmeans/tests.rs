//! Tests of the k-means job: SPMD runs on in-memory teams against the single process.

use vocab_pipeline::kmeans::{self, Init, KMeansError, Params, State, initial_centroids};
use vocab_pipeline::partition::{PartitionSet, split};
use vocab_pipeline::store::{Element, Format};

use vocab_pipeline::kmeans::Assignment;

use super::layout::*;
use super::root::*;
use std::collections::BTreeMap;

use std::time::Instant;

use vocab_pipeline::kmeans::Kernel;
use vocab_pipeline::kmeans::engine::StepReport;
use vocab_pipeline::partition::{Manifest, read_manifest};

use crate::collective::calibration::{Auto, Calibration, chain_order};
use crate::collective::topology::{self, tree::Tree};
use crate::collective::{Algorithm, BroadcastPlan, Probe};
use crate::engine::{EngineError, NoHooks, exit, hello};
use crate::jobs::serve;
use crate::net::transport::memory::MemoryTransport;

/// The distributed run `state` is the single-process run `local` bit for bit: centroids, every
/// iteration's inertia, and (pruned or not, as `assignment` says) the labels the bounds kept.
pub(crate) fn assert_same_run(
    state: &vocab_pipeline::kmeans::State,
    local: &vocab_pipeline::kmeans::State,
    assignment: Assignment,
    what: &str,
) {
    assert_eq!(state.centroids, local.centroids, "{what}");
    let bits = |s: &vocab_pipeline::kmeans::State| {
        s.history
            .iter()
            .map(|h| h.inertia.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(state), bits(local), "{what}");
    let kept =
        |s: &vocab_pipeline::kmeans::State| s.history.iter().map(|h| h.kept).collect::<Vec<_>>();
    assert_eq!(kept(state), kept(local), "{what}");
    assert_eq!(
        kept(state).iter().sum::<usize>() > 0,
        assignment.pruned(),
        "{what}"
    );
}

/// Features around blobs, split into 7 partitions.
pub(super) fn dataset(dir: &std::path::Path) -> std::path::PathBuf {
    let features = dir.join("f.bin");
    vocab_pipeline::synth::generate_features(&features, Format::Bin, 3000, 24, 9, 5)
        .expect("features");
    let parts = dir.join("parts");
    split(&features, 7, &parts, Element::F32).expect("split");
    parts
}

fn params(k: usize, assignment: Assignment) -> Params {
    Params {
        k,
        max_iter: 5,
        tol: 0.0,
        seed: 3,
        init: Init::Random,
        threads: 2,
        assignment,
    }
}

/// Runs a job on an in-memory team on `hosts`: rank 0 drives, the others serve.
fn run(
    hosts: &[&str],
    parts: &std::path::Path,
    options: Options,
    manifest: Manifest,
    params: &Params,
) -> Result<(State, Vec<StepReport>, Vec<String>), EngineError> {
    let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
    let team = MemoryTransport::team_on(&hosts);
    let set = PartitionSet::open(parts).expect("open");
    let start = State {
        iteration: 0,
        centroids: initial_centroids(&set.vectors(), params.k, &Init::Random, 3).expect("init"),
        history: Vec::new(),
        converged: false,
    };
    std::thread::scope(|s| {
        let (root, members) = team.split_first().expect("a root");
        for m in members {
            s.spawn(move || serve(m, &NoHooks));
        }
        let driven = (|| {
            let members = hello(root)?;
            let mut engine = Root::start(Box::new(root), &members, options, manifest, 7)?;
            let mut reports = Vec::new();
            let state = vocab_pipeline::kmeans::engine::fit_with::<_, EngineError>(
                &mut engine,
                params,
                start,
                &mut |_, r| {
                    reports.push(r.clone());
                    Ok(())
                },
            )?;
            Ok((state, reports, engine.members()))
        })();
        // Members leave on Exit, or when the root's end of the team is gone.
        let _ = exit(root);
        driven
    })
}

fn options(
    parts: &std::path::Path,
    algorithm: Algorithm,
    stage1: bool,
    assignment: Assignment,
) -> Options {
    Options {
        dir: parts.display().to_string(),
        plan: BroadcastPlan {
            algorithm,
            chunk: 256,
            chains: 2,
        },
        stage1,
        assignment,
        racks: BTreeMap::new(),
        root_maps: true,
        auto: None,
        known: None,
        deal: Deal::Blocks,
        remake: None,
    }
}

#[test]
fn spmd_runs_give_the_single_process_centroids_bit_for_bit() {
    let tmp = tempfile::tempdir().expect("tmp");
    let parts = dataset(tmp.path());
    let set = PartitionSet::open(&parts).expect("open");
    let manifest = read_manifest(&parts).expect("manifest");
    for (w, algorithm, stage1, k, assignment, root_maps) in [
        (
            1,
            Algorithm::Chain,
            true,
            20,
            Assignment::Full(Kernel::F32),
            true,
        ),
        (
            2,
            Algorithm::Chain,
            true,
            20,
            Assignment::Full(Kernel::F32),
            true,
        ),
        (
            3,
            Algorithm::MultiChain,
            false,
            20,
            Assignment::Full(Kernel::F32),
            true,
        ),
        (
            4,
            Algorithm::Mst,
            true,
            20,
            Assignment::Full(Kernel::F32),
            true,
        ),
        // Fewer centroids than members: some reduce an empty range.
        (
            4,
            Algorithm::Simple,
            true,
            3,
            Assignment::Full(Kernel::F32),
            true,
        ),
        (
            3,
            Algorithm::Chain,
            true,
            20,
            Assignment::Full(Kernel::Int8),
            true,
        ),
        // A root that only drives (the TCP driver): the others map and reduce.
        (
            2,
            Algorithm::Chain,
            true,
            20,
            Assignment::Full(Kernel::F32),
            false,
        ),
        (
            4,
            Algorithm::MultiChain,
            false,
            20,
            Assignment::Full(Kernel::Int8),
            false,
        ),
        // Pruned at the members, bounds kept beside their partitions across iterations.
        (
            3,
            Algorithm::Chain,
            true,
            20,
            Assignment::Pruned(Kernel::F32),
            true,
        ),
        (
            4,
            Algorithm::Mst,
            false,
            20,
            Assignment::Pruned(Kernel::Int8),
            false,
        ),
        // Approximate: every member builds the same index from the broadcast centroids.
        (
            3,
            Algorithm::Chain,
            true,
            20,
            Assignment::Approx {
                lists: 0,
                probes: 2,
            },
            true,
        ),
        (
            2,
            Algorithm::Mst,
            false,
            40,
            Assignment::Approx {
                lists: 9,
                probes: 1,
            },
            false,
        ),
    ] {
        let params = params(k, assignment);
        let local =
            kmeans::engine::fit::<KMeansError>(&set.vectors(), &params, None, &mut |_| Ok(()))
                .expect("local");
        let hosts: Vec<&str> = ["a", "b", "a", "b"][..w].to_vec();
        let (state, reports, members) = run(
            &hosts,
            &parts,
            Options {
                root_maps,
                ..options(&parts, algorithm, stage1, assignment)
            },
            manifest.clone(),
            &params,
        )
        .expect("spmd");
        let what = format!(
            "{w} members, {algorithm:?}, k = {k}, {}, {root_maps}",
            assignment.name()
        );
        assert_same_run(&state, &local, assignment, &what);
        // Hosts a, b, a, b: the chain keeps host a's ranks together.
        let want = ["0@a", "2@a", "1@b", "3@b"];
        let want: Vec<&str> = want
            .into_iter()
            .filter(|m| m[..1].parse::<usize>().is_ok_and(|r| r < w))
            .collect();
        assert_eq!(members, want, "{what}");
        let r = &reports[0];
        assert_eq!(r.workers, w);
        assert_eq!(r.broadcast_bytes, (k * 24 * 4 * (w - 1)) as u64);
        let mappers = if root_maps { w } else { w - 1 };
        if mappers == 1 {
            assert_eq!(r.stage2_bytes, 0);
        } else {
            // Every mapper ships (m - 1) / m of its partial(s): k x (dims + 1) x 8 bytes.
            assert!(
                r.stage2_bytes as f64 >= ((k * 25 * 8) * (mappers - 1)) as f64 * 0.9,
                "{what}: {r:?}"
            );
        }
    }
}

/// The test partitions in `dir`, their manifest, k = 20 parameters and the single-process
/// run of them.
fn single_process(dir: &std::path::Path) -> (std::path::PathBuf, Manifest, Params, State) {
    let parts = dataset(dir);
    let set = PartitionSet::open(&parts).expect("open");
    let manifest = read_manifest(&parts).expect("manifest");
    let params = params(20, Assignment::Full(Kernel::F32));
    let local = kmeans::engine::fit::<KMeansError>(&set.vectors(), &params, None, &mut |_| Ok(()))
        .expect("local");
    (parts, manifest, params, local)
}

#[test]
fn a_chain_from_measured_links_gives_the_same_centroids() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (parts, manifest, params, local) = single_process(tmp.path());
    let auto = Auto {
        probe: Probe {
            small: 16,
            pings: 2,
            large: 8192,
        },
        bytes: (20 * 24 * 4) as f64,
    };
    for root_maps in [true, false] {
        let (state, _, members) = run(
            &["a", "b", "c", "d"],
            &parts,
            Options {
                auto: Some(auto),
                root_maps,
                ..options(
                    &parts,
                    Algorithm::Chain,
                    true,
                    Assignment::Full(Kernel::F32),
                )
            },
            manifest.clone(),
            &params,
        )
        .expect("spmd");
        assert_eq!(state.centroids, local.centroids, "root maps: {root_maps}");
        let mut ranks: Vec<&str> = members.iter().map(|m| &m[..1]).collect();
        assert_eq!(ranks[0], "0");
        ranks.sort_unstable();
        assert_eq!(ranks, ["0", "1", "2", "3"]);
    }
}

#[test]
fn measured_trees_run_the_broadcast_and_the_gather_with_the_same_centroids() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (parts, manifest, params, local) = single_process(tmp.path());
    // One fast switch, but f's path to the driver a is slow both ways (a relay through
    // another member is faster), saved as a calibration of these hosts.
    let hosts = ["a", "b", "c", "d", "e", "f"];
    let mut links = topology::synthetic(&[0; 6], 100e6, 100e6, 0.1, 4);
    (links.bandwidth[5][0], links.bandwidth[0][5]) = (2e6, 2e6);
    let labels: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
    let auto = Auto {
        probe: Probe {
            small: 16,
            pings: 1,
            large: 1024,
        },
        bytes: 4e6,
    };
    let c = Calibration::choose(links.clone(), 0.0, auto, 65536);
    assert_ne!(c.gather_tree, Tree::star(6, 0), "{}", c.describe(&labels));
    assert!(c.gather_check.predicted < c.star, "{}", c.describe(&labels));
    assert!(c.broadcast_check.beats > 0.9, "{}", c.describe(&labels));
    let text = c.describe(&labels);
    assert!(text.contains("broadcast tree (mst): a > "), "{text}");
    assert!(text.contains("gather tree (stage 3): a > "), "{text}");
    for root_maps in [true, false] {
        let (state, reports, _) = run(
            &hosts,
            &parts,
            Options {
                auto: Some(auto),
                known: Some(topology::Saved::new(&labels, &links, 1.0)),
                root_maps,
                ..options(&parts, Algorithm::Mst, true, Assignment::Full(Kernel::F32))
            },
            manifest.clone(),
            &params,
        )
        .expect("spmd");
        assert_eq!(state.centroids, local.centroids, "root maps: {root_maps}");
        assert!(reports.iter().all(|r| r.recalibrated.is_none()));
    }
}

#[test]
fn a_slower_broadcast_marks_the_links_for_measuring_again() {
    assert_eq!(slowed(None, 1.0), (Some(1.0), false));
    assert_eq!(slowed(Some(1.0), 1.19), (Some(1.0), false));
    assert_eq!(slowed(Some(1.0), 1.3), (Some(1.0), true));
    // Small broadcasts: 20 ms of slack, so jitter does not trigger it.
    assert_eq!(slowed(Some(0.001), 0.015), (Some(0.001), false));
}

#[test]
fn measuring_again_mid_job_reorders_and_gives_the_same_centroids() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (parts, manifest, params, local) = single_process(tmp.path());
    let set = PartitionSet::open(&parts).expect("open");
    let hosts: Vec<String> = ["a", "b", "c"].iter().map(|h| h.to_string()).collect();
    let team = MemoryTransport::team_on(&hosts);
    let mut state = State {
        iteration: 0,
        centroids: initial_centroids(&set.vectors(), 20, &Init::Random, 3).expect("init"),
        history: Vec::new(),
        converged: false,
    };
    let options = Options {
        auto: Some(Auto {
            probe: Probe {
                small: 16,
                pings: 1,
                large: 4096,
            },
            bytes: 1e6,
        }),
        ..options(
            &parts,
            Algorithm::Chain,
            true,
            Assignment::Full(Kernel::F32),
        )
    };
    std::thread::scope(|s| {
        let (root, members) = team.split_first().expect("a root");
        for m in members {
            s.spawn(move || serve(m, &NoHooks));
        }
        let members = hello(root).expect("hello");
        let mut engine =
            Root::start(Box::new(root), &members, options, manifest, 7).expect("start");
        while state.iteration < params.max_iter {
            // Before every other iteration the links count as slowed down.
            engine.stale = state.iteration % 2 == 1;
            let started = Instant::now();
            let result = engine
                .step(state.iteration + 1, &state.centroids)
                .expect("step");
            let report = result.apply(&mut state, &params, started);
            assert_eq!(
                report.recalibrated.is_some(),
                state.iteration.is_multiple_of(2)
            );
        }
        exit(root).expect("exit");
    });
    assert_eq!(state.centroids, local.centroids);
}

#[test]
fn members_with_other_partitions_are_refused_by_rank_and_host() {
    let tmp = tempfile::tempdir().expect("tmp");
    let parts = dataset(tmp.path());
    let mut manifest = read_manifest(&parts).expect("manifest");
    manifest.partitions[0].checksum ^= 1;
    let err = run(
        &["h0", "h1"],
        &parts,
        options(
            &parts,
            Algorithm::Chain,
            true,
            Assignment::Full(Kernel::F32),
        ),
        manifest,
        &params(5, Assignment::Full(Kernel::F32)),
    )
    .expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("on h") && text.contains("manifest digest"),
        "{text}"
    );
    let err = run(
        &["h0", "h1", "h2"],
        &parts,
        options(
            std::path::Path::new("/nonexistent/parts"),
            Algorithm::Chain,
            true,
            Assignment::Full(Kernel::F32),
        ),
        read_manifest(&parts).expect("manifest"),
        &params(5, Assignment::Full(Kernel::F32)),
    );
    // The root's own read fails first here, naming the folder.
    let text = err.expect_err("refused").to_string();
    assert!(text.contains("/nonexistent/parts"), "{text}");
}

#[test]
fn data_with_a_huge_outlier_is_refused_before_the_first_step() {
    let tmp = tempfile::tempdir().expect("tmp");
    let features = tmp.path().join("f.bin");
    let mut w =
        vocab_pipeline::store::FeatureWriter::create(&features, Format::Bin, 4).expect("create");
    for i in 0..200u32 {
        // Within the magnitude bound of a 4-value vector, far above the rest.
        let v = if i == 150 {
            1e17
        } else {
            (i % 7) as f32 / 10.0
        };
        w.write(i, 0, 0, &[v, 0.5, 0.25, 0.125]).expect("write");
    }
    w.finish().expect("finish");
    let parts = tmp.path().join("parts");
    split(&features, 4, &parts, Element::F32).expect("split");
    let err = run(
        &["h0", "h1"],
        &parts,
        options(
            &parts,
            Algorithm::Chain,
            true,
            Assignment::Full(Kernel::F32),
        ),
        read_manifest(&parts).expect("manifest"),
        &params(3, Assignment::Full(Kernel::F32)),
    )
    .expect_err("refused");
    assert!(matches!(err, EngineError::Range { .. }), "{err}");
}

#[test]
fn the_chain_keeps_racks_together_in_order_of_first_appearance() {
    let hosts: Vec<String> = ["n1", "n2", "n3", "n4", "n5"]
        .iter()
        .map(|h| h.to_string())
        .collect();
    assert_eq!(chain_order(&hosts, &BTreeMap::new()), vec![0, 1, 2, 3, 4]);
    let racks: BTreeMap<String, String> = [("n1", "r2"), ("n2", "r1"), ("n3", "r2"), ("n4", "r1")]
        .iter()
        .map(|(h, r)| (h.to_string(), r.to_string()))
        .collect();
    // r2 (n1, n3), then r1 (n2, n4), then n5 on its own.
    assert_eq!(chain_order(&hosts, &racks), vec![0, 2, 1, 3, 4]);
    let same: Vec<String> = ["x", "y", "x", "y"].iter().map(|h| h.to_string()).collect();
    assert_eq!(chain_order(&same, &BTreeMap::new()), vec![0, 2, 1, 3]);
}

/// The mixture of `params` over the partitions at `parts`, learned on one process.
pub(crate) fn local_mixture(
    parts: &std::path::Path,
    params: &vocab_pipeline::mixture::Params,
) -> vocab_pipeline::mixture::Fitted {
    use vocab_pipeline::mixture::{Local, MixtureError, fit_with};
    let set = PartitionSet::open(parts).expect("open");
    let vectors = set.vectors();
    let mut engine = Local::new(kmeans::Shard::numbered(&vectors)).expect("engine");
    fit_with::<_, MixtureError>(&mut engine, params, &mut |_| Ok(())).expect("local mixture")
}

/// Two learned mixtures are the same bits: projection, mixture, every step's log-likelihood.
pub(crate) fn assert_same_mixture(
    got: &vocab_pipeline::mixture::Fitted,
    want: &vocab_pipeline::mixture::Fitted,
    what: &str,
) {
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&got.pca.components),
        bits(&want.pca.components),
        "{what}"
    );
    assert_eq!(bits(&got.pca.mean), bits(&want.pca.mean), "{what}");
    assert_eq!(bits(&got.gmm.means), bits(&want.gmm.means), "{what}");
    assert_eq!(
        bits(&got.gmm.variances),
        bits(&want.gmm.variances),
        "{what}"
    );
    assert_eq!(bits(&got.gmm.weights), bits(&want.gmm.weights), "{what}");
    let lls = |f: &vocab_pipeline::mixture::Fitted| {
        f.steps
            .iter()
            .map(|s| s.log_likelihood.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(lls(got), lls(want), "{what}");
}

/// The mixture's PCA and EM steps run as the k-means job's map steps: on any team, with or
/// without stage 1, with a root that maps or only drives, the single process's mixture.
#[test]
fn mixtures_on_teams_are_the_single_process_mixture_bit_for_bit() {
    use vocab_pipeline::mixture::{Params as MixtureParams, fit_with};
    type Failure = Box<dyn std::error::Error>;
    let tmp = tempfile::tempdir().expect("tmp");
    let parts = dataset(tmp.path());
    let params = MixtureParams {
        components: 5,
        pca_dims: 6,
        max_iter: 4,
        tol: 0.0,
        seed: 9,
        reg: 1e-6,
    };
    let local = local_mixture(&parts, &params);
    assert_eq!(local.steps.len(), 5);
    for (w, algorithm, stage1, root_maps) in [
        (1, Algorithm::Chain, true, true),
        (3, Algorithm::Chain, true, true),
        (3, Algorithm::Mst, false, true),
        (3, Algorithm::MultiChain, true, false),
    ] {
        let hosts: Vec<String> = (0..w).map(|i| format!("h{i}")).collect();
        let team = MemoryTransport::team_on(&hosts);
        let options = Options {
            root_maps,
            ..options(&parts, algorithm, stage1, Assignment::default())
        };
        let manifest = read_manifest(&parts).expect("manifest");
        let fitted = std::thread::scope(|s| {
            let (root, members) = team.split_first().expect("a root");
            for m in members {
                s.spawn(move || serve(m, &NoHooks));
            }
            let driven = (|| -> Result<_, Failure> {
                let members = hello(root)?;
                let mut engine = Root::start(Box::new(root), &members, options, manifest, 7)?;
                assert_eq!(engine.shape(), (3000, 24));
                fit_with::<_, Failure>(&mut engine, &params, &mut |_| Ok(()))
            })();
            let _ = exit(root);
            driven
        })
        .expect("team mixture");
        let what = format!("{w} members, {algorithm:?}, stage 1 {stage1}, root maps {root_maps}");
        assert_same_mixture(&fitted, &local, &what);
    }
}
