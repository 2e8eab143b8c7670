//! The worker's side of distributed k-means.
//!
//! * [`Message::Load`]: open and verify the listed partitions once and keep them mapped for every
//!   iteration (the static data); partitions kept from an earlier load of the same job are not
//!   reopened, so a reassignment after a failure only opens the new ones.
//! * [`Message::Step`]: take the broadcast centroids from the store, run the map tasks on the
//!   worker's threads (with the int8 kernel, on the partitions' quantised rows, made at the
//!   first such step and kept like the partitions), merge their partials (stage 1, unless switched off), send range `j` to
//!   worker `j` (stage 2; all sends concurrent), wait until every worker's piece of the own
//!   range arrived, and answer the driver with the range's counts and means (stage 3). While
//!   busy the worker sends a heartbeat every second so the driver can tell slow from stalled.
//! * [`Message::Range`]: a peer's stage-2 piece; its chunks are added into the range accumulator
//!   as they arrive.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinSet;
use vocab_pipeline::kmeans::Centroids;
use vocab_pipeline::partition::read_manifest;

use crate::aggregate::{RangeSum, encode_range, range_len, range_of};
use crate::auth::Secret;
use crate::config::Cluster;
use crate::connection::Connection;
use crate::messages::{
    BUILD, Load, Loaded, Message, MessageError, Range, Step, StepDone, recv, recv_blob, send,
    send_blob,
};
use crate::peer::dial_name;
use crate::share::{Mapped, Share};

/// Largest range accumulator a peer may make a worker allocate (values): 2^31 x 8 bytes.
const MAX_RANGE_VALUES: u64 = 1 << 31;

type InboxKey = (u64, u64, u64);

#[derive(Debug)]
struct Inbox {
    sum: RangeSum,
    from: BTreeSet<u32>,
}

/// Job state of a worker.
#[derive(Debug, Default)]
pub struct Jobs {
    current: Mutex<Option<Arc<Share>>>,
    inbox: Mutex<BTreeMap<InboxKey, Inbox>>,
    arrived: Notify,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep serving.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The heartbeat period for an I/O timeout.
fn beat_period(io_timeout: Duration) -> Duration {
    (io_timeout / 4).min(Duration::from_secs(1))
}

/// Runs `work` while sending [`Message::Working`] on `conn` every `period`.
async fn beating<T>(
    conn: &mut Connection,
    period: Duration,
    work: impl std::future::Future<Output = T>,
) -> Result<T, MessageError> {
    tokio::pin!(work);
    let mut tick = tokio::time::interval(period);
    tick.tick().await;
    loop {
        tokio::select! {
            out = &mut work => return Ok(out),
            _ = tick.tick() => send(conn, &Message::Working).await?,
        }
    }
}

/// What the job code needs of the daemon that runs it (the worker implements it, so this module
/// does not depend on the worker's).
pub(crate) trait Host: Send + Sync + 'static {
    /// The node's name.
    fn name(&self) -> &str;
    /// Its cluster file.
    fn cluster(&self) -> &Cluster;
    /// The shared secret.
    fn secret(&self) -> &Secret;
    /// Job state.
    fn jobs(&self) -> &Jobs;
    /// The stored broadcast `id`.
    fn message(&self, id: u64) -> impl std::future::Future<Output = Option<Vec<u8>>> + Send;
    /// Fault injection: exits in iteration `iteration` when asked to.
    fn maybe_exit_at_step(&self, iteration: u64);
}

/// Answers a control message on `conn`.
pub(crate) async fn control<H: Host>(
    host: &Arc<H>,
    conn: &mut Connection,
    message: Message,
) -> Result<(), MessageError> {
    match message {
        Message::Load(load) => {
            let reply = match load_share(&**host, load).await {
                Ok(loaded) => Message::Loaded(loaded),
                Err(message) => Message::Refused { message },
            };
            send(conn, &reply).await
        }
        Message::Step(step) => match run_step(host, conn, &step).await {
            Ok(()) => Ok(()),
            Err(StepError::Refuse(message)) => send(conn, &Message::Refused { message }).await,
            Err(StepError::Io(e)) => Err(e),
        },
        Message::Range(range) => receive_range(&**host, conn, range).await,
        other => Err(MessageError::Unexpected(other.name().into())),
    }
}

async fn load_share<H: Host>(host: &H, load: Load) -> Result<Loaded, String> {
    let name = host.name().to_string();
    let previous = lock(&host.jobs().current).clone();
    let result = tokio::task::spawn_blocking(move || -> Result<(Loaded, Option<Share>), String> {
        let dir = PathBuf::from(&load.dir);
        let manifest = read_manifest(&dir)
            .map_err(|e| format!("worker {name} cannot read the partitions: {e}"))?;
        let digest = manifest.digest();
        let mut loaded = Loaded {
            rows: 0,
            max_abs_bits: 0,
            magnitudes: Vec::new(),
            build: BUILD.into(),
            manifest: digest,
        };
        // The driver refuses on a different build or manifest; nothing to open then.
        if load.build != BUILD || digest != load.manifest {
            return Ok((loaded, None));
        }
        let share = Share::open(
            load.job,
            &load.dir,
            &manifest,
            &load.partitions,
            previous.as_deref(),
        )
        .map_err(|e| format!("worker {name}: {e}"))?;
        loaded.rows = share.rows();
        loaded.max_abs_bits = share.max_abs().to_bits();
        loaded.magnitudes = share.magnitudes();
        Ok((loaded, Some(share)))
    })
    .await
    .map_err(|e| format!("worker {}: load task failed: {e}", host.name()))??;
    let (loaded, job) = result;
    if let Some(job) = job {
        *lock(&host.jobs().current) = Some(Arc::new(job));
    }
    Ok(loaded)
}

async fn run_step<H: Host>(
    host: &Arc<H>,
    conn: &mut Connection,
    step: &Step,
) -> Result<(), StepError> {
    let received = Instant::now();
    let io_timeout = Duration::from_millis(host.cluster().settings.io_timeout_ms);
    let period = beat_period(io_timeout);
    let job = lock(&host.jobs().current)
        .clone()
        .filter(|j| j.job == step.job)
        .ok_or_else(|| {
            StepError::Refuse(format!(
                "worker {} holds no partitions for job {}",
                host.name(),
                step.job
            ))
        })?;
    let workers = step.workers.len();
    let me = step
        .workers
        .iter()
        .position(|w| w == host.name())
        .ok_or_else(|| StepError::Refuse(format!("{} is not in the step", host.name())))?;
    let (k, dims) = (step.k as usize, step.dims as usize);
    let bytes = host.message(step.centroids).await.ok_or_else(|| {
        StepError::Refuse(format!(
            "worker {} has no broadcast {}",
            host.name(),
            step.centroids
        ))
    })?;
    // Checked: k and dims come from the wire.
    let want = step.k.checked_mul(step.dims).and_then(|v| v.checked_mul(4));
    if want != Some(bytes.len() as u64) || k == 0 || dims == 0 {
        return Err(StepError::Refuse(format!(
            "broadcast {} holds {} bytes, not {k} x {dims} f32",
            step.centroids,
            bytes.len()
        )));
    }
    let centroids = Centroids::new(
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        dims,
    );
    let key = (step.job, step.epoch, step.iteration);
    lock(&host.jobs().inbox).retain(|&k, _| k == key);

    // Map and stage 1, on the rayon pool, with heartbeats.
    let (scale, stage1, int8) = (step.scale, step.stage1, step.int8);
    let mapped = tokio::task::spawn_blocking(move || job.map(&centroids, scale, int8, stage1));
    let Mapped {
        partials,
        kept,
        tasks,
        map_seconds,
        stage1_seconds,
    } = beating(conn, period, mapped)
        .await?
        .map_err(|e| StepError::Refuse(format!("map task failed: {e}")))?;

    host.maybe_exit_at_step(step.iteration);
    let mapped_at = received.elapsed().as_secs_f64();
    // Stage 2: own range in memory, the others to their reducers, all at once.
    let own = range_of(k, workers, me);
    let mut units = Vec::new();
    {
        let mut inbox = lock(&host.jobs().inbox);
        let entry = inbox.entry(key).or_insert_with(|| Inbox {
            sum: RangeSum::new(own.clone(), dims),
            from: BTreeSet::new(),
        });
        for p in &partials {
            entry.sum.add_partial(p);
            units.extend(p.units.iter().map(|&(key, v)| (key, v.to_bits())));
        }
        entry.from.insert(me as u32);
    }
    let partials = Arc::new(partials);
    let mut sends = JoinSet::new();
    for (j, peer) in step.workers.iter().enumerate() {
        let r = range_of(k, workers, j);
        if j == me || r.is_empty() {
            continue;
        }
        let header = Range {
            job: step.job,
            epoch: step.epoch,
            iteration: step.iteration,
            from: me as u32,
            workers: workers as u32,
            start: r.start as u64,
            end: r.end as u64,
            dims: step.dims,
            tasks: partials.len() as u64,
            len: range_len(partials.len(), r.len(), dims),
        };
        let (worker, peer, partials) = (Arc::clone(host), peer.clone(), Arc::clone(&partials));
        sends.spawn(async move {
            let blob = encode_range(&partials, r);
            drop(partials);
            send_range(&*worker, &peer, header, &blob, io_timeout)
                .await
                .map_err(|e| format!("stage 2 to {peer}: {e}"))
        });
    }
    let sent = beating(conn, period, async {
        let mut total = 0u64;
        let mut failure = None;
        while let Some(joined) = sends.join_next().await {
            match joined {
                Ok(Ok(bytes)) => total += bytes,
                Ok(Err(e)) => failure = failure.or(Some(e)),
                Err(e) => failure = failure.or(Some(e.to_string())),
            }
        }
        failure.map_or(Ok(total), Err)
    })
    .await?;
    let stage2_bytes = sent.map_err(StepError::Refuse)?;
    drop(partials);
    // With fewer centroids than workers some ranges are empty: nobody sends to them.
    let sum = if own.is_empty() {
        lock(&host.jobs().inbox).remove(&key);
        RangeSum::new(own.clone(), dims)
    } else {
        beating(conn, period, reduced(&**host, key, workers, io_timeout))
            .await?
            .map_err(StepError::Refuse)?
    };
    let reduced_at = received.elapsed().as_secs_f64();

    // Stage 3: the reduced range to the driver.
    let blob = sum.encode_result(scale);
    let done = StepDone {
        map_seconds,
        stage1_seconds,
        mapped_at,
        reduced_at,
        stage2_bytes,
        tasks: tasks as u64,
        kept: kept as u64,
        units,
        start: own.start as u64,
        end: own.end as u64,
        len: blob.len() as u64,
    };
    send(conn, &Message::StepDone(done)).await?;
    send_blob(
        conn,
        step.iteration,
        &blob,
        host.cluster().settings.chunk_size,
    )
    .await?;
    Ok(())
}

/// Sends a stage-2 piece to `peer`; returns the bytes written.
async fn send_range<H: Host>(
    host: &H,
    peer: &str,
    header: Range,
    blob: &[u8],
    io_timeout: Duration,
) -> Result<u64, MessageError> {
    let mut conn = dial_name(host.cluster(), peer, host.secret(), host.name())
        .await
        .map_err(|e| MessageError::Unreachable(e.to_string()))?;
    let id = header.iteration;
    send(&mut conn, &Message::Range(header)).await?;
    send_blob(&mut conn, id, blob, host.cluster().settings.chunk_size).await?;
    match recv(&mut conn, io_timeout).await? {
        Message::Received => Ok(conn.bytes_written()),
        other => Err(MessageError::Unexpected(other.name().into())),
    }
}

/// Waits until all `workers` contributed to the range of `key`, then takes it.
async fn reduced<H: Host>(
    host: &H,
    key: InboxKey,
    workers: usize,
    io_timeout: Duration,
) -> Result<RangeSum, String> {
    let deadline = tokio::time::Instant::now() + io_timeout;
    loop {
        let notified = host.jobs().arrived.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let mut inbox = lock(&host.jobs().inbox);
            let done = inbox.get(&key).is_some_and(|e| e.from.len() == workers);
            if done {
                if let Some(entry) = inbox.remove(&key) {
                    return Ok(entry.sum);
                }
            }
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            let inbox = lock(&host.jobs().inbox);
            let have = inbox.get(&key).map(|e| e.from.clone()).unwrap_or_default();
            let missing: Vec<String> = (0..workers as u32)
                .filter(|w| !have.contains(w))
                .map(|w| format!("#{w}"))
                .collect();
            return Err(format!(
                "worker {}: stage-2 data from workers {} did not arrive within {io_timeout:?}",
                host.name(),
                missing.join(", ")
            ));
        }
    }
}

async fn receive_range<H: Host>(
    host: &H,
    conn: &mut Connection,
    range: Range,
) -> Result<(), MessageError> {
    let io_timeout = Duration::from_millis(host.cluster().settings.io_timeout_ms);
    let centroids = range.end.saturating_sub(range.start);
    let values = centroids.saturating_mul(range.dims.saturating_add(1));
    if centroids == 0
        || range.dims == 0
        || values > MAX_RANGE_VALUES
        || range.from >= range.workers
        || range.tasks == 0
        || range.len
            != range_len(
                range.tasks as usize,
                centroids as usize,
                range.dims as usize,
            )
    {
        return Err(MessageError::Malformed(format!(
            "stage-2 header does not add up: {range:?}"
        )));
    }
    let key = (range.job, range.epoch, range.iteration);
    let r = range.start as usize..range.end as usize;
    let dims = range.dims as usize;
    {
        let mut inbox = lock(&host.jobs().inbox);
        let entry = inbox.entry(key).or_insert_with(|| Inbox {
            sum: RangeSum::new(r.clone(), dims),
            from: BTreeSet::new(),
        });
        if entry.sum.start != r.start || entry.sum.len() != r.len() || entry.sum.dims != dims {
            return Err(MessageError::Malformed(
                "stage-2 range differs from the reducer's".into(),
            ));
        }
        if entry.from.contains(&range.from) {
            return Err(MessageError::Malformed(format!(
                "stage-2 data from worker #{} arrived twice",
                range.from
            )));
        }
    }
    let jobs = host.jobs();
    recv_blob(
        conn,
        range.iteration,
        range.len,
        io_timeout,
        |offset, data| {
            let mut inbox = lock(&jobs.inbox);
            let entry = inbox
                .get_mut(&key)
                .ok_or_else(|| "the iteration was abandoned".to_string())?;
            entry.sum.add_chunk(offset, data)
        },
    )
    .await?;
    if let Some(entry) = lock(&jobs.inbox).get_mut(&key) {
        entry.from.insert(range.from);
    }
    jobs.arrived.notify_waiters();
    send(conn, &Message::Received).await
}

/// Why a step stopped: a refusal that the driver is told about, or a broken connection to it.
#[derive(Debug)]
enum StepError {
    Refuse(String),
    Io(MessageError),
}

impl From<MessageError> for StepError {
    fn from(e: MessageError) -> Self {
        Self::Io(e)
    }
}
