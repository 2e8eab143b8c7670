//! Partitions born on the nodes (issue 20): after a features job whose members kept the patches
//! they described ([`crate::jobs::photos::PhotoRoot::start_keeping`], one contiguous shard of the
//! collection per member, so rank order is record order), the members cut those records into
//! the partitions one machine's `partition::split` makes of the feature file: `P` contiguous
//! ranges of the records, sizes differing by at most one. Each partition is written by the
//! member holding most of its records ([`plan`]); only the records of a partition that straddles
//! a shard boundary travel, from the neighbours that hold them to its owner, in one exchange.
//! Every partition file, checksum and so the manifest's digest are those of the single-machine
//! set, so k-means over them is the single-machine run bit for bit; the sample never gathers at
//! the root.
//!
//! The cut runs in phases, each ending in a collective so that a member that cannot take part
//! (its kept records do not match the root's counts, its folder cannot be written) stops the cut
//! for everyone with an error naming it instead of leaving peers waiting: members check what
//! they hold (gathered, then the root's go), exchange the boundary records, write their
//! partitions and report them (gathered), and the root sends the manifest, which every member
//! writes beside its partitions (gathered).

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use vocab_pipeline::features::Outcome;
use vocab_pipeline::partition::{
    Manifest, PartReport, PartWriter, partition_sizes, write_manifest,
};
use vocab_pipeline::store::Element;

use crate::collective::{MAX_CONTROL, Team, broadcast_message, gather, tags};
use crate::engine::{EngineError, Job, Member, decode, encode, send_json};
use crate::jobs::photos::job::{Describe, Elsewhere, MAX_PIECE, Work, inside};
use crate::jobs::photos::member::Slot;
use crate::jobs::place::{lock, my_dir};
use crate::net::transport::{Recv, Send, Transport};

/// Bytes of one record of `dims` values on the wire: picture id, row, column, then the values
/// (`f32`), the binary record layout of a feature file.
fn record_len(dims: usize) -> usize {
    8 + dims * 4
}

/// The tag of the born partitions' commands.
pub const TAG: &str = "born";

/// What the root tells the members.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) enum Command {
    /// Cut the patches kept by the current features job into partitions.
    Cut(Cut),
    /// Make partitions born on the nodes again from their photos.
    Remake(Remake),
}

/// Partitions born on the nodes at a member: the cut of what the current photo job (shared
/// with the photo job through `current`) kept, and partitions made again.
#[derive(Debug, Default)]
pub struct Cuts {
    current: Slot,
}

impl Cuts {
    /// The job cutting what the photo job keeping its work in `current` kept.
    pub fn new(current: Slot) -> Self {
        Self { current }
    }
}

impl Job for Cuts {
    fn tag(&self) -> &'static str {
        TAG
    }

    fn serve(&mut self, member: &Member<'_>, body: &[u8]) -> Result<(), EngineError> {
        let transport = member.transport();
        match decode(0, body)? {
            Command::Cut(ref cut) => {
                let mut current = lock(&self.current);
                // A round computed ahead must be in before the kept records are counted.
                if let Some(a) = current.ahead.take() {
                    let _ = a.wait();
                }
                serve(transport, current.work.as_ref(), cut)
            }
            Command::Remake(ref remake) => {
                let error = remake_here(transport, remake).err();
                let control = Team::ranks(transport);
                gather(&control, &encode(&error), MAX_CONTROL)?;
                Ok(())
            }
        }
    }
}

/// The cut, as the root sends it ([`Command::Cut`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Cut {
    /// The partition folder, as every member sees it (`{rank}`, `{node}`: [`member_dir`]).
    pub dir: String,
    /// Partitions.
    pub parts: u64,
    /// Element type of the stored values.
    pub element: String,
    /// Values of a record.
    pub dims: u64,
    /// Photos of each rank.
    pub shards: Vec<(u64, u64)>,
    /// Records each rank holds.
    pub records: Vec<u64>,
}

/// A cut's result at the root.
#[derive(Debug, Clone)]
pub struct Born {
    /// The manifest of the partitions (equal to `split`'s but for its source name).
    pub manifest: Manifest,
    /// The rank that wrote and holds each partition.
    pub owners: Vec<usize>,
    /// Record bytes that travelled between members.
    pub bytes: u64,
}

impl Born {
    /// The partitions each rank holds (by rank, `ranks` of them), for dealing k-means shares by
    /// location.
    pub fn by_rank(&self, ranks: usize) -> Vec<Vec<u32>> {
        let mut deal = vec![Vec::new(); ranks];
        for (p, &owner) in self.owners.iter().enumerate() {
            if let Some(d) = deal.get_mut(owner) {
                d.push(p as u32);
            }
        }
        deal
    }
}

/// Records of one rank that go into a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// The rank holding them.
    pub rank: usize,
    /// First record, counted in that rank's records.
    pub offset: u64,
    /// Records.
    pub count: u64,
}

/// One partition of a cut: its owner and its records, rank by rank in record order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The rank that writes it: the one holding most of its records (the lowest on a tie).
    pub owner: usize,
    /// Where its records are.
    pub pieces: Vec<Piece>,
}

/// The cut of records held by ranks in order (`records[r]` records at rank `r`) into `parts`
/// partitions of `partition::split`'s sizes.
pub fn plan(records: &[u64], parts: usize) -> Result<Vec<Planned>, String> {
    let total = records
        .iter()
        .try_fold(0u64, |a, &b| a.checked_add(b))
        .ok_or("record counts that overflow")?;
    if parts == 0 || total < parts as u64 {
        return Err(format!("{total} records cannot make {parts} partitions"));
    }
    let mut starts = Vec::with_capacity(records.len());
    let mut at = 0;
    for &n in records {
        starts.push(at);
        at += n;
    }
    let mut planned = Vec::with_capacity(parts);
    let mut begin = 0u64;
    for size in partition_sizes(total, parts) {
        let end = begin + size;
        let pieces: Vec<Piece> = (records.iter().zip(&starts).enumerate())
            .filter_map(|(rank, (&n, &s))| {
                let (lo, hi) = (begin.max(s), end.min(s + n));
                // Lazily: the offsets exist only when the ranges meet.
                (lo < hi).then(|| Piece {
                    rank,
                    offset: lo - s,
                    count: hi - lo,
                })
            })
            .collect();
        // `max_by_key` keeps the last of equals: search from the highest rank down.
        let owner = (pieces.iter().rev())
            .max_by_key(|p| p.count)
            .map_or(0, |p| p.rank);
        planned.push(Planned { owner, pieces });
        begin = end;
    }
    Ok(planned)
}

/// A member's answer in a phase of the cut.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    error: Option<String>,
    /// The partitions it wrote (after the exchange).
    #[serde(default)]
    reports: Vec<(u64, PartReport)>,
}

impl Answer {
    /// The answer after the writes: the reports, or why there are none.
    fn of(written: Result<Vec<(u64, PartReport)>, String>) -> Self {
        match written {
            Ok(reports) => Self {
                error: None,
                reports,
            },
            Err(error) => Self {
                error: Some(error),
                reports: Vec::new(),
            },
        }
    }
}

/// The root's word between phases: go on (with the manifest after the writes), or stop.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Verdict {
    stop: bool,
    #[serde(default)]
    manifest: Option<Manifest>,
}

/// This member's kept records of `dims` values in record order, in the wire layout, after
/// checking that they cover its shard exactly and number what the root counted.
fn flatten(work: &Work, dims: usize, shard: (u64, u64), want: u64) -> Result<Vec<u8>, String> {
    let held = std::mem::take(&mut *lock(&work.held));
    let record = record_len(dims);
    let bytes = usize::try_from(want)
        .ok()
        .and_then(|n| n.checked_mul(record))
        .ok_or_else(|| format!("{want} records do not fit in memory"))?;
    let mut out = Vec::with_capacity(bytes);
    let mut cursor = shard.0 as usize;
    let photos = work.collection.photos();
    for (start, outcomes) in held {
        if start != cursor {
            return Err(format!(
                "it kept photos from {start} where its shard goes on at {cursor}"
            ));
        }
        for (i, outcome) in outcomes.iter().enumerate() {
            let Outcome::Done { value, .. } = outcome else {
                continue;
            };
            let id = photos.get(start + i).map_or(0, |p| p.picture_id);
            if Some(value.values.len()) != value.positions.len().checked_mul(dims) {
                return Err(format!(
                    "photo {id}: {} values for {} patches of {dims}",
                    value.values.len(),
                    value.positions.len()
                ));
            }
            for (&(r, c), values) in value.positions.iter().zip(value.values.chunks_exact(dims)) {
                out.extend_from_slice(&id.to_le_bytes());
                // Both fit: `describe` skips photos with a side above u16::MAX.
                out.extend_from_slice(&(r as u16).to_le_bytes());
                out.extend_from_slice(&(c as u16).to_le_bytes());
                for v in values {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
        cursor += outcomes.len();
    }
    if cursor as u64 != shard.1 {
        return Err(format!(
            "it kept photos {}..{cursor} of its shard {}..{}",
            shard.0, shard.0, shard.1
        ));
    }
    if out.len() != bytes {
        return Err(format!(
            "it kept {} records, the root counted {want}",
            out.len() / record
        ));
    }
    Ok(out)
}

/// Removes the rounds members saved while they kept them (the cut is done): this member's, and
/// any the job's earlier teams left in its folder (other ranks of the same node).
fn forget_rounds(work: Option<&Work>) {
    let Some(journal) = work.and_then(|w| w.journal.as_ref()) else {
        return;
    };
    let dir = journal.dir();
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    // `.kept-<digest>-<rank>@<node>`: every folder of the same digest goes.
    let prefix = name.as_deref().and_then(|n| n.get(..".kept-".len() + 9));
    if let (Some(prefix), Some(parent)) = (prefix, dir.parent()) {
        for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(prefix) {
                // Left behind, they only take room: a later job has another digest.
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// Writes partition `index` of records of `dims` values into `dir` from its pieces' bytes, in
/// order.
fn write_part(
    dir: &Path,
    (index, dims): (usize, usize),
    element: Element,
    pieces: &[&[u8]],
) -> Result<PartReport, String> {
    let mut writer =
        PartWriter::create(dir, index, dims, element).map_err(|e| vocab_pipeline::chain(&e))?;
    let mut values = vec![0f32; dims];
    for bytes in pieces {
        for record in bytes.chunks_exact(record_len(dims)) {
            let id = u32::from_le_bytes([record[0], record[1], record[2], record[3]]);
            let row = u16::from_le_bytes([record[4], record[5]]);
            let col = u16::from_le_bytes([record[6], record[7]]);
            for (v, b) in values.iter_mut().zip(record[8..].chunks_exact(4)) {
                *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(format!(
                    "partition {index}: value {} of photo {id}'s patch is not finite",
                    i + 1
                ));
            }
            writer
                .write(id, row, col, &values)
                .map_err(|e| vocab_pipeline::chain(&e))?;
        }
    }
    writer.finish().map_err(|e| vocab_pipeline::chain(&e))
}

/// What a member's first phase made ready: its records and the plan.
struct Ready {
    records: Vec<u8>,
    plan: Vec<Planned>,
    element: Element,
    dims: usize,
}

fn prepare(transport: &dyn Transport, work: Option<&Work>, cut: &Cut) -> Result<Ready, String> {
    let me = transport.rank();
    if cut.shards.len() != transport.size() || cut.records.len() != transport.size() {
        return Err(format!(
            "a cut for {} shards in a team of {}",
            cut.shards.len(),
            transport.size()
        ));
    }
    let element = Element::from_name(&cut.element)
        .ok_or_else(|| format!("element type {:?}", cut.element))?;
    let parts = usize::try_from(cut.parts).map_err(|_| format!("{} partitions", cut.parts))?;
    let plan = plan(&cut.records, parts)?;
    let dims = usize::try_from(cut.dims)
        .ok()
        .filter(|d| (1..=vocab_pipeline::descriptors::MAX_DIMS).contains(d))
        .ok_or_else(|| format!("records of {} values", cut.dims))?;
    // Every piece that travels fits a message (the counts are the root's).
    let record = record_len(dims) as u64;
    for piece in plan.iter().flat_map(|p| &p.pieces) {
        if piece
            .count
            .checked_mul(record)
            .is_none_or(|b| b > MAX_PIECE)
        {
            return Err(format!(
                "{} records of {dims} values in one piece",
                piece.count
            ));
        }
    }
    let (shard, want) = (cut.shards[me], cut.records[me]);
    let records = match work {
        Some(work) if work.dims() != Some(dims) => {
            return Err(format!(
                "a cut of records of {dims} values, where it kept {}",
                work.dims()
                    .map_or("no features".to_string(), |d| format!("{d} values"))
            ));
        }
        Some(work) => flatten(work, dims, shard, want)?,
        None if want == 0 && shard.0 == shard.1 => Vec::new(),
        None => return Err("it has no features job".into()),
    };
    Ok(Ready {
        records,
        plan,
        element,
        dims,
    })
}

/// The exchange of boundary records and the writes: the reports of the partitions this member
/// owns, or why it could not write them.
fn exchange_and_write(
    transport: &dyn Transport,
    ready: &Ready,
    dir: &str,
) -> Result<Result<Vec<(u64, PartReport)>, String>, EngineError> {
    let me = transport.rank();
    let bytes_of = |count: u64| count as usize * record_len(ready.dims);
    let mut sends = Vec::new();
    let mut inbox: Vec<Vec<u8>> = Vec::new();
    let mut froms = Vec::new();
    for part in &ready.plan {
        for piece in &part.pieces {
            if piece.rank == me && part.owner != me {
                let at = bytes_of(piece.offset);
                let data = ready
                    .records
                    .get(at..at + bytes_of(piece.count))
                    .unwrap_or_default();
                sends.push(Send {
                    to: part.owner,
                    tag: tags::BORN,
                    data,
                });
            } else if piece.rank != me && part.owner == me {
                inbox.push(vec![0u8; bytes_of(piece.count)]);
                froms.push(piece.rank);
            }
        }
    }
    {
        let mut recvs: Vec<Recv<'_>> = (inbox.iter_mut().zip(&froms))
            .map(|(buf, &from)| Recv {
                from,
                tag: tags::BORN,
                buf,
            })
            .collect();
        transport
            .exchange(&sends, &mut recvs)
            .map_err(crate::collective::CollectiveError::from)?;
    }
    let folder = my_dir(dir, transport);
    let folder = Path::new(&folder);
    if let Err(e) = vocab_pipeline::output::create_dir_all(folder) {
        return Ok(Err(format!("cannot create {}: {e}", folder.display())));
    }
    let mut received = inbox.iter();
    let mut reports = Vec::new();
    for (index, part) in ready.plan.iter().enumerate() {
        if part.owner != me {
            continue;
        }
        let mut pieces: Vec<&[u8]> = Vec::with_capacity(part.pieces.len());
        for piece in &part.pieces {
            if piece.rank == me {
                let at = bytes_of(piece.offset);
                pieces.push(
                    ready
                        .records
                        .get(at..at + bytes_of(piece.count))
                        .unwrap_or_default(),
                );
            } else {
                pieces.push(received.next().map_or(&[], Vec::as_slice));
            }
        }
        match write_part(folder, (index, ready.dims), ready.element, &pieces) {
            Ok(report) => reports.push((index as u64, report)),
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(reports))
}

/// The member's side of [`Command::Cut`]. Errors of the cut itself go back to the
/// root; the member keeps serving.
pub(crate) fn serve(
    transport: &dyn Transport,
    work: Option<&Arc<Work>>,
    cut: &Cut,
) -> Result<(), EngineError> {
    let control = Team::ranks(transport);
    let ready = prepare(transport, work.map(|w| &**w), cut);
    let answer = Answer {
        error: ready.as_ref().err().cloned(),
        reports: Vec::new(),
    };
    gather(&control, &encode(&answer), MAX_CONTROL)?;
    let verdict: Verdict = decode(0, &broadcast_message(&control, None)?)?;
    let ready = match ready {
        Ok(r) if !verdict.stop => r,
        _ => return Ok(()),
    };
    let answer = Answer::of(exchange_and_write(transport, &ready, &cut.dir)?);
    gather(&control, &encode(&answer), MAX_CONTROL)?;
    let verdict: Verdict = decode(0, &broadcast_message(&control, None)?)?;
    let error = match verdict.manifest {
        Some(m) if !verdict.stop => {
            let folder = my_dir(&cut.dir, transport);
            let error = write_manifest(Path::new(&folder), &m)
                .err()
                .map(|e| vocab_pipeline::chain(&e));
            if error.is_none() {
                forget_rounds(work.map(|w| &**w));
            }
            error
        }
        _ => None,
    };
    gather(
        &control,
        &encode(&Answer {
            error,
            reports: Vec::new(),
        }),
        MAX_CONTROL,
    )?;
    Ok(())
}

/// The answers gathered at the root (members on `hosts`, by rank), the first error as that
/// member's refusal.
fn answers(
    hosts: &[String],
    pieces: Vec<Vec<u8>>,
) -> Result<(Vec<Answer>, Option<EngineError>), EngineError> {
    let mut all = Vec::with_capacity(pieces.len());
    let mut refused = None;
    for (rank, bytes) in pieces.iter().enumerate() {
        let answer: Answer = decode(rank, bytes)?;
        if let (None, Some(reason)) = (&refused, &answer.error) {
            refused = Some(EngineError::Refused {
                rank,
                host: hosts.get(rank).cloned().unwrap_or_default(),
                reason: reason.clone(),
            });
        }
        all.push(answer);
    }
    Ok((all, refused))
}

/// The root's side of a cut (the command already sent): the same phases as [`serve`], then the
/// manifest assembled from the members' reports and checked against the plan.
pub(crate) fn root(
    transport: &dyn Transport,
    hosts: &[String],
    own: Option<&Work>,
    cut: &Cut,
    source: &str,
) -> Result<Born, EngineError> {
    let control = Team::ranks(transport);
    send_json(transport, TAG, &Command::Cut(cut.clone()))?;
    let ready = prepare(transport, own, cut);
    let answer = Answer {
        error: ready.as_ref().err().cloned(),
        reports: Vec::new(),
    };
    let pieces = gather(&control, &encode(&answer), MAX_CONTROL)?.unwrap_or_default();
    let (_, refused) = answers(hosts, pieces)?;
    let stop = |control: &Team<'_>| {
        broadcast_message(
            control,
            Some(&encode(&Verdict {
                stop: true,
                manifest: None,
            })),
        )
    };
    let ready = match (ready, refused) {
        (Ok(r), None) => r,
        (_, Some(e)) => {
            stop(&control)?;
            return Err(e);
        }
        (Err(reason), None) => {
            stop(&control)?;
            return Err(EngineError::Refused {
                rank: 0,
                host: transport.host(),
                reason,
            });
        }
    };
    broadcast_message(
        &control,
        Some(&encode(&Verdict {
            stop: false,
            manifest: None,
        })),
    )?;
    let mine = Answer::of(exchange_and_write(transport, &ready, &cut.dir)?);
    let pieces = gather(&control, &encode(&mine), MAX_CONTROL)?.unwrap_or_default();
    let (all, refused) = answers(hosts, pieces)?;
    let manifest = match refused {
        Some(e) => Err(e),
        None => assemble(&ready.plan, (ready.dims, ready.element), source, all),
    };
    let manifest = match manifest {
        Ok(m) => m,
        Err(e) => {
            stop(&control)?;
            return Err(e);
        }
    };
    broadcast_message(
        &control,
        Some(&encode(&Verdict {
            stop: false,
            manifest: Some(manifest.clone()),
        })),
    )?;
    let own_manifest = write_manifest(Path::new(&my_dir(&cut.dir, transport)), &manifest)
        .err()
        .map(|e| vocab_pipeline::chain(&e));
    let pieces = gather(
        &control,
        &encode(&Answer {
            error: own_manifest,
            reports: Vec::new(),
        }),
        MAX_CONTROL,
    )?
    .unwrap_or_default();
    if let (_, Some(e)) = answers(hosts, pieces)? {
        return Err(e);
    }
    forget_rounds(own);
    let bytes = (ready.plan.iter())
        .flat_map(|p| p.pieces.iter().filter(move |q| q.rank != p.owner))
        .map(|q| q.count * record_len(ready.dims) as u64)
        .sum();
    Ok(Born {
        manifest,
        owners: ready.plan.iter().map(|p| p.owner).collect(),
        bytes,
    })
}

/// The manifest from the members' reports: every partition once, from its owner, with the
/// planned count.
fn assemble(
    plan: &[Planned],
    (dims, element): (usize, Element),
    source: &str,
    answers: Vec<Answer>,
) -> Result<Manifest, EngineError> {
    let mut reports: Vec<Option<PartReport>> = vec![None; plan.len()];
    for (rank, answer) in answers.into_iter().enumerate() {
        for (index, report) in answer.reports {
            let malformed = |reason: String| EngineError::Malformed { rank, reason };
            let part = usize::try_from(index)
                .ok()
                .and_then(|i| plan.get(i).map(|p| (i, p)));
            let Some((i, planned)) = part else {
                return Err(malformed(format!("a report of partition {index}")));
            };
            let want: u64 = planned.pieces.iter().map(|p| p.count).sum();
            if planned.owner != rank || reports[i].is_some() || report.entry.count != want {
                return Err(malformed(format!(
                    "a report of partition {index} ({} records; {want} planned at rank {})",
                    report.entry.count, planned.owner
                )));
            }
            reports[i] = Some(report);
        }
    }
    let reports: Option<Vec<PartReport>> = reports.into_iter().collect();
    let reports = reports.ok_or_else(|| EngineError::Malformed {
        rank: 0,
        reason: "a partition nobody wrote".into(),
    })?;
    Ok(Manifest::assemble(
        dims,
        element,
        source.to_string(),
        &reports,
    ))
}

/// The file beside the driver's copy of the manifest of partitions born on the nodes that
/// holds their [`Recipes`].
pub const RECIPES: &str = "recipes.json";

/// How one partition is made again from the photos: the photos `first..end` of the features
/// job, described again, their records after the first `skip`, `count` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// First photo (picture id).
    pub first: u64,
    /// Photo after the last.
    pub end: u64,
    /// Records of the first photo before the partition's.
    pub skip: u64,
    /// Records in the partition.
    pub count: u64,
}

/// The recipes of partitions of `sizes` records cut from photos giving `counts` records each,
/// in picture-id order.
pub fn recipes(counts: &[u64], sizes: &[u64]) -> Vec<Recipe> {
    let mut out = Vec::with_capacity(sizes.len());
    // The photo holding the next record, and the records of the photos before it.
    let (mut photo, mut before) = (0usize, 0u64);
    let mut begin = 0u64;
    for &size in sizes {
        while photo < counts.len() && before + counts[photo] <= begin {
            before += counts[photo];
            photo += 1;
        }
        let first = photo;
        let skip = begin - before;
        let end_record = begin + size;
        let (mut last, mut at) = (photo, before);
        while last < counts.len() && at < end_record {
            at += counts[last];
            last += 1;
        }
        out.push(Recipe {
            first: first as u64,
            end: last as u64,
            skip,
            count: size,
        });
        begin = end_record;
    }
    out
}

/// What the driver keeps to have partitions born on the nodes made again where they are lost
/// (`remake.json` beside its copy of the manifest): the features job and every partition's
/// recipe.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipes {
    /// The photo folder, as every node sees it.
    pub root: String,
    /// The features stage's settings.
    pub params: vocab_pipeline::features::FeatureParams,
    /// The descriptors made elsewhere it sampled (none: HOG).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Elsewhere>,
    /// The collection's listing (relative path, why unusable), in picture-id order.
    pub listing: Vec<(String, Option<String>)>,
    /// Element type of the stored values.
    pub element: String,
    /// Per partition.
    pub recipes: Vec<Recipe>,
}

/// One partition a member makes again.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Task {
    /// The member that makes it.
    pub rank: u64,
    /// The partition.
    pub index: u64,
    /// Its recipe.
    pub recipe: Recipe,
    /// The photos `recipe.first..recipe.end` of the listing.
    pub photos: Vec<(String, Option<String>)>,
}

/// Partitions to make again ([`Command::Remake`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Remake {
    /// The partition folder, as members see it.
    pub dir: String,
    /// The photo folder, as members see it.
    pub root: String,
    pub params: vocab_pipeline::features::FeatureParams,
    /// The descriptors made elsewhere sampled (none: HOG).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Elsewhere>,
    pub element: String,
    /// The manifest the partitions must match (written beside them).
    pub manifest: Manifest,
    pub tasks: Vec<Task>,
}

impl Recipes {
    /// The recipes of the partitions of `manifest` cut from the photos of `collection`
    /// described with `params`, or sampled from the descriptors made elsewhere `from`
    /// (`sized`: each photo's outcome, in picture-id order).
    pub fn of(
        collection: &vocab_pipeline::image_io::Collection,
        (params, from): (vocab_pipeline::features::FeatureParams, Option<Elsewhere>),
        sized: &[Outcome<()>],
        manifest: &Manifest,
    ) -> Self {
        let counts: Vec<u64> = sized.iter().map(|o| o.patches() as u64).collect();
        let sizes: Vec<u64> = manifest.partitions.iter().map(|p| p.count).collect();
        Self {
            root: collection.root().display().to_string(),
            params,
            from,
            listing: collection.listing(),
            element: manifest.element.clone(),
            recipes: recipes(&counts, &sizes),
        }
    }

    /// The remake of partitions `which` at ranks (`(rank, index)`), or why it cannot be.
    pub(crate) fn remake(
        &self,
        dir: &str,
        manifest: &Manifest,
        which: &[(usize, usize)],
    ) -> Result<Remake, String> {
        let mut tasks = Vec::with_capacity(which.len());
        for &(rank, index) in which {
            let recipe = *self
                .recipes
                .get(index)
                .ok_or_else(|| format!("no recipe for partition {index}"))?;
            let photos = usize::try_from(recipe.first)
                .ok()
                .zip(usize::try_from(recipe.end).ok())
                .and_then(|(a, b)| self.listing.get(a..b))
                .ok_or_else(|| format!("partition {index}'s photos lie outside the listing"))?;
            tasks.push(Task {
                rank: rank as u64,
                index: index as u64,
                recipe,
                photos: photos.to_vec(),
            });
        }
        Ok(Remake {
            dir: dir.to_string(),
            root: self.root.clone(),
            params: self.params,
            from: self.from.clone(),
            element: self.element.clone(),
            manifest: manifest.clone(),
            tasks,
        })
    }
}

/// Makes this member's partitions of `remake` again (describing their photos) in its folder,
/// each checked against the manifest, which is written beside them.
pub(crate) fn remake_here(transport: &dyn Transport, remake: &Remake) -> Result<(), String> {
    let me = transport.rank() as u64;
    let mine: Vec<&Task> = remake.tasks.iter().filter(|t| t.rank == me).collect();
    if mine.is_empty() {
        return Ok(());
    }
    let describe = Describe::new(remake.params, remake.from.as_ref())?;
    let dims = describe.dims();
    if dims != remake.manifest.dims {
        return Err(format!(
            "partitions of {} values, where the features stage gives {dims}{}",
            remake.manifest.dims,
            (remake.from.as_ref()).map_or(String::new(), |f| format!(" (from {})", f.dir))
        ));
    }
    let element = Element::from_name(&remake.element)
        .ok_or_else(|| format!("element type {:?}", remake.element))?;
    let folder = my_dir(&remake.dir, transport);
    let folder = Path::new(&folder);
    vocab_pipeline::output::create_dir_all(folder)
        .map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
    for task in mine {
        if let Some((bad, _)) = task.photos.iter().find(|(p, _)| !inside(p)) {
            return Err(format!("photo path {bad:?} leaves the photo folder"));
        }
        let index = usize::try_from(task.index).map_err(|_| "a partition index".to_string())?;
        let entry = remake
            .manifest
            .partitions
            .get(index)
            .ok_or_else(|| format!("the manifest has no partition {index}"))?;
        let first = u32::try_from(task.recipe.first).map_err(|_| "a photo id".to_string())?;
        let collection = vocab_pipeline::image_io::Collection::listed_from(
            Path::new(&remake.root),
            first,
            task.photos.clone(),
        )
        .map_err(|e| vocab_pipeline::chain(&e))?;
        let outcomes = describe.range(&collection, 0..collection.photos().len());
        let mut writer = PartWriter::create(folder, index, dims, element)
            .map_err(|e| vocab_pipeline::chain(&e))?;
        let (mut skip, mut left) = (task.recipe.skip, task.recipe.count);
        for (photo, outcome) in collection.photos().iter().zip(&outcomes) {
            let Outcome::Done { value, .. } = outcome else {
                continue;
            };
            for (&(r, c), values) in value.positions.iter().zip(value.values.chunks_exact(dims)) {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                if left == 0 {
                    break;
                }
                left -= 1;
                // Both fit: `describe` skips photos with a side above u16::MAX.
                writer
                    .write(photo.picture_id, r as u16, c as u16, values)
                    .map_err(|e| vocab_pipeline::chain(&e))?;
            }
        }
        let report = writer.finish().map_err(|e| vocab_pipeline::chain(&e))?;
        if report.entry != *entry {
            // Not left where a holder would be taken for it.
            let _ = std::fs::remove_file(folder.join(&entry.file));
            return Err(format!(
                "{} made again from photos {}..{} has {} records, checksum {:08x}; the manifest \
                 says {}, {:08x} (the photos changed since they were described?)",
                entry.file,
                task.recipe.first,
                task.recipe.end,
                report.entry.count,
                report.entry.checksum,
                entry.count,
                entry.checksum
            ));
        }
    }
    write_manifest(folder, &remake.manifest).map_err(|e| vocab_pipeline::chain(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cut_split_sizes_and_owners_hold_the_most() {
        // 10 records over ranks holding 0, 4, 6: partitions of 4, 3, 3.
        let p = plan(&[0, 4, 6], 3).expect("plan");
        assert_eq!(p.len(), 3);
        assert_eq!(
            p[0].pieces,
            vec![Piece {
                rank: 1,
                offset: 0,
                count: 4
            }]
        );
        assert_eq!(p[0].owner, 1);
        // Partition 1 (records 4..7) lies at rank 2 only; partition 2 too.
        assert_eq!(p[1].owner, 2);
        assert_eq!(p[1].pieces[0].offset, 0);
        assert_eq!(p[2].pieces[0].offset, 3);
        // A straddling partition goes to the larger holder, the lower rank on a tie.
        let p = plan(&[3, 3], 2).expect("plan");
        assert_eq!((p[0].owner, p[1].owner), (0, 1));
        let p = plan(&[2, 2], 1).expect("plan");
        assert_eq!(p[0].owner, 0);
        assert_eq!(p[0].pieces.len(), 2);
        let p = plan(&[1, 3], 1).expect("plan");
        assert_eq!(p[0].owner, 1);
        assert!(plan(&[1, 1], 3).is_err());
        assert!(plan(&[u64::MAX, 1], 3).is_err());
        assert!(plan(&[5], 0).is_err());
    }

    #[test]
    fn recipes_find_each_partition_s_photos() {
        // Photos of 3, 0 (skipped), 3, 3 records; partitions of 4, 3, 2.
        let r = recipes(&[3, 0, 3, 3], &[4, 3, 2]);
        let at = |first, end, skip, count| Recipe {
            first,
            end,
            skip,
            count,
        };
        assert_eq!(r, vec![at(0, 3, 0, 4), at(2, 4, 1, 3), at(3, 4, 1, 2)]);
        // Every record once: a partition's photos hold skip + count records at least.
        let counts = [5u64, 1, 0, 7, 2, 2];
        for parts in 1..=6usize {
            let sizes = partition_sizes(17, parts);
            for (recipe, &size) in recipes(&counts, &sizes).iter().zip(&sizes) {
                let held: u64 = counts[recipe.first as usize..recipe.end as usize]
                    .iter()
                    .sum();
                assert!(
                    held >= recipe.skip + size && recipe.skip < counts[recipe.first as usize],
                    "{recipe:?}"
                );
            }
        }
    }
}
