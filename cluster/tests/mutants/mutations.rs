//! The mutations: one to three operators a mutant (bit flips, extreme bytes, truncations,
//! appended junk, spliced ranges, header fields set to extremes, text tokens set to extremes,
//! lines dropped, doubled or swapped), then, for formats with checksums, half the time the
//! checksums made valid again.

use super::{Field, Fixup, Reader, Rng};

/// The mutation of `seed` numbered by `rng`'s state: one to three operators, then (for formats
/// with checksums, half the time) the checksums made valid again.
pub fn mutate(reader: &Reader, rng: &mut Rng) -> Vec<u8> {
    let mut bytes = reader.seed.clone();
    let text = std::str::from_utf8(&bytes).is_ok();
    for _ in 0..1 + rng.below(3) {
        let op = rng.below(if text { 9 } else { 7 });
        bytes = match op {
            0 => flip_bits(bytes, rng),
            1 => extreme_byte(bytes, rng),
            2 => truncate(bytes, rng),
            3 => append(bytes, rng),
            4 => splice(bytes, rng),
            5 | 6 if !reader.fields.is_empty() => extreme_field(bytes, &reader.fields, rng),
            5 | 6 => flip_bits(bytes, rng),
            7 => extreme_token(bytes, rng),
            _ => lines(bytes, rng),
        };
    }
    if reader.fixup != Fixup::None && rng.below(2) == 0 {
        fix(&mut bytes, reader.fixup);
    }
    bytes
}

fn flip_bits(mut b: Vec<u8>, rng: &mut Rng) -> Vec<u8> {
    for _ in 0..1 + rng.below(4) {
        if !b.is_empty() {
            let at = rng.below(b.len());
            b[at] ^= 1 << rng.below(8);
        }
    }
    b
}

fn extreme_byte(mut b: Vec<u8>, rng: &mut Rng) -> Vec<u8> {
    if !b.is_empty() {
        let at = rng.below(b.len());
        b[at] = [0x00, 0xFF, 0x7F, 0x80][rng.below(4)];
    }
    b
}

fn truncate(mut b: Vec<u8>, rng: &mut Rng) -> Vec<u8> {
    let len = rng.below(b.len() + 1);
    b.truncate(len);
    b
}

fn append(mut b: Vec<u8>, rng: &mut Rng) -> Vec<u8> {
    for _ in 0..1 + rng.below(64) {
        b.push(rng.next() as u8);
    }
    b
}

fn splice(mut b: Vec<u8>, rng: &mut Rng) -> Vec<u8> {
    if b.len() > 2 {
        let (from, to) = (rng.below(b.len()), rng.below(b.len()));
        let len = rng.below(b.len() - from.max(to)).min(256);
        let piece = b[from..from + len].to_vec();
        b[to..to + len].copy_from_slice(&piece);
    }
    b
}

/// Values that break sizes: zero, one, the largest, just below them, and powers of two that
/// overflow a multiplication.
const EXTREMES: [u64; 9] = [
    0,
    1,
    u64::MAX,
    u64::MAX - 1,
    1 << 31,
    (1 << 32) - 1,
    1 << 61,
    1 << 63,
    (1 << 16) - 1,
];

fn extreme_field(mut b: Vec<u8>, fields: &[Field], rng: &mut Rng) -> Vec<u8> {
    let (at, width) = fields[rng.below(fields.len())];
    if at + width <= b.len() {
        let v = EXTREMES[rng.below(EXTREMES.len())].to_le_bytes();
        b[at..at + width].copy_from_slice(&v[..width]);
    }
    b
}

/// Text tokens that break parsers: non-numbers, overflowing numbers, values past the magnitude
/// bound, empty and very long ones.
const TOKENS: [&str; 12] = [
    "NaN",
    "inf",
    "-inf",
    "1e39",
    "-3e38",
    "1e20",
    "99999999999999999999999",
    "-1",
    "",
    "0x10",
    "\u{feff}",
    "-0",
];

fn extreme_token(b: Vec<u8>, rng: &mut Rng) -> Vec<u8> {
    let text = String::from_utf8_lossy(&b).into_owned();
    // Runs of number characters.
    let spans: Vec<(usize, usize)> = {
        let bytes = text.as_bytes();
        let mut spans = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i].is_ascii_digit() {
                let start = i;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || b".+-".contains(&bytes[i]))
                {
                    i += 1;
                }
                spans.push((start, i));
            } else {
                i += 1;
            }
        }
        spans
    };
    if spans.is_empty() {
        return b;
    }
    let (start, end) = spans[rng.below(spans.len())];
    let token = if rng.below(13) == 12 {
        "7".repeat(100_000)
    } else {
        TOKENS[rng.below(TOKENS.len())].to_string()
    };
    format!("{}{token}{}", &text[..start], &text[end..]).into_bytes()
}

fn lines(b: Vec<u8>, rng: &mut Rng) -> Vec<u8> {
    let text = String::from_utf8_lossy(&b).into_owned();
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.is_empty() {
        return b;
    }
    let at = rng.below(lines.len());
    match rng.below(3) {
        0 => {
            lines.remove(at);
        }
        1 => lines.insert(at, lines[at]),
        _ => {
            let other = rng.below(lines.len());
            lines.swap(at, other);
        }
    }
    lines.concat().into_bytes()
}

/// Makes the checksums of `b` valid again.
pub fn fix(b: &mut [u8], fixup: Fixup) {
    match fixup {
        Fixup::None => {}
        Fixup::FeatureFile if b.len() >= 32 => {
            let payload = crc32fast::hash(&b[32..]);
            b[24..28].copy_from_slice(&payload.to_le_bytes());
            let header = crc32fast::hash(&b[..28]);
            b[28..32].copy_from_slice(&header.to_le_bytes());
        }
        Fixup::FeatureFile => {}
        Fixup::Png => {
            let mut at = 8;
            while at + 12 <= b.len() {
                let len = u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize;
                let Some(end) = at.checked_add(8 + len).filter(|&e| e + 4 <= b.len()) else {
                    break;
                };
                let crc = crc32fast::hash(&b[at + 4..end]);
                b[end..end + 4].copy_from_slice(&crc.to_be_bytes());
                at = end + 4;
            }
        }
    }
}
