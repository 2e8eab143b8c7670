//! An in-process transport: members are threads, messages travel over channels. The unit tests
//! of the collectives and of the SPMD engine run teams of these.
//!
//! A send never blocks (unbounded channels), so an exchange is its sends followed by its
//! receives. A receive waits for a message from its sender with its tag, keeping messages that
//! arrive for other receives; it fails when the sender has dropped its end (a member that ended
//! with an error) or after the timeout, so a protocol bug fails a test instead of hanging it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Recv, Send, Tag, Transport, TransportError, check_peers};

type Message = (usize, Tag, Vec<u8>);

/// One member's end of an in-memory team.
#[derive(Debug)]
pub struct MemoryTransport {
    rank: usize,
    host: String,
    outboxes: Vec<Mutex<Sender<Message>>>,
    inbox: Mutex<Receiver<Message>>,
    /// Messages that arrived before the receive that wants them.
    early: Mutex<Vec<Message>>,
    alive: Arc<Vec<AtomicBool>>,
    timeout: Duration,
}

impl MemoryTransport {
    /// A team of `size` members, all on host `"memory"`.
    pub fn team(size: usize) -> Vec<Self> {
        Self::team_on(&vec!["memory".to_string(); size])
    }

    /// A team with one member per entry of `hosts`, each reporting that host name.
    pub fn team_on(hosts: &[String]) -> Vec<Self> {
        let size = hosts.len();
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..size).map(|_| channel()).unzip();
        let alive = Arc::new((0..size).map(|_| AtomicBool::new(true)).collect::<Vec<_>>());
        receivers
            .into_iter()
            .enumerate()
            .map(|(rank, inbox)| Self {
                rank,
                host: hosts[rank].clone(),
                outboxes: senders.iter().map(|s| Mutex::new(s.clone())).collect(),
                inbox: Mutex::new(inbox),
                early: Mutex::new(Vec::new()),
                alive: Arc::clone(&alive),
                timeout: Duration::from_secs(60),
            })
            .collect()
    }

    /// Sets how long a receive waits (default 60 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn take(&self, from: usize, tag: Tag) -> Result<Vec<u8>, TransportError> {
        let mut early = self.early.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = early.iter().position(|m| m.0 == from && m.1 == tag) {
            return Ok(early.remove(at).2);
        }
        let inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        loop {
            match inbox.recv_timeout(Duration::from_millis(20)) {
                Ok(m) if m.0 == from && m.1 == tag => return Ok(m.2),
                Ok(m) => early.push(m),
                Err(RecvTimeoutError::Timeout) => {
                    // Messages sent before the sender left are still delivered above.
                    if !self.alive[from].load(Ordering::Acquire) {
                        return Err(TransportError::Gone { member: from });
                    }
                    if started.elapsed() > self.timeout {
                        return Err(TransportError::Timeout {
                            from,
                            tag,
                            seconds: self.timeout.as_secs(),
                        });
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(TransportError::Gone { member: from });
                }
            }
        }
    }
}

impl Drop for MemoryTransport {
    fn drop(&mut self) {
        self.alive[self.rank].store(false, Ordering::Release);
    }
}

impl Transport for MemoryTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.outboxes.len()
    }

    fn host(&self) -> String {
        self.host.clone()
    }

    fn wait_idle(&self, from: usize, tag: Tag) {
        // Like MPI's probe: the message stays queued for the receive that follows. A timeout
        // or a departed peer is left for that receive to report.
        if let Ok(data) = self.take(from, tag) {
            let mut early = self.early.lock().unwrap_or_else(|e| e.into_inner());
            early.insert(0, (from, tag, data));
        }
    }

    fn exchange(&self, sends: &[Send<'_>], recvs: &mut [Recv<'_>]) -> Result<(), TransportError> {
        check_peers(self.size(), sends, recvs)?;
        for s in sends.iter().filter(|s| !s.data.is_empty()) {
            let outbox = self.outboxes[s.to]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            outbox
                .send((self.rank, s.tag, s.data.to_vec()))
                .map_err(|_| TransportError::Gone { member: s.to })?;
        }
        for r in recvs.iter_mut().filter(|r| !r.buf.is_empty()) {
            let data = self.take(r.from, r.tag)?;
            if data.len() != r.buf.len() {
                return Err(TransportError::Length {
                    from: r.from,
                    tag: r.tag,
                    got: data.len(),
                    want: r.buf.len(),
                });
            }
            r.buf.copy_from_slice(&data);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_by_sender_and_tag_in_order() {
        let team = MemoryTransport::team(3);
        std::thread::scope(|s| {
            s.spawn(|| {
                team[1].send(0, 7, b"b1").expect("send");
                team[1].send(0, 5, b"a").expect("send");
                team[1].send(0, 7, b"b2").expect("send");
            });
            s.spawn(|| team[2].send(0, 7, b"c").expect("send"));
            let (mut a, mut b1, mut b2, mut c) = ([0u8; 1], [0u8; 2], [0u8; 2], [0u8; 1]);
            team[0].recv(2, 7, &mut c).expect("recv");
            team[0].recv(1, 5, &mut a).expect("recv");
            team[0]
                .exchange(
                    &[],
                    &mut [
                        Recv {
                            from: 1,
                            tag: 7,
                            buf: &mut b1,
                        },
                        Recv {
                            from: 1,
                            tag: 7,
                            buf: &mut b2,
                        },
                    ],
                )
                .expect("recv");
            assert_eq!((&a, &b1, &b2, &c), (b"a", b"b1", b"b2", b"c"));
        });
    }

    #[test]
    fn a_wrong_length_a_stranger_and_a_departed_peer_are_errors() {
        let mut team = MemoryTransport::team(2);
        team[1].send(0, 1, b"abc").expect("send");
        let mut two = [0u8; 2];
        let err = team[0].recv(1, 1, &mut two).expect_err("length");
        assert!(
            matches!(
                err,
                TransportError::Length {
                    got: 3,
                    want: 2,
                    ..
                }
            ),
            "{err}"
        );
        let err = team[0].send(5, 1, b"x").expect_err("stranger");
        assert!(matches!(
            err,
            TransportError::NoSuchMember { member: 5, size: 2 }
        ));
        drop(team.pop());
        let err = team[0].recv(1, 1, &mut two).expect_err("gone");
        assert!(matches!(err, TransportError::Gone { member: 1 }), "{err}");
    }
}
