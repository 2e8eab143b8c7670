//! The mixture against numpy's PCA and scikit-learn's EM (`eval/mixture/fixture.json`, written by
//! `eval/mixture/make_fixture.py`), on data with a known mixture, and the exactness of its sums.

use serde::Deserialize;

use super::*;
use crate::kmeans::Shard;
use crate::partition::Rows;

#[derive(Deserialize)]
struct Fixture {
    dims: usize,
    projected: usize,
    components: usize,
    steps: usize,
    reg: f64,
    x: Vec<f32>,
    pca: Pca,
    first: Gmm,
    sklearn: Sklearn,
    truth: Truth,
}

#[derive(Deserialize)]
struct Sklearn {
    weights: Vec<f64>,
    means: Vec<f64>,
    variances: Vec<f64>,
    mean_log_likelihood: f64,
}

#[derive(Deserialize)]
struct Truth {
    weights: Vec<f64>,
}

fn fixture() -> Fixture {
    serde_json::from_str(include_str!("../../../eval/mixture/fixture.json")).expect("fixture")
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{i}]: {g} against {w}"
        );
    }
}

/// The fixture's vectors as two partitions (the first 1,000 rows, the rest).
fn parts(f: &Fixture) -> Vec<Rows<'_>> {
    let cut = 1000 * f.dims;
    vec![
        Rows::dense(&f.x[..cut], f.dims),
        Rows::dense(&f.x[cut..], f.dims),
    ]
}

#[test]
fn the_pca_is_numpys() {
    let f = fixture();
    let parts = parts(&f);
    let mut local = Local::new(Shard::numbered(&parts)).expect("engine");
    let moments = local
        .moments(1, &Statistic::Covariance { dims: f.dims })
        .expect("covariance");
    let pca = Pca::from_moments(&moments, f.projected).expect("pca");
    close(&pca.mean, &f.pca.mean, 1e-12, "mean");
    close(&pca.variances, &f.pca.variances, 1e-9, "variances");
    close(&pca.components, &f.pca.components, 1e-8, "components");
    close(
        &[pca.total_variance],
        &[f.pca.total_variance],
        1e-12,
        "total variance",
    );
}

#[test]
fn em_steps_are_scikit_learns() {
    let f = fixture();
    let parts = parts(&f);
    let mut local = Local::new(Shard::numbered(&parts)).expect("engine");
    let params = Params {
        components: f.components,
        pca_dims: f.projected,
        max_iter: f.steps,
        tol: 0.0,
        seed: 1,
        reg: f.reg,
    };
    let (gmm, steps, converged) = fit::em::<_, MixtureError>(
        &mut local,
        &f.pca,
        (f.first.clone(), Vec::new()),
        &params,
        &mut |_, _, _| Ok(()),
    )
    .expect("em");
    assert!(!converged);
    assert_eq!(steps.len(), f.steps);
    close(&gmm.weights, &f.sklearn.weights, 1e-9, "weights");
    close(&gmm.means, &f.sklearn.means, 1e-9, "means");
    close(&gmm.variances, &f.sklearn.variances, 1e-9, "variances");
    // The log-likelihood only rises under EM, and one more step's is the final mixture's.
    for w in steps.windows(2) {
        assert!(w[1].log_likelihood >= w[0].log_likelihood - 1e-12);
    }
    let last = local
        .moments(
            99,
            &Statistic::Mixture {
                pca: f.pca.clone(),
                gmm,
            },
        )
        .expect("step");
    let mean = last.log_likelihood / (f.x.len() / f.dims) as f64;
    assert!(
        (mean - f.sklearn.mean_log_likelihood).abs() < 1e-9,
        "{mean}"
    );
}

#[test]
fn a_known_mixture_is_found_from_random_starts() {
    let f = fixture();
    let parts = parts(&f);
    let mut local = Local::new(Shard::numbered(&parts)).expect("engine");
    for seed in 1..=3 {
        let params = Params {
            components: f.components,
            pca_dims: f.projected,
            max_iter: 200,
            tol: 1e-9,
            seed,
            reg: f.reg,
        };
        let fitted =
            fit_with::<_, MixtureError>(&mut local, &params, &mut |_| Ok(())).expect("fit");
        assert!(fitted.converged, "seed {seed}");
        let mut weights = fitted.gmm.weights.clone();
        weights.sort_by(f64::total_cmp);
        let mut truth = f.truth.weights.clone();
        truth.sort_by(f64::total_cmp);
        close(&weights, &truth, 0.04, "weights");
        assert_eq!(fitted.steps[0].iteration, 0);
    }
}

/// A run taken up from the checkpoint of its third EM step ends where the run never stopped
/// ends, bit for bit, whether the checkpoint went through its file or not; another run's
/// checkpoint is refused.
#[test]
fn a_run_taken_up_from_its_checkpoint_ends_bit_for_bit_where_it_would_have() {
    let f = fixture();
    let parts = parts(&f);
    let mut local = Local::new(Shard::numbered(&parts)).expect("engine");
    let params = Params {
        components: f.components,
        pca_dims: f.projected,
        max_iter: 7,
        tol: 0.0,
        seed: 2,
        reg: f.reg,
    };
    let identity = Identity::of(&params, (f.x.len() as u64 / f.dims as u64, f.dims, 77));
    let whole = fit_with::<_, MixtureError>(&mut local, &params, &mut |_| Ok(())).expect("fit");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = checkpoint_path(&dir.path().join("m.json"));
    let mut steps = Vec::new();
    let mut stop = |step: &StepLog, pca: &Pca, gmm: Option<&Gmm>| -> Result<(), MixtureError> {
        steps.push(step.clone());
        if let Some(gmm) = gmm {
            Checkpoint::new(identity.clone(), &steps, pca, gmm).save(&path)?;
        }
        // Stops the run, as a crash would, after the third EM step.
        if step.iteration == 3 {
            Err(MixtureError::Empty)
        } else {
            Ok(())
        }
    };
    assert!(fit_from(&mut local, &params, None, &mut stop).is_err());
    let checkpoint = Checkpoint::load(&path).expect("load");
    assert_eq!(checkpoint.ems(), 3);
    let resumed = checkpoint
        .clone()
        .resumed((&identity, 7), &path)
        .expect("this run's");
    let mut seen = Vec::new();
    let taken_up =
        fit_from::<_, MixtureError>(&mut local, &params, Some(resumed), &mut |s, _, _| {
            seen.push(s.iteration);
            Ok(())
        })
        .expect("fit");
    assert_eq!(seen, [4, 5, 6, 7], "only the steps not done");
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&taken_up.gmm.means), bits(&whole.gmm.means));
    assert_eq!(bits(&taken_up.gmm.variances), bits(&whole.gmm.variances));
    assert_eq!(bits(&taken_up.gmm.weights), bits(&whole.gmm.weights));
    let lls = |f: &Fitted| {
        f.steps
            .iter()
            .map(|s| s.log_likelihood.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(lls(&taken_up), lls(&whole));
    let other = Identity {
        seed: 3,
        ..identity
    };
    let err = (checkpoint.clone())
        .resumed((&other, 7), &path)
        .expect_err("another run");
    assert!(
        err.to_string().contains("a checkpoint of another run"),
        "{err}"
    );
    let err = checkpoint
        .resumed((&identity, 2), &path)
        .expect_err("past its end");
    assert!(
        err.to_string().contains("more than the 2 this run makes"),
        "{err}"
    );
}

/// Sums of any grouping of the partitions, any thread count, and u8 codes against their decoded
/// values: the same bits.
#[test]
fn sums_are_exact_across_groupings_threads_and_codes() {
    let f = fixture();
    let parts = parts(&f);
    let statistic = Statistic::Mixture {
        pca: f.pca.clone(),
        gmm: f.first.clone(),
    };
    let shards = Shard::numbered(&parts);
    let scales = statistic.scales(8.0, 2400);
    let whole = moments::map_merged(&shards, &statistic, &scales);
    let mut apart = moments::map_merged(&shards[..1], &statistic, &scales);
    apart.merge(&moments::map_merged(&shards[1..], &statistic, &scales));
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool")
        .install(|| moments::map_merged(&shards, &statistic, &scales));
    for other in [&apart, &one_thread] {
        assert_eq!(whole.sums(), other.sums());
        assert_eq!(whole.counts(), other.counts());
        assert_eq!(whole.inertia().to_bits(), other.inertia().to_bits());
    }

    // u8 codes: the run on their decoded values.
    let codes: Vec<u8> = (0..300 * 6)
        .map(|i| ((i * 37 + i / 7) % 256) as u8)
        .collect();
    let held = [Rows::U8(crate::partition::Codes::new(&codes, 300, 6, 6))];
    let mut decoded = Vec::new();
    held[0].to_f32(&mut decoded);
    let wide = [Rows::dense(&decoded, 6)];
    let params = Params {
        components: 4,
        pca_dims: 3,
        max_iter: 4,
        tol: 0.0,
        seed: 2,
        reg: 1e-6,
    };
    let run = |parts: &[Rows<'_>]| {
        let mut engine = Local::new(Shard::numbered(parts)).expect("engine");
        fit_with::<_, MixtureError>(&mut engine, &params, &mut |_| Ok(())).expect("fit")
    };
    let (a, b) = (run(&held), run(&wide));
    assert_eq!(a.pca, b.pca);
    assert_eq!(a.gmm, b.gmm);
}

#[test]
fn statistics_travel_as_their_values() {
    let f = fixture();
    let statistic = Statistic::Mixture {
        pca: f.pca.clone(),
        gmm: f.first.clone(),
    };
    let back = Statistic::from_values(statistic.head(), &statistic.values()).expect("back");
    assert_eq!(back, statistic);
    let covariance = Statistic::Covariance { dims: 7 };
    assert_eq!(
        Statistic::from_values(covariance.head(), &[]).expect("back"),
        covariance
    );
    // Too few values, a projection past the dims, a zero variance: refused.
    let values = statistic.values();
    assert!(Statistic::from_values(statistic.head(), &values[1..]).is_err());
    let wide = moments::Head {
        projected: 11,
        ..statistic.head()
    };
    assert!(Statistic::from_values(wide, &values).is_err());
    let mut zero = values.clone();
    let last = zero.len() - 1;
    zero[last] = 0.0;
    assert!(matches!(
        Statistic::from_values(statistic.head(), &zero),
        Err(MixtureError::NotPositive)
    ));
}

/// Each column's own scale: vectors a million times larger give the mixture of the vectors,
/// scaled (a scale shared by all the sums rounded the counts of responsibilities to nothing:
/// equal weights, means of 0, variances of the regulariser).
#[test]
fn large_values_give_the_same_mixture_scaled() {
    let f = fixture();
    let params = Params {
        components: f.components,
        pca_dims: f.projected,
        max_iter: 200,
        tol: 1e-9,
        seed: 1,
        reg: f.reg,
    };
    let fit = |x: &[f32]| {
        let cut = 1000 * f.dims;
        let parts = [
            Rows::dense(&x[..cut], f.dims),
            Rows::dense(&x[cut..], f.dims),
        ];
        let mut engine = Local::new(Shard::numbered(&parts)).expect("engine");
        fit_with::<_, MixtureError>(&mut engine, &params, &mut |_| Ok(())).expect("fit")
    };
    let base = fit(&f.x);
    for c in [1048576.0f32, 1e6] {
        let scaled: Vec<f32> = f.x.iter().map(|v| v * c).collect();
        let big = fit(&scaled);
        close(&big.gmm.weights, &base.gmm.weights, 1e-4, "weights");
        let means: Vec<f64> = big.gmm.means.iter().map(|m| m / f64::from(c)).collect();
        // Means of the projection: the same up to the sign each component's axis was given.
        let abs = |v: &[f64]| v.iter().map(|m| m.abs()).collect::<Vec<_>>();
        close(&abs(&means), &abs(&base.gmm.means), 1e-4, "means");
        let spread = big.gmm.weights.iter().cloned().fold(0.0, f64::max)
            - big.gmm.weights.iter().cloned().fold(1.0, f64::min);
        assert!(
            spread > 0.01,
            "weights collapsed to equal: {:?}",
            big.gmm.weights
        );
    }
}
