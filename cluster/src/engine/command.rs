//! Commands on the wire: a tag (the job's, or the engine's own for its control words) and a
//! body only the tagged job reads.

use serde::{Deserialize, Serialize};

use super::error::EngineError;

/// The tag of the engine's own control words (no job has an empty tag).
pub(super) const CONTROL: &str = "";

/// The engine's own control words.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) enum Control {
    /// Measure every link ([`crate::collective::calibrate`]).
    Calibrate { small: u64, pings: u64, large: u64 },
    /// Leave [`serve`].
    Exit,
}

/// A command on the wire: the tag's length (one byte), the tag, then the body.
pub(super) fn envelope(tag: &str, body: &[u8]) -> Vec<u8> {
    let tag = &tag.as_bytes()[..tag.len().min(u8::MAX as usize)];
    let mut out = Vec::with_capacity(1 + tag.len() + body.len());
    out.push(tag.len() as u8);
    out.extend_from_slice(tag);
    out.extend_from_slice(body);
    out
}

/// The tag and body of a command from the root.
pub(super) fn open(bytes: &[u8]) -> Result<(&str, &[u8]), EngineError> {
    let malformed = |reason: &str| EngineError::Malformed {
        rank: 0,
        reason: reason.into(),
    };
    let (&len, rest) = bytes
        .split_first()
        .ok_or_else(|| malformed("an empty command"))?;
    let len = usize::from(len);
    if rest.len() < len {
        return Err(malformed("a command shorter than its tag"));
    }
    let (tag, body) = rest.split_at(len);
    let tag =
        std::str::from_utf8(tag).map_err(|_| malformed("a command whose tag is not UTF-8"))?;
    Ok((tag, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_opens_to_its_tag_and_body_and_a_broken_one_is_malformed() {
        let bytes = envelope("kmeans", b"{\"Rows\":[]}");
        assert_eq!(
            open(&bytes).expect("opens"),
            ("kmeans", &b"{\"Rows\":[]}"[..])
        );
        assert_eq!(open(&envelope("", b"x")).expect("opens"), ("", &b"x"[..]));
        for broken in [&b""[..], &[7, b'k'][..], &[2, 0xff, 0xfe][..]] {
            assert!(
                matches!(open(broken), Err(EngineError::Malformed { rank: 0, .. })),
                "{broken:?}"
            );
        }
    }
}
