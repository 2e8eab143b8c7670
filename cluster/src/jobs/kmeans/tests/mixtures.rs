//! Mixtures on teams: the single process's mixture, bit for bit.

use super::*;

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
