//! Multiply-adds per second of one core: f32 FMA against `vpmaddubsw` + `vpmaddwd` (the int8
//! kernel's instruction pair), each in a loop of 12 independent accumulators fed from memory.
//! Why the int8 kernel can beat an f32 GEMM at the FMA peak. Run:
//! `cargo run --release -p vocab-pipeline --example isa_peak [THREADS]` (x86_64 with AVX2 and
//! FMA); with THREADS, that many cores at once, their multiply-adds added (the machine's bound
//! in `eval/paper_scale`). The `threads` column is 1 by default.

use std::time::Instant;

#[cfg(target_arch = "x86_64")]
mod peak {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    /// f32 multiply-adds done, one per lane.
    #[target_feature(enable = "avx2,fma")]
    pub fn fma(rounds: usize, src: &[f32; 96]) -> (f32, usize) {
        let mut acc = [_mm256_setzero_ps(); 12];
        let b = _mm256_set1_ps(0.9999);
        for _ in 0..rounds {
            let p = black_box(src);
            for (j, acc) in acc.iter_mut().enumerate() {
                // SAFETY: 8 floats at j * 8 lie within the 96-float array.
                let a = unsafe { _mm256_loadu_ps(p[j * 8..].as_ptr()) };
                *acc = _mm256_fmadd_ps(a, b, *acc);
            }
        }
        let mut out = [0f32; 8];
        let sum = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, &a| _mm256_add_ps(s, a));
        // SAFETY: `out` holds eight f32.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), sum) };
        (out.iter().sum(), rounds * 12 * 8)
    }

    /// u8 x i8 multiply-adds done, widened to i32 as the kernel does.
    #[target_feature(enable = "avx2")]
    pub fn int8(rounds: usize, src: &[u8; 384]) -> (i32, usize) {
        let ones = _mm256_set1_epi16(1);
        let b = _mm256_set1_epi8(5);
        let mut acc = [_mm256_setzero_si256(); 12];
        for _ in 0..rounds {
            let p = black_box(src);
            for (j, acc) in acc.iter_mut().enumerate() {
                // SAFETY: 32 bytes at j * 32 lie within the 384-byte array.
                let a = unsafe { _mm256_loadu_si256(p[j * 32..].as_ptr().cast()) };
                let products = _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones);
                *acc = _mm256_add_epi32(*acc, products);
            }
        }
        let mut out = [0i32; 8];
        let sum = acc
            .iter()
            .fold(_mm256_setzero_si256(), |s, &a| _mm256_add_epi32(s, a));
        // SAFETY: `out` holds eight i32.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), sum) };
        (out.iter().sum(), rounds * 12 * 32)
    }
}

/// Multiply-adds per second (billions) of `work` (returning its multiply-adds) run on
/// `threads` threads at once.
fn rate(threads: usize, work: impl Fn() -> usize + Sync) -> f64 {
    let started = Instant::now();
    let macs: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(&work)).collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    macs as f64 / started.elapsed().as_secs_f64() / 1e9
}

fn main() {
    let threads = std::env::args()
        .nth(1)
        .and_then(|t| t.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        let rounds = 50_000_000;
        let (f, u) = ([1.0001f32; 96], [3u8; 384]);
        println!("trial,threads,f32_fma_gmac_per_s,int8_gmac_per_s,ratio");
        for trial in 1..=3 {
            // SAFETY: AVX2 and FMA were detected.
            let f32_rate = rate(threads, || {
                std::hint::black_box(unsafe { peak::fma(rounds, &f) }).1
            });
            // SAFETY: AVX2 was detected.
            let int8_rate = rate(threads, || {
                std::hint::black_box(unsafe { peak::int8(rounds, &u) }).1
            });
            println!(
                "{trial},{threads},{f32_rate:.1},{int8_rate:.1},{:.2}",
                int8_rate / f32_rate
            );
        }
        return;
    }
    println!("needs x86_64 with AVX2 and FMA");
}
