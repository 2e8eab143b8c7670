//! A member's half of the engine: the command loop and the jobs it hands commands to.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::command::{CONTROL, Control, open};
use super::error::{EngineError, decode, encode};
use crate::collective::{MAX_CONTROL, Probe, Team, broadcast_message, calibrate, gather};
use crate::net::messages::BUILD;
use crate::net::transport::Transport;

/// A member's first words: where it runs.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Hello {
    pub(super) host: String,
    pub(super) build: String,
}

/// A point a member reaches in a job, reported to the [`Hooks`] (fault injection in tests: the
/// binary's hook ends the process at a chosen point).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint<'a> {
    /// The job's tag (`kmeans`, `photos`, ...; `team` for the transport's own counters).
    pub job: &'a str,
    /// What happened: `mapped` (an iteration's map tasks are done, `count` the iteration),
    /// `round` (a photo round begins, `count` counted from 1 per team), `received` (`count`
    /// bytes of team messages so far).
    pub event: &'a str,
    /// The iteration, round or byte count.
    pub count: u64,
    /// The member's rank.
    pub rank: usize,
}

/// What a caller wants to happen at [`Checkpoint`]s.
pub trait Hooks: Sync + std::fmt::Debug {
    /// Called when a member reaches `at`.
    fn reached(&self, at: &Checkpoint<'_>);
}

/// No hooks: every checkpoint passes.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl Hooks for NoHooks {
    fn reached(&self, _: &Checkpoint<'_>) {}
}

/// What a job's member half sees of the command it serves.
pub struct Member<'a> {
    transport: &'a dyn Transport,
    received: Instant,
    hooks: &'a dyn Hooks,
}

impl std::fmt::Debug for Member<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("rank", &self.transport.rank())
            .field("received", &self.received)
            .finish()
    }
}

impl<'a> Member<'a> {
    /// The team's transport.
    pub fn transport(&self) -> &'a dyn Transport {
        self.transport
    }

    /// When the command arrived.
    pub fn received(&self) -> Instant {
        self.received
    }

    /// Reports reaching `event` (`count`) of `job` to the hooks.
    pub fn reached(&self, job: &str, event: &str, count: u64) {
        self.hooks.reached(&Checkpoint {
            job,
            event,
            count,
            rank: self.transport.rank(),
        });
    }
}

/// A job's member half: what it keeps between commands and how it serves them.
pub trait Job: Send + std::fmt::Debug {
    /// The tag of this job's commands.
    fn tag(&self) -> &'static str;

    /// A new team begins: forget what belonged to the old one (what the job may reuse, such as
    /// partitions already open, it keeps).
    fn begin(&mut self) {}

    /// The team ended (by exit or by an error): let go of what only that team needed, so an
    /// idle member holds no job's data but what a later team of the same job reuses.
    fn end(&mut self) {}

    /// Serves one command of this job (`body`: the job's own bytes). An error ends the member's
    /// part in the team; a refusal the root should hear is an answer, not an error.
    fn serve(&mut self, member: &Member<'_>, body: &[u8]) -> Result<(), EngineError>;
}

/// Serves the root's commands until it says exit (every member but the root calls this): the
/// hello, then each command handed to the engine or to the job of its tag among `jobs`, which
/// keep their state across calls (a later team of the same job reuses it).
pub fn serve(
    transport: &dyn Transport,
    jobs: &mut [Box<dyn Job>],
    hooks: &dyn Hooks,
) -> Result<(), EngineError> {
    let served = commands(transport, jobs, hooks);
    for job in jobs.iter_mut() {
        job.end();
    }
    served
}

/// [`serve`]'s loop: the hello, then every command until the exit.
fn commands(
    transport: &dyn Transport,
    jobs: &mut [Box<dyn Job>],
    hooks: &dyn Hooks,
) -> Result<(), EngineError> {
    let control = Team::ranks(transport);
    let hello = Hello {
        host: transport.host(),
        build: BUILD.into(),
    };
    gather(&control, &encode(&hello), MAX_CONTROL)?;
    for job in jobs.iter_mut() {
        job.begin();
    }
    loop {
        let bytes = broadcast_message(&control, None)?;
        let received = Instant::now();
        let (tag, body) = open(&bytes)?;
        if tag == CONTROL {
            match decode(0, body)? {
                Control::Calibrate {
                    small,
                    pings,
                    large,
                } => {
                    let size = |v: u64| {
                        usize::try_from(v)
                            .unwrap_or(usize::MAX)
                            .min(MAX_CONTROL as usize)
                    };
                    let probe = Probe {
                        small: size(small),
                        pings: size(pings).min(1000),
                        large: size(large),
                    };
                    calibrate(&control, probe)?;
                }
                Control::Exit => return Ok(()),
            }
            continue;
        }
        let job =
            jobs.iter_mut()
                .find(|j| j.tag() == tag)
                .ok_or_else(|| EngineError::Malformed {
                    rank: 0,
                    reason: format!("a command of the unknown job {tag:?}"),
                })?;
        let member = Member {
            transport,
            received,
            hooks,
        };
        job.serve(&member, body)?;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::engine::{exit, hello, send};
    use crate::net::transport::memory::MemoryTransport;

    /// A job that writes down what happens to it.
    #[derive(Debug)]
    struct Diary(Arc<Mutex<Vec<String>>>);

    impl Job for Diary {
        fn tag(&self) -> &'static str {
            "diary"
        }

        fn begin(&mut self) {
            self.0.lock().expect("diary").push("begin".into());
        }

        fn end(&mut self) {
            self.0.lock().expect("diary").push("end".into());
        }

        fn serve(&mut self, member: &Member<'_>, body: &[u8]) -> Result<(), EngineError> {
            let entry = format!(
                "{} at rank {}",
                String::from_utf8_lossy(body),
                member.transport().rank()
            );
            self.0.lock().expect("diary").push(entry);
            Ok(())
        }
    }

    /// A member serving one team with a diary, while the root does `drive`; the diary.
    fn served(drive: impl FnOnce(&MemoryTransport) -> Result<(), EngineError>) -> Vec<String> {
        let mut team = MemoryTransport::team(2);
        let (member, root) = (team.pop().expect("member"), team.pop().expect("root"));
        let diary = Arc::new(Mutex::new(Vec::new()));
        let mut jobs: Vec<Box<dyn Job>> = vec![Box::new(Diary(Arc::clone(&diary)))];
        std::thread::scope(|s| {
            let served = s.spawn(move || serve(&member, &mut jobs, &NoHooks));
            hello(&root).expect("hello");
            drive(&root).expect("root");
            let _ = served.join();
        });
        // The member's jobs went with its thread: the diary has one owner left.
        let diary = Arc::try_unwrap(diary).expect("one owner");
        diary.into_inner().expect("diary")
    }

    #[test]
    fn a_job_gets_its_commands_between_begin_and_end_however_the_team_ends() {
        let by_exit = served(|root| {
            send(root, "diary", b"first")?;
            send(root, "diary", b"second")?;
            exit(root)
        });
        assert_eq!(
            by_exit,
            ["begin", "first at rank 1", "second at rank 1", "end"]
        );
        // A command of a job the member does not know ends its part in the team: the job ends.
        let by_error = served(|root| send(root, "ghost", b"boo"));
        assert_eq!(by_error, ["begin", "end"]);
    }
}
