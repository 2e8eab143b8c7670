//! The `vocab` binary: command line, progress reporting and the config-driven orchestrator.

mod bench_cmd;
mod classify_cmd;
mod cli;
mod cluster_cmd;
mod config;
mod daemons;
mod encode_cmd;
mod faults;
mod figures;
mod join_cmd;
mod kmeans_cmd;
mod kmeans_log;
mod links;
mod memory;
mod mixture_cmd;
mod nodes;
mod options;
mod photo_cmd;
mod plan;
mod progress;
mod ranks;
mod run;
mod settings;
mod sharded;
mod tables;
mod teams;
mod words_cmd;

use std::io::stdout;
use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches};

use crate::cli::{BenchCommand, Cli, ClusterCommand, Command, ConfigCommand, DatasetsCommand};
use crate::settings::{
    ClassifySettings, EncodeSettings, EvaluateSettings, FeatureSettings, JoinSettings,
    KmeansSettings, MixtureSettings, OrFlag, PartitionSettings, PhotoSetSettings, TrainSettings,
};

fn main() -> ExitCode {
    reset_sigpipe();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Lets a closed stdout (`vocab ... | head`) end the process quietly, as for other Unix tools,
/// instead of making `println!` panic: Rust ignores SIGPIPE by default.
fn reset_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; restoring the default
    // disposition of SIGPIPE has no other effect on the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn run() -> anyhow::Result<()> {
    let command = Cli::command();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let matches = (command.clone().try_get_matches_from(&args))
        .unwrap_or_else(|e| cli::hint_case(e, &command, &args).exit());
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Every path flag is an input or an output: inputs are registered before anything is
    // written, outputs refused at once when they would replace one.
    cli::guard::guard(&command, &matches)?;
    // A bad cap is named here; the kernels would otherwise ignore it.
    vocab_pipeline::isa::cap_from_env()?;
    if let Some(threads) = cli.threads {
        let threads = crate::settings::threads(threads).or_flag()?;
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
            .context("cannot start the thread pool")?;
    }
    let ui = progress::Ui {
        quiet: cli.quiet,
        log_every: cli.log_every,
    };
    if ranks::wants_mpi(&cli.command) {
        return ranks::main(cli.command, &ui);
    }
    dispatch(cli.command, &ui, None)
}

/// Runs one command (`mpi`: rank 0's handle when running under MPI).
fn dispatch(
    command: Command,
    ui: &progress::Ui,
    mpi: Option<&ranks::Mpi<'_>>,
) -> anyhow::Result<()> {
    let ui = *ui;
    match command {
        Command::Features(args) => {
            let settings = FeatureSettings::from_args(&args).or_flag()?;
            let engine = sharded::engine(&args.nodes, mpi)?;
            let on = sharded::On {
                engine: &engine,
                mpi,
            };
            photo_cmd::features(&settings, &ui, on, &mut stdout()).map(|_| ())
        }
        Command::Convert(args) => photo_cmd::convert(&args),
        Command::Join(args) => {
            let settings = JoinSettings::from_args(&args).or_flag()?;
            join_cmd::join(&settings, &mut stdout())
        }
        Command::Words(args) => words_cmd::words(&args, &mut stdout()),
        Command::Encode(args) => {
            let settings = EncodeSettings::new(
                &args.vocabulary,
                &args.input,
                args.labels.as_deref(),
                &args.out,
                (&args.options, None),
            )
            .or_flag()?;
            let settings = EncodeSettings {
                from: args.from.clone(),
                ..settings
            };
            let engine = sharded::engine(&args.nodes, mpi)?;
            let on = sharded::On {
                engine: &engine,
                mpi,
            };
            encode_cmd::encode(&settings, &ui, on, &mut stdout()).map(|_| ())
        }
        Command::Train(args) => {
            let settings = TrainSettings::from_args(&args).or_flag()?;
            classify_cmd::train(&settings, &ui, &mut stdout())
        }
        Command::Evaluate(args) => {
            classify_cmd::evaluate(&EvaluateSettings::from_args(&args), &mut stdout()).map(|_| ())
        }
        Command::Classify(args) => {
            classify_cmd::classify(&ClassifySettings::from_args(&args).or_flag()?, &ui)
        }
        Command::Datasets(DatasetsCommand::Photos(args)) => {
            let settings =
                PhotoSetSettings::new(&args.out, args.set.per_kind, args.set.seed).or_flag()?;
            photo_cmd::photos(&settings, &mut stdout())
        }
        Command::Datasets(DatasetsCommand::Synth(args)) => kmeans_cmd::synth(&args),
        Command::Datasets(DatasetsCommand::Scene15(args)) => photo_cmd::scene15(&args),
        Command::Partition(args) => {
            let settings =
                PartitionSettings::new(&args.features, &args.out, args.parts, args.element)
                    .or_flag()?;
            kmeans_cmd::partition(&settings, &mut stdout())
        }
        Command::Kmeans(args) => {
            let settings = KmeansSettings::from_args(&args).or_flag()?;
            kmeans_cmd::run(&settings, &ui, mpi, &mut stdout()).map(|_| ())
        }
        Command::Mixture(args) => {
            let settings = MixtureSettings::from_args(&args).or_flag()?;
            mixture_cmd::run(&settings, &ui, mpi, &mut stdout()).map(|_| ())
        }
        Command::Run(args) => run::run(&args, &ui, mpi),
        Command::Clean(args) => run::clean::clean(&args, &mut stdout()),
        Command::Config(ConfigCommand::Check(args)) => run::check::check(&args),
        Command::Config(ConfigCommand::Show(args)) => run::check::show(&args.config),
        Command::Bench(BenchCommand::Hog(args)) => bench_cmd::hog(&args),
        Command::Bench(BenchCommand::Partials(args)) => bench_cmd::partials(&args),
        Command::Bench(BenchCommand::Assign(args)) => bench_cmd::assign(&args),
        // `run` hands it to ranks::main, which runs it on every rank.
        Command::Bench(BenchCommand::Collectives(_)) => {
            anyhow::bail!("bench collectives runs only as an MPI job")
        }
        Command::Bench(BenchCommand::Broadcast(args)) => cluster_cmd::bench(&args),
        Command::Bench(BenchCommand::Gather(args)) => cluster_cmd::bench_gather(&args),
        Command::Worker(args) => cluster_cmd::worker(&args),
        Command::Cluster(ClusterCommand::Local(args)) => cluster_cmd::local(&args),
        Command::Cluster(ClusterCommand::Status(args)) => cluster_cmd::status(&args),
        Command::Cluster(ClusterCommand::Calibrate(args)) => cluster_cmd::calibrate(&args),
    }
}
