//! A hostile network between the driver and its workers (issue 49): a relay that alters frames,
//! and a flood of connections that never authenticate.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::util::*;

/// Frame header bytes, and the tag that follows every frame after the handshake.
const HEADER: usize = 12;
const TAG: usize = 16;

/// Copies frames from `from` to `to`. After the first two frames of this direction (the
/// handshake's), every frame carries a tag; data frames of at least 256 bytes of payload have
/// one bit flipped and their CRC made right again: the first one the relay sees, or `every` one. A build
/// that sent no tags would be misread here and never altered: `done` tells.
fn relay_frames(
    mut from: TcpStream,
    mut to: TcpStream,
    tamper: bool,
    every: bool,
    done: &AtomicBool,
) {
    let mut frames = 0usize;
    loop {
        let mut header = [0u8; HEADER];
        if from.read_exact(&mut header).is_err() {
            break;
        }
        let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
        if len > 1 << 24 {
            break;
        }
        let tag = if frames >= 2 { TAG } else { 0 };
        let mut rest = vec![0u8; len + tag];
        if from.read_exact(&mut rest).is_err() {
            break;
        }
        frames += 1;
        if tamper && header[3] == 9 && len >= 256 && (!done.swap(true, Ordering::SeqCst) || every) {
            rest[len / 2] ^= 0x10;
            let mut crc = crc32fast::Hasher::new();
            crc.update(&header[..8]);
            crc.update(&rest[..len]);
            header[8..12].copy_from_slice(&crc.finalize().to_le_bytes());
        }
        if to
            .write_all(&header)
            .and_then(|()| to.write_all(&rest))
            .is_err()
        {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// A relay on `listener` to the worker at `port`, altering one frame the worker sends.
fn relay(listener: TcpListener, port: u16, every: bool, done: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
                continue;
            };
            let (c2, s2) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            let done_up = Arc::clone(&done);
            std::thread::spawn(move || relay_frames(client, server, false, every, &done_up));
            let done_down = Arc::clone(&done);
            std::thread::spawn(move || relay_frames(s2, c2, true, every, &done_down));
        }
    });
}

/// The k-means both tests run on workers (20,000 blobs of 32 values in 5 partitions, k = 20,
/// 4 iterations) and the vocabulary one process makes of it.
fn kmeans_and_local(d: &std::path::Path) -> (Vec<String>, std::path::PathBuf) {
    let parts = synth_parts(d, 20000, 32, 20, 4, 5);
    let common: Vec<String> = [
        "kmeans",
        "--features",
        s(&parts),
        "--k",
        "20",
        "--iterations",
        "4",
        "--tol",
        "0",
        "--seed",
        "3",
    ]
    .map(String::from)
    .to_vec();
    let local = d.join("local.bin");
    ok(&[&strs(&common)[..], &["--out", s(&local)]].concat());
    (common, local)
}

#[test]
fn a_relay_that_alters_a_frame_never_changes_the_vocabulary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (common, local) = kmeans_and_local(d);
    let common = strs(&common);
    // The first altered frame ends its link: the attempt is made again and gives the local
    // centroids. Every frame altered: the run fails naming why. Never a vocabulary of altered
    // sums.
    for every in [false, true] {
        let (status, stderr, out) = relayed(d, &common, every);
        if every {
            assert!(
                !status.success() && stderr.contains("failed its authentication"),
                "{stderr}"
            );
        } else {
            assert!(status.success(), "{stderr}");
            assert!(
                std::fs::read(&out).expect("vocabulary") == std::fs::read(&local).expect("local"),
                "an altered frame changed the vocabulary"
            );
        }
    }
}

/// `vocab kmeans` (`common`) on 3 workers of which w0 is reached through a relay that alters
/// its data frames (the first one, or `every` one): its exit, its stderr and its vocabulary.
fn relayed(
    d: &std::path::Path,
    common: &[&str],
    every: bool,
) -> (std::process::ExitStatus, String, std::path::PathBuf) {
    let name = if every { "every" } else { "first" };
    // w0's listed address is the relay's; the worker itself listens elsewhere.
    let (cluster, ports) = cluster_file(d, &format!("cluster-{name}.toml"), 3, 3);
    let text = std::fs::read_to_string(&cluster).expect("read").replace(
        "io_timeout_ms = 5000",
        "io_timeout_ms = 3000\nconnect_timeout_ms = 500",
    );
    std::fs::write(&cluster, text).expect("write");
    let hidden = TcpListener::bind("127.0.0.1:0").expect("bind");
    let real = hidden.local_addr().expect("addr").port();
    drop(hidden);
    let relay_at = TcpListener::bind(("127.0.0.1", ports[0])).expect("relay port");
    let done = Arc::new(AtomicBool::new(false));
    relay(relay_at, real, every, Arc::clone(&done));
    let _workers = Workers(vec![
        spawn_worker_args(&cluster, 0, real, &[]),
        spawn_worker_args(&cluster, 1, ports[1], &[]),
        spawn_worker_args(&cluster, 2, ports[2], &[]),
    ]);
    let out = d.join(format!("relayed-{name}.bin"));
    let run = Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args(common)
        .args(["--quiet", "--cluster", s(&cluster), "--out", s(&out)])
        .output()
        .expect("driver");
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(
        done.load(Ordering::SeqCst),
        "the relay altered no frame: {stderr}"
    );
    (run.status, stderr, out)
}

/// The bytes of a hello frame from `name` (nonce all zeros), in the handshake's format.
fn hello_frame(name: &str) -> Vec<u8> {
    let mut payload = (name.len() as u16).to_le_bytes().to_vec();
    payload.extend_from_slice(name.as_bytes());
    payload.extend_from_slice(&[0u8; 32]);
    let mut frame = b"VC".to_vec();
    frame.push(PROTOCOL_VERSION);
    frame.push(1);
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&frame);
    crc.update(&payload);
    frame.extend_from_slice(&crc.finalize().to_le_bytes());
    frame.extend_from_slice(&payload);
    frame
}

/// The wire protocol's version (the hello frame's third byte).
const PROTOCOL_VERSION: u8 = 5;

/// Floods `port` with `per_second` connections a second until `stop`: a third silent, a third
/// sending a valid hello and then nothing (no proof), a third dribbling a hello a byte every
/// 200 ms. Each is held until the worker closes it or 10 s pass.
fn flood(port: u16, per_second: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let hello = hello_frame("w1");
        let started = std::time::Instant::now();
        let mut held: Vec<(TcpStream, std::time::Instant, usize)> = Vec::new();
        let mut made = 0usize;
        let mut dribbled = std::time::Instant::now();
        while !stop.load(Ordering::SeqCst) {
            let due = (started.elapsed().as_secs_f64() * f64::from(per_second)) as usize;
            while made < due {
                if let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) {
                    let _ = c.set_nonblocking(true);
                    if made % 3 == 1 {
                        let _ = c.write_all(&hello);
                    }
                    held.push((c, std::time::Instant::now(), made % 3));
                }
                made += 1;
            }
            if dribbled.elapsed() >= std::time::Duration::from_millis(200) {
                dribbled = std::time::Instant::now();
                for (c, _, kind) in &mut held {
                    if *kind == 2 {
                        let _ = c.write(&hello[..1]);
                    }
                }
            }
            // Closed by the worker, or held long enough: let go.
            held.retain_mut(|(c, at, _)| {
                let mut byte = [0u8; 64];
                let closed = matches!(c.read(&mut byte), Ok(0));
                !closed && at.elapsed() < std::time::Duration::from_secs(10)
            });
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        made
    })
}

#[test]
fn an_honest_job_completes_while_every_worker_is_flooded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (common, local) = kmeans_and_local(d);
    let common = strs(&common);
    let (cluster, ports) = cluster_file(d, "cluster.toml", 3, 3);
    let _workers = Workers(
        (ports.iter().enumerate())
            .map(|(i, &port)| spawn_worker_args(&cluster, i, port, &[]))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let floods: Vec<_> = (ports.iter())
        .map(|&port| flood(port, 200, Arc::clone(&stop)))
        .collect();
    // The flood under way: every worker's handshakes taken by it.
    std::thread::sleep(std::time::Duration::from_secs(4));
    let out = d.join("flooded.bin");
    let run = Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args(common)
        .args(["--quiet", "--cluster", s(&cluster), "--out", s(&out)])
        .output()
        .expect("driver");
    stop.store(true, Ordering::SeqCst);
    let made: usize = floods.into_iter().map(|f| f.join().expect("flood")).sum();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(made >= 3 * 200 * 4, "the flood made {made} connections");
    assert!(
        std::fs::read(&out).expect("vocabulary") == std::fs::read(&local).expect("local"),
        "the flooded run's vocabulary differs"
    );
}

#[test]
fn a_team_of_125_loopback_workers_forms_at_the_first_attempt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let parts = synth_parts(d, 20000, 16, 16, 7, 250);
    let common = [
        "kmeans",
        "--features",
        s(&parts),
        "--k",
        "16",
        "--iterations",
        "2",
        "--tol",
        "0",
        "--seed",
        "2",
    ];
    let local = d.join("local.bin");
    ok(&[&common[..], &["--out", s(&local)]].concat());
    let team = d.join("team.bin");
    let said = ok(&[&common[..], &["--local-nodes", "125", "--out", s(&team)]].concat());
    assert!(said.contains("on 125 workers"), "{said}");
    // Every iteration's first attempt held: each of the 7,750 links was admitted.
    let stages = csv_rows(&d.join("team.bin.stages.csv"));
    assert_eq!(stages.len(), 2, "{stages:?}");
    assert!(stages.iter().all(|r| r[2] == "1"), "attempts: {stages:?}");
    assert!(std::fs::read(&team).expect("team") == std::fs::read(&local).expect("local"));
}
