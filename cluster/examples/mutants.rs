//! The mutation harness of `eval/robustness/`: every reader of vocab's inputs against at least
//! 10,000 seeded mutants (see `cluster/tests/mutants/engine.rs`), in-process, each reader in a
//! child process of its own so that an abort is caught and named; plus `vocab config check`
//! against mutated configs, spawned.
//!
//! usage: mutants [--count N] [--seed S] [--vocab PATH] [--out DIR] [--only READER]
//! (writes DIR/mutants.csv and DIR/failures.txt; default DIR eval/robustness/results);
//! mutants --only READER --dump INDEX writes that mutant to DIR/<reader>-<index>-<file>.

#[path = "../tests/mutants/engine.rs"]
mod engine;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[global_allocator]
static COUNTING: engine::Counting = engine::Counting;

struct Args {
    count: usize,
    seed: u64,
    vocab: Option<PathBuf>,
    out: PathBuf,
    only: Option<String>,
    dump: Option<usize>,
}

fn args() -> Args {
    let mut args = Args {
        count: 10_000,
        seed: 2026,
        vocab: None,
        out: PathBuf::from("eval/robustness/results"),
        only: None,
        dump: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--count" => args.count = value.parse().expect("--count N"),
            "--seed" => args.seed = value.parse().expect("--seed S"),
            "--vocab" => args.vocab = Some(PathBuf::from(value)),
            "--out" => args.out = PathBuf::from(value),
            "--only" => args.only = Some(value),
            "--dump" => args.dump = Some(value.parse().expect("--dump INDEX")),
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

/// One reader's row: `reader,mutants,accepted,refused,failed,peak_mb,bound_mb,slowest_ms,seconds`.
fn row(name: &str, t: &engine::Tally, bound: usize) -> String {
    format!(
        "{name},{},{},{},{},{:.1},{:.1},{:.1},{:.1}\n",
        t.mutants,
        t.accepted,
        t.refused,
        t.failed.len(),
        t.peak as f64 / 1048576.0,
        bound as f64 / 1048576.0,
        t.slowest_ms,
        t.seconds
    )
}

#[expect(
    clippy::zombie_processes,
    reason = "each child is reaped by wait4, which gives its peak memory too"
)]
/// `vocab config check` on `count` mutants of a config: a refusal names the config, exit 1;
/// never a panic (exit 101) or a signal; memory under `bound` (peak resident, from wait4).
fn configs(vocab: &Path, seed: u64, count: usize, bound: usize) -> (engine::Tally, usize) {
    let reader = engine::Reader {
        name: "config",
        file: "c.toml",
        seed: CONFIG.as_bytes().to_vec(),
        fields: Vec::new(),
        fixup: engine::Fixup::None,
        memory: bound,
        read: Box::new(|_| Ok(())),
        beside: Vec::new(),
    };
    let scratch = tempfile::tempdir().expect("scratch");
    let path = scratch.path().join("c.toml");
    let mut tally = engine::Tally::default();
    let started = Instant::now();
    for i in 0..count {
        let mut rng = engine::Rng::new(seed ^ (i as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
        std::fs::write(&path, engine::mutate(&reader, &mut rng)).expect("write");
        let t = Instant::now();
        let child = std::process::Command::new(vocab)
            .args(["config", "check"])
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("vocab starts");
        let pid = child.id() as i32;
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.expect("stderr"), &mut err).ok();
        let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
        // SAFETY: our child, waited for once, with valid out-parameters.
        unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        let peak = usage.ru_maxrss as usize * 1024;
        tally.mutants += 1;
        tally.peak = tally.peak.max(peak);
        tally.slowest_ms = tally.slowest_ms.max(t.elapsed().as_secs_f64() * 1e3);
        let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
        match code {
            Some(0) => tally.accepted += 1,
            Some(1) if err.contains("c.toml") && !err.contains("panicked") => tally.refused += 1,
            _ => tally
                .failed
                .push((i, format!("exit {code:?}: {}", err.trim()))),
        }
        if peak > bound {
            tally
                .failed
                .push((i, format!("peak {peak} bytes over {bound}")));
        }
    }
    tally.seconds = started.elapsed().as_secs_f64();
    (tally, bound)
}

/// The quickstart's config with every section, the seed of the config mutants.
const CONFIG: &str = "[dataset]\nsynthetic = { per_kind = 12, seed = 7 }\n\n[features]\nper_image = 20\nseed = 1\n\n[partition]\nparts = 8\n\n[kmeans]\nk = [8, 32, 128]\niterations = 10\nseed = 1\nnodes = 2\n\n[encode]\nstride = 8\nnorm = \"hellinger\"\npyramid = 2\n\n[classify]\nattributes = [\"urbanicity\", \"elevation\"]\ncv = 3\n\n[plan]\nlink_mbit = 1000\n";

fn main() {
    let args = args();
    std::fs::create_dir_all(&args.out).expect("out");
    // A child per reader: `--only NAME` runs one reader here and prints its row.
    if let (Some(only), Some(index)) = (&args.only, args.dump) {
        for reader in engine::readers().into_iter().filter(|r| r.name == only) {
            let mut rng =
                engine::Rng::new(args.seed ^ (index as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
            let path = args.out.join(format!("{only}-{index}-{}", reader.file));
            std::fs::write(&path, engine::mutate(&reader, &mut rng)).expect("dump");
            println!("{}", path.display());
        }
        return;
    }
    if let Some(only) = &args.only {
        for reader in engine::readers().into_iter().filter(|r| r.name == only) {
            let t = engine::run(&reader, args.seed, args.count);
            print!("{}", row(reader.name, &t, reader.memory));
            eprint!("{}", engine::failures_text(&t));
        }
        return;
    }
    let exe = std::env::current_exe().expect("exe");
    let mut csv = String::from(
        "reader,mutants,accepted,refused,failed,peak_mb,bound_mb,slowest_ms,seconds\n",
    );
    let mut failures = String::new();
    for reader in engine::readers() {
        let out = std::process::Command::new(&exe)
            .args(["--only", reader.name, "--count", &args.count.to_string()])
            .args(["--seed", &args.seed.to_string()])
            .arg("--out")
            .arg(&args.out)
            .output()
            .expect("child");
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && !line.is_empty() {
            csv.push_str(&line);
        } else {
            csv.push_str(&format!("{},ABORTED,,,,,,,\n", reader.name));
        }
        let err = String::from_utf8_lossy(&out.stderr);
        for l in err.lines().filter(|l| !l.trim().is_empty()) {
            failures.push_str(&format!("{}: {l}\n", reader.name));
        }
        eprint!("{line}");
    }
    if let Some(vocab) = &args.vocab {
        let (t, bound) = configs(vocab, args.seed, args.count, 256 << 20);
        let line = row("config", &t, bound);
        eprint!("{line}");
        csv.push_str(&line);
        for (i, why) in &t.failed {
            failures.push_str(&format!("config: {i}: {why}\n"));
        }
    }
    std::fs::write(args.out.join("mutants.csv"), csv).expect("csv");
    let mut f = std::fs::File::create(args.out.join("failures.txt")).expect("failures");
    f.write_all(failures.as_bytes()).expect("write");
}
