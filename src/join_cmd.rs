//! `vocab join`: encodings of the same photos in one vector a photo (`vocab_pipeline::join`),
//! with the record that lists the parts.

use std::io::Write;
use std::time::Instant;

use anyhow::Context;
use vocab_pipeline::features::manifest_path;

use crate::settings::JoinSettings;

/// `vocab join`: reads each part's record, joins the histograms into `--out` and writes the
/// joined record beside it.
pub fn join(args: &JoinSettings, out: &mut dyn Write) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut parts = Vec::new();
    for path in &args.parts {
        let record = crate::classify_cmd::read_encoding(path)?.with_context(|| {
            format!(
                "{}: has no record {} to say how it was encoded; join the histograms of vocab \
                 encode",
                path.display(),
                manifest_path(path, "encoding.json").display()
            )
        })?;
        parts.push((path.as_path(), record));
    }
    let (summary, record) = vocab_pipeline::join::join(&parts, &args.out, &|_| {})?;
    let at = manifest_path(&args.out, "encoding.json");
    vocab_pipeline::atomic::write(&at, serde_json::to_string_pretty(&record)?.as_bytes())
        .with_context(|| format!("cannot write {}", at.display()))?;
    writeln!(
        out,
        "join: {} photos, {} skipped, {} encodings of {} values each joined into {} values \
         (each part times {:.4}) in {:.1} s",
        summary.images,
        summary.skipped,
        parts.len(),
        (parts.iter().map(|(_, e)| e.len().to_string()))
            .collect::<Vec<_>>()
            .join(" + "),
        record.len(),
        record.part_weight(),
        started.elapsed().as_secs_f64()
    )?;
    writeln!(
        out,
        "  wrote {}, {} and {}",
        args.out.display(),
        manifest_path(&args.out, "images.csv").display(),
        at.display()
    )?;
    crate::photo_cmd::skipped_line(out, summary.skipped, &args.out)?;
    Ok(())
}
