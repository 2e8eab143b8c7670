//! `vocab train`: the split, the solver's rows (with their mirror images), the choice of C and
//! the model's file.

use std::time::Instant;

use anyhow::{Context, bail, ensure};
use vocab_pipeline::classify::{
    MODEL_VERSION, ModelFile, Table, labelled, read_histograms, read_labels,
};
use vocab_pipeline::encode::{Encoding, Norm};
use vocab_pipeline::kernel_map::KernelMap;
use vocab_pipeline::svm::{Classifier, Labelled, Rows, SvmParams, choose_c};

use crate::progress::Progress;

use super::records::{mirror_rows, read_encoding};
use super::split::{Pairs, spec_of, split_rows};
use crate::settings::TrainSettings;

/// `vocab train`, reporting to `out`; a bar counts the fits (each fold at each C of the grid,
/// then the final model).
pub fn train(
    args: &TrainSettings,
    ui: &crate::progress::Ui,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    let table = read_histograms(&args.histograms)?;
    let mirrored = (args.mirrored.as_deref())
        .map(|path| read_histograms(path).with_context(|| format!("--mirrored {}", path.display())))
        .transpose()?;
    train_on(args, (&table, mirrored.as_ref()), ui, out)
}

/// [`train`] on the histograms of `args.histograms` and `args.mirrored` already read (`vocab
/// run` reads them once for every attribute).
pub fn train_on(
    args: &TrainSettings,
    (table, mirror): (&Table, Option<&Table>),
    ui: &crate::progress::Ui,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let labels = read_labels(&args.labels, &args.attribute)?;
    let pairs = labelled(table, &labels);
    ensure!(
        !pairs.is_empty(),
        "no photo of {} has a label for {:?} in {}",
        args.histograms.display(),
        args.attribute,
        args.labels.display()
    );
    let split = spec_of(args)?;
    let (train, test) = split_rows(table, &pairs, &split);
    ensure!(!train.is_empty(), "the split leaves no training photos");
    let encoding = read_encoding(&args.histograms)?;
    let mirrored = match (&args.mirrored, mirror) {
        (Some(path), Some(mirror)) => Some(mirror_rows(
            (&args.histograms, table),
            (path, mirror),
            &train,
            encoding.as_ref(),
            "training",
        )?),
        (Some(path), None) => bail!("--mirrored {}: not read", path.display()),
        (None, _) => None,
    };
    let kernel_map = kernel_map_of(args, encoding.as_ref())?;
    let copies = mirrored.as_ref().map_or(0, Vec::len);
    let (x, y) = solver_rows((table, &train), mirrored.as_deref(), kernel_map.as_ref());
    let copy_of: Vec<usize> = (0..copies).collect();
    let data = Labelled::with_copies(&x, &y, &copy_of)?;
    let fits = match args.c {
        Some(_) => 1,
        None => args.cv.max(2) * args.c_grid.len() + 1,
    };
    let bar = ui.bar(fits as u64, &args.attribute);
    let (classifier, c, cv_accuracy) = fit(args, (&data, &x, &y), &labels.classes, &bar)?;
    bar.finish();
    let model = ModelFile {
        version: MODEL_VERSION,
        attribute: args.attribute.clone(),
        split,
        encoding,
        cv_accuracy,
        kernel_map,
        mirrored: mirrored.is_some(),
        classifier,
    };
    // A weight that is not finite (or a model too large to read back) is said to come from
    // the histograms it was trained on.
    model
        .save(&args.out)
        .with_context(|| format!("training on --histograms {}", args.histograms.display()))?;
    writeln!(
        out,
        "train: {:?} over classes {:?}: {} labelled photos, {} trained on{}, {} held out; {}C = {c}{} ({:.1} s)",
        args.attribute,
        labels.classes,
        pairs.len(),
        train.len(),
        if copies > 0 {
            format!(" (and their {copies} mirror images)")
        } else {
            String::new()
        },
        test.len(),
        kernel_map.map_or(String::new(), |m| format!(
            "{} kernel map of order {}, ",
            m.kernel.name(),
            m.order
        )),
        cv_accuracy.map_or(String::new(), |a| format!(
            " (cv accuracy {a:.4} over {} folds)",
            args.cv
        )),
        started.elapsed().as_secs_f64()
    )?;
    writeln!(out, "  wrote {}", args.out.display())?;
    Ok(())
}

/// The kernel map of `--kernel-map`, if any: refused over the vectors of another pooling than
/// bags of words, and over histograms not L1-normalised, as `encoding` records them.
fn kernel_map_of(
    args: &TrainSettings,
    encoding: Option<&Encoding>,
) -> anyhow::Result<Option<KernelMap>> {
    Ok(match args.kernel_map.kernel() {
        None => None,
        Some(kernel) => {
            let bow = vocab_pipeline::encode::Pooling::Bow;
            let parts = || encoding.into_iter().flat_map(Encoding::parts);
            if let Some(enc) = parts().find(|e| e.params().method.pooling() != bow) {
                bail!(
                    "--kernel-map {}: the map takes histograms, and {} holds {} vectors (signed, \
                     already normalised for a linear SVM); drop the kernel map",
                    kernel.name(),
                    args.histograms.display(),
                    enc.params().method.pooling().name()
                );
            }
            if let Some(enc) = parts().find(|e| e.params().norm != Norm::L1) {
                bail!(
                    "--kernel-map {}: the map takes L1-normalised histograms, and {} were \
                     encoded with --norm {} (itself a kernel map); encode with --norm l1",
                    kernel.name(),
                    args.histograms.display(),
                    enc.params().norm.name()
                );
            }
            Some(KernelMap::new(kernel, args.map_order).context("--map-order")?)
        }
    })
}

/// The solver's rows and their classes: the training photos' `train` of `table`, then their
/// mirror images' `mirrored` (copies, in the same folds); mapped straight from the histograms'
/// non-zero bins by `kernel_map` (the dense mapped vectors never exist), or as they are.
fn solver_rows(
    (table, train): (&Table, &Pairs),
    mirrored: Option<&[&[f32]]>,
    kernel_map: Option<&KernelMap>,
) -> (Rows, Vec<usize>) {
    let copies = mirrored.map_or(0, <[_]>::len);
    let histograms: Vec<&[f32]> = (train.iter())
        .map(|&(i, _)| table.rows[i].as_slice())
        .chain(mirrored.into_iter().flatten().copied())
        .collect();
    let x = match kernel_map {
        Some(map) => Rows::mapped(&histograms, map),
        None => Rows::from_dense(&histograms),
    };
    let y: Vec<usize> = (train.iter().map(|&(_, c)| c))
        .chain(train.iter().take(copies).map(|&(_, c)| c))
        .collect();
    (x, y)
}

/// The model's SVM over the solver's rows `x` of classes `y` (`data`, with their copies): at
/// `--c`, or at the C of `--c-grid` that cross-validation over `--cv` folds chooses, the folds'
/// duals at that C starting the fit on every row. `bar` counts the fits. Returns the
/// classifier, its C and, when chosen, the cross-validated accuracy.
fn fit(
    args: &TrainSettings,
    (data, x, y): (&Labelled, &Rows, &[usize]),
    classes: &[String],
    bar: &Progress,
) -> anyhow::Result<(Classifier, f64, Option<f64>)> {
    let (c, cv_accuracy, start) = match args.c {
        Some(c) => (c, None, None),
        None => {
            // Folds finish in any order across the threads: the count moves, the message
            // stays (a fold number here would jump back and forth).
            bar.set_message(format!("choosing C, {}-fold CV", args.cv.max(2)));
            let fitted = |_fold: usize, _c: f64| bar.inc(1);
            let chosen = choose_c(
                data,
                classes,
                &args.c_grid,
                args.cv,
                args.split_seed,
                args.solver,
                &fitted,
            )?;
            // The folds' duals at the chosen C start the fit on every training photo.
            (chosen.c, Some(chosen.accuracy), Some(chosen.start))
        }
    };
    bar.set_message(format!("the model at C = {c}"));
    let (classifier, _) = Classifier::fit_rows(
        x,
        y,
        classes,
        &SvmParams {
            c,
            seed: args.split_seed,
            solver: args.solver,
            ..SvmParams::default()
        },
        start.as_deref().filter(|s| !s.is_empty()),
    )?;
    bar.inc(1);
    Ok((classifier, c, cv_accuracy))
}
