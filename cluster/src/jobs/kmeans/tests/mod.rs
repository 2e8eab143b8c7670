//! Tests of the k-means job: SPMD runs on in-memory teams against the single process.

use crate::jobs::error::JobError;
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
                kernel: Kernel::F32,
            },
            true,
        ),
        (
            3,
            Algorithm::Chain,
            true,
            20,
            Assignment::Approx {
                lists: 0,
                probes: 2,
                kernel: Kernel::Int8,
            },
            false,
        ),
        (
            2,
            Algorithm::Mst,
            false,
            40,
            Assignment::Approx {
                lists: 9,
                probes: 1,
                kernel: Kernel::F32,
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
    assert!(matches!(err.job(), Some(JobError::Range(_))), "{err}");
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

mod links;
mod mixtures;
