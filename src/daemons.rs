//! The worker daemons as this binary reaches them: a cluster file and its secret, the driver's
//! runtime, pings, and loopback clusters (worker processes of this binary on this machine,
//! started for a run and stopped when it ends).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use rand::RngCore;
use vocab_cluster::engine::crew::DRIVER;
use vocab_cluster::net::auth::Secret;
use vocab_cluster::net::config::Cluster;
use vocab_cluster::net::peer::{PingError, ping};

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Loads a cluster file and its secret.
pub fn load(path: &Path) -> anyhow::Result<(Cluster, Secret)> {
    let cluster = Cluster::load(path)?;
    let secret_path = cluster.settings.secret_file.clone().with_context(|| {
        format!(
            "cluster file {} sets no settings.secret_file",
            path.display()
        )
    })?;
    let secret = Secret::load(&secret_path)?;
    Ok((cluster, secret))
}

/// Pings every node; returns `(name, Ok(rtt) | Err(reason))` in chain order.
pub async fn ping_all(
    cluster: &Cluster,
    secret: &Secret,
) -> Vec<(String, Result<Duration, PingError>)> {
    let mut out = Vec::new();
    for node in cluster.chain_nodes() {
        out.push((node.name.clone(), ping(cluster, node, secret, DRIVER).await));
    }
    out
}

/// Loopback workers and the folder of their cluster file, stopped (then removed) when dropped.
pub type Loopback = (LocalCluster, tempfile::TempDir);

/// Worker processes on loopback with their cluster file; the workers are killed when dropped.
pub struct LocalCluster {
    /// The cluster file.
    pub path: std::path::PathBuf,
    /// The folder of the workers' logs (`w0.log`, ...).
    pub logs: std::path::PathBuf,
    /// The cluster's secret (in the folder's `secret` file only when [`Keep::SecretFile`]).
    pub secret: Secret,
    children: Vec<std::process::Child>,
}

/// Where a loopback cluster's secret lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// In a `secret` file beside the cluster file, for other commands to use (`vocab cluster
    /// local`, in a folder the user chose).
    SecretFile,
    /// In memory only: the workers read it from a pipe, so nothing on disk outlives the run,
    /// even one killed (a run's loopback workers, in a temporary folder).
    InMemory,
}

/// Attempts at starting loopback workers when one exits before it answers (its port taken
/// between the kernel naming it free and the worker binding it).
const LOCAL_ATTEMPTS: usize = 3;

/// How starting loopback workers went wrong.
enum StartError {
    /// A worker exited before it answered: worth another attempt on other ports.
    Exited(anyhow::Error),
    /// Anything else.
    Failed(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for StartError {
    fn from(e: E) -> Self {
        Self::Failed(e.into())
    }
}

impl LocalCluster {
    /// Writes a cluster file and secret into `dir` and starts `nodes` workers (spread over
    /// `racks`), each with `threads` map threads (0: the default), then waits until all answer.
    /// Each worker's output goes to its own file in `logs` (`w0.log`, appended), so that it
    /// never interleaves with the driver's. A worker that exits before it answers (another
    /// program took its port) is started again on new ports, up to [`LOCAL_ATTEMPTS`] times.
    pub fn start(
        dir: &Path,
        nodes: usize,
        racks: usize,
        threads: usize,
        logs: &Path,
        keep: Keep,
    ) -> anyhow::Result<Self> {
        ensure!(nodes > 0, "the local cluster needs at least 1 node");
        ensure!(racks > 0, "the local cluster needs at least 1 rack");
        vocab_pipeline::output::create_dir_all(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        vocab_pipeline::output::create_dir_all(logs)
            .with_context(|| format!("cannot create {}", logs.display()))?;
        let mut attempt = 1;
        loop {
            match Self::start_once(dir, (nodes, racks, threads), logs, keep) {
                Ok(local) => return Ok(local),
                Err(StartError::Exited(_)) if attempt < LOCAL_ATTEMPTS => attempt += 1,
                Err(StartError::Exited(e) | StartError::Failed(e)) => return Err(e),
            }
        }
    }

    /// One attempt of [`LocalCluster::start`].
    fn start_once(
        dir: &Path,
        (nodes, racks, threads): (usize, usize, usize),
        logs: &Path,
        keep: Keep,
    ) -> Result<Self, StartError> {
        let mut secret = [0u8; 32];
        rand::rng().fill_bytes(&mut secret);
        let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let mut text = String::from("[settings]\n");
        if keep == Keep::SecretFile {
            let secret_path = dir.join("secret");
            write_private(&secret_path, format!("{hex}\n").as_bytes())
                .with_context(|| format!("cannot write {}", secret_path.display()))?;
            text.push_str("secret_file = \"secret\"\n");
        }
        // Ports: the kernel names free ones, held until every one is named (no two alike) and
        // let go just before the workers bind them.
        let mut held = Vec::new();
        for i in 0..nodes {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            let port = listener.local_addr()?.port();
            held.push((port, listener));
            let _ = write!(
                text,
                "\n[[nodes]]\nname = \"w{i}\"\naddress = \"127.0.0.1:{port}\"\nrack = \"r{}\"\n",
                i % racks
            );
        }
        let path = dir.join("cluster.toml");
        vocab_pipeline::atomic::write(&path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        let mut local = Self {
            path,
            logs: logs.to_path_buf(),
            secret: Secret::from_bytes(hex.into_bytes()),
            children: Vec::new(),
        };
        let ports: Vec<u16> = held.into_iter().map(|(port, _)| port).collect();
        for (i, port) in ports.iter().enumerate() {
            let child = local.spawn(i, *port, threads, keep)?;
            local.children.push(child);
        }
        local.wait_up()?;
        Ok(local)
    }

    /// Starts worker `w{i}` listening on `port`, its output appended to its log.
    fn spawn(
        &self,
        i: usize,
        port: u16,
        threads: usize,
        keep: Keep,
    ) -> anyhow::Result<std::process::Child> {
        let exe = std::env::current_exe().context("cannot find the vocab executable")?;
        let mut command = std::process::Command::new(&exe);
        command
            .args([
                "worker",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--name",
                &format!("w{i}"),
                "--cluster",
            ])
            .arg(&self.path);
        if threads > 0 {
            command.env("RAYON_NUM_THREADS", threads.to_string());
        }
        let log_path = self.logs.join(format!("w{i}.log"));
        let log = vocab_pipeline::output::append(&log_path)
            .with_context(|| format!("cannot open {}", log_path.display()))?;
        let err_log = log
            .try_clone()
            .with_context(|| format!("cannot open {}", log_path.display()))?;
        let stdin = match keep {
            Keep::SecretFile => std::process::Stdio::null(),
            Keep::InMemory => {
                // Written into the pipe and its writing end closed before the worker starts: the
                // 64 bytes sit in the pipe's buffer, so no write can meet a reader that is gone.
                use std::io::Write as _;
                command.arg("--secret-stdin");
                let (reader, mut writer) = std::io::pipe().context("cannot make a pipe")?;
                writer
                    .write_all(self.secret.bytes())
                    .with_context(|| format!("cannot hand worker w{i} its secret"))?;
                drop(writer);
                reader.into()
            }
        };
        command.stdin(stdin).stdout(log).stderr(err_log);
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe and touches only the child being started.
            // With it the kernel kills the worker when this process dies, even by SIGKILL,
            // so loopback workers never outlive the run that started them.
            unsafe {
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        command
            .spawn()
            .with_context(|| format!("cannot start worker w{i}"))
    }

    /// Waits until every worker answers a ping (10 s at most); a worker that exits first is
    /// [`StartError::Exited`].
    fn wait_up(&mut self) -> Result<(), StartError> {
        let cluster = Cluster::load(&self.path)?;
        let secret = &self.secret;
        let rt = runtime()?;
        let started = Instant::now();
        loop {
            let results = rt.block_on(ping_all(&cluster, secret));
            if results.iter().all(|(_, r)| r.is_ok()) {
                return Ok(());
            }
            for (i, child) in self.children.iter_mut().enumerate() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(StartError::Exited(anyhow::anyhow!(
                        "worker w{i} exited before it answered ({status}); its log is {}",
                        self.logs.join(format!("w{i}.log")).display()
                    )));
                }
            }
            if started.elapsed() > Duration::from_secs(10) {
                let down: Vec<String> = results
                    .into_iter()
                    .filter_map(|(name, r)| {
                        r.err()
                            .map(|e| format!("{name}: {}", vocab_pipeline::chain(&e)))
                    })
                    .collect();
                return Err(StartError::Failed(anyhow::anyhow!(
                    "workers did not come up within 10 s: {}; their logs are in {}",
                    down.join("; "),
                    self.logs.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Writes a file only its owner may read (mode 0600 on Unix), as secrets must be.
pub fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    vocab_pipeline::output::check(path)?;
    let mut file = options.open(path)?;
    #[cfg(unix)]
    {
        // An existing file keeps its mode on open: narrow it too.
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(bytes)?;
    file.sync_all()
}
