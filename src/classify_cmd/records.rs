//! The encoding records beside histograms and models (`encoding.json`): read back, and matched
//! against the vocabulary and the histograms a model is given.

use std::path::Path;

use anyhow::{Context, bail, ensure};
use vocab_pipeline::classify::Table;
use vocab_pipeline::encode::Encoding;
use vocab_pipeline::features::manifest_path;

/// The encoding recorded beside a histogram file, if any.
pub(crate) fn read_encoding(histograms: &Path) -> anyhow::Result<Option<Encoding>> {
    let path = manifest_path(histograms, "encoding.json");
    if !path.exists() {
        return Ok(None);
    }
    let text = vocab_pipeline::input::read_text(&path, vocab_pipeline::input::MAX_ENCODING_BYTES)
        .with_context(|| format!("cannot read {}", path.display()))?;
    // Nothing a file says is trusted: a record is read back checked by the rules of vocab encode.
    let encoding: Encoding =
        serde_json::from_str(&text).with_context(|| format!("invalid {}", path.display()))?;
    Ok(Some(encoding))
}

/// The vocabulary at `words` is the one `enc` (a part of its own) was made over, by the SHA-256
/// of its bytes (a record from before digests were kept is taken at its path's word). `whose`
/// names the record: `model m.json`.
pub(super) fn same_words(enc: &Encoding, words: &Path, whose: &str) -> anyhow::Result<()> {
    let Some(recorded) = enc.digest() else {
        return Ok(());
    };
    let now = vocab_pipeline::input::digest(words)
        .with_context(|| format!("cannot read the vocabulary {}", words.display()))?;
    ensure!(
        now == recorded,
        "{whose} was made over another vocabulary than {} holds now (SHA-256 {} recorded, {} \
         now): the file was made again since; encode and train again over it, or give the \
         vocabulary it was made over",
        words.display(),
        &recorded[..12],
        &now[..12]
    );
    Ok(())
}

/// The histograms at `path` (their record `theirs`) were encoded as the model's record `ours`
/// says: the same parts, each over the same vocabulary (by digest) with the same settings.
pub(super) fn same_encoding(
    ours: &Encoding,
    theirs: &Encoding,
    model: &Path,
    path: &Path,
) -> anyhow::Result<()> {
    let (a, b) = (ours.parts().count(), theirs.parts().count());
    ensure!(
        a == b,
        "--histograms {}: {} against model {}'s {}; encode (and join) them as the model's \
         photos were",
        path.display(),
        parts_of(b),
        model.display(),
        parts_of(a)
    );
    for (ours, theirs) in ours.parts().zip(theirs.parts()) {
        same_part(ours, theirs, model, path)?;
    }
    Ok(())
}

/// "1 encoding" or "2 encodings joined".
fn parts_of(n: usize) -> String {
    match n {
        1 => "an encoding of its own".into(),
        n => format!("{n} encodings joined"),
    }
}

/// [`same_encoding`] of one part.
fn same_part(ours: &Encoding, theirs: &Encoding, model: &Path, path: &Path) -> anyhow::Result<()> {
    let record = manifest_path(path, "encoding.json");
    match (ours.digest(), theirs.digest()) {
        (Some(a), Some(b)) => ensure!(
            a == b,
            "--histograms {}: encoded over another vocabulary than model {} was trained over \
             (SHA-256 {} in {}, {} in the model); encode them over the model's vocabulary",
            path.display(),
            model.display(),
            &b[..12],
            record.display(),
            &a[..12]
        ),
        // A record without its digest beside one with it: refused, not compared by path (a
        // record's digest removed would bring the path's word back).
        (Some(_), None) | (None, Some(_)) => bail!(
            "--histograms {}: the record {} and model {} do not both carry their vocabulary's \
             SHA-256, so the histograms cannot be shown to be over the model's vocabulary; \
             encode them again with this build",
            path.display(),
            record.display(),
            model.display()
        ),
        // Records from before digests were kept: the vocabulary's path and size.
        (None, None) => ensure!(
            ours.vocabulary() == theirs.vocabulary() && ours.k() == theirs.k(),
            "--histograms {}: encoded over {} ({} words), model {} over {} ({} words)",
            path.display(),
            theirs.vocabulary(),
            theirs.k(),
            model.display(),
            ours.vocabulary(),
            ours.k()
        ),
    }
    ensure!(
        ours.params() == theirs.params(),
        "--histograms {}: encoded with other settings than model {} was trained on ({}); \
         encode them as the model's photos were",
        path.display(),
        model.display(),
        record.display()
    );
    Ok(())
}

/// The rows of `mirror` (`--mirrored path`, of `vocab train` and `vocab evaluate`) for the
/// photos `photos` of `table` (`--histograms histograms`, whose record is `encoding`), in their
/// order: both files record the same encoding, of the photos as they are and mirrored, and
/// `mirror` has a row of the same length for every one of the photos (found by path). `which`
/// names the photos in errors (`training`).
pub(super) fn mirror_rows<'m>(
    (histograms, table): (&Path, &Table),
    (path, mirror): (&Path, &'m Table),
    photos: &[(usize, usize)],
    encoding: Option<&Encoding>,
    which: &str,
) -> anyhow::Result<Vec<&'m [f32]>> {
    // Both records are needed: they are what says the rows are mirror images of the same
    // photos over the same vocabulary (by its digest), and vocab encode always writes them.
    let record = |histograms: &Path, flag: &str| {
        format!(
            "{flag} {}: has no record {} to show that --mirrored holds the mirror images of \
             --histograms' photos over the same vocabulary; give the histograms of vocab encode \
             (and of vocab encode --mirror) with their records",
            histograms.display(),
            manifest_path(histograms, "encoding.json").display()
        )
    };
    let ours = encoding.with_context(|| record(histograms, "--histograms"))?;
    let theirs = read_encoding(path)?.with_context(|| record(path, "--mirrored"))?;
    ensure!(
        !ours.params().features.mirror,
        "--histograms {}: holds mirrored photos (vocab encode --mirror); give the photos as \
         they are, and their mirror images as --mirrored",
        histograms.display()
    );
    ensure!(
        theirs.params().features.mirror,
        "--mirrored {}: holds the photos as they are; give the histograms of `vocab encode \
         --mirror`",
        path.display()
    );
    {
        ensure!(
            theirs == ours.mirror_image(),
            "--mirrored {}: encoded otherwise than --histograms {} ({} against {}); encode both \
             with the same vocabulary and settings",
            path.display(),
            histograms.display(),
            manifest_path(path, "encoding.json").display(),
            manifest_path(histograms, "encoding.json").display()
        );
    }
    let by_path: std::collections::HashMap<&str, usize> = (mirror.paths.iter())
        .enumerate()
        .map(|(i, p)| (p.as_str(), i))
        .collect();
    let len = table.rows.first().map_or(0, Vec::len);
    photos
        .iter()
        .map(|&(i, _)| {
            let photo = &table.paths[i];
            let row = by_path.get(photo.as_str()).map(|&m| &mirror.rows[m]);
            let row = row.with_context(|| {
                format!(
                    "--mirrored {}: has no row for the {which} photo {photo}",
                    path.display()
                )
            })?;
            ensure!(
                row.len() == len,
                "--mirrored {}: rows of {} values, --histograms {} rows of {len}",
                path.display(),
                row.len(),
                histograms.display()
            );
            Ok(row.as_slice())
        })
        .collect()
}
