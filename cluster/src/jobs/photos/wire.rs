//! A photo round's piece on the wire: compute seconds, then per photo its size and patches
//! (or why it was skipped), each value checked as it is read ([`take_piece`]).

use vocab_pipeline::features::{Described, Outcome};

/// What a piece must hold (`crate::jobs::photos::PhotoStage::expect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expect {
    /// Photos in it.
    pub photos: usize,
    /// Values of a histogram (encode).
    pub histogram: usize,
    /// Values of a patch (features).
    pub dims: usize,
    /// Side of the smallest patch (features): a patch at `(r, c)` ends inside the photo. A
    /// keypoint made elsewhere is placed at its centre, of side 1.
    pub side: usize,
}

impl Expect {
    /// The same for `photos` photos.
    pub fn of(self, photos: usize) -> Self {
        Self { photos, ..self }
    }
}

/// A stage's result for one photo, as it travels.
pub trait Value: Sized {
    /// Appends it.
    fn put(&self, out: &mut Vec<u8>);
    /// Bytes [`Value::put`] appends.
    fn wire_len(&self) -> usize;
    /// Reads one, checked against the photo's size and `expect`.
    fn take(
        input: &mut Reader<'_>,
        width: usize,
        height: usize,
        patches: usize,
        expect: &Expect,
    ) -> Result<Self, String>;
}

/// Reads a piece from the front, every length checked against what is left.
#[derive(Debug)]
pub struct Reader<'a> {
    pub(super) bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.bytes.len() {
            return Err(format!("{n} bytes wanted, {} left", self.bytes.len()));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    pub(super) fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn f32s(&mut self, n: usize) -> Result<Vec<f32>, String> {
        let len = n.checked_mul(4).ok_or("a length that overflows")?;
        let values: Vec<f32> = self
            .take(len)?
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(format!("value {i} is not finite"));
        }
        Ok(values)
    }
}

fn put_u32(out: &mut Vec<u8>, v: usize) {
    // Sizes of one photo (sides below 65,536, counts far below 2^32).
    out.extend_from_slice(&u32::try_from(v).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_f32s(out: &mut Vec<u8>, values: &[f32]) {
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

impl Value for Described {
    fn wire_len(&self) -> usize {
        4 + 4 * self.positions.len() + 4 * self.values.len()
    }

    fn put(&self, out: &mut Vec<u8>) {
        put_u32(out, self.positions.len());
        for &(r, c) in &self.positions {
            // `describe` skips photos with a side above u16::MAX.
            out.extend_from_slice(&(r as u16).to_le_bytes());
            out.extend_from_slice(&(c as u16).to_le_bytes());
        }
        put_f32s(out, &self.values);
    }

    fn take(
        input: &mut Reader<'_>,
        width: usize,
        height: usize,
        patches: usize,
        expect: &Expect,
    ) -> Result<Self, String> {
        let n = input.u32()? as usize;
        if n != patches {
            return Err(format!("{n} positions for {patches} patches"));
        }
        let mut positions = Vec::with_capacity(n.min(input.bytes.len() / 4));
        for _ in 0..n {
            let (r, c) = (usize::from(input.u16()?), usize::from(input.u16()?));
            if r + expect.side > height || c + expect.side > width {
                return Err(format!(
                    "a patch at ({r}, {c}) of a {width} x {height} photo"
                ));
            }
            positions.push((r, c));
        }
        let values = input.f32s(n.checked_mul(expect.dims).ok_or("too many patches")?)?;
        Ok(Self {
            width,
            height,
            positions,
            values,
        })
    }
}

/// Nothing travels with a photo's size and patch count (features kept at the members).
impl Value for () {
    fn wire_len(&self) -> usize {
        0
    }

    fn put(&self, _: &mut Vec<u8>) {}

    fn take(_: &mut Reader<'_>, _: usize, _: usize, _: usize, _: &Expect) -> Result<(), String> {
        Ok(())
    }
}

impl Value for Vec<f32> {
    fn wire_len(&self) -> usize {
        4 + 4 * self.len()
    }

    fn put(&self, out: &mut Vec<u8>) {
        put_u32(out, self.len());
        put_f32s(out, self);
    }

    fn take(
        input: &mut Reader<'_>,
        _: usize,
        _: usize,
        _: usize,
        expect: &Expect,
    ) -> Result<Self, String> {
        let n = input.u32()? as usize;
        if n != expect.histogram {
            return Err(format!(
                "a histogram of {n} values, {} expected",
                expect.histogram
            ));
        }
        input.f32s(n)
    }
}

pub(super) fn put_outcomes<T: Value>(out: &mut Vec<u8>, outcomes: &[Outcome<T>]) {
    let len: usize = (outcomes.iter())
        .map(|o| match o {
            Outcome::Done { value, .. } => 13 + value.wire_len(),
            Outcome::Skipped(reason) => 5 + reason.len(),
        })
        .sum();
    out.reserve(4 + len);
    put_u32(out, outcomes.len());
    for outcome in outcomes {
        match outcome {
            Outcome::Done {
                width,
                height,
                patches,
                value,
            } => {
                out.push(1);
                put_u32(out, *width);
                put_u32(out, *height);
                put_u32(out, *patches);
                value.put(out);
            }
            Outcome::Skipped(reason) => {
                out.push(0);
                put_u32(out, reason.len());
                out.extend_from_slice(reason.as_bytes());
            }
        }
    }
}

/// Reads a piece: the member's seconds, then exactly `expect.photos` outcomes and nothing more.
pub fn take_piece<T: Value>(
    piece: &[u8],
    expect: &Expect,
) -> Result<(f64, Vec<Outcome<T>>), String> {
    let mut input = Reader { bytes: piece };
    let head = input.take(8)?;
    let seconds = f64::from_le_bytes(head.try_into().map_err(|_| "a short piece")?);
    let n = input.u32()? as usize;
    if n != expect.photos {
        return Err(format!("{n} results for {} photos", expect.photos));
    }
    let mut outcomes = Vec::with_capacity(n);
    for _ in 0..n {
        let tag = input.take(1)?[0];
        let outcome = match tag {
            1 => {
                let (width, height) = (input.u32()? as usize, input.u32()? as usize);
                if width > usize::from(u16::MAX) || height > usize::from(u16::MAX) {
                    return Err(format!("a photo of {width} x {height}"));
                }
                let patches = input.u32()? as usize;
                let value = T::take(&mut input, width, height, patches, expect)?;
                Outcome::Done {
                    width,
                    height,
                    patches,
                    value,
                }
            }
            0 => {
                let len = input.u32()? as usize;
                let reason = std::str::from_utf8(input.take(len)?)
                    .map_err(|_| "a skip reason that is not UTF-8")?;
                Outcome::Skipped(reason.to_string())
            }
            t => return Err(format!("result tag {t}")),
        };
        outcomes.push(outcome);
    }
    if !input.bytes.is_empty() {
        return Err(format!("{} bytes after the last result", input.bytes.len()));
    }
    Ok((seconds.max(0.0), outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_of_keypoints_is_read_with_their_values_and_side() {
        // A keypoint made elsewhere is placed at its centre: anywhere inside the photo.
        let done = Outcome::Done {
            width: 50,
            height: 45,
            patches: 1,
            value: Described {
                width: 50,
                height: 45,
                positions: vec![(44, 49)],
                values: vec![0.1; 5],
            },
        };
        let mut piece = 0f64.to_le_bytes().to_vec();
        put_outcomes(&mut piece, std::slice::from_ref(&done));
        let elsewhere = Expect {
            photos: 1,
            histogram: 0,
            dims: 5,
            side: 1,
        };
        let (_, back) = take_piece::<Described>(&piece, &elsewhere).expect("a keypoint");
        assert_eq!(back, [done]);
        // As HOG's 16-pixel patch it leaves the photo; read as 6 values, the piece is short.
        let hog = Expect {
            side: 16,
            ..elsewhere
        };
        let err = take_piece::<Described>(&piece, &hog).expect_err("outside");
        assert!(err.contains("patch at (44, 49)"), "{err}");
        let six = Expect {
            dims: 6,
            ..elsewhere
        };
        assert!(take_piece::<Described>(&piece, &six).is_err());
    }
}
