//! `vocab encode`: every photo's vector over a vocabulary or a mixture, from HOG patches or
//! descriptors made elsewhere, here or sharded over nodes, with the record that binds it to its
//! words; and the words' reading every encoding shares (`vocab classify` too).

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, ensure};
use vocab_cluster::jobs::photos::{Elsewhere, PhotoStage};
use vocab_pipeline::descriptors::Foreign;
use vocab_pipeline::encode::fisher::FisherModel;
use vocab_pipeline::encode::{self, EncodeParams, Encoding, Words};
use vocab_pipeline::features::Descriptor;
use vocab_pipeline::features::{self, FeatureSummary, manifest_path};
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::store::{self, Format};

use crate::photo_cmd::{foreign_of, forget_rounds, open_collection, skipped_line};
use crate::progress::Ui;
use crate::settings::EncodeSettings;
use crate::sharded::On;

/// Runs the encode stage (here, or sharded over the nodes of `on`) and reports it to `out`.
pub fn encode(
    settings: &EncodeSettings,
    ui: &Ui,
    on: On<'_>,
    out: &mut dyn Write,
) -> anyhow::Result<FeatureSummary> {
    let started = Instant::now();
    let (digest, mixture) = digest_of(settings)?;
    // Descriptors made elsewhere: their dimension is the first readable file's (the photos
    // are listed once, first, to find it).
    let foreign = (settings.from.as_deref())
        .map(|from| foreign_of(from, on))
        .transpose()?;
    let owned;
    let (settings, listed) = match &foreign {
        Some(foreign) => {
            let listed = open_collection(&settings.input, settings.labels.as_deref(), on)?;
            owned = with_foreign_dims(settings, foreign, &listed)?;
            (&owned, Some(listed))
        }
        None => (settings, None),
    };
    let vocabulary = read_words(&settings.vocabulary, &settings.params, mixture)?;
    vocabulary_rules(settings, &vocabulary)?;
    let collection = match listed {
        Some(collection) => collection,
        None => open_collection(&settings.input, settings.labels.as_deref(), on)?,
    };
    let bar = ui.bar(collection.photos().len() as u64, "encode");
    let progress = |p: features::Progress| {
        bar.set_position(p.images as u64);
        if let Some(patches) = p.patches {
            bar.set_message(format!("{patches} patches"));
        }
    };
    let file = &settings.out;
    let (summary, spread) = if on.engine.distributed() {
        // The workers quantise the vocabulary; the driver only writes histograms.
        let from = (foreign.as_ref()).map(|f| Elsewhere::new(&f.dir, settings.params.dims));
        let stage = PhotoStage::Encode(settings.params.clone(), from);
        let len = stage.histogram_len(vocabulary.k());
        let (summary, spread) = crate::sharded::run(
            on,
            &collection,
            stage,
            Some(&vocabulary),
            file,
            &mut |source| encode::encode_from(&collection, len, file, source, &progress),
        )
        .with_context(|| over(&settings.vocabulary))?;
        (summary, Some(spread))
    } else {
        forget_rounds(file)?;
        let params = &settings.params;
        let summary = match &foreign {
            Some(foreign) => {
                encode::encode_foreign(&collection, &vocabulary, params, foreign, file, &progress)
            }
            None => encode::encode(&collection, &vocabulary, params, file, &progress),
        }
        .with_context(|| over(&settings.vocabulary))?;
        (summary, None)
    };
    bar.finish();
    write_encoding(settings, &vocabulary, digest)?;
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    writeln!(
        out,
        "encode: {} photos{}, {} skipped, {} patches over {} {} in {secs:.1} s ({:.0} photos/s); {} values each",
        summary.images,
        if settings.params.features.mirror {
            " mirrored"
        } else {
            ""
        },
        summary.skipped,
        summary.patches,
        vocabulary.k(),
        if vocabulary.centroids().is_some() {
            "words"
        } else {
            "Gaussians"
        },
        summary.images as f64 / secs,
        settings.params.len(vocabulary.k()),
    )?;
    writeln!(
        out,
        "  wrote {} and {}",
        settings.out.display(),
        manifest_path(&settings.out, "images.csv").display()
    )?;
    if let Some(spread) = spread {
        spread.write(out)?;
    }
    skipped_line(out, summary.skipped, &settings.out)?;
    Ok(summary)
}

/// The digest the encoding's record binds to, and the mixture the settings hold. The record
/// binds the histograms to the vocabulary's bytes, not to its path: a mixture's digest is of
/// the bytes the settings read it from; a vocabulary's is taken before its words are read, so
/// a file changed meanwhile is one the record does not match.
fn digest_of(
    settings: &EncodeSettings,
) -> anyhow::Result<(String, Option<&vocab_pipeline::mixture::MixtureFile>)> {
    Ok(match &settings.mixture {
        Some((file, digest)) => (digest.clone(), Some(file)),
        None => {
            let digest = vocab_pipeline::input::digest(&settings.vocabulary)
                .with_context(|| format!("cannot read {}", settings.vocabulary.display()))?;
            (digest, None)
        }
    })
}

/// `settings` over descriptors made elsewhere in `foreign`: their dimension is the first
/// readable file's among `collection`'s photos.
fn with_foreign_dims(
    settings: &EncodeSettings,
    foreign: &Foreign,
    collection: &Collection,
) -> anyhow::Result<EncodeSettings> {
    let (dims, _) = foreign.dims_of(collection)?;
    let params = EncodeParams {
        dims,
        foreign: true,
        ..settings.params.clone()
    };
    // (Nothing of vocab's own description applies to them: refused by the parameters' rules.)
    params.check(None).map_err(crate::settings::Invalid::from)?;
    Ok(EncodeSettings {
        params,
        ..settings.clone()
    })
}

/// The rules of `settings` that need the vocabulary's size, checked before any photo is read:
/// the encoding's own, and a vector that fits a line of the text format when `--out` is text.
fn vocabulary_rules(settings: &EncodeSettings, vocabulary: &Words) -> anyhow::Result<()> {
    if let Err(e) = settings.params.check(Some(vocabulary.k())) {
        use vocab_pipeline::params::Broken as _;
        anyhow::bail!(
            "--{} {}: {} (the vocabulary {} has {} words)",
            e.key(),
            e.value(),
            e.rule(),
            settings.vocabulary.display(),
            vocabulary.k()
        );
    }
    // A text line holds at most MAX_LINE_BYTES, some 16 bytes a value at worst: a longer
    // vector would be written and then never read back.
    let values = settings.params.len(vocabulary.k());
    let widest = values.saturating_mul(16).saturating_add(32);
    if Format::for_path(&settings.out) == Format::Text && widest > store::MAX_LINE_BYTES {
        anyhow::bail!(
            "--out {}: {values} values a photo can make a text line longer than the {} bytes \
             the text format holds; write .bin, .npy or .fvecs",
            settings.out.display(),
            store::MAX_LINE_BYTES
        );
    }
    Ok(())
}

/// Writes the encoding's record beside the histograms (`encoding.json`): the vocabulary's path
/// (made absolute where it resolves), its size and `digest` (the SHA-256 of its bytes), and the
/// settings.
fn write_encoding(
    settings: &EncodeSettings,
    vocabulary: &Words,
    digest: String,
) -> anyhow::Result<()> {
    let vocabulary_path =
        std::fs::canonicalize(&settings.vocabulary).unwrap_or_else(|_| settings.vocabulary.clone());
    let encoding = Encoding::new(
        vocabulary_path.display().to_string(),
        vocabulary.k(),
        settings.params.clone(),
    )
    .with_context(|| format!("the vocabulary {}", settings.vocabulary.display()))?
    .with_digest(digest);
    let encoding_path = manifest_path(&settings.out, "encoding.json");
    vocab_pipeline::atomic::write(
        &encoding_path,
        serde_json::to_string_pretty(&encoding)?.as_bytes(),
    )
    .with_context(|| format!("cannot write {}", encoding_path.display()))?;
    Ok(())
}

/// What an encode's error is said to be over: the file whose words (or mixture) made the values,
/// which is the one to look at when a value is not finite.
fn over(words: &Path) -> String {
    format!("encoding over {}", words.display())
}

/// Reads what patches are encoded against for `params`: a vocabulary whose words have the
/// descriptor's dims, or for Fisher vectors a mixture over the descriptor projected onto
/// the method's dims (the error names the file, not the histograms being written); `mixture`,
/// that file as the settings read it (read here when not given).
pub fn read_words(
    path: &Path,
    params: &EncodeParams,
    mixture: Option<&vocab_pipeline::mixture::MixtureFile>,
) -> anyhow::Result<Words> {
    let dims = params.dims;
    let descriptor = match (params.foreign, params.features.descriptor) {
        (true, _) => "the descriptors made elsewhere have",
        (false, Descriptor::Hog) => "the HOG descriptor has",
        (false, Descriptor::Sift) => "the SIFT descriptor has",
    };
    let Some(projected) = params.method.projected() else {
        let vocabulary = vocab_pipeline::kmeans::files::read_vocabulary(path).map_err(|e| {
            // A mixture given for words: say what it is for.
            match vocab_pipeline::mixture::MixtureFile::read(path) {
                Ok(_) => anyhow::anyhow!(
                    "{} is a mixture (vocab mixture): it encodes Fisher vectors, --method fisher",
                    path.display()
                ),
                Err(_) => e.into(),
            }
        })?;
        ensure!(
            vocabulary.dims() == dims,
            "{}: words of {} dims, {descriptor} {dims}",
            path.display(),
            vocabulary.dims(),
        );
        return Ok(Words::Vocabulary(vocabulary));
    };
    let read;
    let file = match mixture {
        Some(file) => file,
        None => {
            read = vocab_pipeline::mixture::MixtureFile::read(path)?;
            &read
        }
    };
    let model = FisherModel::of(file).with_context(|| format!("the mixture {}", path.display()))?;
    ensure!(
        model.input_dims() == dims && model.dims() == projected,
        "{}: a mixture projecting {} dims onto {}, where {dims} onto {projected} are wanted \
         ({descriptor} {dims})",
        path.display(),
        model.input_dims(),
        model.dims(),
    );
    Ok(Words::Mixture(Box::new(model)))
}
