//! The engine layer: a team of members that one root drives, whatever the job.
//!
//! Every member of a [`Transport`] but the root sits in [`serve`], the command loop: the root
//! broadcasts a command (binomial tree over the control team), every member acts on it, often
//! with collectives of its own, then waits for the next. A command is either a control word of
//! the engine (measure the links, leave) or a **job command**: a job's tag and that job's bytes,
//! handed to the [`Job`] registered under the tag. The engine never looks inside a job's bytes,
//! so a new job is a new module of `crate::jobs`, not a new variant here.
//!
//! A job's root half starts on [`Nodes`]: a team of ranks, or the TCP workers of a cluster file.
//! The root's half: [`hello`] once per process (every member's host and build), [`send`] a job
//! command, [`calibrate_links`], [`exit`]. [`crew`] adds what a team of TCP daemons needs on top:
//! membership, failure detection and recovery (a lost member is dropped and the attempt redone
//! on a new team). Faults are injected through [`Hooks`] the caller passes in, never by the
//! library ending the process.

mod command;
pub mod crew;
mod error;
mod member;
mod root;

pub use self::error::EngineError;
pub(crate) use self::error::{decode, encode};
pub use self::member::{Checkpoint, Hooks, Job, Member, NoHooks, serve};
pub use self::root::{Members, Nodes, calibrate_links, exit, hello, send, send_json};

#[cfg(doc)]
use crate::net::transport::Transport;
