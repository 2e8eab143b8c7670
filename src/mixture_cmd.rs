//! `vocab mixture`: the PCA and the Gaussian mixture of Fisher vectors, learned by EM over a
//! feature file or partitions, on one process, TCP workers or MPI ranks (the k-means job's map
//! steps: the same team, broadcast and three-stage aggregation; the same bits everywhere).

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use vocab_pipeline::kmeans::Shard;
use vocab_pipeline::mixture::moments::{Head, values_len};
use vocab_pipeline::mixture::{
    Checkpoint, Gmm, Identity, Local, MixtureFile, Pca, Resumed, StepLog, checkpoint_path, fit_from,
};

use crate::kmeans_cmd::Input;
use crate::progress::Ui;
use crate::ranks::Mpi;
use crate::settings::{Invalid, MixtureSettings, OrFlag};
use crate::teams;

/// Learns the mixture of `settings`, writes its file and the steps beside it, and reports to
/// `out`.
pub fn run(
    settings: &MixtureSettings,
    ui: &Ui,
    mpi: Option<&Mpi<'_>>,
    out: &mut dyn Write,
) -> anyhow::Result<MixtureFile> {
    let (team, params) = (&settings.team, &settings.params);
    let distributed = team.engine.distributed();
    crate::nodes::check(&team.engine, mpi)?;
    let out = RefCell::new(out);
    let input = Input::of(team)?;
    let parts = input.vectors();
    let (n, dims) = input.shape(&parts);
    params
        .check_for(n as u64, dims)
        .map_err(Invalid::from)
        .or_flag()?;
    writeln!(
        out.borrow_mut(),
        "mixture: {n} vectors x {dims} dims from {}; {} Gaussians over {} principal \
         components, at most {} EM steps",
        team.features.display(),
        params.components,
        params.pca_dims,
        params.max_iter,
    )?;
    let identity = Identity::of(params, (n as u64, dims, input.checksum()));
    let from = resumed(settings, &identity, &mut **out.borrow_mut())?;
    let bar = ui.bar(params.max_iter as u64 + 1, "mixture");
    let started = Instant::now();
    let mut steps: Vec<StepLog> = from.as_ref().map_or_else(Vec::new, |r| r.steps.clone());
    bar.set_position(steps.len() as u64);
    let checkpoint = checkpoint_path(&team.out);
    let mut on_step = |step: &StepLog, pca: &Pca, gmm: Option<&Gmm>| -> anyhow::Result<()> {
        bar.inc(1);
        steps.push(step.clone());
        let Some(gmm) = gmm else {
            return Ok(());
        };
        bar.set_message(format!("log-likelihood {:.4}", step.log_likelihood));
        Checkpoint::new(identity.clone(), &steps, pca, gmm).save(&checkpoint)?;
        if settings.exit_after_iteration == Some(step.iteration as u64) {
            eprintln!(
                "mixture: exiting after EM step {} (fault injection)",
                step.iteration
            );
            std::process::exit(3);
        }
        Ok(())
    };
    let fitted = match input.at().filter(|_| distributed) {
        Some(at) => {
            // The largest broadcast: a mixture step's projection and mixture.
            let head = Head {
                dims: dims as u64,
                projected: params.pca_dims as u64,
                components: params.components as u64,
            };
            let bytes = values_len(&head).unwrap_or(0) as f64 * 8.0;
            teams::start(team, at, mpi, ("mixture", bytes), &out).and_then(|mut t| {
                writeln!(out.borrow_mut(), "mixture: on {}", t.job.describe())?;
                let fitted = fit_from::<_, anyhow::Error>(&mut t.job, params, from, &mut on_step);
                teams::keep_links(&t.job, team);
                fitted
            })
        }
        None => Local::new(Shard::numbered(&parts))
            .map_err(anyhow::Error::from)
            .and_then(|mut e| fit_from::<_, anyhow::Error>(&mut e, params, from, &mut on_step)),
    }
    .with_context(|| format!("learning a mixture from {}", team.features.display()))?;
    bar.finish();
    let file = MixtureFile::new(params, (n as u64, dims, input.checksum()), &fitted);
    file.write(&team.out)?;
    let csv_path = write_steps(&steps, &team.out)?;
    let seconds = started.elapsed().as_secs_f64();
    summary(
        &file,
        &fitted,
        seconds,
        (&team.out, &csv_path),
        out.into_inner(),
    )?;
    Ok(file)
}

/// The run's last lines: what the PCA kept, the EM steps, the files.
fn summary(
    file: &MixtureFile,
    fitted: &vocab_pipeline::mixture::Fitted,
    seconds: f64,
    (mixture, csv_path): (&Path, &Path),
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let ems = fitted.steps.len().saturating_sub(1);
    writeln!(
        out,
        "mixture: PCA kept {:.1}% of the variance in {} of {} dims",
        100.0 * explained(&fitted.pca.variances, file),
        file.params.pca_dims,
        file.dims,
    )?;
    let weights = &fitted.gmm.weights;
    writeln!(
        out,
        "mixture: {ems} EM steps{} in {seconds:.1} s, mean log-likelihood {:.4}; weights {:.4} \
         to {:.4}",
        if fitted.converged { " (converged)" } else { "" },
        file.log_likelihood.last().copied().unwrap_or(f64::NAN),
        weights.iter().copied().fold(f64::INFINITY, f64::min),
        weights.iter().copied().fold(0.0, f64::max),
    )?;
    writeln!(
        out,
        "  wrote {} and {}",
        mixture.display(),
        csv_path.display()
    )?;
    Ok(())
}

/// With `--resume` (a run's interrupted step), the run to take up from the checkpoint beside
/// the mixture file: it must be of this run (`identity`) and not past its end.
fn resumed(
    settings: &MixtureSettings,
    identity: &Identity,
    out: &mut dyn Write,
) -> anyhow::Result<Option<Resumed>> {
    if !settings.resume {
        return Ok(None);
    }
    let path = checkpoint_path(&settings.team.out);
    let checkpoint = Checkpoint::load(&path)?;
    let ems = checkpoint.ems();
    let resumed = checkpoint.resumed((identity, settings.params.max_iter), &path)?;
    writeln!(
        out,
        "mixture: resuming after EM step {ems} from {}",
        path.display()
    )?;
    Ok(Some(resumed))
}

/// Writes the fit's steps beside the mixture file `mixture` (`steps.csv`: the PCA, then each EM
/// step's mean log-likelihood and times); returns its path.
fn write_steps(steps: &[StepLog], mixture: &Path) -> anyhow::Result<PathBuf> {
    let csv_path = vocab_pipeline::features::manifest_path(mixture, "steps.csv");
    let rows = steps.iter().map(|s| {
        let r = &s.report;
        vec![
            if s.iteration == 0 {
                "pca".to_string()
            } else {
                s.iteration.to_string()
            },
            s.log_likelihood.to_string(),
            s.seconds.to_string(),
            r.map_seconds.to_string(),
            (r.stage1_seconds + r.stage2_seconds + r.stage3_seconds).to_string(),
            r.workers.max(1).to_string(),
        ]
    });
    let text = crate::tables::csv_text(
        &[
            "step",
            "mean_log_likelihood",
            "seconds",
            "map_seconds",
            "aggregation_seconds",
            "members",
        ],
        rows,
    )?;
    vocab_pipeline::atomic::write(&csv_path, text.as_bytes())
        .with_context(|| format!("cannot write {}", csv_path.display()))?;
    Ok(csv_path)
}

/// The share of the vectors' total variance (the covariance's trace) the kept components hold.
fn explained(kept: &[f64], file: &MixtureFile) -> f64 {
    let total = file.pca.total_variance;
    if total > 0.0 {
        kept.iter().sum::<f64>() / total
    } else {
        1.0
    }
}
