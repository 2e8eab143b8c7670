//! The `vocab` binary: command line, progress reporting and the config-driven orchestrator.

mod bench;
mod cli;
mod cluster_cmd;
mod config;
mod kmeans;
mod progress;
mod stages;

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use crate::cli::{BenchCommand, Cli, ClusterCommand, Command, DatasetsCommand};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(threads) = cli.threads {
        anyhow::ensure!(threads > 0, "--threads must be at least 1");
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
            .context("cannot start the thread pool")?;
    }
    let ui = progress::Ui { quiet: cli.quiet };
    match cli.command {
        Command::Features(args) => {
            let settings = stages::FeatureSettings::from_args(&args)?;
            stages::features(&settings, &ui).map(|_| ())
        }
        Command::Convert(args) => stages::convert(&args),
        Command::Encode(args) => stages::encode(&args, &ui),
        Command::Datasets(DatasetsCommand::Photos(args)) => stages::photos(&args),
        Command::Datasets(DatasetsCommand::Synth(args)) => kmeans::synth(&args),
        Command::Partition(args) => kmeans::partition(&args),
        Command::Kmeans(args) => kmeans::run(&args, &ui),
        Command::Run(args) => config::run(&args, &ui),
        Command::Bench(BenchCommand::Hog(args)) => bench::hog(&args),
        Command::Bench(BenchCommand::Broadcast(args)) => cluster_cmd::bench(&args),
        Command::Worker(args) => cluster_cmd::worker(&args),
        Command::Cluster(ClusterCommand::Local(args)) => cluster_cmd::local(&args),
        Command::Cluster(ClusterCommand::Status(args)) => cluster_cmd::status(&args),
    }
}
