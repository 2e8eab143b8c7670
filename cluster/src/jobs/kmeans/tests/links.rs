//! Chains and trees from measured links, measured again mid-job, and racks kept together: the
//! same centroids whatever the order.

use super::*;

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
